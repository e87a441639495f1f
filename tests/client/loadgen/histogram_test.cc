#include "client/loadgen/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/workload/random.h"

namespace specverify::loadgen {
namespace {

// The exact q-quantile of a sample, with the histogram's rank convention:
// the smallest value v with at least ceil(q * n) values <= v.
int64_t ExactQuantile(std::vector<int64_t> values, double q) {
  std::sort(values.begin(), values.end());
  const int64_t n = static_cast<int64_t>(values.size());
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * n)));
  return values[static_cast<size_t>(rank - 1)];
}

constexpr double kQuantiles[] = {0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999};

void ExpectQuantilesWithinPrecision(const std::vector<int64_t>& values, uint64_t seed) {
  LatencyHistogram h;
  for (int64_t v : values) h.Record(v);
  ASSERT_EQ(h.count(), static_cast<int64_t>(values.size()));
  for (double q : kQuantiles) {
    const int64_t exact = ExactQuantile(values, q);
    const int64_t got = h.ValueAtQuantile(q);
    EXPECT_LE(std::abs(static_cast<double>(got - exact)),
              exact * LatencyHistogram::kRelativePrecision + 0.5)
        << "q=" << q << " exact=" << exact << " got=" << got << " seed=" << seed;
  }
  EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (int64_t v = 0; v < 256; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 256);
  EXPECT_EQ(h.ValueAtQuantile(0.5), 127);
  EXPECT_EQ(h.ValueAtQuantile(1.0), 255);
  EXPECT_EQ(h.ValueAtQuantile(0.0), 0);
  EXPECT_DOUBLE_EQ(h.mean(), 127.5);
}

TEST(LatencyHistogramTest, EveryBucketIsNarrowerThanThePrecision) {
  SplitMix64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Log-uniform over [1, 2^62].
    const int64_t v = static_cast<int64_t>(rng.Next() >> (2 + rng.NextBelow(62)));
    const int index = LatencyHistogram::BucketIndex(v);
    ASSERT_GE(index, 0);
    ASSERT_LT(index, LatencyHistogram::NumBuckets());
    const int64_t lowest = LatencyHistogram::BucketLowest(index);
    const int64_t width = LatencyHistogram::BucketWidth(index);
    ASSERT_LE(lowest, v) << v;
    ASSERT_LT(v - lowest, width) << v;
    ASSERT_LE(static_cast<double>(width - 1), lowest * LatencyHistogram::kRelativePrecision) << v;
  }
}

TEST(LatencyHistogramTest, BucketsTileTheValueRange) {
  for (int i = 0; i + 1 < LatencyHistogram::NumBuckets(); ++i) {
    ASSERT_EQ(LatencyHistogram::BucketLowest(i) + LatencyHistogram::BucketWidth(i),
              LatencyHistogram::BucketLowest(i + 1))
        << i;
    ASSERT_EQ(LatencyHistogram::BucketIndex(LatencyHistogram::BucketLowest(i)), i);
  }
}

TEST(LatencyHistogramTest, UniformQuantilesWithinPrecision) {
  std::vector<int64_t> values;
  for (int64_t v = 1; v <= 1000000; v += 7) values.push_back(v);
  ExpectQuantilesWithinPrecision(values, 0);
}

TEST(LatencyHistogramTest, ExponentialLatenciesWithinPrecision) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SplitMix64 rng(seed);
    std::vector<int64_t> values;
    for (int i = 0; i < 100000; ++i) {
      // 50 us base plus an exponential tail with mean 200 us, in ns.
      values.push_back(50000 + static_cast<int64_t>(-std::log(1.0 - rng.NextDouble()) * 200000));
    }
    ExpectQuantilesWithinPrecision(values, seed);
  }
}

TEST(LatencyHistogramTest, BimodalWithRareStallsKeepsTheTail) {
  // 0.5% of requests stall for 250 ms: p99 must stay on the fast mode, p99.9
  // must land on the stall.
  std::vector<int64_t> values;
  for (int i = 0; i < 100000; ++i) values.push_back(i % 200 == 0 ? 250'000'000 : 80'000 + i % 1000);
  ExpectQuantilesWithinPrecision(values, 0);
  LatencyHistogram h;
  for (int64_t v : values) h.Record(v);
  EXPECT_LT(h.ValueAtQuantile(0.99), 100'000);
  EXPECT_GT(h.ValueAtQuantile(0.999), 240'000'000);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingIntoOne) {
  SplitMix64 rng(11);
  LatencyHistogram all;
  LatencyHistogram parts[4];
  for (int i = 0; i < 50000; ++i) {
    const int64_t v = static_cast<int64_t>(rng.NextBelow(10'000'000));
    all.Record(v);
    parts[i % 4].Record(v);
  }
  LatencyHistogram merged;
  for (const auto& p : parts) merged.Merge(p);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_DOUBLE_EQ(merged.mean(), all.mean());
  for (double q : kQuantiles) EXPECT_EQ(merged.ValueAtQuantile(q), all.ValueAtQuantile(q)) << q;
}

TEST(LatencyHistogramTest, EmptyNegativeAndHugeValues) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.ValueAtQuantile(0.99), 0);
  EXPECT_EQ(h.max(), 0);
  h.Record(-5);  // a clock step backwards is recorded as 0, not lost
  EXPECT_EQ(h.count(), 1);
  EXPECT_EQ(h.min(), 0);
  const int64_t huge = int64_t{1} << 61;
  h.Record(huge);
  EXPECT_EQ(h.max(), huge);
  EXPECT_EQ(h.ValueAtQuantile(1.0), huge);
  EXPECT_NEAR(static_cast<double>(h.ValueAtQuantile(0.9)), static_cast<double>(huge),
              huge * LatencyHistogram::kRelativePrecision);
  h.Reset();
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.max(), 0);
}

}  // namespace
}  // namespace specverify::loadgen
