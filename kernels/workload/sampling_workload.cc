#include "kernels/workload/sampling_workload.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/sampling/det_math.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/workload/random.h"

namespace specverify {
namespace {

// Logit assigned outside a distribution's support: its softmax weight is 0.
constexpr float kOffSupportLogit = -1e4f;

// Approximately standard normal (Irwin-Hall of 4 uniforms, rescaled): pure
// arithmetic, so identical on every machine.
float NextNormal(SplitMix64& rng) {
  const double s = rng.NextDouble() + rng.NextDouble() + rng.NextDouble() + rng.NextDouble();
  return static_cast<float>((s - 2.0) * 1.7320508075688772);  // variance 4/12 -> 1
}

// Logits below the k-th largest to -inf (k < z.size()): the distribution
// restricted to its top k, ties at the cut included.
void KeepTopK(std::vector<float>& z, int32_t k, std::vector<float>& scratch) {
  scratch = z;
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<float>());
  const float cut = scratch[k - 1];
  for (float& v : z) {
    if (v < cut) v = rejection::NegativeInfinity();
  }
}

DistributionShape ShapeOf(const SamplingWorkloadOptions& o, int32_t i) {
  return o.shape == DistributionShape::kMixed ? static_cast<DistributionShape>(i % 4) : o.shape;
}

// softmax(z / t) in float weights with a double sum; t > 0.
std::vector<double> Softmax(const std::vector<float>& z, float t) {
  float m = z[0];
  for (float v : z) m = v > m ? v : m;
  std::vector<double> p(z.size());
  double sum = 0.0;
  for (size_t x = 0; x < z.size(); ++x) {
    p[x] = detmath::ExpDet(detmath::Div(detmath::Sub(z[x], m), t));
    sum += p[x];
  }
  for (double& v : p) v /= sum;
  return p;
}

// log(softmax(z / t)) as floats: (z - m) / t - log(sum), the rows a caller
// would send as log-probabilities; -inf exactly where softmax's weight
// underflows to 0 (so exp of these rows is 0 where the probability rows are).
std::vector<float> LogSoftmax(const std::vector<float>& z, float t) {
  float m = z[0];
  for (float v : z) m = v > m ? v : m;
  std::vector<float> d(z.size());
  double sum = 0.0;
  for (size_t x = 0; x < z.size(); ++x) {
    d[x] = detmath::Div(detmath::Sub(z[x], m), t);
    sum += detmath::ExpDet(d[x]);
  }
  // sum >= 1 (the maximum contributes 1): a normal float, LogDet's domain.
  const float log_sum = detmath::LogDet(static_cast<float>(sum));
  for (float& v : d) {
    v = detmath::ExpDet(v) > 0.0f ? detmath::Sub(v, log_sum) : rejection::NegativeInfinity();
  }
  return d;
}

int32_t SampleFrom(const std::vector<double>& p, SplitMix64& rng) {
  const double u = rng.NextDouble();
  double cumulative = 0.0;
  int32_t last_positive = 0;
  for (size_t x = 0; x < p.size(); ++x) {
    if (p[x] <= 0.0) continue;
    last_positive = static_cast<int32_t>(x);
    cumulative += p[x];
    if (u < cumulative) return static_cast<int32_t>(x);
  }
  return last_positive;  // rounding left u above the last cumulative value
}

}  // namespace

void AppendAsDtype(const float* values, int64_t count, SampleDtype dtype, std::vector<std::byte>& out) {
  const size_t base = out.size();
  out.resize(base + count * SampleDtypeBytes(dtype));
  std::byte* dst = out.data() + base;
  for (int64_t x = 0; x < count; ++x) {
    if (dtype == SampleDtype::kFloat32) {
      std::memcpy(dst + 4 * x, &values[x], 4);
    } else {
      const uint16_t h = dtype == SampleDtype::kFloat16 ? detmath::FloatToFloat16Bits(values[x])
                                                        : detmath::FloatToBFloat16Bits(values[x]);
      std::memcpy(dst + 2 * x, &h, 2);
    }
  }
}

RejectionBatchInput SamplingWorkload::input() const {
  RejectionBatchInput in;
  in.num_sequences = options.num_sequences;
  in.vocab_size = options.vocab_size;
  in.total_draft_tokens = draft_offsets.back();
  in.dtype = options.dtype;
  in.kind = options.kind;
  in.has_draft_probs = options.has_draft_probs;
  in.any_top_k_top_p = options.kind == SampleValueKind::kLogits && (options.top_k > 0 || options.top_p < 1.0f);
  in.draft_offsets = draft_offsets.data();
  in.draft_tokens = draft_tokens.data();
  in.target_values = target_values.data();
  in.draft_values = options.has_draft_probs ? draft_values.data() : nullptr;
  in.sequences = sequences.data();
  return in;
}

absl::StatusOr<SamplingWorkload> GenerateSamplingWorkload(const SamplingWorkloadOptions& o) {
  if (o.num_sequences < 0) return absl::InvalidArgumentError("num_sequences must be >= 0");
  if (o.gamma_min < 1 || o.gamma_max < o.gamma_min) {
    return absl::InvalidArgumentError(absl::StrCat("gamma range [", o.gamma_min, ", ", o.gamma_max,
                                                   "] must satisfy 1 <= gamma_min <= gamma_max"));
  }
  if (o.vocab_size < 2) return absl::InvalidArgumentError("vocab_size must be >= 2");
  if (!(o.temperature >= 0.0f) || !(o.top_p > 0.0f && o.top_p <= 1.0f) || o.top_k < 0) {
    return absl::InvalidArgumentError("temperature >= 0, top_k >= 0 and top_p in (0, 1] required");
  }
  if (o.sequences_per_request < 1) return absl::InvalidArgumentError("sequences_per_request must be >= 1");
  if (o.draft_noise < 0.0f) return absl::InvalidArgumentError("draft_noise must be >= 0");
  if (o.caller_top_k < 0 || (o.caller_top_k > 0 && o.kind == SampleValueKind::kLogits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "caller_top_k is ", o.caller_top_k,
        "; must be >= 0, and 0 for logits (the server applies top_k to logits)"));
  }

  SamplingWorkload w;
  w.options = o;
  const int32_t v = o.vocab_size;
  const bool logits = o.kind == SampleValueKind::kLogits;
  const bool log_probs = o.kind == SampleValueKind::kLogProbabilities;
  // (Log-)probabilities are stored after temperature; T == 0 there means T == 1.
  const float t = o.temperature > 0.0f ? o.temperature : 1.0f;
  w.draft_offsets.push_back(0);
  std::vector<float> zp(v), zq(v), stored(v), scratch;
  const bool filter_rows = o.caller_top_k > 0 && o.caller_top_k < v;
  for (int32_t i = 0; i < o.num_sequences; ++i) {
    SplitMix64 rng(DeriveSeed(o.seed, static_cast<uint64_t>(i)));
    const int32_t gamma = o.gamma_min + static_cast<int32_t>(rng.NextBelow(o.gamma_max - o.gamma_min + 1));
    w.draft_offsets.push_back(w.draft_offsets.back() + gamma);
    const DistributionShape shape = ShapeOf(o, i);
    const int32_t request = i / o.sequences_per_request;
    SequenceSamplingParams s;
    s.seed = DeriveSeed(o.seed ^ 0x5eed5eed5eed5eedULL, static_cast<uint64_t>(request));
    s.sequence_index = i % o.sequences_per_request;
    if (logits) {
      s.temperature = o.temperature;
      s.top_k = o.top_k;
      s.top_p = o.top_p;
    }
    w.sequences.push_back(s);
    // gamma + 1 target rows, gamma draft rows (drafted token j comes from q_j).
    for (int32_t j = 0; j <= gamma; ++j) {
      const float scale = shape == DistributionShape::kFlat ? 0.1f : 3.0f;
      for (int32_t x = 0; x < v; ++x) zp[x] = detmath::Mul(scale, NextNormal(rng));
      if (shape == DistributionShape::kPeaked) {
        for (int32_t boost = 0; boost < 3; ++boost) zp[rng.NextBelow(v)] += 8.0f;
      }
      for (int32_t x = 0; x < v; ++x) {
        zq[x] = shape == DistributionShape::kIdentical ? zp[x]
                                                       : detmath::Add(zp[x], detmath::Mul(o.draft_noise, NextNormal(rng)));
      }
      if (shape == DistributionShape::kDisjoint) {
        for (int32_t x = 0; x < v; ++x) (x < v / 2 ? zq : zp)[x] = kOffSupportLogit;
      }
      if (filter_rows) {
        KeepTopK(zp, o.caller_top_k, scratch);
        KeepTopK(zq, o.caller_top_k, scratch);
      }
      // Target row.
      if (logits) {
        AppendAsDtype(zp.data(), v, o.dtype, w.target_values);
      } else if (log_probs) {
        const std::vector<float> lp = LogSoftmax(zp, t);
        AppendAsDtype(lp.data(), v, o.dtype, w.target_values);
      } else {
        const std::vector<double> p = Softmax(zp, t);
        for (int32_t x = 0; x < v; ++x) stored[x] = static_cast<float>(p[x]);
        AppendAsDtype(stored.data(), v, o.dtype, w.target_values);
      }
      if (j == gamma) break;
      const std::vector<double> q = Softmax(zq, t);
      w.draft_tokens.push_back(SampleFrom(q, rng));
      if (o.has_draft_probs) {
        if (logits) {
          AppendAsDtype(zq.data(), v, o.dtype, w.draft_values);
        } else if (log_probs) {
          const std::vector<float> lq = LogSoftmax(zq, t);
          AppendAsDtype(lq.data(), v, o.dtype, w.draft_values);
        } else {
          for (int32_t x = 0; x < v; ++x) stored[x] = static_cast<float>(q[x]);
          AppendAsDtype(stored.data(), v, o.dtype, w.draft_values);
        }
      }
    }
  }
  // Rows were appended per sequence in target order; draft rows likewise.
  return w;
}

RejectionHostOutputs::RejectionHostOutputs(int32_t b, uint8_t poison)
    : accepted_lengths(b), next_tokens(b), mismatch(b), status_codes(b), error_positions(b) {
  // b == 0: the vectors are empty and data() may be null, which memset must
  // not be given even for 0 bytes.
  if (b <= 0) return;
  std::memset(accepted_lengths.data(), poison, b * sizeof(int32_t));
  std::memset(next_tokens.data(), poison, b * sizeof(int32_t));
  std::memset(mismatch.data(), poison, b);
  std::memset(status_codes.data(), poison, b * sizeof(int32_t));
  std::memset(error_positions.data(), poison, b * sizeof(int32_t));
}

RejectionHostOutputs ReferenceOutcome(const SamplingWorkload& w) {
  RejectionHostOutputs out(w.num_sequences(), 0);
  ReferenceRejectionSample(RejectionSampleParams{w.input(), out.view()});
  return out;
}

RejectionBatchOutput RejectionHostOutputs::view() {
  return RejectionBatchOutput{accepted_lengths.data(), next_tokens.data(), mismatch.data(),
                              status_codes.data(), error_positions.data()};
}

}  // namespace specverify
