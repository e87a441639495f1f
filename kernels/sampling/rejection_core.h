// The per-element formulas of rejection sampling, shared verbatim by the CPU
// reference and the CUDA kernels (host + device). Every value that can decide
// a token (a probability read for acceptance, a softmax normalizer, a race
// key) is computed here from det_math.h operations, so both sides produce the
// same bits. The only order-dependent quantity is the double-precision sum
// inside a normalizer chunk (see kNormalizerChunk); docs/SAMPLING.md bounds
// what that can change.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_CORE_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_CORE_H_

#include <cstdint>

#include "kernels/sampling/det_math.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify::rejection {

// Softmax normalizers (and full-row sums) are defined over fixed chunks of a
// row, not over thread blocks: chunk c covers [c * kNormalizerChunk,
// (c+1) * kNormalizerChunk). Per chunk: m_c = max z, s_c = a sum of
// LogitWeight(z, m_c, 1/T) in a FIXED order: element e belongs to lane
// (e / kLaneWidth) % kChunkLanes, each lane adds its 16 elements in
// increasing e in float, then the lane sums, as doubles, are folded pairwise,
// s[t] += s[t + stride] for stride = 128, 64, ..., 1. Per row: m = max m_c, Z = sum over c in increasing order of
// s_c * LogitWeight(m_c, m, 1/T) in double, rounded to float. A CUDA block of
// kChunkLanes threads computes a chunk in exactly this order, so the CPU and
// the GPU produce the same bits for every normalizer.
inline constexpr int32_t kNormalizerChunk = 4096;
inline constexpr int32_t kChunkLanes = 256;
inline constexpr int32_t kLaneWidth = 4;
static_assert(kNormalizerChunk % (kChunkLanes * kLaneWidth) == 0);

SV_HD int32_t NumChunks(int32_t vocab) { return (vocab + kNormalizerChunk - 1) / kNormalizerChunk; }

SV_HD float LoadValue(const void* base, SampleDtype dtype, int64_t index) {
  switch (dtype) {
    case SampleDtype::kFloat16:
      return detmath::Float16BitsToFloat(static_cast<const uint16_t*>(base)[index]);
    case SampleDtype::kBFloat16:
      return detmath::BFloat16BitsToFloat(static_cast<const uint16_t*>(base)[index]);
    case SampleDtype::kFloat32:
    default:
      return static_cast<const float*>(base)[index];
  }
}

// A value the verification may read: finite; a probability also >= 0; a
// log-probability is anything but NaN and +inf (-inf is probability 0).
SV_HD bool ValueIsValid(SampleValueKind kind, float v) {
  if (kind == SampleValueKind::kLogProbabilities) return v < detmath::BitsToFloat(0x7f800000u);
  return detmath::IsFinite(v) && (kind == SampleValueKind::kLogits || v >= 0.0f);
}

// The probability a log-probability stands for: ExpDet, so the CPU and the
// GPU agree bit for bit. -inf (and anything <= -103.5) gives 0; v >= 88.72
// gives +inf (a valid value, if a useless one: such a row is not normalized).
SV_HD float LogProbabilityToProbability(float v) { return detmath::ExpDet(v); }

// What an element adds to its row's mass in the full-row check
// (validate_full_rows) of probability and log-probability rows.
SV_HD float RowMassOf(SampleValueKind kind, float v) {
  return kind == SampleValueKind::kLogProbabilities ? LogProbabilityToProbability(v) : v;
}

// 1 / T, computed the same way everywhere (T > 0).
SV_HD float InverseTemperature(float t) { return detmath::Div(1.0f, t); }

// log2(e) / T, the per-row scale of LogitWeight, capped at FLT_MAX so that
// (z - m) * scale is never NaN (0 * inf): the maximum keeps weight exactly 1.
SV_HD float LogitScale(float inv_t) {
  return detmath::MinF(detmath::Mul(inv_t, 1.44269504088896341f), 3.40282347e38f);
}

// exp((z - m) / T) as Exp2Det((z - m) * (log2(e) / T)), with the scale from
// LogitScale: exactly 1 at the maximum (Exp2Det(+-0) = 1). The softmax
// normalizer evaluates it for every element of every row, so it is the cheap
// base-2 form, with no branch (the rounding of the scaled difference costs
// the same relative error as rounding (z - m) / T did with ExpDet).
SV_HD float ScaledLogitWeight(float z, float row_max, float scale) {
  return detmath::Exp2Det(detmath::Mul(detmath::Sub(z, row_max), scale));
}

SV_HD float LogitWeight(float z, float row_max, float inv_t) {
  return ScaledLogitWeight(z, row_max, LogitScale(inv_t));
}

// Top-p masses in fixed point (docs/SAMPLING.md): a weight w in [0, 1] (the
// row maximum weighs 1) counts floor(w * 2^40) units. Integer sums do not
// depend on their order, so the GPU's histogram atomics and the CPU's sorted
// sum decide every top-p boundary alike, on every run; 2^20 tokens (the
// vocabulary limit) sum below 2^60.
SV_HD uint64_t TopPMassUnits(float weight) {
  const float scaled = detmath::Mul(weight, 1099511627776.0f);  // 2^40: exact
#if defined(__CUDA_ARCH__)
  return __float2ull_rz(scaled);
#else
  return static_cast<uint64_t>(scaled);
#endif
}

// The top-p budget in units: floor(top_p * kept), the product in double.
SV_HD uint64_t TopPBudgetUnits(float top_p, uint64_t kept_units) {
  const double budget = detmath::MulD(static_cast<double>(top_p), static_cast<double>(kept_units));
#if defined(__CUDA_ARCH__)
  return __double2ull_rz(budget);
#else
  return static_cast<uint64_t>(budget);
#endif
}

// Seed 001: sigmoid((z / T - alpha) / (beta - alpha)).
SV_HD float SigmoidValue(float z, float inv_t, float alpha, float beta_minus_alpha) {
  const float s = detmath::Div(detmath::Sub(detmath::Mul(z, inv_t), alpha), beta_minus_alpha);
  return detmath::Div(1.0f, detmath::Add(1.0f, detmath::ExpDet(-s)));
}

// Normalizer of a logits row, after chunk combination.
struct RowNormalizer {
  float max = 0.0f;      // m
  int32_t argmax = -1;   // lowest index attaining m
  float sum = 0.0f;      // Z (over the kept tokens when filtered), as float
  float threshold = 0.0f;  // filtered rows keep z >= threshold; -inf keeps all
};

SV_HD float NegativeInfinity() { return detmath::BitsToFloat(0xff800000u); }

// Partial statistics of one chunk.
struct ChunkStats {
  float max;       // m_c
  int32_t argmax;  // lowest index in the chunk attaining m_c
  double sum;      // s_c: sum of LogitWeight(z, m_c, inv_t) over the chunk (0 when greedy)
};

// Combines the chunks of one row, in chunk order. An unfiltered normalizer
// keeps every token (threshold -inf).
SV_HD RowNormalizer CombineChunks(const ChunkStats* chunks, int32_t num_chunks, float inv_t) {
  RowNormalizer n;
  n.max = chunks[0].max;
  n.argmax = chunks[0].argmax;
  for (int32_t c = 1; c < num_chunks; ++c) {
    if (chunks[c].max > n.max) {
      n.max = chunks[c].max;
      n.argmax = chunks[c].argmax;
    }
  }
  double z = 0.0;
  for (int32_t c = 0; c < num_chunks; ++c) {
    z = detmath::AddD(z, detmath::MulD(chunks[c].sum,
                                       static_cast<double>(LogitWeight(chunks[c].max, n.max, inv_t))));
  }
  n.sum = static_cast<float>(z);
  n.threshold = NegativeInfinity();
  return n;
}

// How p(x) (or q(x)) is obtained from a stored value of one row.
struct RowProbability {
  SampleValueKind kind;
  SampleMethod method;
  float inv_t;            // logits
  RowNormalizer norm;     // logits, exact (for drafts: threshold -inf)
  float sig_alpha;        // sigmoid
  float sig_beta_minus_alpha;
};

SV_HD float ProbabilityOf(const RowProbability& r, float v) {
  if (r.kind == SampleValueKind::kProbabilities) return v;
  if (r.kind == SampleValueKind::kLogProbabilities) return LogProbabilityToProbability(v);
  if (r.method == SampleMethod::kSigmoid) {
    return SigmoidValue(v, r.inv_t, r.sig_alpha, r.sig_beta_minus_alpha);
  }
  if (v < r.norm.threshold) return 0.0f;
  return detmath::Div(LogitWeight(v, r.norm.max, r.inv_t), r.norm.sum);
}

// kRejectionOk or kRejectionBadSequenceParams for one sequence's parameters
// (docs/SAMPLING.md lists the ranges). Used by the host validator and the
// kernels alike, so both reject the same sequences.
SV_HD int32_t SequenceParamsCode(SampleValueKind kind, SampleMethod method,
                                 const SequenceSamplingParams& s) {
  if (s.sequence_index < 0) return kRejectionBadSequenceParams;
  if (kind == SampleValueKind::kProbabilities || kind == SampleValueKind::kLogProbabilities) {
    return (s.top_k == 0 && s.top_p == 1.0f) ? kRejectionOk : kRejectionBadSequenceParams;
  }
  if (!detmath::IsFinite(s.temperature) || !(s.temperature >= 0.0f)) return kRejectionBadSequenceParams;
  if (s.top_k < 0 || !(s.top_p > 0.0f && s.top_p <= 1.0f)) return kRejectionBadSequenceParams;
  if (method == SampleMethod::kSigmoid &&
      (s.temperature == 0.0f || s.top_k != 0 || s.top_p != 1.0f)) {
    return kRejectionBadSequenceParams;
  }
  return kRejectionOk;
}

SV_HD bool IsFiltered(const SequenceSamplingParams& s) { return s.top_k > 0 || s.top_p < 1.0f; }

// Leviathan et al. 2023, Algorithm 1: accept iff u * q <= p, with the extra
// p > 0 so that neither an underflowing u * q nor a zero-probability draft
// (q == 0, which the drafter cannot have sampled) can accept a token the
// target never emits. q == 0 with p > 0 accepts (ratio +inf).
SV_HD bool AcceptDraft(double coin, float p, float q) {
  return p > 0.0f && detmath::MulD(coin, static_cast<double>(q)) <= static_cast<double>(p);
}

// The residual weight max(0, p - q).
SV_HD float ResidualWeight(float p, float q) { return p > q ? detmath::Sub(p, q) : 0.0f; }

// Exponential race (Gumbel-max in disguise): the token with the smallest
// E_x / r(x), E_x ~ Exp(1) i.i.d., is distributed as r / sum(r). Tokens with
// r == 0 never compete. Ties go to the lower index, so the winner does not
// depend on how the vocabulary is split.
struct RaceCandidate {
  float key;      // E / r; +inf possible (r subnormal), still a valid entrant
  int32_t token;  // -1: no entrant yet
};

SV_HD RaceCandidate NoCandidate() { return RaceCandidate{0.0f, -1}; }

SV_HD bool RaceBeats(const RaceCandidate& a, const RaceCandidate& b) {
  if (a.token < 0) return false;
  if (b.token < 0) return true;
  return a.key < b.key || (a.key == b.key && a.token < b.token);
}

SV_HD void RaceOffer(RaceCandidate& best, float exponential, float weight, int32_t token) {
  if (!(weight > 0.0f)) return;
  const RaceCandidate c{detmath::Div(exponential, weight), token};
  if (RaceBeats(c, best)) best = c;
}

}  // namespace specverify::rejection

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_CORE_H_
