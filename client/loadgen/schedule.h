// Open-loop arrival schedules. The load generator sends request i at its
// *intended* time IntendedOffset(i) after the step starts, whatever happened
// to earlier requests, and measures latency from that intended time: a server
// that stalls cannot make the client send less and so hide the stall
// (coordinated omission, Gil Tene). If the client itself cannot keep up, the
// difference between actual and intended send times is reported as lag.
#ifndef SPECVERIFY_CLIENT_LOADGEN_SCHEDULE_H_
#define SPECVERIFY_CLIENT_LOADGEN_SCHEDULE_H_

#include <chrono>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/workload/random.h"

namespace specverify::loadgen {

enum class ArrivalProcess { kConstant, kPoisson };

// Intended send offsets for an open-loop step, generated in order.
// Not thread-safe: one pacing thread owns a schedule.
class ArrivalSchedule {
 public:
  // rate_per_second > 0. Poisson gaps are exponential with mean 1 / rate,
  // drawn from a SplitMix64 stream keyed by `seed`, so a schedule is
  // reproducible.
  static absl::StatusOr<ArrivalSchedule> Create(ArrivalProcess process,
                                                double rate_per_second, uint64_t seed);

  // The intended offset of the next request from the start of the step.
  // Constant rate: i / rate exactly (computed from i, so it never drifts).
  std::chrono::nanoseconds Next();

  double rate_per_second() const { return rate_; }
  ArrivalProcess process() const { return process_; }

 private:
  ArrivalSchedule(ArrivalProcess process, double rate, uint64_t seed)
      : process_(process), rate_(rate), rng_(seed) {}

  ArrivalProcess process_;
  double rate_;
  SplitMix64 rng_;
  int64_t index_ = 0;
  double poisson_seconds_ = 0.0;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_SCHEDULE_H_
