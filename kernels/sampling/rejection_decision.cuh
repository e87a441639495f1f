// Fragment of kernels/sampling/rejection_sample.cu: the race's arguments and
// the acceptance decision (two scalars per position), with the outcome it
// writes.
// Included once, inside that file's anonymous namespace, after rejection_filter_search.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_DECISION_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_DECISION_CUH_

// -------------------------------------------------------------- race --

struct RaceArgs {
  RejectionBatchInput in;
  RejectionBatchOutput out;
  ScratchLayout scratch;
  int64_t num_target_rows;
  int32_t blocks_per_sequence;  // G
  bool logits_exact;
  bool row_pass_ran;  // norms hold full-row check flags (probabilities / sigmoid)
};

// The race kernel is compiled per value mode so that the probabilities path
// carries no logits state in registers.
enum class RaceMode : int { kProbabilities = 0, kLogitsExact = 1, kSigmoid = 2, kLogProbabilities = 3 };

template <RaceMode M>
struct RaceModeTraits {
  static constexpr SampleValueKind kKind = M == RaceMode::kProbabilities      ? SampleValueKind::kProbabilities
                                           : M == RaceMode::kLogProbabilities ? SampleValueKind::kLogProbabilities
                                                                              : SampleValueKind::kLogits;
  static constexpr SampleMethod kMethod = M == RaceMode::kSigmoid ? SampleMethod::kSigmoid : SampleMethod::kExact;
  static constexpr bool kLogitsExact = M == RaceMode::kLogitsExact;
  static constexpr bool kLogProbabilities = M == RaceMode::kLogProbabilities;
};

struct Decision {
  int32_t code;
  int32_t position;
  int32_t k;
  int32_t next;     // greedy only
  int32_t drafted;  // x_k when k < gamma, else -1
  bool race;
};

// Exact logits: the normalizers of the rows the race samples (target row k;
// draft row k when k < gamma), as the deciding lane read them. Apart from
// Decision, so that the other races' block broadcast stays as small as it
// was: with them inside, probabilities B=128 ran 1.2 us slower (H100, run 3
// of bench/sampling/results/2026-11-27-stream).
struct SampledRowNorms {
  RowNormalizer target;
  RowNormalizer draft;
};

__device__ __forceinline__ RowNormalizer ShuffleNorm(const RowNormalizer& n, int lane) {
  return RowNormalizer{__shfl_sync(kFullMask, n.max, lane), __shfl_sync(kFullMask, n.argmax, lane),
                       __shfl_sync(kFullMask, n.sum, lane), __shfl_sync(kFullMask, n.threshold, lane)};
}

// Log-probabilities: bounds on the exact weight ExpDet(v) from one MUFU ex2
// (no polynomial), so the hopeless test costs a few instructions per element
// and only the seeding and the hopeful entrants pay for ExpDet. The relative
// error of ex2.approx and of rounding v * log2(e) (|v| <= 103.5) is below
// 1e-5, ExpDet's 2 ulp below 3e-7: a 0.1% margin covers them (and the FMA's
// one rounding). The additive 2^-126 covers subnormal results, which the
// .ftz form (one SASS instruction) flushes to 0. With a =
// LogProbabilityApprox(v), LogProbabilityUpper(a) >= ExpDet(v) >=
// LogProbabilityLower(a), without a select where ExpDet is 0 (v <= -103.5,
// -inf; the sweep pads the row's tail and the slots outside a share with
// -inf): ex2 flushes to 0 there, so the bounds are 2^-126 and -2^-126, still
// bounds, and the hot loop is four instructions a quad shorter. A NaN value
// (an invalid row, whose outcome is an error whatever the race picks) gives
// NaN and 3.3e38. The bounds need not be bit-reproducible (FMA allowed):
// they prune the race and settle a decision only where they prove it; the
// outcome is reproducible.
__device__ __forceinline__ float LogProbabilityApprox(float v) {
  float approx;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(approx) : "f"(__fmul_rn(v, 1.44269504f)));
  return approx;
}
__device__ __forceinline__ float LogProbabilityUpper(float approx) { return __fmaf_rn(approx, 1.001f, kFloatMinNormal); }
// ex2 may overflow to +inf a little before ExpDet does (ExpDet(v) >= 3.39e38 there).
__device__ __forceinline__ float LogProbabilityLower(float approx) {
  return fminf(__fmaf_rn(approx, 0.999f, -kFloatMinNormal), 3.3e38f);
}

// AcceptDraft (coin * q <= p) on log-probability values, from the ex2
// bounds where they settle it and from the exact ExpDet weights only in the
// band of about 0.2% around the boundary where they do not. Double
// multiplication rounds monotonically, so coin * q_up <= p_lo (p_lo > 0)
// proves the exact test true and coin * q_lo > p_up proves it false. Two
// ExpDet polynomials sat on warp 0's decision, which the whole block waits
// for (run 4 of bench/sampling/results/2026-11-27-item2). q is 1 without
// draft rows (the one-hot draft).
__device__ __forceinline__ bool AcceptLogProbabilityDraft(double coin, float tv, float dv, bool has_draft_rows) {
  const float p_approx = LogProbabilityApprox(tv);
  const float p_up = LogProbabilityUpper(p_approx), p_lo = LogProbabilityLower(p_approx);
  float q_up = 1.0f, q_lo = 1.0f;
  if (has_draft_rows) {
    const float q_approx = LogProbabilityApprox(dv);
    q_up = LogProbabilityUpper(q_approx);
    q_lo = LogProbabilityLower(q_approx);
  }
  if (p_lo > 0.0f && detmath::MulD(coin, static_cast<double>(q_up)) <= static_cast<double>(p_lo)) return true;
  if (detmath::MulD(coin, static_cast<double>(q_lo)) > static_cast<double>(p_up)) return false;
  return rejection::AcceptDraft(coin, rejection::LogProbabilityToProbability(tv),
                                has_draft_rows ? rejection::LogProbabilityToProbability(dv) : 1.0f);
}

// A position's decision inputs: the draft token and the target and draft
// values at it (0 and 1 where there is no token or it is out of range). The
// exact-logits race reads those of positions 0..31 before it waits for the
// normalizers (they are inputs, not the combine's output), so after the
// wait its decision waits only for the normalizers.
struct DecisionInputs {
  int32_t x = 0;
  float tv = 0.0f;
  float dv = 1.0f;
};

template <SampleDtype D>
__device__ __forceinline__ DecisionInputs LoadDecisionInputs(const RejectionBatchInput& in, int32_t i, int32_t first,
                                                             int32_t gamma, int32_t pos) {
  DecisionInputs p;
  const bool has_token = pos < gamma;
  p.x = has_token ? in.draft_tokens[first + pos] : 0;
  if (has_token && p.x >= 0 && p.x < in.vocab_size) {
    p.tv = LoadOne<D>(SampledRowAddress(in, false, static_cast<int64_t>(first) + i + pos), p.x);
    if (in.has_draft_probs) p.dv = LoadOne<D>(SampledRowAddress(in, true, first + pos), p.x);
  }
  return p;
}

template <SampleDtype D, RaceMode M>
__device__ Decision Decide(const RaceArgs& a, int32_t i, int32_t first, int32_t gamma,
                           const SequenceSamplingParams& s, const DecisionInputs& preloaded,
                           SampledRowNorms& sampled_norms) {
  using Traits = RaceModeTraits<M>;
  const RejectionBatchInput& in = a.in;
  const int64_t target_row0 = static_cast<int64_t>(first) + i;
  const int64_t draft_slot0 = a.num_target_rows + first;
  const DeviceRowNorm* norms = a.scratch.norms;
  Decision d{kRejectionOk, -1, 0, -1, -1, false};
  sampled_norms = SampledRowNorms{};
  if (rejection::SequenceParamsCode(Traits::kKind, Traits::kMethod, s) != kRejectionOk) {
    d.code = kRejectionBadSequenceParams;
    return d;
  }
  const bool greedy = Traits::kLogitsExact && !(s.temperature > 0.0f);
  const float inv_t = (Traits::kKind == SampleValueKind::kLogits && !greedy) ? rejection::InverseTemperature(s.temperature)
                                                                        : 0.0f;
  const float sig_scale = detmath::Sub(in.sigmoid_beta, in.sigmoid_alpha);
  const auto seq_index = static_cast<uint32_t>(s.sequence_index);
  const bool read_norms = Traits::kLogitsExact || a.row_pass_ran;
  // One lane per position. Every load a lane needs is issued before any is
  // used (token, then target and draft scalars and row flags together), so the
  // decision costs two memory round trips; precedence is resolved after the
  // sweep and matches the reference: draft ids anywhere, then values read,
  // then full-row flags, then the first rejection.
  const int lane = threadIdx.x % 32;
  int32_t first_token_error = -1, first_value_error = -1, first_row_error = -1, first_reject = -1;
  int32_t value_code_at_error = 0, row_code_at_error = 0, drafted_at_reject = -1;
  for (int32_t base = 0; base <= gamma; base += 32) {
    const int32_t pos = base + lane;
    const bool has_token = pos < gamma;
    const DecisionInputs inputs =
        (Traits::kLogitsExact && base == 0) ? preloaded : LoadDecisionInputs<D>(in, i, first, gamma, pos);
    const int32_t x = inputs.x;
    const bool token_bad = has_token && (x < 0 || x >= in.vocab_size);
    const bool read_values = has_token && !token_bad;
    const float tv = inputs.tv, dv = inputs.dv;
    DeviceRowNorm tn{}, dn{};
    if (read_norms && pos <= gamma) {
      tn = norms[target_row0 + pos];
      if (in.has_draft_probs && has_token) dn = norms[draft_slot0 + pos];
    }
    int32_t value_code = kRejectionOk, row_code = kRejectionOk;
    if (Traits::kLogitsExact && pos <= gamma) {
      if (tn.flags & kRowBadElement) {
        value_code = kRejectionBadTargetValue;
      } else if (in.has_draft_probs && has_token && (dn.flags & kRowBadElement)) {
        value_code = kRejectionBadDraftValue;
      }
    } else if (read_values) {
      if (!rejection::ValueIsValid(Traits::kKind, tv)) {
        value_code = kRejectionBadTargetValue;
      } else if (in.has_draft_probs && !rejection::ValueIsValid(Traits::kKind, dv)) {
        value_code = kRejectionBadDraftValue;
      }
    }
    if (a.row_pass_ran && pos <= gamma) {
      if (tn.flags & kRowBadElement) {
        row_code = kRejectionBadTargetValue;
      } else if (tn.flags & kRowBadSum) {
        row_code = kRejectionBadRowSum;
      } else if (in.has_draft_probs && has_token && (dn.flags & kRowBadElement)) {
        row_code = kRejectionBadDraftValue;
      } else if (in.has_draft_probs && has_token && (dn.flags & kRowBadSum)) {
        row_code = kRejectionBadRowSum;
      }
    }
    bool reject = false;
    if (read_values && value_code == kRejectionOk) {
      if (greedy) {
        reject = x != tn.norm.argmax;
      } else {
        const double coin = AcceptCoin(s.seed, seq_index, static_cast<uint32_t>(pos));
        if constexpr (Traits::kLogProbabilities) {
          reject = !AcceptLogProbabilityDraft(coin, tv, dv, in.has_draft_probs);
        } else {
          RowProbability rp{Traits::kKind, Traits::kMethod, inv_t, tn.norm, in.sigmoid_alpha, sig_scale};
          const float p = rejection::ProbabilityOf(rp, tv);
          float q = 1.0f;
          if (in.has_draft_probs) {
            rp.norm = dn.norm;
            q = rejection::ProbabilityOf(rp, dv);
          }
          reject = !rejection::AcceptDraft(coin, p, q);
        }
      }
    }
    const unsigned token_mask = __ballot_sync(kFullMask, token_bad);
    const unsigned value_mask = __ballot_sync(kFullMask, value_code != kRejectionOk);
    const unsigned row_mask = __ballot_sync(kFullMask, row_code != kRejectionOk);
    const unsigned reject_mask = __ballot_sync(kFullMask, reject);
    if (first_token_error < 0 && token_mask) first_token_error = base + __ffs(token_mask) - 1;
    if (first_value_error < 0 && value_mask) {
      first_value_error = base + __ffs(value_mask) - 1;
      value_code_at_error = __shfl_sync(kFullMask, value_code, __ffs(value_mask) - 1);
    }
    if (first_row_error < 0 && row_mask) {
      first_row_error = base + __ffs(row_mask) - 1;
      row_code_at_error = __shfl_sync(kFullMask, row_code, __ffs(row_mask) - 1);
    }
    // The sampled rows' normalizers from the lane that read them (the first
    // rejection's, else position gamma's), so the race's blocks do not read
    // them again after the decision (a round trip on their chain).
    if (Traits::kLogitsExact && first_reject < 0 && (reject_mask || gamma - base < 32)) {
      const int source = reject_mask ? __ffs(reject_mask) - 1 : gamma - base;
      sampled_norms.target = ShuffleNorm(tn.norm, source);
      sampled_norms.draft = ShuffleNorm(dn.norm, source);
    }
    if (first_reject < 0 && reject_mask) {
      first_reject = base + __ffs(reject_mask) - 1;
      drafted_at_reject = __shfl_sync(kFullMask, x, __ffs(reject_mask) - 1);
    }
  }
  if (first_token_error >= 0) {
    d.code = kRejectionDraftTokenOutOfRange;
    d.position = first_token_error;
  } else if (first_value_error >= 0) {
    d.code = value_code_at_error;
    d.position = first_value_error;
  } else if (first_row_error >= 0) {
    d.code = row_code_at_error;
    d.position = first_row_error;
  } else {
    d.k = first_reject < 0 ? gamma : first_reject;
    d.drafted = first_reject < 0 ? -1 : drafted_at_reject;
    if (greedy) {
      d.next = sampled_norms.target.argmax;
    } else {
      d.race = true;
    }
  }
  return d;
}

__device__ void WriteOutcome(const RaceArgs& a, int32_t i, int32_t gamma, int32_t code, int32_t position,
                             int32_t k, int32_t next) {
  const bool ok = code == kRejectionOk;
  a.out.accepted_lengths[i] = ok ? k : 0;
  a.out.next_tokens[i] = ok ? next : -1;
  a.out.mismatch[i] = (!ok || k < gamma) ? 1 : 0;
  a.out.status_codes[i] = code;
  a.out.error_positions[i] = ok ? -1 : position;
  if (a.out.greedy_target_tokens != nullptr) {
    const int32_t first = a.in.draft_offsets[i];
    const int32_t accepted = ok ? k : 0;
    for (int32_t j = 0; j <= gamma; ++j) {
      a.out.greedy_target_tokens[first + i + j] = GreedyTargetForOutcome(
          j, accepted, gamma, j < gamma ? a.in.draft_tokens[first + j] : 0, ok ? next : -1);
    }
  }
}

// A host-finished race's outcome (RejectionBatchOutput::race_slots) until
// FinishRejectionOutcomes reads the slots: k accepted, so that a row copy on
// the device can follow the launch, the mismatch k < gamma, and k as the
// position an invalid value in the swept row will be reported at.
__device__ void WritePendingOutcome(const RaceArgs& a, int32_t i, int32_t gamma, int32_t k) {
  a.out.accepted_lengths[i] = k;
  a.out.next_tokens[i] = -1;
  a.out.mismatch[i] = k < gamma ? 1 : 0;
  a.out.status_codes[i] = kRejectionRacePending;
  a.out.error_positions[i] = k;
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_DECISION_CUH_
