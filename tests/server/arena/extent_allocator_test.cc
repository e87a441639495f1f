#include "server/arena/extent_allocator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ExtentAllocatorTest, FirstFitTakesLowestOffset) {
  ExtentAllocator a(1000);
  EXPECT_EQ(*a.Allocate(100), 0);
  EXPECT_EQ(*a.Allocate(100), 100);
  EXPECT_EQ(a.used_bytes(), 200);
  ASSERT_THAT(a.Free(0, 100), IsOk());
  // The hole at 0 fits 50: first fit reuses it rather than the tail.
  EXPECT_EQ(*a.Allocate(50), 0);
  // 60 does not fit the remaining 50-byte hole: it goes after 200.
  EXPECT_EQ(*a.Allocate(60), 200);
}

TEST(ExtentAllocatorTest, AlignmentSkipsToAlignedStart) {
  ExtentAllocator a(4096);
  EXPECT_EQ(*a.Allocate(10), 0);
  EXPECT_EQ(*a.Allocate(10, 256), 256);
  EXPECT_EQ(a.used_bytes(), 20);
  // The 10..256 gap stays free and usable.
  EXPECT_EQ(*a.Allocate(200), 10);
}

TEST(ExtentAllocatorTest, CoalescesBothNeighbours) {
  ExtentAllocator a(300);
  ASSERT_EQ(*a.Allocate(300), 0);
  ASSERT_THAT(a.Free(0, 100), IsOk());
  ASSERT_THAT(a.Free(200, 100), IsOk());
  EXPECT_EQ(a.free_extent_count(), 2);
  ASSERT_THAT(a.Free(100, 100), IsOk());
  EXPECT_EQ(a.free_extent_count(), 1);
  EXPECT_EQ(a.largest_free_extent(), 300);
  EXPECT_EQ(a.used_bytes(), 0);
}

TEST(ExtentAllocatorTest, SubRangesOfOneAllocationFreeIndependently) {
  // The batcher's pattern: reserve an upper bound, keep slices, free the rest.
  ExtentAllocator a(1024);
  const int64_t base = *a.Allocate(1000);
  ASSERT_THAT(a.Free(base + 100, 50), IsOk());   // gap between two kept slices
  ASSERT_THAT(a.Free(base + 400, 600), IsOk());  // unused tail
  EXPECT_EQ(a.used_bytes(), 350);
  ASSERT_THAT(a.Free(base, 100), IsOk());
  ASSERT_THAT(a.Free(base + 150, 250), IsOk());
  EXPECT_EQ(a.used_bytes(), 0);
  EXPECT_EQ(a.free_extent_count(), 1);
}

TEST(ExtentAllocatorTest, FullArenaIsResourceExhausted) {
  ExtentAllocator a(100);
  ASSERT_EQ(*a.Allocate(60), 0);
  EXPECT_THAT(a.Allocate(41), StatusIs(absl::StatusCode::kResourceExhausted,
                                       HasSubstr("need 41 contiguous bytes; 40 of 100")));
  EXPECT_EQ(*a.Allocate(40), 60);
}

TEST(ExtentAllocatorTest, FragmentationIsReported) {
  ExtentAllocator a(300);
  ASSERT_EQ(*a.Allocate(300), 0);
  ASSERT_THAT(a.Free(0, 100), IsOk());
  ASSERT_THAT(a.Free(200, 100), IsOk());
  EXPECT_THAT(a.Allocate(150), StatusIs(absl::StatusCode::kResourceExhausted,
                                        HasSubstr("largest free extent 100")));
}

TEST(ExtentAllocatorTest, DoubleFreeIsRejectedAndChangesNothing) {
  ExtentAllocator a(100);
  ASSERT_EQ(*a.Allocate(50), 0);
  ASSERT_THAT(a.Free(10, 10), IsOk());
  EXPECT_THAT(a.Free(15, 10), StatusIs(absl::StatusCode::kInternal, HasSubstr("double free")));
  EXPECT_THAT(a.Free(5, 10), StatusIs(absl::StatusCode::kInternal, HasSubstr("double free")));
  EXPECT_THAT(a.Free(90, 20), StatusIs(absl::StatusCode::kInternal, HasSubstr("outside")));
  EXPECT_EQ(a.used_bytes(), 40);
}

TEST(ExtentAllocatorTest, RejectsBadArguments) {
  ExtentAllocator a(100);
  EXPECT_THAT(a.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
  EXPECT_THAT(a.Allocate(8, 3), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("power of two")));
  EXPECT_THAT(a.Free(0, 0), IsOk());
}

}  // namespace
}  // namespace specverify::server
