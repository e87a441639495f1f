// Statistical cases shared by the CPU statistical test and the GPU test: many
// one-position sequences over the same small rows, each with its own
// sequence index (so its own random numbers) and a draft token drawn from the
// drafter's q. The first emitted token (x_0 if accepted, else the recovery)
// must follow the target distribution p_0 exactly, the acceptance rate must be
// sum min(p_0, q), and after an acceptance the bonus token follows p_1.
#ifndef SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_STAT_CASES_H_
#define SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_STAT_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling/det_math.h"
#include "kernels/workload/random.h"
#include "tests/kernels/sampling/sampling_test_util.h"

namespace specverify::testing {

// 10^5 trials per case: the chi-square test then detects a total variation
// distance of about 0.01 between emitted and target distributions.
inline constexpr int32_t kStatTrials = 100000;

struct StatCase {
  std::string name;
  SampleValueKind kind = SampleValueKind::kProbabilities;
  SampleDtype dtype = SampleDtype::kFloat32;
  SampleMethod method = SampleMethod::kExact;
  bool has_draft_probs = true;
  std::vector<float> target0, target1;  // stored rows (probabilities, logits or log-probabilities)
  std::vector<float> draft;             // stored draft row (or the drafter's logits/probs when one-hot)
  SequenceSamplingParams params;        // temperature / top-k / top-p; seed
  // The distributions the test expects, computed independently in double.
  std::vector<double> drafter_q;   // what the drafter samples x_0 from
  std::vector<double> expected0;   // distribution of the first emitted token
  std::vector<double> expected1;   // distribution of the bonus token
  double expected_acceptance = 0.0;
};

// gtest prints parameters on failure: the name is what identifies a case.
inline void PrintTo(const StatCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<double> SoftmaxD(const std::vector<float>& z, double t) {
  double m = -1e300;
  for (float v : z) m = std::max(m, static_cast<double>(v));
  std::vector<double> w(z.size());
  for (size_t i = 0; i < z.size(); ++i) w[i] = std::exp((z[i] - m) / t);
  return Normalized(w);
}

// Top-k then top-p on a distribution, ties kept together (docs/SAMPLING.md).
inline std::vector<double> FilteredD(const std::vector<double>& p, int32_t top_k, double top_p) {
  std::vector<double> sorted = p;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  double threshold = 0.0;
  if (top_k > 0 && top_k < static_cast<int32_t>(p.size())) threshold = sorted[top_k - 1];
  std::vector<double> kept(p.size());
  for (size_t i = 0; i < p.size(); ++i) kept[i] = p[i] >= threshold ? p[i] : 0.0;
  kept = Normalized(kept);
  if (top_p < 1.0) {
    std::vector<double> out(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double larger = 0.0;
      for (size_t j = 0; j < p.size(); ++j) larger += kept[j] > kept[i] ? kept[j] : 0.0;
      if (kept[i] > 0.0 && larger < top_p) out[i] = kept[i];
    }
    kept = Normalized(out);
  }
  return kept;
}

inline double SumMin(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += std::min(a[i], b[i]);
  return s;
}

inline std::vector<double> ToDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Values as the kernels see them after storage in dtype.
inline std::vector<float> Quantized(const std::vector<float>& v, SampleDtype dtype) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == SampleDtype::kFloat16) {
      out[i] = detmath::Float16BitsToFloat(detmath::FloatToFloat16Bits(v[i]));
    } else if (dtype == SampleDtype::kBFloat16) {
      out[i] = detmath::BFloat16BitsToFloat(detmath::FloatToBFloat16Bits(v[i]));
    } else {
      out[i] = v[i];
    }
  }
  return out;
}

inline std::vector<StatCase> StatCases() {
  std::vector<StatCase> cases;
  const auto probability_case = [](std::string name, std::vector<float> p0, std::vector<float> p1,
                                   std::vector<float> q, bool has_draft, SampleDtype dtype) {
    StatCase c;
    c.name = std::move(name);
    c.dtype = dtype;
    c.has_draft_probs = has_draft;
    c.target0 = Quantized(p0, dtype);
    c.target1 = Quantized(p1, dtype);
    c.draft = Quantized(q, dtype);
    c.drafter_q = Normalized(ToDouble(c.draft));
    // Rows are used as stored: acceptance reads raw values, sampling normalizes.
    const std::vector<double> p = ToDouble(c.target0);
    c.expected1 = Normalized(ToDouble(c.target1));
    if (has_draft) {
      c.expected0 = FirstTokenDistribution(c.drafter_q, p, ToDouble(c.draft));
      c.expected_acceptance = 0.0;
      for (size_t x = 0; x < p.size(); ++x) {
        c.expected_acceptance += c.draft[x] > 0 ? c.drafter_q[x] * std::min(1.0, p[x] / c.draft[x]) : 0.0;
      }
    } else {
      c.expected0 = Normalized(p);
      c.expected_acceptance = 0.0;
      for (size_t x = 0; x < p.size(); ++x) c.expected_acceptance += c.drafter_q[x] * std::min(1.0, p[x]);
    }
    return c;
  };
  cases.push_back(probability_case(
      "peaked_vs_flat", {0.40f, 0.20f, 0.10f, 0.08f, 0.06f, 0.05f, 0.04f, 0.03f, 0.02f, 0.01f, 0.01f, 0.0f},
      {0.05f, 0.05f, 0.1f, 0.1f, 0.2f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f, 0.0f, 0.0f},
      {0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.09f, 0.09f, 0.09f, 0.09f}, true,
      SampleDtype::kFloat32));
  cases.push_back(probability_case("disjoint_supports", {0.5f, 0.3f, 0.2f, 0.0f, 0.0f, 0.0f},
                                   {0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.6f, 0.3f, 0.1f}, true,
                                   SampleDtype::kFloat32));
  cases.push_back(probability_case("identical", {0.3f, 0.3f, 0.2f, 0.1f, 0.1f}, {0.1f, 0.2f, 0.3f, 0.4f, 0.0f},
                                   {0.3f, 0.3f, 0.2f, 0.1f, 0.1f}, true, SampleDtype::kFloat32));
  cases.push_back(probability_case("one_hot_draft", {0.1f, 0.5f, 0.2f, 0.0f, 0.2f, 0.0f},
                                   {0.25f, 0.25f, 0.25f, 0.25f, 0.0f, 0.0f}, {0.3f, 0.1f, 0.1f, 0.3f, 0.1f, 0.1f},
                                   false, SampleDtype::kFloat32));
  cases.push_back(probability_case("bf16_probabilities", {0.31f, 0.27f, 0.19f, 0.13f, 0.07f, 0.03f},
                                   {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f}, {0.1f, 0.2f, 0.3f, 0.2f, 0.1f, 0.1f}, true,
                                   SampleDtype::kBFloat16));
  // Log-probabilities (issue #17): the stored rows are log(p) in the dtype,
  // -inf where p is 0; the kernels use exp of the stored values, so the
  // expected laws are computed from exp (in double) of the quantized rows,
  // exactly like the probability cases from their raw rows.
  const auto log_probability_case = [](std::string name, const std::vector<float>& p0, const std::vector<float>& p1,
                                       const std::vector<float>& q, bool has_draft, SampleDtype dtype) {
    const auto logs = [dtype](const std::vector<float>& p) {
      std::vector<float> out(p.size());
      for (size_t x = 0; x < p.size(); ++x) {
        out[x] = p[x] > 0.0f ? static_cast<float>(std::log(static_cast<double>(p[x])))
                             : -std::numeric_limits<float>::infinity();
      }
      return Quantized(out, dtype);
    };
    const auto exps = [](const std::vector<float>& lp) {
      std::vector<double> out(lp.size());
      for (size_t x = 0; x < lp.size(); ++x) out[x] = std::exp(static_cast<double>(lp[x]));
      return out;
    };
    StatCase c;
    c.name = std::move(name);
    c.kind = SampleValueKind::kLogProbabilities;
    c.dtype = dtype;
    c.has_draft_probs = has_draft;
    c.target0 = logs(p0);
    c.target1 = logs(p1);
    c.draft = logs(q);
    const std::vector<double> p = exps(c.target0);
    const std::vector<double> qa = exps(c.draft);
    c.drafter_q = Normalized(qa);
    c.expected1 = Normalized(exps(c.target1));
    c.expected_acceptance = 0.0;
    if (has_draft) {
      c.expected0 = FirstTokenDistribution(c.drafter_q, p, qa);
      for (size_t x = 0; x < p.size(); ++x) {
        c.expected_acceptance += qa[x] > 0 ? c.drafter_q[x] * std::min(1.0, p[x] / qa[x]) : 0.0;
      }
    } else {
      // One-hot drafter: x is accepted with min(1, p(x)), else the recovery
      // samples normalize(max(0, p - onehot(x))). Quantized log-probabilities
      // need not sum to 1 exactly, so the law is computed as is rather than
      // taken to be normalize(p).
      c.expected0.assign(p.size(), 0.0);
      for (size_t x = 0; x < p.size(); ++x) {
        const double accept = p[x] > 0.0 ? std::min(1.0, p[x]) : 0.0;
        c.expected_acceptance += c.drafter_q[x] * accept;
        c.expected0[x] += c.drafter_q[x] * accept;
        std::vector<double> residual(p.size());
        for (size_t y = 0; y < p.size(); ++y) residual[y] = std::max(0.0, p[y] - (y == x ? 1.0 : 0.0));
        residual = Normalized(residual);
        for (size_t y = 0; y < p.size(); ++y) c.expected0[y] += c.drafter_q[x] * (1.0 - accept) * residual[y];
      }
    }
    return c;
  };
  // The drafter proposes tokens 9 and 11 (target -inf): never emitted.
  cases.push_back(log_probability_case(
      "logprobs_peaked_vs_flat", {0.40f, 0.20f, 0.10f, 0.08f, 0.06f, 0.05f, 0.04f, 0.03f, 0.02f, 0.0f, 0.02f, 0.0f},
      {0.05f, 0.05f, 0.1f, 0.1f, 0.2f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f, 0.0f, 0.0f},
      {0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.08f, 0.09f, 0.09f, 0.09f, 0.09f}, true,
      SampleDtype::kFloat32));
  cases.push_back(log_probability_case("logprobs_disjoint_fp16", {0.5f, 0.3f, 0.2f, 0.0f, 0.0f, 0.0f},
                                       {0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.6f, 0.3f, 0.1f},
                                       true, SampleDtype::kFloat16));
  cases.push_back(log_probability_case("logprobs_one_hot_bf16", {0.1f, 0.5f, 0.2f, 0.0f, 0.2f, 0.0f},
                                       {0.25f, 0.25f, 0.25f, 0.25f, 0.0f, 0.0f},
                                       {0.3f, 0.1f, 0.1f, 0.3f, 0.1f, 0.1f}, false, SampleDtype::kBFloat16));
  {
    // Logits, temperature 0.7, top-k 6 then top-p 0.9, draft logits.
    StatCase c;
    c.name = "logits_temperature_topk_topp";
    c.kind = SampleValueKind::kLogits;
    c.dtype = SampleDtype::kFloat16;
    c.target0 = Quantized({2.0f, 1.5f, 1.0f, 0.8f, 0.5f, 0.1f, -0.5f, -1.0f, 1.2f, 0.0f}, c.dtype);
    c.target1 = Quantized({0.0f, 0.3f, 0.6f, 0.9f, 1.2f, 1.5f, 1.8f, 2.1f, 2.4f, 2.7f}, c.dtype);
    c.draft = Quantized({1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, c.dtype);
    c.params.temperature = 0.7f;
    c.params.top_k = 6;
    c.params.top_p = 0.9f;
    c.drafter_q = SoftmaxD(c.draft, 0.7);
    const std::vector<double> p = FilteredD(SoftmaxD(c.target0, 0.7), 6, 0.9);
    c.expected0 = p;
    c.expected1 = FilteredD(SoftmaxD(c.target1, 0.7), 6, 0.9);
    c.expected_acceptance = SumMin(p, c.drafter_q);
    cases.push_back(c);
  }
  {
    // Seed 001's sigmoid approximation with tight constants, so the deviation
    // from exact is visible; expected0 is its analytic (non-target) law.
    StatCase c;
    c.name = "sigmoid_approximation";
    c.kind = SampleValueKind::kLogits;
    c.method = SampleMethod::kSigmoid;
    c.target0 = {3.0f, 1.0f, 0.0f, -1.0f, -3.0f, 2.0f};
    c.target1 = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 4.0f};
    c.draft = {1.0f, 2.0f, 0.0f, 0.0f, -1.0f, 0.5f};
    c.drafter_q = SoftmaxD(c.draft, 1.0);
    std::vector<double> ph(6), qh(6), p1h(6);
    const auto sig = [](double z) { return 1.0 / (1.0 + std::exp(-(z - (-4.0)) / 8.0)); };
    for (int x = 0; x < 6; ++x) {
      ph[x] = sig(c.target0[x]);
      qh[x] = sig(c.draft[x]);
      p1h[x] = sig(c.target1[x]);
    }
    c.expected0 = FirstTokenDistribution(c.drafter_q, ph, qh);
    c.expected1 = Normalized(p1h);
    c.expected_acceptance = 0.0;
    for (int x = 0; x < 6; ++x) c.expected_acceptance += c.drafter_q[x] * std::min(1.0, ph[x] / qh[x]);
    cases.push_back(c);
  }
  return cases;
}

// Sigmoid constants of the sigmoid case: alpha = -4, beta = 4 (beta - alpha = 8).
inline constexpr float kStatSigmoidAlpha = -4.0f;
inline constexpr float kStatSigmoidBeta = 4.0f;

// kStatTrials one-position sequences of a case; draft tokens drawn from
// drafter_q with a SplitMix64 stream keyed by `seed`.
inline ExplicitBatch BuildStatBatch(const StatCase& c, uint64_t seed, int32_t trials = kStatTrials) {
  const int32_t v = static_cast<int32_t>(c.target0.size());
  ExplicitBatch batch(v, c.kind, c.dtype, c.has_draft_probs);
  std::vector<std::byte> target, draft;
  AppendAsDtype(c.target0.data(), v, c.dtype, target);
  AppendAsDtype(c.target1.data(), v, c.dtype, target);
  AppendAsDtype(c.draft.data(), v, c.dtype, draft);
  SplitMix64 rng(seed);
  for (int32_t i = 0; i < trials; ++i) {
    SequenceSamplingParams s = c.params;
    s.seed = seed;
    s.sequence_index = i;
    batch.AddRepeated(target, draft, {SampleIndex(c.drafter_q, rng)}, s);
  }
  return batch;
}

inline RejectionBatchInput StatInput(const StatCase& c, const ExplicitBatch& batch) {
  RejectionBatchInput in = batch.input(c.method);
  in.sigmoid_alpha = kStatSigmoidAlpha;
  in.sigmoid_beta = kStatSigmoidBeta;
  return in;
}

// Checks emitted tokens against the case's laws; `who` names the backend.
inline void ExpectStatistics(const StatCase& c, const ExplicitBatch& batch, const int32_t* accepted,
                             const int32_t* next, const std::string& who, uint64_t seed) {
  const size_t v = c.target0.size();
  std::vector<int64_t> first(v, 0), bonus(v, 0);
  int64_t accepted_count = 0;
  const int32_t n = batch.num_sequences();
  for (int32_t i = 0; i < n; ++i) {
    if (accepted[i] == 1) {
      ++accepted_count;
      ++first[batch.tokens_[i]];
      ++bonus[next[i]];
    } else {
      ++first[next[i]];
    }
  }
  SCOPED_TRACE(who + " case " + c.name + " seed " + std::to_string(seed));
  const ChiSquareResult r0 = ChiSquare(first, c.expected0);
  EXPECT_EQ(r0.zero_probability_hits, 0) << "a token of zero target probability was emitted";
  EXPECT_LT(r0.statistic, ChiSquareCritical(r0.df, kFalseFailureZ)) << "first-token chi-square, df " << r0.df;
  if (accepted_count > 1000) {
    const ChiSquareResult r1 = ChiSquare(bonus, c.expected1);
    EXPECT_EQ(r1.zero_probability_hits, 0) << "a bonus token of zero target probability was emitted";
    EXPECT_LT(r1.statistic, ChiSquareCritical(r1.df, kFalseFailureZ)) << "bonus chi-square, df " << r1.df;
  }
  const double a = c.expected_acceptance;
  const double sd = std::sqrt(std::max(a * (1.0 - a), 1e-12) / n);
  EXPECT_NEAR(static_cast<double>(accepted_count) / n, a, kFalseFailureZ * sd + 1e-12)
      << "acceptance rate vs sum min(p, q)";
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_KERNELS_SAMPLING_SAMPLING_STAT_CASES_H_
