#include "kernels/sampling/rejection_reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/sampling/philox.h"
#include "kernels/sampling/reference_rows.h"
#include "kernels/sampling/rejection_core.h"

// target_clones makes RaceOverRow an ifunc, whose resolver the dynamic
// loader runs while it relocates the binary, before any sanitizer runtime
// has started: ThreadSanitizer's instrumented resolver crashed every suite
// that links the reference at load (scripts/tsan.sh). One clone there.
#if defined(__SANITIZE_THREAD__)
#define SV_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SV_THREAD_SANITIZER 1
#endif
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(SV_THREAD_SANITIZER)
#define SV_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define SV_FMA_CLONES
#endif

namespace specverify {
namespace {

using rejection::ChunkStats;
using rejection::RaceCandidate;
using rejection::RowNormalizer;
using rejection::RowProbability;

struct SequenceView {
  const RejectionBatchInput& in;
  int32_t index;
  int32_t gamma;
  const int32_t* draft;
  int64_t target_row0;  // row index of position 0
  int64_t draft_row0;
  const SequenceSamplingParams& seq;

  const void* TargetRow(int32_t j) const { return SampledRowAddress(in, false, target_row0 + j); }
  const void* DraftRow(int32_t j) const { return SampledRowAddress(in, true, draft_row0 + j); }
  float Target(int32_t j, int32_t x) const { return rejection::LoadValue(TargetRow(j), in.dtype, x); }
  float Draft(int32_t j, int32_t x) const { return rejection::LoadValue(DraftRow(j), in.dtype, x); }
};

struct Outcome {
  int32_t accepted = 0;
  int32_t next = -1;
  int32_t code = kRejectionOk;
  int32_t position = -1;
};

// First invalid element of a row, or -1.
int32_t FirstInvalid(const RejectionBatchInput& in, const void* row) {
  return reference_rows::FirstInvalidElement(row, in.dtype, in.kind, in.vocab_size);
}

// Full-row check of a probability (log-probability) row: the mass, sum of p
// (of ExpDet(v)), with chunk sums in the fixed order and chunks in increasing
// order (as the GPU's check pass).
bool RowSumIsPositiveFinite(const RejectionBatchInput& in, const void* row) {
  double sum = 0.0;
  const auto load = [&](int32_t x) { return rejection::LoadValue(row, in.dtype, x); };
  for (int32_t begin = 0; begin < in.vocab_size; begin += rejection::kNormalizerChunk) {
    const int32_t end = std::min(in.vocab_size, begin + rejection::kNormalizerChunk);
    sum = detmath::AddD(sum, reference_rows::ChunkSumFixedOrder(begin, end, [&](int32_t x) {
                          return rejection::RowMassOf(in.kind, load(x));
                        }));
  }
  return sum > 0.0 && sum <= 1.7976931348623157e308;
}

// Top-k then top-p (docs/SAMPLING.md): keeps z >= threshold, where top-k's
// threshold is the k-th largest logit (ties kept) and top-p then keeps a
// logit value iff the mass of strictly larger kept logits is < top_p of the
// kept mass (masses in TopPMassUnits). Recomputes the normalizer over the
// kept tokens.
void Filter(const RejectionBatchInput& in, const void* row, const SequenceSamplingParams& s, float inv_t,
            RowNormalizer& norm) {
  const auto load = [&](int32_t x) { return rejection::LoadValue(row, in.dtype, x); };
  std::vector<float> sorted(in.vocab_size);
  for (int32_t x = 0; x < in.vocab_size; ++x) sorted[x] = load(x);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float threshold = rejection::NegativeInfinity();
  int32_t kept = in.vocab_size;
  if (s.top_k > 0 && s.top_k < in.vocab_size) {
    threshold = sorted[s.top_k - 1];
    kept = static_cast<int32_t>(std::upper_bound(sorted.begin(), sorted.end(), threshold,
                                                 std::greater<float>()) - sorted.begin());
  }
  if (s.top_p < 1.0f) {
    const auto units = [&](float z) { return rejection::TopPMassUnits(rejection::LogitWeight(z, norm.max, inv_t)); };
    uint64_t kept_mass = 0;
    for (int32_t r = 0; r < kept; ++r) kept_mass += units(sorted[r]);
    const uint64_t budget = rejection::TopPBudgetUnits(s.top_p, kept_mass);
    uint64_t larger = 0;  // mass of logits strictly above the current value
    int32_t r = 0;
    while (r < kept) {
      const float value = sorted[r];
      if (!(larger < budget)) break;
      threshold = value;
      while (r < kept && sorted[r] == value) {
        larger += units(sorted[r]);
        ++r;
      }
    }
  }
  // The kept mass in the fixed chunk order, as the GPU's filter pass.
  double sum = 0.0;
  for (int32_t begin = 0; begin < in.vocab_size; begin += rejection::kNormalizerChunk) {
    const int32_t end = std::min(in.vocab_size, begin + rejection::kNormalizerChunk);
    sum = detmath::AddD(sum, reference_rows::ChunkSumFixedOrder(begin, end, [&](int32_t x) {
                          const float z = load(x);
                          return z >= threshold ? rejection::LogitWeight(z, norm.max, inv_t) : 0.0f;
                        }));
  }
  norm.threshold = threshold;
  norm.sum = static_cast<float>(sum);
}

// A lower bound on an element's key in both races from its uniform and its
// value alone, with no logarithm and no exp (exact methods). E = -LogDet(u)
// >= 1 - u (within LogDet's 2 ulp), and the residual's weight Sub(p, q) is at
// most p, so either key E / w is at least (1 - u) / p_up for any p_up at or
// above the computed p: probabilities: p itself; log-probabilities:
// ExpDet(v) <= 2^(floor(v log2 e) + 2) (one more than needed, for the
// rounding of v log2 e); logits: Exp2Det(t) / Z <= 2^(floor(t) + 1) / Z, t
// the very exponent LogitWeight computes. The relative errors of LogDet, the
// exps and the divisions are inside the 0.1% margin the GPU's bounds keep;
// their absolute error where p is subnormal inside the 2^-148 added to p_up.
// +inf where p is 0 (the element enters neither race); 0 (no bound) where p
// may be +inf (log-probabilities from 88.72 on). Always inlined, so that it
// is built inside each of RaceOverRow's target clones (apart, its floor was
// a call into libm on every element).
inline __attribute__((always_inline)) double RaceKeyLowerBound(uint32_t bits, float value,
                                                               const RowProbability& target, float logit_scale) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  constexpr double kSubnormalError = 0x1p-148;
  // 2^e for an integer e in [-1022, 1023].
  const auto two_to = [](double e) { return std::bit_cast<double>(static_cast<uint64_t>(e + 1023.0) << 52); };
  double p_up = 0.0;
  switch (target.kind) {
    case SampleValueKind::kProbabilities:
      if (!(value > 0.0f)) return kNever;
      p_up = static_cast<double>(value);
      break;
    case SampleValueKind::kLogProbabilities: {
      if (!(value > -103.5f)) return kNever;  // ExpDet is 0
      if (!(value < 88.0f)) return 0.0;
      p_up = two_to(std::floor(static_cast<double>(value) * 1.4426950408889634) + 2.0) + kSubnormalError;
      break;
    }
    case SampleValueKind::kLogits: {
      if (value < target.norm.threshold) return kNever;  // filtered out
      const float t = detmath::Mul(detmath::Sub(value, target.norm.max), logit_scale);  // <= 0
      if (!(t > -1000.0f)) return kNever;  // Exp2Det is 0 from -152 on
      p_up = two_to(std::floor(static_cast<double>(t)) + 1.0) / static_cast<double>(target.norm.sum) + kSubnormalError;
      break;
    }
  }
  return (1.0 - static_cast<double>(UniformOpenFloat(bits))) * 0.999 / p_up;
}

// The race over row k (docs/SAMPLING.md): every element's exponential
// against its residual and its target weight. Compiled twice on x86-64, for
// CPUs with FMA and without: the weights' fused multiply-adds are then one
// instruction instead of a call to libm's fmaf (the same correctly rounded
// result either way). With the exact method, an element whose key bound
// (RaceKeyLowerBound) exceeds both races' best keys cannot win either race
// (a later token also loses a tie), so its logarithm and exact weights are
// skipped, as the GPU's sweep skips hopeless elements: the outcome is the
// full race's.
SV_FMA_CLONES void RaceOverRow(const SequenceView& v, int32_t k, const RowProbability& target_rp,
                               const RowProbability& draft_rp, RaceCandidate& best_residual,
                               RaceCandidate& best_target) {
  const RejectionBatchInput& in = v.in;
  const bool residual = k < v.gamma;
  const bool prune = target_rp.method == SampleMethod::kExact;
  const float logit_scale = rejection::LogitScale(target_rp.inv_t);
  const auto seq_index = static_cast<uint32_t>(v.seq.sequence_index);
  Philox4x32 bits{};
  for (int32_t x = 0; x < in.vocab_size; ++x) {
    if (x % 4 == 0) bits = RaceBits(v.seq.seed, seq_index, static_cast<uint32_t>(k), static_cast<uint32_t>(x / 4));
    const float value = v.Target(k, x);
    if (prune && best_target.token >= 0 && (!residual || best_residual.token >= 0)) {
      // Keys from 2^-100 on are normal floats: the bound's relative margin
      // covers their rounding.
      const float best = residual ? std::max(best_target.key, best_residual.key) : best_target.key;
      if (best >= 0x1p-100f &&
          RaceKeyLowerBound(bits.v[x % 4], value, target_rp, logit_scale) > static_cast<double>(best)) {
        continue;
      }
    }
    const float e = RaceExponential(bits.v[x % 4]);
    const float p = rejection::ProbabilityOf(target_rp, value);
    if (residual) {
      const float q = in.has_draft_probs ? rejection::ProbabilityOf(draft_rp, v.Draft(k, x))
                                         : (x == v.draft[k] ? 1.0f : 0.0f);
      rejection::RaceOffer(best_residual, e, rejection::ResidualWeight(p, q), x);
    }
    rejection::RaceOffer(best_target, e, p, x);
  }
}

Outcome SampleSequence(const SequenceView& v) {
  const RejectionBatchInput& in = v.in;
  const SequenceSamplingParams& s = v.seq;
  Outcome out;
  const auto fail = [&out](int32_t code, int32_t position) {
    out.code = code;
    out.position = position;
    return out;
  };
  if (const int32_t code = rejection::SequenceParamsCode(in.kind, in.method, s); code != kRejectionOk) {
    return fail(code, -1);
  }
  for (int32_t j = 0; j < v.gamma; ++j) {
    if (v.draft[j] < 0 || v.draft[j] >= in.vocab_size) return fail(kRejectionDraftTokenOutOfRange, j);
  }
  const bool logits_exact = in.kind == SampleValueKind::kLogits && in.method == SampleMethod::kExact;
  const bool greedy = logits_exact && s.temperature == 0.0f;
  const float inv_t = (in.kind == SampleValueKind::kLogits && !greedy)
                          ? rejection::InverseTemperature(s.temperature)
                          : 0.0f;
  // The elements every path reads before deciding acceptance. Exact logits
  // read whole rows, each checked and normalized in one pass over it (an
  // invalid row's normalizer is never used), in the order the check reports
  // them: target j, then draft j.
  std::vector<RowNormalizer> target_norms, draft_norms;
  std::vector<ChunkStats> chunks;
  const int32_t num_chunks = rejection::NumChunks(in.vocab_size);
  for (int32_t j = 0; j < v.gamma || (logits_exact && j == v.gamma); ++j) {
    if (logits_exact) {
      if (reference_rows::CheckedLogitRowStats(v.TargetRow(j), in.dtype, in.vocab_size, inv_t, chunks) >= 0) {
        return fail(kRejectionBadTargetValue, j);
      }
      RowNormalizer n = rejection::CombineChunks(chunks.data(), num_chunks, inv_t);
      if (!greedy && rejection::IsFiltered(s)) Filter(in, v.TargetRow(j), s, inv_t, n);
      target_norms.push_back(n);
      if (in.has_draft_probs && j < v.gamma) {
        // A greedy batch reads draft rows only to check them.
        const int32_t invalid =
            greedy ? FirstInvalid(in, v.DraftRow(j))
                   : reference_rows::CheckedLogitRowStats(v.DraftRow(j), in.dtype, in.vocab_size, inv_t, chunks);
        if (invalid >= 0) return fail(kRejectionBadDraftValue, j);
        if (!greedy) draft_norms.push_back(rejection::CombineChunks(chunks.data(), num_chunks, inv_t));
      }
    } else {
      if (!rejection::ValueIsValid(in.kind, v.Target(j, v.draft[j]))) return fail(kRejectionBadTargetValue, j);
      if (in.has_draft_probs && !rejection::ValueIsValid(in.kind, v.Draft(j, v.draft[j]))) {
        return fail(kRejectionBadDraftValue, j);
      }
    }
  }
  if (in.validate_full_rows) {
    // Probability and log-probability rows must also have a positive, finite mass.
    const bool probabilities = in.kind != SampleValueKind::kLogits;
    for (int32_t j = 0; j <= v.gamma; ++j) {
      if (FirstInvalid(in, v.TargetRow(j)) >= 0) return fail(kRejectionBadTargetValue, j);
      if (probabilities && !RowSumIsPositiveFinite(in, v.TargetRow(j))) return fail(kRejectionBadRowSum, j);
      if (in.has_draft_probs && j < v.gamma) {
        if (FirstInvalid(in, v.DraftRow(j)) >= 0) return fail(kRejectionBadDraftValue, j);
        if (probabilities && !RowSumIsPositiveFinite(in, v.DraftRow(j))) return fail(kRejectionBadRowSum, j);
      }
    }
  }

  RowProbability target_rp{in.kind, in.method, inv_t, RowNormalizer{}, in.sigmoid_alpha,
                           detmath::Sub(in.sigmoid_beta, in.sigmoid_alpha)};
  RowProbability draft_rp = target_rp;
  if (greedy) {
    int32_t k = 0;
    while (k < v.gamma && v.draft[k] == target_norms[k].argmax) ++k;
    out.accepted = k;
    out.next = target_norms[k].argmax;
    return out;
  }

  const auto seq_index = static_cast<uint32_t>(s.sequence_index);
  int32_t k = 0;
  for (; k < v.gamma; ++k) {
    if (logits_exact) {
      target_rp.norm = target_norms[k];
      if (in.has_draft_probs) draft_rp.norm = draft_norms[k];
    }
    const int32_t x = v.draft[k];
    const float p = rejection::ProbabilityOf(target_rp, v.Target(k, x));
    const float q = in.has_draft_probs ? rejection::ProbabilityOf(draft_rp, v.Draft(k, x)) : 1.0f;
    if (!rejection::AcceptDraft(AcceptCoin(s.seed, seq_index, static_cast<uint32_t>(k)), p, q)) break;
  }
  out.accepted = k;

  // The recovery (k < gamma) or bonus (k == gamma) row: one pass over V.
  const bool residual = k < v.gamma;
  if (!logits_exact) {
    if (FirstInvalid(in, v.TargetRow(k)) >= 0) return fail(kRejectionBadTargetValue, k);
    if (residual && in.has_draft_probs && FirstInvalid(in, v.DraftRow(k)) >= 0) {
      return fail(kRejectionBadDraftValue, k);
    }
  } else {
    target_rp.norm = target_norms[k];
    if (residual && in.has_draft_probs) draft_rp.norm = draft_norms[k];
  }
  RaceCandidate best_residual = rejection::NoCandidate();
  RaceCandidate best_target = rejection::NoCandidate();
  RaceOverRow(v, k, target_rp, draft_rp, best_residual, best_target);
  // A residual that sums to zero (p_k <= q_k everywhere: only possible when the
  // rows are not normalized alike or through rounding) falls back to p_k.
  const RaceCandidate& winner = best_residual.token >= 0 ? best_residual : best_target;
  if (winner.token < 0) return fail(kRejectionEmptyTargetRow, k);
  out.next = winner.token;
  return out;
}

}  // namespace

void ReferenceRejectionSampleRange(const RejectionSampleParams& params, int32_t begin, int32_t end) {
  const RejectionBatchInput& in = params.input;
  const RejectionBatchOutput& out = params.output;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t first = in.draft_offsets[i];
    const SequenceView view{in, i, in.draft_offsets[i + 1] - first, in.draft_tokens + first,
                            static_cast<int64_t>(first) + i, first, in.sequences[i]};
    const Outcome o = SampleSequence(view);
    const bool ok = o.code == kRejectionOk;
    out.accepted_lengths[i] = ok ? o.accepted : 0;
    out.next_tokens[i] = ok ? o.next : -1;
    out.mismatch[i] = (!ok || o.accepted < view.gamma) ? 1 : 0;
    out.status_codes[i] = o.code;
    out.error_positions[i] = ok ? -1 : o.position;
    if (out.greedy_target_tokens != nullptr) {
      const int32_t k = ok ? o.accepted : 0;
      for (int32_t j = 0; j <= view.gamma; ++j) {
        out.greedy_target_tokens[first + i + j] =
            GreedyTargetForOutcome(j, k, view.gamma, j < view.gamma ? view.draft[j] : 0, ok ? o.next : -1);
      }
    }
  }
}

void ReferenceRejectionSample(const RejectionSampleParams& params) {
  ReferenceRejectionSampleRange(params, 0, params.input.num_sequences);
}

}  // namespace specverify
