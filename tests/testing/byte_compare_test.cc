// The shared byte-comparison helpers, including empty ranges (issue #15: an
// empty vector's data() is null and must not reach memcmp; fails under
// -fsanitize=undefined before the guard).
#include "tests/testing/byte_compare.h"

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace specverify::testing {
namespace {

TEST(ByteCompareTest, EmptyRangesAreEqual) {
  const std::vector<std::byte> empty_a, empty_b;
  EXPECT_TRUE(BytesEqual(empty_a, empty_b));
  EXPECT_TRUE(AllBytesAre(empty_a, std::byte{7}));
}

TEST(ByteCompareTest, NamesTheFirstDifferenceAndSizeMismatch) {
  const std::vector<std::byte> a = {std::byte{1}, std::byte{2}, std::byte{3}};
  std::vector<std::byte> b = a;
  EXPECT_TRUE(BytesEqual(a, b));
  b[2] = std::byte{9};
  const ::testing::AssertionResult differ = BytesEqual(a, b);
  EXPECT_FALSE(differ);
  EXPECT_NE(std::string(differ.message()).find("first difference at byte 2"), std::string::npos);
  EXPECT_FALSE(BytesEqual(a, std::vector<std::byte>()));
}

}  // namespace
}  // namespace specverify::testing
