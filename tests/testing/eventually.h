// Polls `done` (bounded) for state changes that have no notification hook:
// a server's health, a counter another thread advances.
//   ASSERT_TRUE(Eventually([&] { return backend.held_batches() == 1; }));
#ifndef SPECVERIFY_TESTS_TESTING_EVENTUALLY_H_
#define SPECVERIFY_TESTS_TESTING_EVENTUALLY_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace specverify::testing {

inline bool Eventually(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_TESTING_EVENTUALLY_H_
