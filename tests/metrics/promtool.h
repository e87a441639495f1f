// Runs `promtool check metrics` (Prometheus's exposition linter: names,
// units, suffixes, help text) on an exposition text.
#ifndef SPECVERIFY_TESTS_METRICS_PROMTOOL_H_
#define SPECVERIFY_TESTS_METRICS_PROMTOOL_H_

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace specverify::testing {

// OK when promtool exits 0 and prints nothing; otherwise FAILED_PRECONDITION
// carrying promtool's output.
inline absl::Status PromtoolCheckMetrics(const std::string& promtool,
                                         const std::string& exposition) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/specverify_exposition_", ::getpid(), ".prom");
  std::ofstream(path) << exposition;
  const std::string command = absl::StrCat(promtool, " check metrics < ", path, " 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run ", command));
  std::string output;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int rc = ::pclose(pipe);
  std::remove(path.c_str());
  if (rc != 0 || !output.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("promtool check metrics (exit ", rc, "): ", output));
  }
  return absl::OkStatus();
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_METRICS_PROMTOOL_H_
