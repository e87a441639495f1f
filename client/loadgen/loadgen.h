// specverify-loadgen's whole run: connect, describe the servers, run every
// step (and its no-op twin when a ceiling server is given), scrape /metrics
// around each step, print the report, write JSON/CSV, and decide the exit code.
#ifndef SPECVERIFY_CLIENT_LOADGEN_LOADGEN_H_
#define SPECVERIFY_CLIENT_LOADGEN_LOADGEN_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "client/loadgen/config.h"
#include "client/loadgen/report.h"

namespace specverify::loadgen {

// Exit codes of specverify-loadgen.
inline constexpr int kExitOk = 0;
// At least one answer disagreed with the oracle (or fetched/inline KV bytes
// did), or the server under test returned unverified answers without being
// the no-op backend (GetServerInfo.backend "noop").
inline constexpr int kExitWrongAnswers = 1;
// The run could not start: bad flags, unreachable server, unwritable output.
inline constexpr int kExitSetupError = 2;
// More RPCs failed than --max_error_fraction allows.
inline constexpr int kExitTooManyErrors = 3;

// Runs the configured sweep. An error status only when the run could not
// start or finish (no server, bad options); RPC errors and wrong answers are
// in the report.
absl::StatusOr<RunReport> RunLoadgen(const LoadgenConfig& config);

// The exit code a finished run deserves (see the kExit constants).
int ExitCodeFor(const RunReport& report);

// RunLoadgen, then the table to `out`, JSON/CSV files, and the exit code;
// setup errors are printed to `err`.
int RunLoadgenMain(const LoadgenConfig& config, std::ostream& out, std::ostream& err);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_LOADGEN_H_
