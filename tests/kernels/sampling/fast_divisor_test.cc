#include "kernels/sampling/fast_divisor.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace specverify {
namespace {

// The row-pass kernels split every block index with it: any wrong quotient
// sends a block to another row's chunk.
TEST(FastDivisorTest, SmallDivisorsAgainstEveryIndexUpTo65536) {
  for (uint32_t d = 1; d <= 300; ++d) {
    const FastDivisor f = FastDivisor::For(d);
    for (uint32_t n = 0; n < 65536; ++n) {
      const uint32_t q = f.Quotient(n);
      ASSERT_EQ(q, n / d) << "n " << n << " d " << d;
      ASSERT_EQ(f.Remainder(n, q), n % d) << "n " << n << " d " << d;
    }
  }
}

TEST(FastDivisorTest, LargeIndicesAndDivisors) {
  std::mt19937_64 rng(17);
  const uint32_t top = (uint32_t{1} << 31) - 1;
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t d = trial < 32 ? (uint32_t{1} << (trial % 31)) + (trial / 31)
                                  : static_cast<uint32_t>(rng() % top) + 1;
    const FastDivisor f = FastDivisor::For(d);
    for (uint32_t n : {uint32_t{0}, d - 1, d, d + 1, 2 * (d / 2) + 1, top, top - 1, top - d % top,
                       static_cast<uint32_t>(rng() % (uint64_t{top} + 1))}) {
      if (n > top) continue;
      ASSERT_EQ(f.Quotient(n), n / d) << "n " << n << " d " << d;
      ASSERT_EQ(f.Remainder(n, f.Quotient(n)), n % d) << "n " << n << " d " << d;
    }
  }
}

}  // namespace
}  // namespace specverify
