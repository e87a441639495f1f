// A log-linear latency histogram in the shape of HdrHistogram (Gil Tene): values
// below 2 * kSubBuckets are counted exactly; above, each power-of-two range is
// split into kSubBuckets equal buckets, so a bucket is never wider than
// 1/kSubBuckets of the values it holds. With kSubBuckets = 128 a recorded value
// is known to within 0.79% (0.39% once reported at its bucket's midpoint),
// whatever its magnitude, from 1 ns to hours, in a fixed 60 KB of counters.
//
// Thread safety: none. Each thread (or connection) records into its own
// histogram; Merge() combines them exactly, because every histogram shares
// the same bucket boundaries.
#ifndef SPECVERIFY_CLIENT_LOADGEN_HISTOGRAM_H_
#define SPECVERIFY_CLIENT_LOADGEN_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace specverify::loadgen {

class LatencyHistogram {
 public:
  // Sub-buckets per power of two: the resolution (1/128 = 0.78%).
  static constexpr int kSubBucketBits = 7;
  static constexpr int64_t kSubBuckets = int64_t{1} << kSubBucketBits;
  // Bounds on the relative error of ValueAtQuantile() for any recorded value.
  static constexpr double kRelativePrecision = 1.0 / kSubBuckets;

  LatencyHistogram();

  // Records a value (nanoseconds, say); negative values are recorded as 0.
  void Record(int64_t value) { RecordN(value, 1); }
  void RecordN(int64_t value, int64_t count);
  void Merge(const LatencyHistogram& other);
  void Reset();

  int64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }  // exact
  int64_t max() const { return max_; }                     // exact
  double mean() const;                                     // exact (sum kept)

  // The smallest recorded value v such that at least q * count() values are
  // <= v, reported as its bucket's midpoint and clamped to [min(), max()].
  // q in [0, 1]; q = 1 gives max(), q = 0 gives min(). 0 when empty.
  int64_t ValueAtQuantile(double q) const;

  // Bucket geometry, exposed for tests.
  static int BucketIndex(int64_t value);
  static int64_t BucketLowest(int index);
  static int64_t BucketWidth(int index);
  static int NumBuckets();

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  long double sum_ = 0;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_HISTOGRAM_H_
