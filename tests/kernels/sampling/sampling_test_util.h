// Test helpers for rejection sampling: explicit small batches built from
// float rows, the statistical thresholds, and the analytic distributions the
// emitted tokens are compared with.
#ifndef SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_TEST_UTIL_H_
#define SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/sampling/rejection_params.h"
#include "kernels/workload/random.h"
#include "kernels/workload/sampling_workload.h"

namespace specverify::testing {

// A batch assembled from explicit rows (floats, stored in `dtype`).
class ExplicitBatch {
 public:
  ExplicitBatch(int32_t vocab, SampleValueKind kind, SampleDtype dtype, bool has_draft_probs)
      : vocab_(vocab), kind_(kind), dtype_(dtype), has_draft_(has_draft_probs) {
    offsets_.push_back(0);
  }

  // target: gamma + 1 rows; draft: gamma rows (ignored without draft probs).
  void Add(const std::vector<std::vector<float>>& target, const std::vector<std::vector<float>>& draft,
           const std::vector<int32_t>& tokens, const SequenceSamplingParams& params) {
    for (const auto& row : target) AppendAsDtype(row.data(), vocab_, dtype_, target_);
    if (has_draft_) {
      for (const auto& row : draft) AppendAsDtype(row.data(), vocab_, dtype_, draft_);
    }
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    offsets_.push_back(offsets_.back() + static_cast<int32_t>(tokens.size()));
    sequences_.push_back(params);
    if (params.top_k > 0 || params.top_p < 1.0f) any_filter_ = true;
  }

  // Faster path for many copies of the same rows (statistical tests).
  void AddRepeated(const std::vector<std::byte>& target_bytes, const std::vector<std::byte>& draft_bytes,
                   const std::vector<int32_t>& tokens, const SequenceSamplingParams& params) {
    target_.insert(target_.end(), target_bytes.begin(), target_bytes.end());
    if (has_draft_) draft_.insert(draft_.end(), draft_bytes.begin(), draft_bytes.end());
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    offsets_.push_back(offsets_.back() + static_cast<int32_t>(tokens.size()));
    sequences_.push_back(params);
    if (params.top_k > 0 || params.top_p < 1.0f) any_filter_ = true;
  }

  int32_t num_sequences() const { return static_cast<int32_t>(sequences_.size()); }

  RejectionBatchInput input(SampleMethod method = SampleMethod::kExact) const {
    RejectionBatchInput in;
    in.num_sequences = num_sequences();
    in.vocab_size = vocab_;
    in.total_draft_tokens = offsets_.back();
    in.dtype = dtype_;
    in.kind = kind_;
    in.method = method;
    in.has_draft_probs = has_draft_;
    in.any_top_k_top_p = any_filter_;
    in.draft_offsets = offsets_.data();
    in.draft_tokens = tokens_.data();
    in.target_values = target_.data();
    in.draft_values = has_draft_ ? draft_.data() : nullptr;
    in.sequences = sequences_.data();
    return in;
  }

  std::vector<int32_t> offsets_;
  std::vector<int32_t> tokens_;
  std::vector<std::byte> target_;
  std::vector<std::byte> draft_;
  std::vector<SequenceSamplingParams> sequences_;

 private:
  int32_t vocab_;
  SampleValueKind kind_;
  SampleDtype dtype_;
  bool has_draft_;
  bool any_filter_ = false;
};

inline std::vector<double> Normalized(const std::vector<double>& w) {
  double sum = 0.0;
  for (double v : w) sum += v;
  std::vector<double> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] / sum;
  return out;
}

inline int32_t SampleIndex(const std::vector<double>& p, SplitMix64& rng) {
  const double u = rng.NextDouble();
  double c = 0.0;
  int32_t last = 0;
  for (size_t x = 0; x < p.size(); ++x) {
    if (p[x] <= 0.0) continue;
    last = static_cast<int32_t>(x);
    c += p[x];
    if (u < c) return last;
  }
  return last;
}

// Upper quantile of chi-square with `df` degrees of freedom at one-sided
// standard-normal deviate z (Wilson-Hilferty; within 1% for df >= 3).
inline double ChiSquareCritical(int32_t df, double z) {
  const double a = 2.0 / (9.0 * df);
  const double t = 1.0 - a + z * std::sqrt(a);
  return df * t * t * t;
}

// z = 4.753: each statistical assertion fails by chance with probability
// 1e-6 (one-sided normal tail), so the whole suite (a few dozen assertions)
// has a false-failure probability below 1e-4.
inline constexpr double kFalseFailureZ = 4.753;

struct ChiSquareResult {
  double statistic = 0.0;
  int32_t df = 0;
  int64_t zero_probability_hits = 0;  // emitted tokens of expected probability 0
};

// Pearson chi-square of observed counts against expected probabilities over
// bins of positive probability (bins with expected count < 5 are pooled).
inline ChiSquareResult ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& expected) {
  ChiSquareResult r;
  int64_t n = 0;
  for (size_t x = 0; x < counts.size(); ++x) {
    n += counts[x];
    if (expected[x] <= 0.0) r.zero_probability_hits += counts[x];
  }
  double pooled_obs = 0.0, pooled_exp = 0.0;
  int32_t bins = 0;
  for (size_t x = 0; x < counts.size(); ++x) {
    if (expected[x] <= 0.0) continue;
    const double e = expected[x] * n;
    if (e < 5.0) {
      pooled_obs += counts[x];
      pooled_exp += e;
      continue;
    }
    r.statistic += (counts[x] - e) * (counts[x] - e) / e;
    ++bins;
  }
  if (pooled_exp > 0.0) {
    r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1e-300);
    ++bins;
  }
  r.df = std::max(1, bins - 1);
  return r;
}

inline double TotalVariation(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
  return d / 2.0;
}

// Distribution of the first emitted token of rejection sampling with draft
// q (the drafter samples from q), acceptance ratios computed from (pa, qa) and
// recovery from normalize(max(0, pa - qa)): exact rejection sampling is pa = p,
// qa = q and returns p; the sigmoid method passes its unnormalized p^, q^.
inline std::vector<double> FirstTokenDistribution(const std::vector<double>& q, const std::vector<double>& pa,
                                                  const std::vector<double>& qa) {
  const size_t v = q.size();
  std::vector<double> out(v, 0.0);
  double accept_total = 0.0;
  std::vector<double> residual(v);
  double residual_sum = 0.0;
  for (size_t x = 0; x < v; ++x) {
    const double a = pa[x] <= 0.0 ? 0.0 : (qa[x] <= 0.0 ? 1.0 : std::min(1.0, pa[x] / qa[x]));
    out[x] = q[x] * a;
    accept_total += q[x] * a;
    residual[x] = std::max(0.0, pa[x] - qa[x]);
    residual_sum += residual[x];
  }
  for (size_t x = 0; x < v; ++x) {
    const double r = residual_sum > 0.0 ? residual[x] / residual_sum : pa[x];
    out[x] += (1.0 - accept_total) * r;
  }
  return out;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_TEST_UTIL_H_
