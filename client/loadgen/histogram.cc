#include "client/loadgen/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace specverify::loadgen {
namespace {

// Values below kExactLimit have one bucket each.
constexpr int64_t kExactLimit = 2 * LatencyHistogram::kSubBuckets;
constexpr int kExactExponent = LatencyHistogram::kSubBucketBits + 1;  // log2(kExactLimit)
constexpr int kMaxExponent = 62;  // values up to 2^63 - 1

}  // namespace

int LatencyHistogram::NumBuckets() {
  return static_cast<int>(kExactLimit + (kMaxExponent - kExactExponent + 1) * kSubBuckets);
}

int LatencyHistogram::BucketIndex(int64_t value) {
  if (value < kExactLimit) return static_cast<int>(std::max<int64_t>(value, 0));
  const int exponent = 63 - std::countl_zero(static_cast<uint64_t>(value));
  const int shift = exponent - kSubBucketBits;
  const int64_t mantissa = (value >> shift) & (kSubBuckets - 1);
  return static_cast<int>(kExactLimit + (exponent - kExactExponent) * kSubBuckets + mantissa);
}

int64_t LatencyHistogram::BucketLowest(int index) {
  if (index < kExactLimit) return index;
  const int64_t above = index - kExactLimit;
  const int exponent = static_cast<int>(above / kSubBuckets) + kExactExponent;
  const int64_t mantissa = above % kSubBuckets;
  return (int64_t{1} << exponent) + (mantissa << (exponent - kSubBucketBits));
}

int64_t LatencyHistogram::BucketWidth(int index) {
  if (index < kExactLimit) return 1;
  const int exponent = static_cast<int>((index - kExactLimit) / kSubBuckets) + kExactExponent;
  return int64_t{1} << (exponent - kSubBucketBits);
}

LatencyHistogram::LatencyHistogram() : counts_(NumBuckets(), 0) {}

void LatencyHistogram::RecordN(int64_t value, int64_t count) {
  if (count <= 0) return;
  value = std::max<int64_t>(value, 0);
  counts_[BucketIndex(value)] += count;
  if (count_ == 0 || value < min_) min_ = value;
  if (value > max_) max_ = value;
  count_ += count;
  sum_ += static_cast<long double>(value) * count;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  if (count_ == 0 || other.min_ < min_) min_ = other.min_;
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LatencyHistogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = min_ = max_ = 0;
  sum_ = 0;
}

double LatencyHistogram::mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / count_);
}

int64_t LatencyHistogram::ValueAtQuantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  if (q == 0.0) return min_;
  if (q == 1.0) return max_;
  // The rank of the wanted value, 1-based: at least q * count values <= it.
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * count_)));
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int index = static_cast<int>(i);
      const int64_t mid = BucketLowest(index) + (BucketWidth(index) - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace specverify::loadgen
