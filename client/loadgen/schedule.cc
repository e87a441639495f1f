#include "client/loadgen/schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace specverify::loadgen {

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::Create(ArrivalProcess process,
                                                        double rate_per_second,
                                                        uint64_t seed) {
  if (!(rate_per_second > 0.0) || !std::isfinite(rate_per_second)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate must be a finite number > 0 requests/s, got ", rate_per_second));
  }
  return ArrivalSchedule(process, rate_per_second, seed);
}

std::chrono::nanoseconds ArrivalSchedule::Next() {
  double seconds;
  if (process_ == ArrivalProcess::kConstant) {
    seconds = static_cast<double>(index_) / rate_;
  } else {
    // Inverse-CDF exponential gap; 1 - u lies in (0, 1], so the log is finite.
    // The first request goes at 0 like the constant schedule's.
    seconds = poisson_seconds_;
    poisson_seconds_ += -std::log(1.0 - rng_.NextDouble()) / rate_;
  }
  ++index_;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(seconds * 1e9)));
}

}  // namespace specverify::loadgen
