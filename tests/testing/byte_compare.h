// Fast byte-range checks for large buffers (gMock's element matchers cost
// microseconds per element, which adds up to seconds at megabytes).
#ifndef SPECVERIFY_TESTS_TESTING_BYTE_COMPARE_H_
#define SPECVERIFY_TESTS_TESTING_BYTE_COMPARE_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>

#include "gtest/gtest.h"

namespace specverify::testing {

// Success iff `actual` equals `expected` byte for byte; otherwise names the
// first differing offset.
inline ::testing::AssertionResult BytesEqual(std::span<const std::byte> actual,
                                             std::span<const std::byte> expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  // Empty spans may carry null data(), which memcmp must not be given.
  if (actual.empty() || std::memcmp(actual.data(), expected.data(), actual.size()) == 0) {
    return ::testing::AssertionSuccess();
  }
  const auto [a, e] = std::mismatch(actual.begin(), actual.end(), expected.begin());
  return ::testing::AssertionFailure()
         << "first difference at byte " << (a - actual.begin()) << ": "
         << static_cast<int>(*a) << " vs expected " << static_cast<int>(*e);
}

// Success iff every byte equals `value` (e.g. poison that must stay unwritten).
inline ::testing::AssertionResult AllBytesAre(std::span<const std::byte> bytes,
                                              std::byte value) {
  const auto it = std::find_if(bytes.begin(), bytes.end(),
                               [value](std::byte b) { return b != value; });
  if (it == bytes.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "byte " << (it - bytes.begin()) << " is " << static_cast<int>(*it)
         << ", expected " << static_cast<int>(value);
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_TESTING_BYTE_COMPARE_H_
