// Fragment of kernels/sampling/rejection_sample.cu: AcceptRaceKernel: the
// decision, the sweep of the block's share and the merge of every block's
// winner into the sequence's outcome (or, host-finished, into its slot).
// Included once, inside that file's anonymous namespace, after rejection_race_sweep.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_KERNEL_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_KERNEL_CUH_

template <SampleDtype D, RaceMode M>
__global__ void __launch_bounds__(kThreads, kRaceBlocksPerSm) AcceptRaceKernel(RaceArgs a) {
  using Traits = RaceModeTraits<M>;
  __shared__ unsigned long long warp_words[kWarps];
  __shared__ int32_t warp_flags[kWarps];
  extern __shared__ __align__(16) unsigned char race_stage[];  // kRaceStageBytes
  __shared__ BlockBounds block_bounds;
  __shared__ Decision block_decision;
  __shared__ SampledRowNorms block_norms;  // exact logits only
  const RejectionBatchInput& in = a.in;
  // Flattened (sequence, share) grid: b may exceed gridDim.y's 65535.
  const int32_t i = blockIdx.x / a.blocks_per_sequence;
  const int32_t g = blockIdx.x % a.blocks_per_sequence;
  const int32_t first = in.draft_offsets[i];
  const int32_t gamma = in.draft_offsets[i + 1] - first;
  const SequenceSamplingParams s = in.sequences[i];
  const int32_t quads = (in.vocab_size + 3) / 4;
  // Shares are whole multiples of kShareQuads, so each starts on a 512-byte
  // boundary of the row (256 for 16-bit values) whatever V and G are; the
  // race's argmin does not depend on the split, only its speed does. With
  // ceil(quads / G) shares, B=128 at V=151,936 (G=3) began its shares 96
  // bytes past a 128-byte line, so every warp's 512 contiguous bytes touched
  // five lines instead of four: 72.2 us against 64.5 aligned, at a read
  // floor of 59.1 (H100, 2026-11-24, bench/sampling/results/2026-11-24-item5).
  const int32_t per_block =
      (quads + a.blocks_per_sequence * kShareQuads - 1) / (a.blocks_per_sequence * kShareQuads) * kShareQuads;
  const int32_t q_begin = g * per_block;
  // Warps 1 and 2 touch one line of this block's slice in every candidate
  // row (target rows 0..gamma, draft rows 0..gamma-1) before deciding, so the
  // address translation and first line of the row the race will read are
  // warm when the decision is known: the race's first loads skip a TLB miss.
  // One line per row and block: no measurable extra traffic.
  if (threadIdx.x >= 32 && threadIdx.x < 96 && q_begin < quads) {
    const bool draft_side = threadIdx.x >= 64;
    const int64_t element = int64_t{4} * q_begin;
    for (int32_t j = threadIdx.x % 32; j <= gamma; j += 32) {
      if (draft_side && (j >= gamma || !in.has_draft_probs)) continue;
      const void* row = draft_side ? SampledRowAddress(in, true, first + j)
                                   : SampledRowAddress(in, false, static_cast<int64_t>(first) + i + j);
      const char* address = static_cast<const char*>(row) + element * SampleDtypeBytes(in.dtype);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(address));
    }
  }
  // Exact logits: the decision waits for the normalizers, but the draft
  // tokens and the values at them are inputs, so warp 0 reads those of
  // positions 0..31 before the wait (LoadDecisionInputs: bf16 B=32 -1.3 us,
  // B=8 -0.45, fp32 B=1 -0.25; run 1 of bench/sampling/results/
  // 2026-11-27-tail), and for longer drafts warp 3 brings the values' lines
  // of positions 32 on into L2 meanwhile, so those reads after the wait are
  // L2 hits. Compiled for that race only: in the others, behind a run-time
  // test, the prefetch cost log-probabilities B=8 ~1% (run 6 of
  // bench/sampling/results/2026-11-27-onelaunch).
  DecisionInputs preloaded;
  if (Traits::kLogitsExact && threadIdx.x < 32) preloaded = LoadDecisionInputs<D>(in, i, first, gamma, threadIdx.x % 32);
  if (Traits::kLogitsExact && gamma > 32 && threadIdx.x >= 96 && threadIdx.x < 128) {
    for (int32_t j = 32 + threadIdx.x % 32; j < gamma; j += 32) {  // 0..31: warp 0's preload
      const int32_t x = in.draft_tokens[first + j];
      if (x < 0 || x >= in.vocab_size) continue;
      const int64_t offset = int64_t{x} * SampleDtypeBytes(in.dtype);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(
          static_cast<const char*>(SampledRowAddress(in, false, static_cast<int64_t>(first) + i + j)) + offset));
      if (in.has_draft_probs) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(
            static_cast<const char*>(SampledRowAddress(in, true, first + j)) + offset));
      }
    }
  }
  // A programmatic dependent of the combine / filter grid after a row pass
  // (a no-op otherwise): the normalizers are read from here on.
  race_result::WaitForPrimaryGrid();
  // Warp 0 decides for the block (every warp deciding cost the block 8x the
  // decision's instructions, and the race is instruction-bound); the barrier
  // also publishes block_bounds' initial value.
  if (threadIdx.x < 32) {
    SampledRowNorms norms;
    const Decision decided = Decide<D, M>(a, i, first, gamma, s, preloaded, norms);
    if (threadIdx.x == 0) {
      block_decision = decided;
      if constexpr (Traits::kLogitsExact) block_norms = norms;
      block_bounds = BlockBounds{0x7f800000u, 0x7f800000u};  // +inf
    }
  }
  __syncthreads();
  const Decision d = block_decision;
  if (!d.race) {
    if (g == 0 && threadIdx.x == 0) WriteOutcome(a, i, gamma, d.code, d.position, d.k, d.next);
    return;
  }

  // The recovery (k < gamma) or bonus (k == gamma) row, this block's share.
  const int32_t k = d.k;
  const bool host_finishes = a.out.race_slots != nullptr;
  if (host_finishes && g == 0 && threadIdx.x == 0) WritePendingOutcome(a, i, gamma, k);
  const bool residual = k < gamma;
  const bool use_draft_row = residual && in.has_draft_probs;
  const int64_t target_row = static_cast<int64_t>(first) + i + k;
  const float inv_t = Traits::kKind == SampleValueKind::kLogits ? rejection::InverseTemperature(s.temperature) : 0.0f;
  RowShare share;
  share.target_row = SampledRowAddress(in, false, target_row);
  share.draft_row = use_draft_row ? SampledRowAddress(in, true, first + k) : nullptr;
  share.target_probability = RowProbability{Traits::kKind, Traits::kMethod, inv_t, RowNormalizer{}, in.sigmoid_alpha,
                                            detmath::Sub(in.sigmoid_beta, in.sigmoid_alpha)};
  share.draft_probability = share.target_probability;
  if constexpr (Traits::kLogitsExact) {
    share.target_probability.norm = block_norms.target;
    if (use_draft_row) share.draft_probability.norm = block_norms.draft;
    // The bounds' per-row constants (LogitUpper, LogitLower): 1/Z within 0.1%, either side.
    const float scale = rejection::LogitScale(inv_t);
    const float target_inv = __frcp_rn(share.target_probability.norm.sum);
    share.logit_scale = scale;
    share.target_inv_sum_up = __fmul_rn(target_inv, 1.001f);
    share.target_inv_sum_lo = __fmul_rn(target_inv, 0.999f);
    const float draft_inv = use_draft_row ? __frcp_rn(share.draft_probability.norm.sum) : 0.0f;
    share.draft_inv_sum_up = __fmul_rn(draft_inv, 1.001f);
    share.draft_inv_sum_lo = __fmul_rn(draft_inv, 0.999f);
  }
  share.q_begin = q_begin;
  share.q_end = min(quads, q_begin + per_block);
  share.vocab_size = in.vocab_size;
  share.vector_ok = in.vocab_size % 4 == 0;
  share.seed = s.seed;
  share.sequence_index = static_cast<uint32_t>(s.sequence_index);
  share.position = static_cast<uint32_t>(k);
  share.drafted = d.drafted;

  RaceCandidate best_residual = rejection::NoCandidate();
  RaceCandidate best_target = rejection::NoCandidate();
  int32_t flags = 0;
  // Block-uniform: every thread of the block sweeps the same row.
  if (!residual) {
    SweepShare<D, M, RowRace::kBonus>(share, race_stage, block_bounds, best_residual, best_target, flags);
  } else if (use_draft_row) {
    SweepShare<D, M, RowRace::kResidualDraftRow>(share, race_stage, block_bounds, best_residual, best_target, flags);
  } else {
    SweepShare<D, M, RowRace::kResidualOneHot>(share, race_stage, block_bounds, best_residual, best_target, flags);
  }
  WarpRace(best_residual, best_target);
  const int warp = threadIdx.x / 32;
  // Warp OR of the two flag bits (ballots: __reduce_or_sync needs sm_80 and
  // the build also emits compute_75 PTX).
  flags = (__ballot_sync(kFullMask, flags & kRaceReadBadTarget) ? kRaceReadBadTarget : 0) |
          (__ballot_sync(kFullMask, flags & kRaceReadBadDraft) ? kRaceReadBadDraft : 0);
  if (threadIdx.x % 32 == 0) {
    warp_words[warp] = race_result::Better(race_result::Word(best_residual, false), race_result::Word(best_target, true));
    warp_flags[warp] = flags;
  }
  __syncthreads();
  // Host-finished: the block's winner goes to its slot, one 16-byte store.
  // Otherwise one atomic per block and race result, then a ticket: the block
  // that takes the sequence's last one reads the folded word and flags,
  // writes the outcome and clears the three (no merging kernel after the
  // grid).
  if (threadIdx.x == 0) {
    unsigned long long word = warp_words[0];
    int32_t block_flags = warp_flags[0];
    for (int w = 1; w < kWarps; ++w) {
      word = race_result::Better(word, warp_words[w]);
      block_flags |= warp_flags[w];
    }
    if (host_finishes) {
      RejectionRaceSlot slot;
      slot.word = word;
      slot.flags = static_cast<uint32_t>(block_flags);
      a.out.race_slots[static_cast<int64_t>(i) * a.blocks_per_sequence + g] = slot;
      return;
    }
    if (word != race_result::kNoWord) atomicMax(&a.scratch.race_words[i], word);
    if (block_flags != 0) atomicOr(&a.scratch.race_flags[i], static_cast<uint32_t>(block_flags));
    if (race_result::TakeTicket(&a.scratch.race_tickets[i]) + 1 == static_cast<uint32_t>(a.blocks_per_sequence)) {
      const unsigned long long final_word = atomicExch(&a.scratch.race_words[i], race_result::kNoWord);
      const uint32_t final_flags = atomicExch(&a.scratch.race_flags[i], 0u);
      a.scratch.race_tickets[i] = 0;
      const int32_t code = RaceOutcomeCode(final_word, final_flags);
      if (code != kRejectionOk) return WriteOutcome(a, i, gamma, code, k, k, -1);
      WriteOutcome(a, i, gamma, kRejectionOk, -1, k, RaceWordToken(final_word));
    }
  }
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_RACE_KERNEL_CUH_
