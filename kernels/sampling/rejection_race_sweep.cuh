// Fragment of kernels/sampling/rejection_sample.cu: the race sweep: a block's
// share of the sampled row, value checks, pruning bounds, the exact weights of
// each mode and the staged asynchronous copies.
// Included once, inside that file's anonymous namespace, after rejection_decision.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_SWEEP_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_SWEEP_CUH_

// Which races a sampled row runs. A compile-time choice so that the sweep's
// per-element code is straight-line.
enum class RowRace {
  kBonus,             // k == gamma: the target race over p_gamma only
  kResidualDraftRow,  // k < gamma, draft probabilities: max(0, p - q) over two rows
  kResidualOneHot,    // k < gamma, deterministic drafter: q is one-hot at the drafted token
};

// One race block's share of the sampled row.
struct RowShare {
  const void* target_row;
  const void* draft_row;  // kResidualDraftRow
  RowProbability target_probability;
  RowProbability draft_probability;
  int32_t q_begin, q_end;  // quads [q_begin, q_end) of the row
  int32_t vocab_size;
  bool vector_ok;  // V % 4 == 0: every quad is whole and aligned for one copy
  uint64_t seed;
  uint32_t sequence_index;
  uint32_t position;  // k
  int32_t drafted;    // kResidualOneHot: x_k
  // Exact logits: per-row constants of the pruning bounds (LogitApprox,
  // LogitUpper, LogitLower).
  float logit_scale;  // LogitScale(1/T), both rows
  float target_inv_sum_up, target_inv_sum_lo, draft_inv_sum_up, draft_inv_sum_lo;
};

// Value checks of everything a thread reads, branch-free: `poison`
// accumulates v * 0 (NaN once any v is infinite or NaN), `low` the smallest
// value (a probability must be >= 0).
struct ValueChecks {
  float target_poison = 0.0f, draft_poison = 0.0f;
  float target_low = 0.0f, draft_low = 0.0f;
};

template <SampleValueKind K>
__device__ __forceinline__ void CheckValue(float v, float& poison, float& low) {
  if constexpr (K == SampleValueKind::kLogProbabilities) {
    // -inf is valid (probability 0), so no v * 0 poison: `poison` keeps the
    // running max instead (from 0; one instruction on sm_80+), +inf or NaN
    // once any v is; ChecksPassedFor turns it into a poison.
    poison = MaxKeepingNaN(poison, v);
  } else {
    poison = __fmaf_rn(v, 0.0f, poison);
    if constexpr (K == SampleValueKind::kProbabilities) low = fminf(low, v);
  }
}

__device__ __forceinline__ bool ChecksPassed(float poison, float low) { return poison == 0.0f && low >= 0.0f; }

template <SampleValueKind K>
__device__ __forceinline__ bool ChecksPassedFor(float poison, float low) {
  // Log-probabilities: the running max is >= 0 and finite iff every value
  // was valid, and then max * 0 is 0.
  if constexpr (K == SampleValueKind::kLogProbabilities) return ChecksPassed(__fmul_rn(poison, 0.0f), low);
  return ChecksPassed(poison, low);
}

// The pruning state of one race in one thread. `bound` is a valid bound on
// the race's winning key (it may differ between lanes); `seeded` is
// warp-uniform.
struct RaceBound {
  float bound = kInfinity;
  float scale = kInfinity;  // PruneScale(bound)
  bool seeded = false;
};

// The block's race bounds in shared memory, as float bits (keys are >= 0 or
// +inf, so their bits order as the floats do): every warp publishes what it
// learns and reads what the others did, so a warp prunes with the minimum
// over 8x more entrants than its own.
struct BlockBounds {
  unsigned residual;
  unsigned target;
};

__device__ __forceinline__ void Tighten(RaceBound& rb, float bound) {
  rb.bound = fminf(rb.bound, bound);
  rb.scale = PruneScale(rb.bound);
}

// The hopeless test: only entrants that can still win need the logarithm and
// the division. E = -log u >= 1 - u, so when (1 - u) exceeds a bound on the
// winner's key times the weight, with a 0.1% margin (PruneScale) that covers
// every rounding (and an underflowing product, which only means the key is
// far larger), E / weight is certainly larger than the winner's key and
// cannot win, whatever its index. The outcome is exactly the full race's (the
// CPU reference runs it in full; parity tests compare).
//
// In three instructions an element: u = (2j + 1) 2^-24 with j = bits >> 9,
// so 1 - u - 2^-24 = (2 - 2^-23) - F with F = 1 + j 2^-23, the float whose
// bits are (bits >> 9) | 0x3f800000 (exact). F < H with H = (2 - 2^-23) -
// scale x weight rounded down (one FMA, never above the exact value) proves
// 1 - u > scale x weight, so the test prunes no hopeful entrant; an
// overflowing or unseeded (+inf) scale gives H = -inf: nothing is pruned.
// It replaced 1 - u from the complemented bits, a subtraction and a
// product: the sweep loop ran 172 instructions an iteration (ncu, H100,
// B=128), a dozen of them this test.
__device__ __forceinline__ bool Hopeful(uint32_t bits, float weight, float scale) {
  const float f = detmath::BitsToFloat((bits >> 9) | 0x3f800000u);
  return (weight > 0.0f) & !(f < __fmaf_rd(-scale, weight, 0x1.fffffep0f));
}

// One race over one quad: seeds the warp's bound at its first entrants from
// upper bounds on their keys (KeyUpperBound: no logarithm), so even the first
// quad rarely pays for one; then computes exact keys for the lanes' hopeful
// entrants only (rare once seeded) and shares the tighter bound with the warp
// and the block. Every lane of the warp calls it (warp votes and shuffles).
// weight(e) is an upper bound on entrant e's weight, used only to prune;
// lower(e) a lower bound on it, used only to seed; exact(e) its exact weight.
// The three are one value for every value kind but log-probabilities and
// exact logits, whose exact weight costs an exp (and for logits a division)
// and is computed only for the hopeful entrants. kMaySeed = false leaves the
// seeding step out, for a caller whose warp is seeded already (the second
// loop of SweepInTwoPhases); unseeded, it would prune nothing, not err.
template <bool kMaySeed = true, typename BoundWeight, typename LowerWeight, typename ExactWeight,
          typename PossibleMask>
__device__ __forceinline__ void RaceOneQuad(const Philox4x32& bits, const BoundWeight& weight,
                                            const LowerWeight& lower, const ExactWeight& exact,
                                            const PossibleMask& possible, int32_t x0, RaceBound& rb,
                                            RaceCandidate& best, unsigned* block_word) {
  const bool leader = threadIdx.x % 32 == 0;
  // With no bound yet every entrant whose bound is > 0 is hopeful; where a
  // bound is > 0 for a weight that is certainly 0 (a -inf log-probability,
  // an off-support logit), possible() says so, or a share with no entrant at
  // all (a top-k'd or disjoint row) takes every element through the exact
  // step (disjoint log-probabilities B=8 16.98 -> 14.22 us, run 18 of
  // bench/sampling/results/2026-11-27-item2). Computed where the warp seeds:
  // as a test on the seeded path it cost the headline ~1% (run 17).
  unsigned possible_mask = 0xfu;
  if (kMaySeed && !rb.seeded) {
    // Any entrant's key bounds the winner's, so one entrant per lane will
    // do: the heaviest (its key is likely the smallest), at one
    // KeyUpperBound instead of four. KeyUpperBound needs a weight no larger
    // than the exact one; a lower bound is 0.1% looser than the exact weight
    // and spares every warp's first quad the exact weights, which sat on
    // the sweep's serial chain (at B=8 a thread sweeps ~5 quads).
    float heaviest = 0.0f;
    uint32_t heaviest_bits = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float w = lower(e);
      heaviest_bits = w > heaviest ? bits.v[e] : heaviest_bits;
      heaviest = fmaxf(heaviest, w);
    }
    float ub = kInfinity;
    if (heaviest > 0.0f) {
      const float uniform = UniformOpenFloat(heaviest_bits);
      ub = KeyUpperBound(uniform, detmath::Sub(1.0f, uniform), heaviest);
    }
    ub = WarpMin(ub);
    rb.seeded = ub < kInfinity;
    Tighten(rb, ub);
    if (leader && rb.seeded) atomicMin(block_word, __float_as_uint(ub));
    if (!(rb.scale < kInfinity)) possible_mask = possible();
  }
  unsigned hopeful = 0;  // bit e: entrant x0 + e
#pragma unroll
  for (int e = 0; e < 4; ++e) hopeful |= Hopeful(bits.v[e], weight(e), rb.scale) ? 1u << e : 0u;
  hopeful &= possible_mask;
  if (__any_sync(kFullMask, hopeful != 0)) {
    // One exact offer per step, each lane its next hopeful entrant: the warp
    // takes as many steps as its busiest lane (usually one) rather than one
    // per element slot any lane needs, and the exact code (an exp, a
    // logarithm, divisions) exists once, not four times: the loop's code
    // outgrew the instruction cache (ncu: a third of the stalls were
    // instruction fetch).
    while (hopeful != 0) {
      const int e = __ffs(hopeful) - 1;
      hopeful &= hopeful - 1;
      // The weight first: a hopeful entrant of weight 0 (a warp not yet
      // seeded keeps every entrant whose bound is > 0) costs no logarithm.
      const float weight = exact(e);
      if (weight > 0.0f) rejection::RaceOffer(best, RaceExponential(Pick(bits.v, e)), weight, x0 + e);
    }
    const float warp_best = WarpMin(best.token >= 0 ? best.key : kInfinity);
    Tighten(rb, warp_best);
    if (leader && warp_best < kInfinity) atomicMin(block_word, __float_as_uint(warp_best));
  }
}

// What the other warps of the block published. Every lane reads the word
// itself (a broadcast) with a relaxed load: a bound only prunes, so any value
// another warp has published is good, and a stale one only prunes less. An
// atomicOr by one lane and a shuffle cost the sweep ~15 instructions and two
// long-latency steps an iteration (ncu, issue #17 item 5).
__device__ __forceinline__ void ReadBlockBound(RaceBound& rb, const unsigned* block_word) {
  unsigned bits;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.cta.shared.b32 %0, [%1];"
               : "=r"(bits)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(block_word))));
#else
  bits = *static_cast<const volatile unsigned*>(block_word);
#endif
  if (__uint_as_float(bits) < rb.bound) Tighten(rb, __uint_as_float(bits));
}

// The race weights of one quad (tokens x0 .. x0+3): p (target race) and
// r = max(0, p - q) (residual race), zero outside the share or the row.
// Not for log-probabilities (LogProbabilityQuad).
template <RaceMode M, RowRace R>
__device__ __forceinline__ void QuadWeights(const RowShare& w, const float (&tv)[4], const float (&dv)[4], int32_t x0,
                                            bool in_share, ValueChecks& checks, float (&p)[4], float (&r)[4]) {
  using Traits = RaceModeTraits<M>;
  constexpr bool kCheckValues = !Traits::kLogitsExact;  // logits rows were checked by the normalizer pass
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    // Values outside the share are zeros: a zero probability needs no mask;
    // logits and sigmoid values do.
    const bool real = in_share && x0 + e < w.vocab_size;
    if constexpr (kCheckValues) CheckValue<Traits::kKind>(tv[e], checks.target_poison, checks.target_low);
    p[e] = rejection::ProbabilityOf(w.target_probability, tv[e]);
    if constexpr (Traits::kKind != SampleValueKind::kProbabilities) p[e] = real ? p[e] : 0.0f;
    if constexpr (R == RowRace::kResidualDraftRow) {
      if constexpr (kCheckValues) CheckValue<Traits::kKind>(dv[e], checks.draft_poison, checks.draft_low);
      const float q = rejection::ProbabilityOf(w.draft_probability, dv[e]);
      // fmaxf(p - q, 0) is ResidualWeight: p > q makes p - q > 0 exactly
      // (floats are multiples of 2^-149); otherwise both are <= 0 and
      // never enter.
      r[e] = fmaxf(detmath::Sub(p[e], q), 0.0f);
    } else if constexpr (R == RowRace::kResidualOneHot) {
      r[e] = rejection::ResidualWeight(p[e], x0 + e == w.drafted ? 1.0f : 0.0f);
    } else {
      r[e] = 0.0f;
    }
  }
}

// What LogProbabilityQuad and LogitQuad share: the quad's values, one ex2
// of each (filled by the derived constructor), and the residual race's
// bounds built from the derived quad's bounds on p (BoundTarget,
// LowerTarget) and on q (DraftUpper, DraftLower). ex2.approx of each value
// is taken once per quad: the certainty test, the seeding and the hopeless
// test all derive their bounds from it (the compiler did not share the ex2
// between the seeding's branch and the hot path, so a warp's first quad
// paid 24 MUFU ex2 for 8 values; run 3 of
// bench/sampling/results/2026-11-27-item2). Dead after the quad's races; the
// exact weights start again from the values.
template <typename Derived, RowRace R>
struct BoundedQuad {
  const RowShare& w;
  const float (&tv)[4];
  const float (&dv)[4];
  int32_t x0;
  float target_approx[4];
  float draft_approx[4];

  __device__ __forceinline__ BoundedQuad(const RowShare& share, const float (&target)[4], const float (&draft)[4],
                                         int32_t first)
      : w(share), tv(target), dv(draft), x0(first) {}

  __device__ __forceinline__ float OneHotDraft(int e) const { return x0 + e == w.drafted ? 1.0f : 0.0f; }
  // max(0, p - q) <= max(0, p_up - q_lo) (rounding is monotone). Without
  // the max: the hopeless test and the seeding ignore weights <= 0 (and
  // NaN) themselves.
  __device__ __forceinline__ float BoundResidual(int e) const {
    const float p_up = self().BoundTarget(e);
    if constexpr (R == RowRace::kResidualDraftRow) {
      return detmath::Sub(p_up, self().DraftLower(e));
    } else {
      return detmath::Sub(p_up, OneHotDraft(e));
    }
  }
  // Lower bounds: max(0, p - q) >= max(0, p_lo - q_up).
  __device__ __forceinline__ float LowerResidual(int e) const {
    const float p_lo = self().LowerTarget(e);
    if constexpr (R == RowRace::kResidualDraftRow) {
      return detmath::Sub(p_lo, self().DraftUpper(e));
    } else {
      return detmath::Sub(p_lo, OneHotDraft(e));
    }
  }
  // Some residual weight is certainly > 0: p_lo > q_up makes p > q.
  __device__ __forceinline__ bool CertainResidual() const {
    bool certain = false;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float q_up = R == RowRace::kResidualDraftRow ? self().DraftUpper(e) : OneHotDraft(e);
      certain = certain || self().LowerTarget(e) > q_up;
    }
    return certain;
  }

 private:
  __device__ __forceinline__ const Derived& self() const { return static_cast<const Derived&>(*this); }
};

// A quad of log-probability values. The weights are functions of the stored
// values, evaluated where needed: bounds (from one ex2 a value) for the
// certainty test, the seeding and the hopeless test, exact ExpDet weights
// for the hopeful entrants only. Slots outside the row or the share hold
// -inf (SweepShare's padding): weight 0, with bounds that need no select
// (PossiblyWeighted drops them while a warp has no bound).
template <RowRace R>
struct LogProbabilityQuad : BoundedQuad<LogProbabilityQuad<R>, R> {
  using Base = BoundedQuad<LogProbabilityQuad<R>, R>;
  using Base::draft_approx;
  using Base::dv;
  using Base::OneHotDraft;
  using Base::target_approx;
  using Base::tv;

  __device__ __forceinline__ LogProbabilityQuad(const RowShare& share, const float (&target)[4],
                                                const float (&draft)[4], int32_t first)
      : Base(share, target, draft, first) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      target_approx[e] = LogProbabilityApprox(tv[e]);
      draft_approx[e] = R == RowRace::kResidualDraftRow ? LogProbabilityApprox(dv[e]) : 0.0f;
    }
  }

  // The entrants whose weights may be > 0 in either race: p = ExpDet(v) is 0
  // exactly for v <= -103.5 (and -inf), where the upper bound is 2^-126.
  __device__ __forceinline__ unsigned PossiblyWeighted() const {
    unsigned mask = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) mask |= tv[e] > -103.5f ? 1u << e : 0u;
    return mask;
  }
  // Exact weights, the reference's bits (LogProbabilityToProbability is
  // ExpDet; ExpDetBranchFree is ExpDet without branches, so the two exps and
  // the race's logarithm of an exact step can interleave).
  __device__ __forceinline__ float ExactTarget(int e) const { return detmath::ExpDetBranchFree(Pick(tv, e)); }
  __device__ __forceinline__ float ExactResidual(int e) const {
    const float p = ExactTarget(e);
    if constexpr (R == RowRace::kResidualDraftRow) {
      // As QuadWeights: fmaxf(p - q, 0) is ResidualWeight (p = q = +inf: NaN -> 0, as there).
      return fmaxf(detmath::Sub(p, detmath::ExpDetBranchFree(Pick(dv, e))), 0.0f);
    } else {
      return rejection::ResidualWeight(p, OneHotDraft(e));
    }
  }
  // Bounds on p and q (for BoundedQuad's residual bounds).
  __device__ __forceinline__ float BoundTarget(int e) const { return LogProbabilityUpper(target_approx[e]); }
  __device__ __forceinline__ float LowerTarget(int e) const { return LogProbabilityLower(target_approx[e]); }
  __device__ __forceinline__ float DraftUpper(int e) const { return LogProbabilityUpper(draft_approx[e]); }
  __device__ __forceinline__ float DraftLower(int e) const { return LogProbabilityLower(draft_approx[e]); }
};

// Exact logits: bounds on p = Div(Exp2Det(t), Z), t = (v - m) * scale, from
// one MUFU ex2 (no polynomial, no division), so the hopeless test costs a
// few instructions per element and only the seeding and the hopeful entrants
// pay for the exact weight. ex2.approx's relative error (2 ulp) and
// Exp2Det's (1 ulp) are far inside the 0.1% margins on the weight and on
// 1/Z (the inv_sum constants); the additive 2^-126 covers results the .ftz
// form flushes (p <= weight since Z >= 1: the maximum weighs 1). Values
// below a filtered row's threshold have p = 0 (LogitApprox). As for
// log-probabilities, the bounds only prune; the outcome is the full race's.
// ex2.approx of a value's t; for a value below the threshold (and NaN),
// whose p is 0, `filtered`: 0 gives the bounds +-2^-126 / Z, which bound
// p = 0 (the draft side); -1 makes both bounds negative (the target side),
// so neither race's bound of that entrant is > 0 and it is never hopeful. A
// bound of 2^-126 / Z made every filtered-out entrant hopeful in a warp not
// yet seeded, which on a top-k row is most warps for their whole share
// (filtered B=8 79 -> 83 us, run 12 of bench/sampling/results/
// 2026-11-27-item2); selects on the bounds instead cost the unfiltered sweep
// what the shared ex2 had saved (run 13).
__device__ __forceinline__ float LogitApprox(float v, const RowNormalizer& n, float scale, float filtered) {
  const float t = detmath::Mul(detmath::Sub(v, n.max), scale);
  float approx;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(approx) : "f"(t));
  return v >= n.threshold ? approx : filtered;
}
__device__ __forceinline__ float LogitUpper(float approx, float inv_sum_up) {
  return __fmul_rn(__fmaf_rn(approx, 1.001f, kFloatMinNormal), inv_sum_up);
}
__device__ __forceinline__ float LogitLower(float approx, float inv_sum_lo) {
  return __fmul_rn(__fmaf_rn(approx, 0.999f, -kFloatMinNormal), inv_sum_lo);
}

// A quad of exact-logits values, the LogProbabilityQuad scheme: exact
// weights (ProbabilityOf, as the reference) only where needed, bounds from
// one ex2 a value otherwise. Slots outside the row or the share hold -inf
// (weight 0).
template <RowRace R>
struct LogitQuad : BoundedQuad<LogitQuad<R>, R> {
  using Base = BoundedQuad<LogitQuad<R>, R>;
  using Base::draft_approx;
  using Base::dv;
  using Base::OneHotDraft;
  using Base::target_approx;
  using Base::tv;
  using Base::w;

  __device__ __forceinline__ LogitQuad(const RowShare& share, const float (&target)[4], const float (&draft)[4],
                                       int32_t first)
      : Base(share, target, draft, first) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      target_approx[e] = LogitApprox(tv[e], w.target_probability.norm, w.logit_scale, -1.0f);
      draft_approx[e] =
          R == RowRace::kResidualDraftRow ? LogitApprox(dv[e], w.draft_probability.norm, w.logit_scale, 0.0f) : 0.0f;
    }
  }

  // The entrants whose weights may be > 0 in either race: a filtered value's
  // bounds are already <= 0 (LogitApprox), but a logit whose t is <= -152
  // (a -inf vocabulary mask, an off-support -1e4, the padding past the row)
  // weighs exactly 0 (Exp2Det clamps there and rounds to 0) with an upper
  // bound of 2^-126 / Z.
  __device__ __forceinline__ unsigned PossiblyWeighted() const {
    const RowNormalizer& n = w.target_probability.norm;
    unsigned mask = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float t = detmath::Mul(detmath::Sub(tv[e], n.max), w.logit_scale);
      mask |= (tv[e] >= n.threshold && t > -152.0f) ? 1u << e : 0u;
    }
    return mask;
  }
  __device__ __forceinline__ float ExactTarget(int e) const {
    return rejection::ProbabilityOf(w.target_probability, Pick(tv, e));
  }
  __device__ __forceinline__ float ExactResidual(int e) const {
    const float p = ExactTarget(e);
    if constexpr (R == RowRace::kResidualDraftRow) {
      // As QuadWeights: fmaxf(p - q, 0) is ResidualWeight.
      return fmaxf(detmath::Sub(p, rejection::ProbabilityOf(w.draft_probability, Pick(dv, e))), 0.0f);
    } else {
      return rejection::ResidualWeight(p, OneHotDraft(e));
    }
  }
  // Bounds on p and q (for BoundedQuad's residual bounds).
  __device__ __forceinline__ float BoundTarget(int e) const {
    return LogitUpper(target_approx[e], w.target_inv_sum_up);
  }
  __device__ __forceinline__ float LowerTarget(int e) const {
    return LogitLower(target_approx[e], w.target_inv_sum_lo);
  }
  __device__ __forceinline__ float DraftUpper(int e) const { return LogitUpper(draft_approx[e], w.draft_inv_sum_up); }
  __device__ __forceinline__ float DraftLower(int e) const { return LogitLower(draft_approx[e], w.draft_inv_sum_lo); }
};

// Both races over one quad whose exact weights cost an exp (Quad:
// LogProbabilityQuad or LogitQuad): the bounds prune, and only the seeding
// and the hopeful entrants pay for the exact weight. The residual race's
// certainty test stops feeding the target race as in RaceQuad, and while
// the warp feeds it, a quad without an entrant of possible weight
// (PossiblyWeighted()) is skipped, as RaceQuad's are.
template <bool kResidual, bool kFeeding, typename Quad>
__device__ __forceinline__ void RaceBoundedQuad(const Quad& quad, const Philox4x32& bits, int32_t x0,
                                                BlockBounds& block, RaceBound& residual_bound,
                                                RaceBound& target_bound, bool& feed_target,
                                                RaceCandidate& best_residual, RaceCandidate& best_target) {
  if constexpr (kResidual) {
    if (kFeeding && feed_target) {
      feed_target = !__any_sync(kFullMask, quad.CertainResidual());
      if (feed_target && !__any_sync(kFullMask, quad.PossiblyWeighted() != 0)) return;
    }
    ReadBlockBound(residual_bound, &block.residual);
    RaceOneQuad<kFeeding>(
        bits, [&](int e) { return quad.BoundResidual(e); }, [&](int e) { return quad.LowerResidual(e); },
        [&](int e) { return quad.ExactResidual(e); }, [&] { return quad.PossiblyWeighted(); }, x0, residual_bound,
        best_residual, &block.residual);
  }
  if (kFeeding && feed_target) {
    ReadBlockBound(target_bound, &block.target);
    RaceOneQuad(
        bits, [&](int e) { return quad.BoundTarget(e); }, [&](int e) { return quad.LowerTarget(e); },
        [&](int e) { return quad.ExactTarget(e); }, [&] { return quad.PossiblyWeighted(); }, x0, target_bound,
        best_target, &block.target);
  }
}

// The race over one quad. While the warp has seen no residual entrant the
// target race is fed too: it only decides when the whole row has none, so a
// warp that has seen one stops feeding it (warp-uniform `feed_target`): for
// log-probabilities once a residual entrant is certain from the bounds.
// kFeeding: the quad is in SweepInTwoPhases' first loop, where the warp may
// still feed the target race and its residual race may still seed; in the
// second it does neither.
//
// While feeding, a quad in which no lane has an entrant in either race is
// skipped: RaceOneQuad seeds from and offers only weights > 0, so it would
// change nothing. Such quads fill the zero runs of a row (the half of a
// disjoint row where p <= q, all of a caller-filtered top-k / top-p target
// but its k), where the warp, seeing no residual entrant, fed both races
// unseeded for its whole share, each quad paying two warp minima:
// probabilities B=128 on disjoint rows took 79 us against 49 on peaked
// ones (H200, bench/sampling/results/2026-11-28-shapes).
template <RaceMode M, RowRace R, bool kFeeding>
__device__ __forceinline__ void RaceQuad(const RowShare& w, const float (&tv)[4], const float (&dv)[4], int32_t q,
                                         bool in_share, BlockBounds& block, ValueChecks& checks,
                                         RaceBound& residual_bound, RaceBound& target_bound, bool& feed_target,
                                         RaceCandidate& best_residual, RaceCandidate& best_target) {
  using Traits = RaceModeTraits<M>;
  constexpr bool kResidual = R != RowRace::kBonus;
  const int32_t x0 = 4 * q;
  if constexpr (Traits::kLogProbabilities) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      CheckValue<Traits::kKind>(tv[e], checks.target_poison, checks.target_low);
      if constexpr (R == RowRace::kResidualDraftRow) {
        CheckValue<Traits::kKind>(dv[e], checks.draft_poison, checks.draft_low);
      }
    }
    RaceBoundedQuad<kResidual, kFeeding>(LogProbabilityQuad<R>{w, tv, dv, x0},
                                         RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q)),
                                         x0, block, residual_bound, target_bound, feed_target, best_residual,
                                         best_target);
  } else if constexpr (Traits::kLogitsExact) {
    // Rows were checked by the normalizer pass: no value checks here.
    RaceBoundedQuad<kResidual, kFeeding>(LogitQuad<R>{w, tv, dv, x0},
                                         RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q)),
                                         x0, block, residual_bound, target_bound, feed_target, best_residual,
                                         best_target);
  } else {
    float p[4], r[4];
    QuadWeights<M, R>(w, tv, dv, x0, in_share, checks, p, r);
    const auto weight_p = [&](int e) { return Pick(p, e); };
    const auto weight_r = [&](int e) { return Pick(r, e); };
    const Philox4x32 bits = RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q));
    if constexpr (kResidual) {
      if (kFeeding && feed_target) {
        const bool lane_has_residual = r[0] > 0.0f || r[1] > 0.0f || r[2] > 0.0f || r[3] > 0.0f;
        feed_target = !__any_sync(kFullMask, lane_has_residual);
        const bool lane_has_target = p[0] > 0.0f || p[1] > 0.0f || p[2] > 0.0f || p[3] > 0.0f;
        if (feed_target && !__any_sync(kFullMask, lane_has_target)) return;
      }
      ReadBlockBound(residual_bound, &block.residual);
      RaceOneQuad<kFeeding>(
          bits, weight_r, weight_r, weight_r, [] { return 0xfu; }, x0, residual_bound, best_residual,
          &block.residual);
    }
    if (kFeeding && feed_target) {
      ReadBlockBound(target_bound, &block.target);
      RaceOneQuad(
          bits, weight_p, weight_p, weight_p, [] { return 0xfu; }, x0, target_bound, best_target, &block.target);
    }
  }
}

// Asynchronous global -> shared copies of one quad (sm_80+; compiled out for
// older targets, which take the direct-load sweep).
template <SampleDtype D>
__device__ __forceinline__ void CopyQuadAsync(unsigned address, const void* row, int32_t q) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  if constexpr (D == SampleDtype::kFloat32) {
    const char* source = static_cast<const char*>(row) + int64_t{16} * q;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(source) : "memory");
  } else {
    const char* source = static_cast<const char*>(row) + int64_t{8} * q;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(address), "l"(source) : "memory");
  }
#endif
}

__device__ __forceinline__ void CommitCopies() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until the thread's oldest outstanding group has landed.
__device__ __forceinline__ void WaitForOldestCopies() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(kStageLookahead - 1) : "memory");
#endif
}

template <SampleDtype D>
__device__ __forceinline__ void ReadStagedQuad(const unsigned char* stage, float out[4]) {
  UnpackQuad<D>(*reinterpret_cast<const PackedQuad<D>*>(stage), out);
}

template <SampleDtype D>
constexpr int kStagedQuadBytes = sizeof(PackedQuad<D>);

// Runs step(q, feeding) over a thread's quads q_first + kThreads j, j <
// iterations: with feeding = std::true_type while the warp feeds the target
// race or has not seeded its residual race (a bonus row: throughout), then
// with std::false_type, so the loop that runs once a residual entrant has
// been seen, nearly every quad of a row, carries neither the feeding tests,
// nor the skip of weightless quads, nor the target race's code, nor the
// seeding step. Probabilities B=128 on peaked rows: 44.9-45.1 us against
// 48.4-48.8 in one loop (H200, bench/sampling/results/2026-11-28-shapes);
// the skip asked of every quad in one loop had cost them 2.2 us, asked only
// while feeding, behind a branch, 0.5-0.7 us. Taking the seeding step out
// of the second loop too took unfiltered exact logits at B=8 from 0.1-0.6
// us slower than one loop to within 0.15 us, and log-probabilities B=8
// 0.2 us below it (run 9).
template <RowRace R, typename Step>
__device__ __forceinline__ void SweepInTwoPhases(int32_t q_first, int32_t iterations, const bool& feed_target,
                                                 const RaceBound& residual_bound, const Step& step) {
  int32_t j = 0;
  int32_t q = q_first;
  for (; j < iterations && (R == RowRace::kBonus || feed_target || !residual_bound.seeded); ++j, q += kThreads) {
    step(q, std::true_type{});
  }
  if constexpr (R != RowRace::kBonus) {
    for (; j < iterations; ++j, q += kThreads) step(q, std::false_type{});
  }
}

// Sweeps one share of the sampled row (RaceQuad per quad) and returns the
// thread's best entrant of each race and the value-check bits
// (kRaceReadBadTarget, kRaceReadBadDraft). Thread t takes quads
// q_begin + t + 256 j, j = 0, 1, ...: the same trip count for every thread
// of the block.
template <SampleDtype D, RaceMode M, RowRace R>
__device__ __forceinline__ void SweepShare(const RowShare& w, unsigned char* stage, BlockBounds& block,
                                           RaceCandidate& best_residual, RaceCandidate& best_target, int32_t& flags) {
  constexpr bool kDraftRow = R == RowRace::kResidualDraftRow;
  // Slots outside the share or past the row: probability 0 (log-probabilities: -inf).
  constexpr float kPad =
      (RaceModeTraits<M>::kLogProbabilities || RaceModeTraits<M>::kLogitsExact) ? -kInfinity : 0.0f;
  ValueChecks checks;
  RaceBound residual_bound, target_bound;
  bool feed_target = true;
  const int32_t iterations = (w.q_end - w.q_begin + kThreads - 1) / kThreads;
  const int32_t q_first = w.q_begin + static_cast<int32_t>(threadIdx.x);
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr bool kStaged = true;
#else
  constexpr bool kStaged = false;
#endif
  if (kStaged && w.vector_ok) {
    // Each thread stages only the quads it consumes, so no barrier is needed:
    // its own cp.async.wait_group makes them visible to it. Slot offsets
    // advance by one slot per quad and wrap after kStageSlots.
    constexpr int kSlotBytes = kThreads * kStagedQuadBytes<D>;
    constexpr int kRingBytes = kStageSlots * kSlotBytes;
    unsigned char* const target_stage = stage + threadIdx.x * kStagedQuadBytes<D>;
    unsigned char* const draft_stage = target_stage + kStageBytesPerRow;
    // Shared-space addresses converted once: converted in the loop, each
    // iteration paid a read of the block's cluster rank and two address
    // computations per row.
    const auto target_stage_address = static_cast<unsigned>(__cvta_generic_to_shared(target_stage));
    const auto draft_stage_address = static_cast<unsigned>(__cvta_generic_to_shared(draft_stage));
    int write_offset = 0, read_offset = 0;
    int32_t q_issue = q_first;
    const auto issue_next = [&]() {
      if (q_issue < w.q_end) {
        CopyQuadAsync<D>(target_stage_address + write_offset, w.target_row, q_issue);
        if constexpr (kDraftRow) CopyQuadAsync<D>(draft_stage_address + write_offset, w.draft_row, q_issue);
      }
      CommitCopies();  // empty groups too: the wait counts groups
      q_issue += kThreads;
      write_offset = write_offset + kSlotBytes == kRingBytes ? 0 : write_offset + kSlotBytes;
    };
#pragma unroll
    for (int j = 0; j < kStageLookahead; ++j) issue_next();
    SweepInTwoPhases<R>(q_first, iterations, feed_target, residual_bound, [&](int32_t q, auto feeding) {
      const bool in_share = q < w.q_end;
      WaitForOldestCopies();
      float tv[4] = {kPad, kPad, kPad, kPad}, dv[4] = {kPad, kPad, kPad, kPad};
      if (in_share) {
        ReadStagedQuad<D>(target_stage + read_offset, tv);
        if constexpr (kDraftRow) ReadStagedQuad<D>(draft_stage + read_offset, dv);
      }
      read_offset = read_offset + kSlotBytes == kRingBytes ? 0 : read_offset + kSlotBytes;
      // Refills the slot read one iteration ago (kStageSlots = lookahead + 1);
      // one group per iteration, empty or not, keeps the wait's count right.
      issue_next();
      RaceQuad<M, R, decltype(feeding)::value>(w, tv, dv, q, in_share, block, checks, residual_bound, target_bound,
                                               feed_target, best_residual, best_target);
    });
  } else {
    SweepInTwoPhases<R>(q_first, iterations, feed_target, residual_bound, [&](int32_t q, auto feeding) {
      const bool in_share = q < w.q_end;
      float tv[4] = {kPad, kPad, kPad, kPad}, dv[4] = {kPad, kPad, kPad, kPad};
      if (in_share) {
        Load4<D>(w.target_row, 4 * q, w.vocab_size, w.vector_ok, tv, kPad);
        if constexpr (kDraftRow) Load4<D>(w.draft_row, 4 * q, w.vocab_size, w.vector_ok, dv, kPad);
      }
      RaceQuad<M, R, decltype(feeding)::value>(w, tv, dv, q, in_share, block, checks, residual_bound, target_bound,
                                               feed_target, best_residual, best_target);
    });
  }
  constexpr SampleValueKind kKind = RaceModeTraits<M>::kKind;
  flags |= (ChecksPassedFor<kKind>(checks.target_poison, checks.target_low) ? 0 : kRaceReadBadTarget) |
           (ChecksPassedFor<kKind>(checks.draft_poison, checks.draft_low) ? 0 : kRaceReadBadDraft);
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_SWEEP_CUH_
