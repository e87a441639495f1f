// Fragment of kernels/sampling/rejection_sample.cu: the exact-logits row pass
// (RowPassKernel, RowPassRunKernel: each chunk's maximum and sum), the
// full-row check of probability and log-probability rows (RowCheckKernel:
// each chunk's validity and mass) and CombineRowsKernel, which folds a row's
// chunks into its normalizer or its mass.
// Included once, inside that file's anonymous namespace, after rejection_device_helpers.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_ROW_PASS_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_ROW_PASS_CUH_

// --------------------------------------------------------- row pass --
// Normalizer (exact logits) or full-row check, one block per (row, chunk).

enum class RowPassMode : int32_t { kNormalize = 0, kCheck = 1 };

struct RowPassArgs {
  RejectionBatchInput in;
  ScratchLayout scratch;
  int64_t num_target_rows;
  int64_t num_draft_rows;
  int32_t num_chunks;
  RowPassMode mode;
  // A filtered batch: blocks take the draft rows first, so that the target
  // rows, which the top-k / top-p filter reads right after, are the ones the
  // L2 still holds; and the target rows' warp maxima are kept for it.
  bool targets_last;
  // RowPassRunKernel: consecutive chunks of one row per block
  // (RejectionRowPassChunksPerBlock) and the blocks that cover a row.
  int32_t chunks_per_block;
  int32_t blocks_per_row;
  // blockIdx.x / blocks_per_row without a division (fast_divisor.h): a
  // block's row and its place in the row.
  FastDivisor row_of_block;
};

// The slot (target rows, then draft rows) of the row a block takes
// order-th: a filtered batch takes the draft rows first (targets_last).
__device__ __forceinline__ int64_t SlotOfOrder(const RowPassArgs& a, int64_t order) {
  return !a.targets_last ? order : order < a.num_draft_rows ? a.num_target_rows + order : order - a.num_draft_rows;
}

__device__ __forceinline__ bool SlotIsDraft(const RowPassArgs& a, int64_t slot) { return slot >= a.num_target_rows; }

// The stored values of a slot's row.
__device__ __forceinline__ const void* SlotRowAddress(const RowPassArgs& a, int64_t slot) {
  const bool is_draft = SlotIsDraft(a, slot);
  return SampledRowAddress(a.in, is_draft, is_draft ? slot - a.num_target_rows : slot);
}

// The (row order, block within the row) of this block.
__device__ __forceinline__ void SplitRowBlock(const RowPassArgs& a, int64_t& order, int32_t& within) {
  const uint32_t q = a.row_of_block.Quotient(blockIdx.x);
  order = q;
  within = static_cast<int32_t>(a.row_of_block.Remainder(blockIdx.x, q));
}

// Block max of one float per thread (any NaN is dropped: the callers check
// validity separately).
__device__ float BlockMax(float m, float* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = m;
  __syncthreads();
  float result = shared[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) result = fmaxf(result, shared[w]);
  return result;
}

// The row pass streams every logits row once (83 MB at fp32 B=8, more than
// the H100's 50 MB L2). With the default L2 policy that stream evicted what
// runs next: the combine's and the race's code and the scratch they read,
// which their serial chains then fetched from DRAM (the race's first sweep
// step took 4.6 us after the pass against 1.5 with probabilities).
// Evict-first reads (sm_80+) let the stream replace its own lines instead:
// fp32 logits B=8 53.1 -> 47.5 us, B=32 139.8 -> 130.5, top-k/top-p B=8
// 76.1 -> 68.2 (H100, bench/sampling/results/2026-11-27-evict-first).
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
#else
  return 0;
#endif
}

template <SampleDtype D>
__device__ __forceinline__ PackedQuad<D> LoadQuadEvictFirst(const PackedQuad<D>* p, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  PackedQuad<D> v;
  if constexpr (D == SampleDtype::kFloat32) {
    asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p), "l"(policy));
  } else {
    asm volatile("ld.global.nc.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy));
  }
  return v;
#else
  (void)policy;
  return __ldg(p);
#endif
}

// The thread's 16 values of a whole chunk (lane order of rejection_core.h),
// read evict-first, as stored.
template <SampleDtype D>
__device__ __forceinline__ void LoadChunk(const void* row_ptr, int32_t begin, PackedQuad<D> (&raw)[kRounds]) {
  const uint64_t policy = EvictFirstPolicy();
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int32_t x = begin + (r * kThreads + threadIdx.x) * rejection::kLaneWidth;
    raw[r] = LoadQuadEvictFirst<D>(
        reinterpret_cast<const PackedQuad<D>*>(static_cast<const char*>(row_ptr) + int64_t{x} * SampleDtypeBytes(D)),
        policy);
  }
}

// Two 16-bit values at a time in their own format: exact, and NaN (0x7fff
// or the hardware's) where either is. One max.NaN / min.NaN on bf16x2 or
// f16x2 pairs on sm_80+; compared as floats before that.
template <SampleDtype D, bool kMax>
__device__ __forceinline__ uint32_t PairExtreme(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  if constexpr (D == SampleDtype::kBFloat16) {
    if constexpr (kMax) {
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
  } else {
    if constexpr (kMax) {
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
  }
  return r;
#else
  uint32_t r = 0;
  for (int shift = 0; shift < 32; shift += 16) {
    float fa[4], fb[4];
    UnpackQuad<D>(PackedQuad<D>{a >> shift, 0u}, fa);
    UnpackQuad<D>(PackedQuad<D>{b >> shift, 0u}, fb);
    const uint32_t pick = isnan(fa[0]) || isnan(fb[0])   ? 0x7fffu
                          : (kMax ? fa[0] >= fb[0] : fa[0] <= fb[0]) ? (a >> shift) & 0xffffu
                                                                     : (b >> shift) & 0xffffu;
    r |= pick << shift;
  }
  return r;
#endif
}

template <SampleDtype D>
__device__ __forceinline__ uint32_t PairMax(uint32_t a, uint32_t b) { return PairExtreme<D, true>(a, b); }

template <SampleDtype D>
__device__ __forceinline__ uint32_t PairMin(uint32_t a, uint32_t b) { return PairExtreme<D, false>(a, b); }

// A thread's 16 stored 16-bit values folded pairwise: each half of `hi`
// holds the maximum of 8 of them, each half of `lo` the minimum, NaN if
// any is.
template <SampleDtype D>
__device__ __forceinline__ void ChunkPairExtremes(const PackedQuad<D> (&raw)[kRounds], uint32_t& hi, uint32_t& lo) {
  hi = raw[0].x;
  lo = raw[0].x;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (r == 0 && half == 0) continue;
      const uint32_t pair = half == 0 ? raw[r].x : raw[r].y;
      hi = PairMax<D>(hi, pair);
      lo = PairMin<D>(lo, pair);
    }
  }
}

// The largest and smallest of a thread's 16 stored values, NaN if any is.
// 16-bit values on sm_80+: two at a time in their own format
// (ChunkPairExtremes, then one conversion each), half the instructions of
// comparing them one at a time as floats in a pass that is issue-bound on
// 16-bit rows (bf16 B=32 116 -> 110 us, B=128 394 -> 370;
// bench/sampling/results/2026-11-27-hmax). Conversion is exact and monotone, so
// the results are the float comparisons' (but for the sign of a zero
// maximum and NaN payloads: no weight or validity depends on either).
template <SampleDtype D>
__device__ __forceinline__ void ChunkMaxMin(const PackedQuad<D> (&raw)[kRounds], float& m, float& low) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (D != SampleDtype::kFloat32) {
    uint32_t hi, lo;
    ChunkPairExtremes<D>(raw, hi, lo);
    const PackedQuad<D> extremes{hi, lo};
    float e[4];
    UnpackQuad<D>(extremes, e);
    m = MaxKeepingNaN(e[0], e[1]);
    low = MinKeepingNaN(e[2], e[3]);
    return;
  }
#endif
  m = -kInfinity;
  low = kInfinity;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    float v[4];
    UnpackQuad<D>(raw[r], v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      m = MaxKeepingNaN(m, v[i]);
      low = MinKeepingNaN(low, v[i]);
    }
  }
}

// A thread's fixed-order lane sum of a whole chunk's weights (rejection_core.h),
// given the chunk's maximum m and the thread's smallest value. Every
// exponent t = (v - m) * scale is <= 0 (m is the maximum), and t is monotone
// in v: when the thread's smallest value gives t >= -125, every weight is
// Exp2DetNonPositive(t), bit for bit ScaledLogitWeight's Exp2Det, seven
// instructions shorter per element in a pass that is issue-bound on them.
// Wider rows (and invalid ones) take the full exp. Values are unpacked from
// the stored form round by round, here and in ChunkMaxMin: holding a whole
// chunk unpacked (16 floats a thread, 32 for a chunk pair) made the fp16
// row-pass kernels spill 16 bytes a thread (the bf16 ones did not), and
// packed values let the 16-bit runs kernel take 6 blocks per SM.
template <SampleDtype D>
__device__ __forceinline__ float ChunkLaneWeightSum(const PackedQuad<D> (&raw)[kRounds], float m, float low, bool bad,
                                                    float scale) {
  float partial = 0.0f;
  if (!bad && detmath::Mul(detmath::Sub(low, m), scale) >= -125.0f) {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      float v[4];
      UnpackQuad<D>(raw[r], v);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial = detmath::Add(partial, detmath::Exp2DetNonPositive(detmath::Mul(detmath::Sub(v[i], m), scale)));
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      float v[4];
      UnpackQuad<D>(raw[r], v);
#pragma unroll
      for (int i = 0; i < 4; ++i) partial = detmath::Add(partial, rejection::ScaledLogitWeight(v[i], m, scale));
    }
  }
  return partial;
}

// The normalizer of a whole chunk of a sampled (T > 0) logits row: the hot
// path of the logits pass, straight-line per element. Validity comes from
// the NaN-keeping maximum and minimum (any infinite or NaN value makes one
// of them non-finite), the maximum is a plain max on valid rows (its sign of
// zero may differ from the reference's first maximum, which changes no
// weight: z - (+0) and z - (-0) are equal or both 0), and the
// weights the fixed-order lane sums of rejection_core.h. No argmax: only
// greedy rows read it.
template <SampleDtype D>
__device__ __forceinline__ ChunkStats FullChunkStats(const PackedQuad<D> (&raw)[kRounds], int32_t begin, float inv_t,
                                                     double* sum_shared, float* max_shared) {
  float m, low;
  ChunkMaxMin<D>(raw, m, low);
  // Validity without a per-element poison: a NaN makes both NaN, +inf the
  // maximum and -inf the minimum infinite.
  const bool bad = __syncthreads_or(!(detmath::IsFinite(m) && detmath::IsFinite(low)));
  m = BlockMax(m, max_shared);
  const float partial = ChunkLaneWeightSum<D>(raw, m, low, bad, rejection::LogitScale(inv_t));
  const double sum = BlockFixedOrderSum(static_cast<double>(partial), sum_shared);
  return ChunkStats{m, bad ? -1 : begin, sum};
}

// Two whole chunks of one sampled 16-bit row reduced side by side:
// FullChunkStats' statistics for each (bit for bit for a valid chunk),
// with the barriers of each reduction shared by both (the pass is
// issue-bound with barrier waits 17% of its stall samples at bf16 B=128,
// bench/sampling/results/2026-11-29-pass-profile). The two maxima travel as
// one 16-bit pair through the warp's shuffles and the block's fold (the
// maximum of stored values is a stored value, so no rounding), and a
// thread with a non-finite value marks its chunk's half NaN, which max.NaN
// carries to the block's maximum: one barrier, one word a warp and no vote
// for both chunks' maxima and validity. Leaves each warp's (chunk 0, chunk
// 1) maxima in pair_max_shared[warp]; a chunk with a non-finite value
// has a NaN maximum there and in its statistics.
template <SampleDtype D>
__device__ __forceinline__ void FullChunkPairStats(const PackedQuad<D> (&raw0)[kRounds],
                                                   const PackedQuad<D> (&raw1)[kRounds], int32_t begin0,
                                                   float inv_t, double* sum_shared, uint32_t* pair_max_shared,
                                                   ChunkStats& s0, ChunkStats& s1) {
  uint32_t hi0, lo0, hi1, lo1;
  ChunkPairExtremes<D>(raw0, hi0, lo0);
  ChunkPairExtremes<D>(raw1, hi1, lo1);
  // (chunk 0, chunk 1) in the low and high halves.
  uint32_t maxima = PairMax<D>(__byte_perm(hi0, hi1, 0x5410), __byte_perm(hi0, hi1, 0x7632));
  const uint32_t minima = PairMin<D>(__byte_perm(lo0, lo1, 0x5410), __byte_perm(lo0, lo1, 0x7632));
  // A half is infinite or NaN when its exponent bits are all ones, i.e.
  // when adding one exponent unit to its magnitude carries into its sign
  // bit (no carry crosses the halves); such a half becomes 0x7fff, a NaN.
  constexpr uint32_t kMagnitudes = 0x7fff7fffu;
  constexpr uint32_t kExponentUnits = D == SampleDtype::kBFloat16 ? 0x00800080u : 0x04000400u;
  const uint32_t non_finite =
      (((maxima & kMagnitudes) + kExponentUnits) | ((minima & kMagnitudes) + kExponentUnits)) & 0x80008000u;
  maxima |= non_finite - (non_finite >> 15);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    maxima = PairMax<D>(maxima, __shfl_xor_sync(kFullMask, maxima, offset));
  }
  if (threadIdx.x % 32 == 0) pair_max_shared[threadIdx.x / 32] = maxima;
  __syncthreads();
  static_assert(kWarps == 8, "the fold reads the warps' pairs as two 16-byte words");
  const uint4 w03 = reinterpret_cast<const uint4*>(pair_max_shared)[0];
  const uint4 w47 = reinterpret_cast<const uint4*>(pair_max_shared)[1];
  const uint32_t block_pair = PairMax<D>(PairMax<D>(PairMax<D>(w03.x, w03.y), PairMax<D>(w03.z, w03.w)),
                                         PairMax<D>(PairMax<D>(w47.x, w47.y), PairMax<D>(w47.z, w47.w)));
  float e[4];
  UnpackQuad<D>(PackedQuad<D>{block_pair, minima}, e);
  const float block_m0 = e[0], block_m1 = e[1], low0 = e[2], low1 = e[3];
  const bool bad0 = isnan(block_m0), bad1 = isnan(block_m1);
  const float scale = rejection::LogitScale(inv_t);
  const float partial0 = ChunkLaneWeightSum<D>(raw0, block_m0, low0, bad0, scale);
  const float partial1 = ChunkLaneWeightSum<D>(raw1, block_m1, low1, bad1, scale);
  double sums[2] = {static_cast<double>(partial0), static_cast<double>(partial1)};
  BlockFixedOrderSums<2>(sums, sum_shared);
  s0 = ChunkStats{block_m0, bad0 ? -1 : begin0, sums[0]};  // valid in thread 0
  s1 = ChunkStats{block_m1, bad1 ? -1 : begin0 + rejection::kNormalizerChunk, sums[1]};
}

// Warp w's maximum of chunk k (k = 0, 1) of the last FullChunkPairStats.
template <SampleDtype D>
__device__ __forceinline__ float PairWarpMax(const uint32_t* pair_max_shared, int32_t k, int32_t w) {
  const uint32_t pair = pair_max_shared[w];
  return StoredHalfToFloat<D>(static_cast<uint16_t>(k == 0 ? pair : pair >> 16));
}

// The full-row check of a whole chunk of probability or log-probability
// rows: every value's validity and the chunk's mass, added in the fixed lane
// order as GeneralChunkStats adds them (ExpDetBranchFree is ExpDet bit for
// bit, NaN and infinities included), without its per-element bounds tests
// and the maximum that only the normalizer reads.
template <SampleDtype D>
__device__ __forceinline__ ChunkStats FullChunkMass(const PackedQuad<D> (&raw)[kRounds], int32_t begin,
                                                    SampleValueKind kind, double* sum_shared) {
  const bool log_probabilities = kind == SampleValueKind::kLogProbabilities;
  bool bad = false;
  float partial = 0.0f;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    float v[4];
    UnpackQuad<D>(raw[r], v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      bad = bad || !rejection::ValueIsValid(kind, v[i]);
      partial = detmath::Add(partial, log_probabilities ? detmath::ExpDetBranchFree(v[i]) : v[i]);
    }
  }
  bad = __syncthreads_or(bad);
  return ChunkStats{0.0f, bad ? -1 : begin, BlockFixedOrderSum(static_cast<double>(partial), sum_shared)};
}

// Any other chunk: a row's partial last chunk, a greedy row (argmax), the
// full-row check. Loads its own values. The mode is a template argument so
// that RowPassKernel (normalizer only) and RowCheckKernel (check only)
// carry no code for the other.
template <SampleDtype D, RowPassMode kMode>
__device__ ChunkStats GeneralChunkStats(const RowPassArgs& a, const void* row_ptr, int32_t begin, int32_t end,
                                        bool greedy, float inv_t, double* sum_shared, MaxArg* max_shared) {
  const RejectionBatchInput& in = a.in;
  const bool vector_ok = in.vocab_size % 4 == 0;
  float v[kRounds][4];
  bool bad = false;
  MaxArg m{0.0f, -1};
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int32_t x = begin + (r * kThreads + threadIdx.x) * rejection::kLaneWidth;
    Load4<D>(row_ptr, x, end, vector_ok, v[r]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (x + i >= end) continue;
      bad = bad || !rejection::ValueIsValid(in.kind, v[r][i]);
      const MaxArg o{v[r][i], x + i};
      if (MaxBeats(o, m)) m = o;
    }
  }
  bad = __syncthreads_or(bad);
  float partial = 0.0f;  // the lane's sum, in float (rejection_core.h's fixed order)
  ChunkStats stats{0.0f, bad ? -1 : begin, 0.0};
  if constexpr (kMode == RowPassMode::kNormalize) {
    m = BlockMaxArg(m, max_shared);
    stats.max = m.value;
    if (!bad) stats.argmax = m.index;
    if (!greedy) {
      const float scale = rejection::LogitScale(inv_t);
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int32_t x = begin + (r * kThreads + threadIdx.x) * rejection::kLaneWidth;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (x + i < end) partial = detmath::Add(partial, rejection::ScaledLogitWeight(v[r][i], m.value, scale));
        }
      }
    }
  } else {
    // The row's mass: p, or ExpDet(v) for log-probabilities (RowMassOf).
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const int32_t x = begin + (r * kThreads + threadIdx.x) * rejection::kLaneWidth;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (x + i < end) partial = detmath::Add(partial, rejection::RowMassOf(in.kind, v[r][i]));
      }
    }
  }
  if (kMode == RowPassMode::kCheck || !greedy) {
    stats.sum = BlockFixedOrderSum(static_cast<double>(partial), sum_shared);
  }
  return stats;
}

// Row statistics of one row's temperature (the row's sequence). Every lane
// of the calling warp asks for the same slot.
__device__ __forceinline__ float RowTemperature(const RowPassArgs& a, int64_t slot) {
  const bool is_draft = SlotIsDraft(a, slot);
  const int64_t row = is_draft ? slot - a.num_target_rows : slot;
  return a.in.sequences[SequenceOfRowWarp(a.in.draft_offsets, a.in.num_sequences, row, is_draft ? 0 : 1)].temperature;
}

// The normalizer, one block per (row, chunk) (the launcher sends a one-chunk
// check pass to RowCheckKernel). A block's life is a chain of latencies (its
// row's address, the chunk's loads, two block reductions), so it carries no
// more: the chunk's values are requested before the row's sequence is looked
// up (the full-chunk case needs no sequence to load), and the chunks are
// combined by CombineRowsKernel, not by a last-block ticket (its fence and
// atomic round trips held every block ~1.5 us longer). Only warp 0 looks the
// sequence and its temperature up; the other warps wait for its 1/T at a
// barrier, as they waited for their own lookups' round trips, instead of
// issuing the same ~146 warp instructions (a 16-value chunk took 484) in a
// pass that is issue-bound: H200, bf16 B=8 41.1-41.3 -> 39.7-39.8 us, fp16
// 41.7-41.9 -> 39.7-40.0, fp32 B=8 44.0-44.2 -> 43.6-43.7, B=32 120.0-120.3
// -> 115.7-116.1, B=128 452-454 -> 417-422; fp32 B=1, one partial wave with
// no issue pressure, 0.1-0.4 slower (run 4 of
// bench/sampling/results/2026-11-29-rowpass-barriers). The same lookup by
// warp 0 in RowPassRunKernel, which pays it once per run, gained nothing
// there; fewer barriers in the chunk's reductions (validity folded into
// the maximum's, the sum finished by warp 0 alone) cost 0.5-1.9 us at B=8
// and 7.5-10 at fp32 B=32 and bf16 B=128.
template <SampleDtype D>
__global__ void __launch_bounds__(kThreads, RowPassBlocksPerSm<D>()) RowPassKernel(RowPassArgs a) {
  __shared__ double sum_shared[kThreads];
  __shared__ MaxArg max_shared[kWarps];
  __shared__ float inv_t_shared;
  const RejectionBatchInput& in = a.in;
  // A plain division here: SplitRowBlock measured 0.4-1.2 us slower in this
  // kernel at bf16 B=8 and B=32 (run 1 of
  // bench/sampling/results/2026-11-29-pass-overhead), and a (chunk, row)
  // grid without any division lost too (2026-11-29-one-chunk-grid).
  const int64_t order = blockIdx.x / a.num_chunks;
  const int32_t c = blockIdx.x % a.num_chunks;
  const int64_t slot = SlotOfOrder(a, order);
  const bool is_draft = SlotIsDraft(a, slot);
  const void* row_ptr = SlotRowAddress(a, slot);
  const int32_t begin = c * rejection::kNormalizerChunk;
  const int32_t end = min(in.vocab_size, begin + rejection::kNormalizerChunk);
  const bool full = in.vocab_size % 4 == 0 && end - begin == rejection::kNormalizerChunk;
  PackedQuad<D> raw[kRounds];
  if (full) LoadChunk<D>(row_ptr, begin, raw);
  if (threadIdx.x < 32) {
    const float temperature = RowTemperature(a, slot);
    const bool row_greedy = !(temperature > 0.0f);
    const float row_inv_t = row_greedy ? 0.0f : rejection::InverseTemperature(temperature);
    if (threadIdx.x == 0) {
      // -1 marks a greedy row (1/T >= 0 otherwise, and 0 for T = +inf).
      inv_t_shared = row_greedy ? -1.0f : row_inv_t;
      if (c == 0) a.scratch.row_inv_t[slot] = row_inv_t;
    }
  }
  __syncthreads();
  const bool greedy = inv_t_shared < 0.0f;
  const float inv_t = greedy ? 0.0f : inv_t_shared;
  const ChunkStats stats = (full && !greedy)
                               ? FullChunkStats<D>(raw, begin, inv_t, sum_shared, reinterpret_cast<float*>(max_shared))
                               : GeneralChunkStats<D, RowPassMode::kNormalize>(a, row_ptr, begin, end, greedy, inv_t,
                                                                               sum_shared, max_shared);
  if (threadIdx.x == 0) a.scratch.chunks[slot * a.num_chunks + c] = stats;
  if (a.targets_last && !is_draft && threadIdx.x < kWarps) {
    // FullChunkStats leaves each warp's maximum in max_shared; other chunks
    // record none (NaN).
    a.scratch.warp_max[(slot * a.num_chunks + c) * kWarps + threadIdx.x] =
        (full && !greedy) ? reinterpret_cast<const float*>(max_shared)[threadIdx.x] : __int_as_float(0x7fffffff);
  }
}

// The full-row check (RowPassMode::kCheck) of probability or log-probability
// rows, one block per (row, chunk) like RowPassKernel's: no temperature to
// look up, and whole chunks take FullChunkMass (in RowPassKernel's general
// path the check took 73.4-73.6 us at B=8 fp32 probabilities, 36.7-36.9
// here; log-probabilities 96.8-96.9 and 60.0-60.3; H200,
// bench/sampling/results/2026-11-29-full-row-check). A kernel of its own so
// that the normalizer's registers stay as they were (inside RowPassKernel
// the mass path made the bf16 pass spill 20 bytes).
template <SampleDtype D>
__global__ void __launch_bounds__(kThreads, RowPassBlocksPerSm<D>()) RowCheckKernel(RowPassArgs a) {
  __shared__ double sum_shared[kThreads];
  __shared__ MaxArg max_shared[kWarps];
  const RejectionBatchInput& in = a.in;
  int64_t slot;
  int32_t c;
  SplitRowBlock(a, slot, c);
  const void* row_ptr = SlotRowAddress(a, slot);
  const int32_t begin = c * rejection::kNormalizerChunk;
  const int32_t end = min(in.vocab_size, begin + rejection::kNormalizerChunk);
  ChunkStats stats;
  if (in.vocab_size % 4 == 0 && end - begin == rejection::kNormalizerChunk) {
    PackedQuad<D> raw[kRounds];
    LoadChunk<D>(row_ptr, begin, raw);
    stats = FullChunkMass<D>(raw, begin, in.kind, sum_shared);
  } else {
    stats = GeneralChunkStats<D, RowPassMode::kCheck>(a, row_ptr, begin, end, /*greedy=*/false, /*inv_t=*/0.0f,
                                                      sum_shared, max_shared);
  }
  if (threadIdx.x == 0) a.scratch.chunks[slot * a.num_chunks + c] = stats;
}

// A whole chunk's L2 lines (LoadChunk's addresses): requested while the
// block still works on the chunk before, so that chunk's reductions hide
// their DRAM latency. On sm_90 one bulk prefetch of the chunk's contiguous
// bytes with LoadChunk's evict-first policy (a plain prefetch brings the
// lines in at normal priority, which LoadChunk's hits do not lower: bf16
// B=32 120.6 -> 116.9 us, B=128 407.8 -> 396.8, run 2 of
// bench/sampling/results/2026-11-27-evict-first); elsewhere one prefetch a
// thread and line.
template <SampleDtype D>
__device__ __forceinline__ void PrefetchChunk(const void* row_ptr, int32_t begin) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    // The bulk copy wants 16-byte bounds; 16-bit rows may start 8 bytes off
    // one, and then the chunk's first and last 8 bytes are left to the loads.
    const auto start = reinterpret_cast<uintptr_t>(row_ptr) + static_cast<uintptr_t>(begin) * SampleDtypeBytes(D);
    const uintptr_t end = start + static_cast<uintptr_t>(rejection::kNormalizerChunk) * SampleDtypeBytes(D);
    const uintptr_t first = (start + 15) & ~uintptr_t{15};
    const uintptr_t last = end & ~uintptr_t{15};
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(first),
                 "r"(static_cast<unsigned>(last - first)), "l"(EvictFirstPolicy())
                 : "memory");
  }
#else
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int32_t x = begin + (r * kThreads + threadIdx.x) * rejection::kLaneWidth;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(row_ptr) + int64_t{x} * SampleDtypeBytes(D)));
  }
#endif
}

// RowPassKernel for large batches: one block per run of chunks_per_block
// consecutive chunks of one row, so the block's prologue (its row's address,
// the row's sequence and temperature: about 146 of a 16-value chunk's 484
// warp instructions) is paid once per run; each chunk's lines are requested
// into L2 before the chunk ahead of it is reduced (the first chunk's before
// the sequence is looked up). The loop's state costs registers: 5 blocks per
// SM for fp32 rows, 6 for 16-bit ones (RowPassRunBlocksPerSm). 16-bit rows
// reduce two whole chunks at a time (FullChunkPairStats: H200, bf16 B=128
// 357 -> 348 us, B=64 191 -> 187; bench/sampling/results/2026-11-29-chunk-pairs).
// The same statistics, bit for bit, as RowPassKernel's.
template <SampleDtype D>
__global__ void __launch_bounds__(kThreads, RowPassRunBlocksPerSm<D>()) RowPassRunKernel(RowPassArgs a) {
  __shared__ double sum_shared[2 * kThreads];
  __shared__ MaxArg max_shared[kWarps];
  __shared__ __align__(16) uint32_t pair_max_shared[kWarps];
  const RejectionBatchInput& in = a.in;
  int64_t order;
  int32_t block_in_row;
  SplitRowBlock(a, order, block_in_row);
  const int64_t slot = SlotOfOrder(a, order);
  const int32_t c_first = block_in_row * a.chunks_per_block;
  const int32_t c_end = min(a.num_chunks, c_first + a.chunks_per_block);
  const bool is_draft = SlotIsDraft(a, slot);
  const void* row_ptr = SlotRowAddress(a, slot);
  // Chunks [0, full_chunks) are whole and vector-aligned: the normalizer's
  // fast path (a check pass takes none). One comparison a chunk where the
  // loop tested the chunk's bounds again for it and for its successor.
  const int32_t full_chunks = (a.mode == RowPassMode::kNormalize && in.vocab_size % 4 == 0)
                                  ? in.vocab_size / rejection::kNormalizerChunk
                                  : 0;
  const auto is_full = [&](int32_t c) { return c < full_chunks; };
  if (is_full(c_first)) PrefetchChunk<D>(row_ptr, c_first * rejection::kNormalizerChunk);
  const float temperature = RowTemperature(a, slot);
  const bool greedy = !(temperature > 0.0f);
  const float inv_t = greedy ? 0.0f : rejection::InverseTemperature(temperature);
  if (c_first == 0 && threadIdx.x == 0) a.scratch.row_inv_t[slot] = inv_t;
  for (int32_t c = c_first; c < c_end; ++c) {
    if constexpr (D != SampleDtype::kFloat32) {
      if (!greedy && c + 1 < c_end && is_full(c + 1)) {  // chunks c and c + 1 whole
        const int32_t begin = c * rejection::kNormalizerChunk;
        PackedQuad<D> raw0[kRounds], raw1[kRounds];
        LoadChunk<D>(row_ptr, begin, raw0);
        LoadChunk<D>(row_ptr, begin + rejection::kNormalizerChunk, raw1);
        if (c + 2 < c_end && is_full(c + 2)) PrefetchChunk<D>(row_ptr, begin + 2 * rejection::kNormalizerChunk);
        if (c + 3 < c_end && is_full(c + 3)) PrefetchChunk<D>(row_ptr, begin + 3 * rejection::kNormalizerChunk);
        ChunkStats s0, s1;
        FullChunkPairStats<D>(raw0, raw1, begin, inv_t, sum_shared, pair_max_shared, s0, s1);
        if (threadIdx.x == 0) {
          a.scratch.chunks[slot * a.num_chunks + c] = s0;
          a.scratch.chunks[slot * a.num_chunks + c + 1] = s1;
        }
        if (a.targets_last && !is_draft) {
          if (threadIdx.x < 2 * kWarps) {
            a.scratch.warp_max[(slot * a.num_chunks + c) * kWarps + threadIdx.x] =
                PairWarpMax<D>(pair_max_shared, threadIdx.x / kWarps, threadIdx.x % kWarps);
          }
          __syncthreads();  // read before the next chunks' maxima are written
        }
        ++c;
        continue;
      }
    }
    const int32_t begin = c * rejection::kNormalizerChunk;
    const int32_t end = min(in.vocab_size, begin + rejection::kNormalizerChunk);
    const bool full = is_full(c);
    PackedQuad<D> raw[kRounds];
    if (full) LoadChunk<D>(row_ptr, begin, raw);
    if (c + 1 < c_end && is_full(c + 1)) PrefetchChunk<D>(row_ptr, begin + rejection::kNormalizerChunk);
    ChunkStats stats;
    if (full && !greedy) {
      stats = FullChunkStats<D>(raw, begin, inv_t, sum_shared, reinterpret_cast<float*>(max_shared));
    } else if (a.mode == RowPassMode::kNormalize) {
      stats = GeneralChunkStats<D, RowPassMode::kNormalize>(a, row_ptr, begin, end, greedy, inv_t, sum_shared,
                                                            max_shared);
    } else {
      stats = GeneralChunkStats<D, RowPassMode::kCheck>(a, row_ptr, begin, end, greedy, inv_t, sum_shared, max_shared);
    }
    if (threadIdx.x == 0) a.scratch.chunks[slot * a.num_chunks + c] = stats;
    if (a.targets_last && !is_draft) {
      if (threadIdx.x < kWarps) {
        // FullChunkStats leaves each warp's maximum in max_shared; other
        // chunks record none (NaN).
        a.scratch.warp_max[(slot * a.num_chunks + c) * kWarps + threadIdx.x] =
            (full && !greedy) ? reinterpret_cast<const float*>(max_shared)[threadIdx.x] : __int_as_float(0x7fffffff);
      }
      __syncthreads();  // read before the next chunk's maxima are written
    }
  }
}

// Combines each row's chunks (rejection::CombineChunks' bits), one warp per
// row: the maximum with the lowest chunk on ties (its argmax carried along),
// then the chunk sums rescaled in parallel and added in chunk order by lane
// 0. Each chunk's 16 bytes come in one load, issued before the temperature's
// lookups, so a row's statistics cost one round trip to L2 (they took three:
// the maxima, the sums, then the best chunk's argmax). Launched as a
// programmatic dependent of the row pass (sm_90): it waits for that grid's
// completion and memory flush.
constexpr int kCombineThreads = 128;
constexpr int kCombineChunksPerLane = kMaxChunks / 32;
static_assert(kMaxChunks % 32 == 0, "a lane's chunks lane, lane + 32, ... must cover every chunk");

__device__ __forceinline__ ChunkStats LoadChunkStats(const ChunkStats* p) {
  static_assert(sizeof(ChunkStats) == 16 && alignof(ChunkStats) == 8);
  const int4 v = __ldcg(reinterpret_cast<const int4*>(p));  // the scratch carve aligns chunks to 256 bytes
  return ChunkStats{__int_as_float(v.x), v.y, __hiloint2double(v.w, v.z)};
}

__global__ void __launch_bounds__(kCombineThreads) CombineRowsKernel(RowPassArgs a) {
  __shared__ double scaled_sums[kCombineThreads / 32][kMaxChunks];
  race_result::WaitForPrimaryGrid();
  race_result::AllowDependentLaunch();
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * (kCombineThreads / 32) + warp;
  if (slot >= a.num_target_rows + a.num_draft_rows) return;
  const ChunkStats* chunks = a.scratch.chunks + slot * a.num_chunks;
  ChunkStats mine[kCombineChunksPerLane];  // chunks lane, lane + 32, ...
#pragma unroll
  for (int j = 0; j < kCombineChunksPerLane; ++j) {
    if (lane + 32 * j < a.num_chunks) mine[j] = LoadChunkStats(&chunks[lane + 32 * j]);
  }
  // The pass's 1/T, loaded with the chunks: looking the temperature up here
  // (the offsets search, then the sequence's parameters) put two dependent
  // round trips on the chain (fp32 B=8 -0.4 to -0.8 us, B=1 -0.4; run 2 of
  // bench/sampling/results/2026-11-27-evict-first). The full-row check
  // (RowCheckKernel) writes no 1/T, and its combine reads none.
  const bool normalize = a.mode == RowPassMode::kNormalize;
  const float inv_t = normalize ? __ldcg(&a.scratch.row_inv_t[slot]) : 0.0f;
  MaxArg best{0.0f, -1};
  int32_t best_argmax = 0;
  bool bad = false;
#pragma unroll
  for (int j = 0; j < kCombineChunksPerLane; ++j) {
    if (lane + 32 * j >= a.num_chunks) break;
    bad = bad || mine[j].argmax < 0;
    const MaxArg o{mine[j].max, lane + 32 * j};
    if (MaxBeats(o, best)) {
      best = o;
      best_argmax = mine[j].argmax;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxArg o{__shfl_xor_sync(kFullMask, best.value, offset), __shfl_xor_sync(kFullMask, best.index, offset)};
    const int32_t o_argmax = __shfl_xor_sync(kFullMask, best_argmax, offset);
    if (MaxBeats(o, best)) {
      best = o;
      best_argmax = o_argmax;
    }
  }
  bad = __any_sync(kFullMask, bad);
  DeviceRowNorm out{};
  if (bad) out.flags |= kRowBadElement;
  if (!normalize || !bad) {
    // What lane 0 adds in chunk order: rescaled sums (the normalizer) or
    // plain ones (the row check's mass).
#pragma unroll
    for (int j = 0; j < kCombineChunksPerLane; ++j) {
      if (lane + 32 * j >= a.num_chunks) break;
      scaled_sums[warp][lane + 32 * j] =
          normalize ? detmath::MulD(mine[j].sum,
                                    static_cast<double>(rejection::LogitWeight(mine[j].max, best.value, inv_t)))
                    : mine[j].sum;
    }
    __syncwarp();
    if (lane == 0) {
      double z = 0.0;
      for (int32_t i = 0; i < a.num_chunks; ++i) z = detmath::AddD(z, scaled_sums[warp][i]);
      if (normalize) {
        out.norm.max = best.value;
        out.norm.argmax = best_argmax;
        out.norm.sum = static_cast<float>(z);
        out.norm.threshold = rejection::NegativeInfinity();
      } else if (a.in.kind != SampleValueKind::kLogits && !(z > 0.0 && z <= 1.7976931348623157e308)) {
        out.flags |= kRowBadSum;
      }
    }
  }
  if (lane == 0) a.scratch.norms[slot] = out;
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_ROW_PASS_CUH_
