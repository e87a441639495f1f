// Time source injected into every component that schedules by time (batcher,
// KV arena TTLs), so tests control time instead of sleeping.
//
// Thread safety: every Clock is safe to call from any thread.
#ifndef SPECVERIFY_SERVER_COMMON_CLOCK_H_
#define SPECVERIFY_SERVER_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace specverify::server {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  // A process-wide instance (stateless).
  static Clock* Get() {
    static RealClock clock;
    return &clock;
  }
};

// Time moves only when a test says so.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1))
      : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_COMMON_CLOCK_H_
