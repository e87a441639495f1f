// Fragment of kernels/sampling/rejection_sample.cu: the top-k / top-p filter's
// arguments, cluster slices, shared state and block scan.
// Included once, inside that file's anonymous namespace, after rejection_row_pass.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_CUH_

// ------------------------------------------------------------ filter --
// Top-k then top-p on a logits target row (docs/SAMPLING.md): selection
// over order-preserving keys of z by up to kFilterMaxSlices blocks per row
// (a thread-block cluster on sm_90), the first of which finishes the row.

__device__ __forceinline__ uint32_t OrderedKey(float z) {
  uint32_t bits = detmath::FloatToBits(z);
  if (bits == 0x80000000u) bits = 0;  // -0 sorts with +0, as float comparison does
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float KeyToFloat(uint32_t key) {
  return detmath::BitsToFloat((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

struct FilterArgs {
  RejectionBatchInput in;
  ScratchLayout scratch;
  // Blocks per row: > 1 only as a thread-block cluster (sm_90 code), whose
  // blocks each read a slice of the row and meet in shared memory.
  int32_t slices;
};

// The cluster operations the filter's slices need. The portable PTX of the
// build (compute_75) has no clusters; the launcher gives its kernels one
// slice per row (FilterHasClusters), where these are the block's own.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define SV_FILTER_HAS_CLUSTERS 0
#else
#define SV_FILTER_HAS_CLUSTERS 1
#endif

__device__ __forceinline__ void FilterSlicesSync(int32_t slices) {
#if SV_FILTER_HAS_CLUSTERS
  if (slices > 1) {
    cooperative_groups::this_cluster().sync();
    return;
  }
#endif
  (void)slices;
  __syncthreads();
}

// `p` (this block's shared memory) as it lies in the block of slice `rank`.
template <typename T>
__device__ __forceinline__ T* FilterSliceShared(T* p, int32_t slices, int32_t rank) {
#if SV_FILTER_HAS_CLUSTERS
  if (slices > 1) return cooperative_groups::this_cluster().map_shared_rank(p, static_cast<unsigned>(rank));
#endif
  (void)slices;
  (void)rank;
  return p;
}

// The filter finds its threshold on a shared-memory copy of the few
// elements that can decide it (FlashInfer and vLLM select top-k/top-p
// thresholds by pivot or radix search rather than a sort). Top-k with k at
// most half the row's warp maxima (kept by the row pass) gathers them in
// one step: the elements at or above the k-th largest maximum, read from
// the groups of 512 values whose maximum reaches it (FilterKernel). Otherwise,
// a radix search whose first digit is a histogram over the row and whose
// further digits run on the compacted candidates:
//   1. one pass over the row, each slice its share: a count histogram of
//      the top 11 bits of the order-preserving keys (shared atomics), the
//      slices' summed through distributed shared memory;
//   2. from the histogram alone, the coarse bin b that holds the decision:
//      top-k's k-th largest key, or (top-p without top-k) the lowest bin
//      whose lower bound on the mass above it (count x weight of the bin's
//      lower edge) is still below the budget, top_p x the row's mass (a
//      double sum of the weights taken in the same pass);
//   3. a second pass copies every element of bins >= b (key and weight) to
//      the first slice's shared memory, where the remaining digits of top-k
//      and the top-p search run on at most kFilterCandidates elements (as
//      direct rank-counting searches on at most kFilterDirect); a row with
//      more takes digit rounds over the row (FilterThresholdSliced);
//   4. the kept mass in the fixed chunk order: from shared memory when the
//      kept set is small (DirectKeptMass), else one warp per chunk over the
//      row (8 lanes of the chunk order per thread, the pairwise tree in
//      registers and shuffles): the bits of rejection_core.h's order.
constexpr int kFilterBins = 2048;
constexpr int kFilterBinShift = 21;  // 32 - 11 bits
constexpr int kFilterCandidates = 2048;
constexpr int kFilterWarps = kFilterThreads / 32;
constexpr int kFilterBinsPerThread = kFilterBins / kFilterThreads;
static_assert(kFilterBins % kFilterThreads == 0 && kFilterWarps <= 32);

constexpr int kFilterGroupWords = kMaxChunks * kThreads / 32;  // one bit per (chunk, lane) of the chunk order

// Top-p masses (rejection::TopPMassUnits) as the type the shared-memory
// atomics take.
using TopPUnits = unsigned long long;

// Sets of at most this many elements take the direct searches (every
// element's rank counted against the others) instead of digit rounds, and
// their kept mass is summed from shared memory instead of the row.
constexpr int kFilterDirect = 256;

// The elements of the direct searches: the candidates at or above the top-k
// threshold (all of them for top-p alone).
struct DirectSet {
  uint32_t key[kFilterDirect];
  TopPUnits units[kFilterDirect];
  int32_t index[kFilterDirect];
  float weight[kFilterDirect];
};

struct FilterShared {
  union {
    uint32_t bin_count[kFilterBins];         // steps 1-2
    uint32_t group_bits[kFilterGroupWords];  // step 4 from the row: (chunk, lane) groups holding a kept element
    DirectSet direct;                        // the direct searches and step 4 from shared memory
  };
  uint32_t cand_key[kFilterCandidates];
  float cand_weight[kFilterCandidates];
  int32_t cand_index[kFilterCandidates];
  uint32_t digit_count[256];
  TopPUnits digit_mass[256];
  uint32_t warp_u[kFilterWarps];
  double warp_d[kFilterWarps];
  TopPUnits warp_m[kFilterWarps];
  double chunk_sum[kMaxChunks];
  int32_t cut_rank;
  uint32_t cut_above, num_candidates, cursor, direct_count;
  uint32_t bound_key, bound_cursor, group_count;  // the candidates from the warp maxima
  // The first slice's word to each other slice after its searches (written
  // into theirs): whether they share the kept-mass pass over the row, and
  // at which threshold.
  uint32_t share_pass, share_threshold;
  uint32_t prefix;
  uint32_t remaining;
  TopPUnits above, budget;
  TopPUnits row_mass;    // top-p alone: the row's mass (kept mass before top-p)
  TopPUnits slice_mass;  // top-p alone: this block's slice's share of it
};

// Exclusive prefix sum over the kFilterThreads threads of the filter block (thread
// order), and the total. Uses sh.warp_u / sh.warp_d / sh.warp_m.
template <typename T>
__device__ __forceinline__ T FilterBlockScan(T v, T* warp_totals, T& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T x = v;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const T y = __shfl_up_sync(kFullMask, x, o);
    if (lane >= o) x = x + y;
  }
  T exclusive = __shfl_up_sync(kFullMask, x, 1);
  if (lane == 0) exclusive = T(0);
  if (lane == 31) warp_totals[warp] = x;
  __syncthreads();
  if (warp == 0) {
    T w = lane < kFilterWarps ? warp_totals[lane] : T(0);
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const T y = __shfl_up_sync(kFullMask, w, o);
      if (lane >= o) w = w + y;
    }
    if (lane < kFilterWarps) warp_totals[lane] = w;
  }
  __syncthreads();
  total = warp_totals[kFilterWarps - 1];
  const T base = warp == 0 ? T(0) : warp_totals[warp - 1];
  __syncthreads();
  return base + exclusive;
}

// The quads [begin, end) of a row that one block of the filter reads.
struct QuadSlice {
  int32_t begin, end;
};

// Slice `rank` of `slices` near-equal ones, each a whole number of 32-quad
// runs (512 B of fp32) so that no run is split between two blocks.
__device__ __forceinline__ QuadSlice SliceOfRow(int32_t v, int32_t slices, int32_t rank) {
  const int32_t quads = (v + 3) / 4;
  const int32_t per = ((quads + slices - 1) / slices + 31) / 32 * 32;
  const int32_t begin = min(quads, rank * per);
  return QuadSlice{begin, min(quads, begin + per)};
}

// Calls f(x0, z, n) for every quad of the slice, four quads per thread in
// flight: z holds elements x0 .. x0 + 3, of which the first n are the row's
// (n < 4 only in the last quad when V % 4 != 0; the rest are -inf).
template <SampleDtype D, typename F>
__device__ __forceinline__ void ForEachSliceQuad(const void* row_ptr, int32_t v, QuadSlice slice, F&& f) {
  const bool vector_ok = v % 4 == 0;
  constexpr int kUnroll = 4;
  for (int32_t q0 = slice.begin + static_cast<int32_t>(threadIdx.x); q0 < slice.end;
       q0 += kFilterThreads * kUnroll) {
    float z[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t q = q0 + u * kFilterThreads;
      if (q < slice.end) Load4<D>(row_ptr, 4 * q, v, vector_ok, z[u], -kInfinity);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t q = q0 + u * kFilterThreads;
      if (q < slice.end) f(4 * q, z[u], min(4, v - 4 * q));
    }
  }
}

// Calls f(x, z) for every element of the slice, in ForEachSliceQuad's order.
// Whole quads take no per-element bounds test: as a branch per element it
// was a good part of the filter passes' instructions.
template <SampleDtype D, typename F>
__device__ __forceinline__ void ForEachSliceValue(const void* row_ptr, int32_t v, QuadSlice slice, F&& f) {
  ForEachSliceQuad<D>(row_ptr, v, slice, [&](int32_t x0, const float (&z)[4], int n) {
    if (n == 4) {
#pragma unroll
      for (int i = 0; i < 4; ++i) f(x0 + i, z[i]);
    } else {
      for (int i = 0; i < n; ++i) f(x0 + i, z[i]);
    }
  });
}

// One 8-bit digit of a radix search, chosen by warp 0 from sh.digit_count
// (and sh.digit_mass): top-k (by_mass false) the digit holding the
// `remaining`-th largest; top-p the lowest non-empty digit whose mass above
// it, plus `above`, is below the budget (0 if none). Lane l owns digits
// 255 - 8l down to 248 - 8l. Returns the digit; sets the count or mass above it.
__device__ int FilterPickDigit(FilterShared& sh, bool by_mass, uint32_t remaining, uint32_t& count_above,
                               TopPUnits& mass_above) {
  const int lane = threadIdx.x % 32;
  uint32_t lane_count = 0;
  TopPUnits lane_mass = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = 255 - 8 * lane - i;
    lane_count += sh.digit_count[d];
    if (by_mass) lane_mass += sh.digit_mass[d];
  }
  uint32_t c = lane_count;
  TopPUnits m = lane_mass;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const uint32_t yc = __shfl_up_sync(kFullMask, c, o);
    const TopPUnits ym = __shfl_up_sync(kFullMask, m, o);
    if (lane >= o) {
      c += yc;
      m += ym;
    }
  }
  uint32_t c_above = c - lane_count;
  TopPUnits m_above = __shfl_up_sync(kFullMask, m, 1);
  if (lane == 0) m_above = 0;
  int chosen = -1;
  uint32_t chosen_count = 0;
  TopPUnits chosen_mass = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d = 255 - 8 * lane - i;
    const uint32_t n = sh.digit_count[d];
    const bool ok = n > 0 && (by_mass ? (sh.above + m_above < sh.budget) : (c_above < remaining));
    if (ok) {
      chosen = d;
      chosen_count = c_above;
      chosen_mass = m_above;
    }
    c_above += n;
    if (by_mass) m_above += sh.digit_mass[d];
  }
  // The lowest digit chosen by any lane: the highest lane with a choice.
  const unsigned lanes = __ballot_sync(kFullMask, chosen >= 0);
  if (lanes == 0) {
    count_above = 0;
    mass_above = 0;
    return 0;
  }
  const int src = 31 - __clz(lanes);
  count_above = __shfl_sync(kFullMask, chosen_count, src);
  mass_above = __shfl_sync(kFullMask, chosen_mass, src);
  return __shfl_sync(kFullMask, chosen, src);
}

// Warp 0's step of a digit round, on the round's sh.digit_count /
// sh.digit_mass: on the first round of a top-p search whose budget is the
// searched set's mass (top-k then top-p), that budget; then the digit
// (FilterPickDigit), the count or mass above it taken off sh.remaining or
// added to sh.above, and sh.prefix = prefix | digit << shift. The caller
// synchronizes the block after it.
__device__ void FilterPickAndAdvance(FilterShared& sh, bool by_mass, bool budget_from_digits, float top_p,
                                     uint32_t prefix, int shift) {
  const int t = threadIdx.x;
  if (budget_from_digits) {
    TopPUnits m = 0;
    for (int d = t; d < 256; d += 32) m += sh.digit_mass[d];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) m += __shfl_xor_sync(kFullMask, m, o);
    if (t == 0) sh.budget = rejection::TopPBudgetUnits(top_p, m);
    __syncwarp();
  }
  uint32_t count_above;
  TopPUnits mass_above;
  const int d = FilterPickDigit(sh, by_mass, sh.remaining, count_above, mass_above);
  // Every lane has read sh.remaining / sh.above / sh.budget before lane 0
  // rewrites them (racecheck: a write-after-read hazard in the warp).
  __syncwarp();
  if (t == 0) {
    if (by_mass) {
      sh.above += mass_above;
    } else {
      sh.remaining -= count_above;
    }
    sh.prefix = prefix | (static_cast<uint32_t>(d) << shift);
  }
}

// The radix search over the candidates in shared memory: keys with
// (key & mask) == prefix, 8-bit digits from `shift` down. Top-k: returns the
// `remaining`-th largest key. Top-p (by_mass): the threshold key, with
// sh.above / sh.budget as set by the caller; candidates below `kept_from`
// take no part.
__device__ uint32_t FilterRadixOnCandidates(FilterShared& sh, bool by_mass, uint32_t prefix, uint32_t mask,
                                            int first_shift, uint32_t remaining, uint32_t kept_from,
                                            bool set_budget_from_mass, float top_p) {
  const int t = threadIdx.x;
  const uint32_t n = sh.num_candidates;
  // Masses go to kRadixMassCopies copies of the digit counters (one per
  // group of warps, in the union's bins, unused here): the candidates crowd
  // into a few digits, and one 64-bit counter per digit serialized them
  // (~35 us for a top-p over 1,000 candidates on the H100).
  constexpr int kRadixMassCopies = 4;
  static_assert(sizeof(TopPUnits) * kRadixMassCopies * 256 <= sizeof(uint32_t) * kFilterBins);
  auto* mass_copies = reinterpret_cast<TopPUnits(*)[256]>(sh.bin_count);
  TopPUnits* my_mass = mass_copies[(t / 32) % kRadixMassCopies];
  // Digits at first_shift, first_shift - 8, ..., then 0 (24, 16, 8, 0 or
  // 13, 5, 0: the last digit's high bits are then already fixed by the mask).
  for (int shift = first_shift;; shift = shift >= 8 ? shift - 8 : 0) {
    for (int d = t; d < 256; d += kFilterThreads) {
      sh.digit_count[d] = 0;
      if (by_mass) {
#pragma unroll
        for (int c = 0; c < kRadixMassCopies; ++c) mass_copies[c][d] = 0;
      }
    }
    __syncthreads();
    for (uint32_t i = t; i < n; i += kFilterThreads) {
      const uint32_t key = sh.cand_key[i];
      if (key >= kept_from && (key & mask) == prefix) {
        const uint32_t d = (key >> shift) & 255u;
        atomicAdd(&sh.digit_count[d], 1u);
        if (by_mass) atomicAdd(&my_mass[d], TopPUnits{rejection::TopPMassUnits(sh.cand_weight[i])});
      }
    }
    __syncthreads();
    for (int d = t; d < 256; d += kFilterThreads) {
      TopPUnits m = 0;
      if (by_mass) {
#pragma unroll
        for (int c = 0; c < kRadixMassCopies; ++c) m += mass_copies[c][d];
      }
      sh.digit_mass[d] = m;
    }
    __syncthreads();
    // Top-k then top-p: the budget is the candidates' kept mass (all kept
    // ones are candidates).
    const bool budget_from_digits = by_mass && set_budget_from_mass && shift == first_shift;
    if (t < 32) FilterPickAndAdvance(sh, by_mass, budget_from_digits, top_p, prefix, shift);
    __syncthreads();
    prefix = sh.prefix;
    mask |= 255u << shift;
    if (shift == 0) break;
  }
  (void)remaining;
  return prefix;
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_CUH_
