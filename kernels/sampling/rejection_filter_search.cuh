// Fragment of kernels/sampling/rejection_sample.cu: the filter's threshold
// searches (direct over few candidates, radix over the whole row), its kept
// mass and FilterKernel.
// Included once, inside that file's anonymous namespace, after rejection_filter.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_SEARCH_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_SEARCH_CUH_

// ------------------------------------------- the filter's direct searches --
// For a few hundred elements a rank counted against every other one is
// shorter than the digit rounds, whose barriers and serial warp-0 choices
// cost ~1.5 us each (seven of them for top-k 50 + top-p 0.9 on the H100).

// Top-k over the n <= kFilterDirect candidates: the k-th largest key (ties
// counted), i.e. the largest key with at least k keys at or above it --
// what the digit rounds find. Every element at or above it is a candidate.
__device__ __noinline__ uint32_t DirectTopK(FilterShared& sh, uint32_t n, uint32_t k) {
  const int t = threadIdx.x;
  if (t == 0) sh.prefix = 0;
  __syncthreads();
  if (t < static_cast<int>(n)) {
    const uint32_t key = sh.cand_key[t];
    uint32_t at_or_above = 0;
#pragma unroll 8
    for (uint32_t j = 0; j < n; ++j) at_or_above += sh.cand_key[j] >= key ? 1u : 0u;
    if (at_or_above >= k) atomicMax(&sh.prefix, key);
  }
  __syncthreads();
  return sh.prefix;
}

// Copies the candidates at or above `kept_from` into sh.direct (key, top-p
// units, index, weight) when there are at most kFilterDirect of them.
// Returns whether they fit; sh.direct_count is their number either way.
__device__ __noinline__ bool CollectDirectSet(FilterShared& sh, uint32_t n, uint32_t kept_from) {
  const int t = threadIdx.x;
  if (t == 0) sh.direct_count = 0;
  __syncthreads();
  for (uint32_t i = t; i < n; i += kFilterThreads) {
    const uint32_t key = sh.cand_key[i];
    if (key >= kept_from) {
      const uint32_t at = atomicAdd(&sh.direct_count, 1u);
      if (at < kFilterDirect) {
        sh.direct.key[at] = key;
        sh.direct.units[at] = rejection::TopPMassUnits(sh.cand_weight[i]);
        sh.direct.index[at] = sh.cand_index[i];
        sh.direct.weight[at] = sh.cand_weight[i];
      }
    }
  }
  __syncthreads();
  return sh.direct_count <= kFilterDirect;
}

// Top-p over sh.direct: the smallest key whose set mass strictly above it
// is below the budget (0 if none) -- what the digit rounds find. The budget
// is top_p x the set's mass after top-k, else x the row's (sh.row_mass).
__device__ __noinline__ uint32_t DirectTopP(FilterShared& sh, bool after_top_k, float top_p) {
  const int t = threadIdx.x;
  const uint32_t n = sh.direct_count;
  const bool mine = t < static_cast<int>(n);
  TopPUnits total = 0;
  FilterBlockScan<TopPUnits>(mine ? sh.direct.units[t] : TopPUnits{0}, sh.warp_m, total);
  const TopPUnits budget = rejection::TopPBudgetUnits(top_p, after_top_k ? total : sh.row_mass);
  if (t == 0) sh.prefix = ~0u;
  __syncthreads();
  if (mine) {
    const uint32_t key = sh.direct.key[t];
    TopPUnits above = 0;
#pragma unroll 8
    for (uint32_t j = 0; j < n; ++j) above += sh.direct.key[j] > key ? sh.direct.units[j] : TopPUnits{0};
    if (above < budget) atomicMin(&sh.prefix, key);
  }
  __syncthreads();
  return sh.prefix == ~0u ? 0u : sh.prefix;
}

// The pairwise fold of a chunk's 256 lane sums s[t] += s[t + stride],
// stride 128, 64, 32 in registers (lane l holds chunk lanes l + 32 j), then
// 16 .. 1 across the warp (BlockFixedOrderSum's order). Lane 0 gets the sum.
__device__ __forceinline__ double FoldChunkLanes(double (&lane_sums)[8]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) lane_sums[j] = detmath::AddD(lane_sums[j], lane_sums[j + 4]);
#pragma unroll
  for (int j = 0; j < 2; ++j) lane_sums[j] = detmath::AddD(lane_sums[j], lane_sums[j + 2]);
  double w = detmath::AddD(lane_sums[0], lane_sums[1]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) w = detmath::AddD(w, __shfl_down_sync(kFullMask, w, offset));
  return w;
}

// Step 4 from shared memory: the kept elements (sh.direct's keys >= the
// threshold) sorted by token, then each chunk's lane sums added in token
// order -- the order in which a lane of the fixed chunk order meets them --
// and folded as the pass over the row does. Groups without a kept element
// are +0 there and here. Writes sh.chunk_sum[0 .. num_chunks).
__device__ __noinline__ void DirectKeptMass(FilterShared& sh, uint32_t threshold, int32_t num_chunks) {
  const int t = threadIdx.x;
  const uint32_t n = sh.direct_count;
  const bool kept = t < static_cast<int>(n) && sh.direct.key[t] >= threshold;
  int32_t index = 0;
  float weight = 0.0f;
  uint32_t rank = 0;
  if (kept) {
    index = sh.direct.index[t];
    weight = sh.direct.weight[t];
#pragma unroll 8
    for (uint32_t j = 0; j < n; ++j) {
      rank += (sh.direct.key[j] >= threshold && sh.direct.index[j] < index) ? 1u : 0u;
    }
  }
  const uint32_t m = static_cast<uint32_t>(__syncthreads_count(kept));
  // The candidates' arrays are free now: the kept elements in token order.
  if (kept) {
    sh.cand_index[rank] = index;
    sh.cand_weight[rank] = weight;
  }
  __syncthreads();
  const int warp = t / 32, lane = t % 32;
  for (int32_t c = warp; c < num_chunks; c += kFilterWarps) {
    const int32_t begin = c * rejection::kNormalizerChunk;
    // The chunk's run [lo, hi) of the sorted kept elements: counts of the
    // elements before it and before its end, lane-parallel.
    uint32_t before = 0, before_end = 0;
    for (uint32_t e = lane; e < m; e += 32) {
      const int32_t x = sh.cand_index[e];
      before += x < begin ? 1u : 0u;
      before_end += x < begin + rejection::kNormalizerChunk ? 1u : 0u;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      before += __shfl_xor_sync(kFullMask, before, offset);
      before_end += __shfl_xor_sync(kFullMask, before_end, offset);
    }
    const uint32_t lo = before, hi = before_end;
    if (lo == hi) {
      if (lane == 0) sh.chunk_sum[c] = 0.0;  // every lane sum +0, as over the row
      continue;
    }
    float partial[8] = {};
    for (uint32_t e = lo; e < hi; ++e) {
      const int32_t chunk_lane = (sh.cand_index[e] - begin) / rejection::kLaneWidth % kThreads;
      if (chunk_lane % 32 == lane) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (chunk_lane / 32 == j) partial[j] = detmath::Add(partial[j], sh.cand_weight[e]);
        }
      }
    }
    double lane_sums[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) lane_sums[j] = static_cast<double>(partial[j]);
    const double w = FoldChunkLanes(lane_sums);
    if (lane == 0) sh.chunk_sum[c] = w;
  }
}

// The whole-row search, for rows whose candidates do not fit in shared
// memory (large top-k, a wide top-p nucleus): 8-bit digit rounds, each a
// pass over the row in which every slice of the row's cluster counts its
// share (and, for top-p, sums its mass in kFilterMassCopies copies, one per
// group of warps: a single 64-bit counter per digit serialized the many
// elements of the few hot digits), merged through distributed shared memory
// before warp 0 picks the digit as the candidates' rounds do. Returns the
// threshold key. All slices call it; `slice` is this block's share.
constexpr int kFilterMassCopies = 8;

template <SampleDtype D>
__device__ __noinline__ uint32_t FilterThresholdSliced(FilterShared& sh, const void* row_ptr, int32_t v,
                                                       QuadSlice slice, int32_t slices, int32_t top_k, float top_p,
                                                       float row_max, float scale) {
  static_assert(sizeof(TopPUnits) * kFilterMassCopies * 256 <= sizeof(uint32_t) * kFilterCandidates * 2);
  static_assert(offsetof(FilterShared, cand_weight) ==
                offsetof(FilterShared, cand_key) + sizeof(uint32_t) * kFilterCandidates);
  static_assert(offsetof(FilterShared, cand_index) % alignof(TopPUnits) == 0);
  static_assert(sizeof(uint32_t) * 256 + sizeof(TopPUnits) * 256 <= sizeof(int32_t) * kFilterCandidates);
  const int t = threadIdx.x;
  // The candidates' arrays are unused on this path: the mass copies take
  // cand_key and cand_weight, this slice's digit counts and masses (which
  // the other slices read) cand_index.
  auto* mass_copies = reinterpret_cast<TopPUnits(*)[256]>(sh.cand_key);
  uint32_t* share_count = reinterpret_cast<uint32_t*>(sh.cand_index);
  TopPUnits* share_mass = reinterpret_cast<TopPUnits*>(sh.cand_index + 256);
  const auto round = [&](bool by_mass, uint32_t kept_from, uint32_t prefix, uint32_t mask, int shift,
                         bool first_of_top_p) {
    // Every block has read the previous round's shares.
    FilterSlicesSync(slices);
    for (int d = t; d < 256; d += kFilterThreads) {
      share_count[d] = 0;
      if (by_mass) {
#pragma unroll
        for (int c = 0; c < kFilterMassCopies; ++c) mass_copies[c][d] = 0;
      }
    }
    __syncthreads();
    TopPUnits* my_mass = mass_copies[(t / 32) % kFilterMassCopies];
    ForEachSliceValue<D>(row_ptr, v, slice, [&](int32_t, float z) {
      const uint32_t key = OrderedKey(z);
      if (key >= kept_from && (key & mask) == prefix) {
        const uint32_t d = (key >> shift) & 255u;
        atomicAdd(&share_count[d], 1u);
        if (by_mass) {
          atomicAdd(&my_mass[d], TopPUnits{rejection::TopPMassUnits(rejection::ScaledLogitWeight(z, row_max, scale))});
        }
      }
    });
    __syncthreads();
    for (int d = t; d < 256 && by_mass; d += kFilterThreads) {
      TopPUnits m = 0;
#pragma unroll
      for (int c = 0; c < kFilterMassCopies; ++c) m += mass_copies[c][d];
      share_mass[d] = m;
    }
    // Every slice's share is complete.
    FilterSlicesSync(slices);
    for (int d = t; d < 256; d += kFilterThreads) {
      uint32_t count = 0;
      TopPUnits mass = 0;
      for (int32_t r = 0; r < slices; ++r) {
        count += FilterSliceShared(share_count, slices, r)[d];
        if (by_mass) mass += FilterSliceShared(share_mass, slices, r)[d];
      }
      sh.digit_count[d] = count;
      sh.digit_mass[d] = by_mass ? mass : TopPUnits{0};
    }
    __syncthreads();
    // The first top-p round's budget: the mass at or above kept_from, whole.
    if (t < 32) FilterPickAndAdvance(sh, by_mass, first_of_top_p, top_p, prefix, shift);
    __syncthreads();
    return sh.prefix;
  };
  uint32_t kept_from = 0;
  if (top_k > 0 && top_k < v) {
    if (t == 0) sh.remaining = static_cast<uint32_t>(top_k);
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      prefix = round(false, 0, prefix, mask, shift, false);
      mask |= 255u << shift;
    }
    kept_from = prefix;
  }
  uint32_t threshold = kept_from;
  if (top_p < 1.0f) {
    if (t == 0) sh.above = 0;  // published by the round's first barrier
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      prefix = round(true, kept_from, prefix, mask, shift, shift == 24);
      mask |= 255u << shift;
    }
    threshold = prefix;
  }
  // Every block has read the last round's shares before any leaves: a
  // block's shared memory must outlive the other slices' reads of it.
  FilterSlicesSync(slices);
  return threshold;
}

// Step 4 and the row's normalizer: the kept mass in the fixed chunk order
// from the row (mass_from_row: the groups sh.group_bits marks) or from
// DirectKeptMass's chunk sums, then thread 0 writes the threshold and sum.
//
// With `slices` > 1 the row's slices share the pass over the row (slice r
// takes chunks r * 16 + w, ... ): they read the first slice's group bits
// and leave their chunk sums in its shared memory; only the first writes.
template <SampleDtype D>
__device__ __forceinline__ void FinishRow(FilterShared& sh, const void* row_ptr, int32_t v, uint32_t threshold,
                                          bool mass_from_row, float row_max, float scale, DeviceRowNorm* norm,
                                          int32_t slices = 1, int32_t rank = 0) {
  const int t = threadIdx.x;
  const uint32_t* group_bits = FilterSliceShared(sh.group_bits, slices, 0);
  double* chunk_sum = FilterSliceShared(sh.chunk_sum, slices, 0);
  const float threshold_value = threshold == 0 ? rejection::NegativeInfinity() : KeyToFloat(threshold);
  // 4. The kept mass in the fixed chunk order from the row (unless the
  // kept elements were few: DirectKeptMass): warp w takes chunks w, w + 16,
  // ...; lane l holds the chunk-order lanes l + 32 j, j = 0..7.
  const int warp = t / 32, lane = t % 32;
  const int32_t num_chunks = rejection::NumChunks(v);
  const bool vector_ok = v % 4 == 0;
  for (int32_t c = rank * kFilterWarps + warp; mass_from_row && c < num_chunks; c += slices * kFilterWarps) {
    const int32_t begin = c * rejection::kNormalizerChunk;
    const int32_t end = min(v, begin + rejection::kNormalizerChunk);
    double lane_sums[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int32_t chunk_lane = lane + 32 * j;
      const int32_t group = c * kThreads + chunk_lane;
      const bool any_kept = (group_bits[group / 32] >> (group % 32)) & 1u;
      float partial = 0.0f;
      // A group without a kept element sums to +0 unread. One branch skips
      // its loads and 16 compares: as per-element branches they were ~40% of
      // the filter's time (ncu, bench/sampling/results/2026-11-24-filter).
      if (any_kept) {
        float z[kRounds][4];
#pragma unroll
        for (int r = 0; r < kRounds; ++r) {
          const int32_t x = begin + (r * kThreads + chunk_lane) * rejection::kLaneWidth;
          if (x < end) {
            Load4<D>(row_ptr, x, end, vector_ok, z[r], -kInfinity);
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) z[r][i] = -kInfinity;
          }
        }
#pragma unroll
        for (int r = 0; r < kRounds; ++r) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            // Skipped elements add +0, which changes no partial sum.
            if (z[r][i] >= threshold_value) {
              partial = detmath::Add(partial, rejection::ScaledLogitWeight(z[r][i], row_max, scale));
            }
          }
        }
      }
      lane_sums[j] = static_cast<double>(partial);
    }
    const double w = FoldChunkLanes(lane_sums);
    if (lane == 0) chunk_sum[c] = w;
  }
  // Every chunk's sum is in the first slice's shared memory.
  if (mass_from_row && slices > 1) {
    FilterSlicesSync(slices);
  } else {
    __syncthreads();
  }
  if (rank != 0) return;
  if (t == 0) {
    double z_sum = 0.0;
    for (int32_t c = 0; c < num_chunks; ++c) z_sum = detmath::AddD(z_sum, sh.chunk_sum[c]);
    norm->norm.threshold = threshold_value;
    norm->norm.sum = static_cast<float>(z_sum);
  }
}

// FinishRow for the slices that only share the pass over the row: out of
// line, so that the common path's registers are not spent on a second copy.
template <SampleDtype D>
__device__ __noinline__ void ShareRowPass(FilterShared& sh, const void* row_ptr, int32_t v, uint32_t threshold,
                                          float row_max, float scale, int32_t slices, int32_t rank) {
  FinishRow<D>(sh, row_ptr, v, threshold, true, row_max, scale, nullptr, slices, rank);
}

// Rows whose candidates overflow shared memory: the threshold from digit
// rounds over the row by every slice, then the first slice's block sums the
// kept mass from the row. Out of line, so that the registers it needs are
// not the common path's.
template <SampleDtype D>
__device__ __noinline__ void FilterWholeRow(FilterShared& sh, const void* row_ptr, int32_t v, QuadSlice slice,
                                            int32_t slices, int32_t rank, int32_t top_k, float top_p,
                                            float row_max, float scale, DeviceRowNorm* norm) {
  const uint32_t threshold = FilterThresholdSliced<D>(sh, row_ptr, v, slice, slices, top_k, top_p, row_max, scale);
  if (rank != 0) return;
  for (int i = threadIdx.x; i < kFilterGroupWords; i += kFilterThreads) sh.group_bits[i] = ~0u;
  __syncthreads();
  FinishRow<D>(sh, row_ptr, v, threshold, true, row_max, scale, norm);
}

template <SampleDtype D>
__global__ void __launch_bounds__(kFilterThreads, kFilterBlocksPerSm) FilterKernel(FilterArgs a) {
  __shared__ FilterShared sh;
  const RejectionBatchInput& in = a.in;
  const int32_t slices = a.slices;
  const int64_t row = blockIdx.x / slices;
  const int32_t rank = static_cast<int32_t>(blockIdx.x % slices);
  const int t = threadIdx.x;
  // What needs only the inputs and the row pass (complete before the
  // combine grid let this one start) comes before the wait for the combine
  // grid: the row's sequence and rules, and the bound from its warp maxima.
  const int32_t seq = SequenceOfRowWarp(in.draft_offsets, in.num_sequences, row, 1);
  const SequenceSamplingParams s = in.sequences[seq];
  const bool filtered = rejection::SequenceParamsCode(in.kind, in.method, s) == kRejectionOk &&
                        s.temperature > 0.0f && rejection::IsFiltered(s);
  const int32_t v = in.vocab_size;
  const bool top_k = s.top_k > 0 && s.top_k < v;
  const bool top_p = s.top_p < 1.0f;
  if (t == 0) {
    sh.cut_rank = -1;
    sh.cursor = 0;
    sh.bound_cursor = 0;
    sh.bound_key = 0;
    sh.group_count = 0;
  }
  // Top-k with k at most half the row's warp maxima: the candidates are
  // the elements at or above the k-th largest of those maxima (k distinct
  // elements reach it, so the k-th largest element does too), and only the
  // groups whose maximum reaches it can hold one: about k groups of 512
  // values are read instead of the row, and no histogram. Ties or masked
  // rows that bring more candidates than shared memory holds take the
  // histogram below.
  const int32_t num_maxima = rejection::NumChunks(v) * kWarps;
  bool histogram = !(filtered && top_k && 2 * s.top_k <= num_maxima && num_maxima <= 2 * kFilterThreads);
  // The row's slices share out the groups (a warp's 512 values of the row
  // pass) whose maxima reach the bound, about k of them; every block finds
  // the bound.
  if (!histogram) {
    // bin_count[0, n): the maxima's keys for the bound (a group without a
    // maximum, NaN, counts as nothing); bin_count[n, 2n): for the choice of
    // groups (a group without a maximum is always read).
    // The bound is taken over maxima merged f at a time (f neighbouring
    // warps of a chunk: still one distinct element each) as long as k is at
    // most half of them: each halving quarters the comparisons, which were
    // a serial chain of several microseconds per row at f = 1.
    const float* maxima = a.scratch.warp_max + row * num_maxima;
    int32_t f = 1;
    while (f < kWarps && 2 * s.top_k <= num_maxima / (2 * f)) f *= 2;
    const int32_t n = num_maxima / f;
    uint32_t* const at_or_above = sh.cand_key;  // free until the candidates are gathered
    for (int32_t i = t; i < num_maxima; i += kFilterThreads) {
      const float m = __ldcg(&maxima[i]);
      sh.bin_count[num_maxima + i] = isnan(m) ? ~0u : OrderedKey(m);
    }
    for (int32_t i = t; i < n; i += kFilterThreads) {
      uint32_t key = 0;
      for (int32_t u = 0; u < f; ++u) {
        const float m = __ldcg(&maxima[i * f + u]);
        if (!isnan(m)) key = max(key, OrderedKey(m));
      }
      sh.bin_count[i] = key;
      at_or_above[i] = 0;
    }
    __syncthreads();
    // Each merged maximum's count of those at or above it, split among
    // `parts` threads.
    const int32_t parts = max(1, kFilterThreads / n);
    const int32_t per = (n + parts - 1) / parts;
    for (int32_t w = t; w < n * parts; w += kFilterThreads) {
      const int32_t i = w % n, p = w / n;
      const uint32_t key = sh.bin_count[i];
      uint32_t count = 0;
      const int32_t end = min(n, (p + 1) * per);
#pragma unroll 8
      for (int32_t j = p * per; j < end; ++j) count += sh.bin_count[j] >= key ? 1u : 0u;
      atomicAdd(&at_or_above[i], count);
    }
    __syncthreads();
    for (int32_t i = t; i < n; i += kFilterThreads) {
      if (at_or_above[i] >= static_cast<uint32_t>(s.top_k)) atomicMax(&sh.bound_key, sh.bin_count[i]);
    }
  }
  // A programmatic dependent of the combine grid (sm_90): every block waits
  // for it before it returns or reads a normalizer, so that the race (this
  // grid's dependent) may rely on both grids having completed.
  race_result::WaitForPrimaryGrid();
  race_result::AllowDependentLaunch();
  // Every early return below depends on the row alone, so the blocks of a
  // cluster leave together and never wait at a cluster barrier for one
  // that left.
  if (!filtered) return;
  DeviceRowNorm* const norm = &a.scratch.norms[row];
  if (norm->flags != 0) return;
  const float inv_t = rejection::InverseTemperature(s.temperature);
  const float scale = rejection::LogitScale(inv_t);
  const float row_max = norm->norm.max;
  const void* row_ptr = SampledRowAddress(in, false, row);
  // Neither rule cuts anything: the kept mass is the whole row's (step 4,
  // the first slice's block alone).
  if (!top_k && !top_p && rank != 0) return;

  uint32_t threshold = 0;
  bool mass_from_row = true;  // step 4 over the row, else from the direct set
  int32_t sharing_slices = 1;  // the blocks waiting to share step 4 over the row
  if (top_k || top_p) {
    int32_t row_slices = slices;  // the blocks that take part in the histogram
    QuadSlice slice = SliceOfRow(v, slices, rank);
    bool candidates = false;
    uint32_t first_prefix = 0, first_mask = 0;
    int first_shift = 24;
    uint32_t count_above_cut = 0;
    if (!histogram) {
      // Every thread's maximum of the bound is in, and (cluster-wide) the
      // first slice's cursor is 0.
      FilterSlicesSync(slices);
      const uint32_t bound_key = sh.bound_key;
      const float bound = bound_key == 0 ? -kInfinity : KeyToFloat(bound_key);
      // The groups whose maximum reaches the bound (in bin_count, whose
      // merged maxima are spent; every slice lists them alike), then their
      // quads round by round: item i is round i % 4 of listed group i / 4,
      // and a warp takes four items at a time, so that every warp of every
      // slice has loads in flight (one block alone was latency-bound: ~8 us
      // for ~75 groups at B=8). Group g is warp g % 8 of chunk g / 8 in the
      // row pass: lane l's quad of round r lies at chunk offset
      // (r * 256 + 32 * (g % 8) + l) * 4. Candidates go to the first
      // slice's shared memory.
      // In group order (a ballot per warp of 32 groups), so that every slice
      // lists the same groups at the same places.
      for (int32_t g0 = 0; g0 < num_maxima; g0 += kFilterThreads) {
        const int32_t g = g0 + t;
        const bool listed = g < num_maxima && sh.bin_count[num_maxima + g] >= bound_key;
        const unsigned ballot = __ballot_sync(kFullMask, listed);
        if (t % 32 == 0) sh.warp_u[t / 32] = __popc(ballot);
        __syncthreads();
        uint32_t before = sh.group_count;
        for (int w = 0; w < t / 32; ++w) before += sh.warp_u[w];
        if (listed) sh.bin_count[before + __popc(ballot & ((1u << (t % 32)) - 1u))] = g;
        __syncthreads();
        if (t == kFilterThreads - 1) {
          uint32_t total = sh.group_count;
          for (int w = 0; w < kFilterWarps; ++w) total += sh.warp_u[w];
          sh.group_count = total;
        }
        __syncthreads();
      }
      const int32_t items = static_cast<int32_t>(sh.group_count) * kRounds;
      const int warp = t / 32, lane = t % 32;
      const bool vector_ok = v % 4 == 0;
      constexpr int kItemsInFlight = 4;
      for (int32_t item0 = (rank * kFilterWarps + warp) * kItemsInFlight; item0 < items;
           item0 += slices * kFilterWarps * kItemsInFlight) {
        float z[kItemsInFlight][4];
        int32_t x[kItemsInFlight], end[kItemsInFlight];
#pragma unroll
        for (int u = 0; u < kItemsInFlight; ++u) {
          const int32_t item = item0 + u;
          const int32_t g = item < items ? static_cast<int32_t>(sh.bin_count[item / kRounds]) : 0;
          const int32_t begin = (g / kWarps) * rejection::kNormalizerChunk;
          end[u] = item < items ? min(v, begin + rejection::kNormalizerChunk) : 0;
          x[u] = begin + ((item % kRounds) * kThreads + 32 * (g % kWarps) + lane) * rejection::kLaneWidth;
          if (x[u] < end[u]) {
            Load4<D>(row_ptr, x[u], end[u], vector_ok, z[u], -kInfinity);
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) z[u][i] = -kInfinity;
          }
        }
#pragma unroll
        for (int u = 0; u < kItemsInFlight; ++u) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (x[u] + i < end[u] && z[u][i] >= bound) {
              const uint32_t at = atomicAdd(FilterSliceShared(&sh.bound_cursor, slices, 0), 1u);
              if (at < kFilterCandidates) {
                FilterSliceShared(sh.cand_key, slices, 0)[at] = OrderedKey(z[u][i]);
                FilterSliceShared(sh.cand_weight, slices, 0)[at] =
                    rejection::ScaledLogitWeight(z[u][i], row_max, scale);
                FilterSliceShared(sh.cand_index, slices, 0)[at] = x[u] + i;
              }
            }
          }
        }
      }
      // Every candidate is in the first slice's shared memory.
      FilterSlicesSync(slices);
      const uint32_t found = *FilterSliceShared(&sh.bound_cursor, slices, 0);
      if (rank != 0) return;
      histogram = found > kFilterCandidates;
      if (!histogram) {
        if (t == 0) sh.num_candidates = found;
        candidates = true;
        __syncthreads();
      } else {
        // The other slices have left: this block reads the whole row alone.
        row_slices = 1;
        slice = SliceOfRow(v, 1, 0);
      }
    }
    if (histogram) {
      // 1. The coarse histogram of this block's slice (top-p alone: and the
      // slice's mass in top-p units, for the reference's kept mass).
      for (int b = t; b < kFilterBins; b += kFilterThreads) sh.bin_count[b] = 0;
      __syncthreads();
      const bool row_mass = top_p && !top_k;
      TopPUnits mass = 0;
      // Two loops, so that the common one (top-k) carries no mass test.
      if (row_mass) {
        ForEachSliceValue<D>(row_ptr, v, slice, [&](int32_t, float z) {
          atomicAdd(&sh.bin_count[OrderedKey(z) >> kFilterBinShift], 1u);
          mass += rejection::TopPMassUnits(rejection::ScaledLogitWeight(z, row_max, scale));
        });
        TopPUnits total;
        FilterBlockScan<TopPUnits>(mass, sh.warp_m, total);
        if (t == 0) sh.slice_mass = total;
      } else {
        ForEachSliceValue<D>(row_ptr, v, slice, [&](int32_t, float z) {
          atomicAdd(&sh.bin_count[OrderedKey(z) >> kFilterBinShift], 1u);
        });
      }
      // Every slice's histogram (and mass) is complete, and the first
      // slice's candidate cursor is 0.
      FilterSlicesSync(row_slices);
      if (row_mass && t == 0) {
        TopPUnits total = 0;
        for (int32_t r = 0; r < row_slices; ++r) total += *FilterSliceShared(&sh.slice_mass, row_slices, r);
        sh.row_mass = total;
      }
      // 2. The coarse bin of the decision, from the row's histogram (the
      // slices' summed: every block finds the same bin). Thread t owns ranks
      // kFilterBinsPerThread * t + j (rank 0 = the top bin).
      uint32_t c[kFilterBinsPerThread];
      uint32_t thread_count = 0;
#pragma unroll
      for (int j = 0; j < kFilterBinsPerThread; ++j) {
        const int b = kFilterBins - 1 - (kFilterBinsPerThread * t + j);
        c[j] = 0;
        for (int32_t r = 0; r < row_slices; ++r) c[j] += FilterSliceShared(sh.bin_count, row_slices, r)[b];
        thread_count += c[j];
      }
      uint32_t total_count;
      uint32_t above[kFilterBinsPerThread];
      above[0] = FilterBlockScan<uint32_t>(thread_count, sh.warp_u, total_count);
#pragma unroll
      for (int j = 1; j < kFilterBinsPerThread; ++j) above[j] = above[j - 1] + c[j - 1];
      int rank_cut = -1;
      if (top_k) {
        const uint32_t k = static_cast<uint32_t>(s.top_k);
#pragma unroll
        for (int j = 0; j < kFilterBinsPerThread; ++j) {
          if (c[j] > 0 && above[j] < k) rank_cut = kFilterBinsPerThread * t + j;
        }
      } else {
        // Lower bounds on each bin's mass in top-p units: count x the units
        // of its lowest value (the slack covers the double sums' rounding).
        double m[kFilterBinsPerThread];
        double thread_mass = 0.0;
#pragma unroll
        for (int j = 0; j < kFilterBinsPerThread; ++j) {
          m[j] = 0.0;
          if (c[j] > 0) {
            const int b = kFilterBins - 1 - (kFilterBinsPerThread * t + j);
            const float low = KeyToFloat(static_cast<uint32_t>(b) << kFilterBinShift);
            const float w = detmath::IsFinite(low) ? rejection::ScaledLogitWeight(fminf(low, row_max), row_max, scale)
                                                   : 0.0f;
            m[j] = static_cast<double>(c[j]) * static_cast<double>(rejection::TopPMassUnits(w)) * 0.999;
          }
          thread_mass += m[j];
        }
        double total_mass;
        double mabove = FilterBlockScan<double>(thread_mass, sh.warp_d, total_mass);
        // FilterBlockScan's barriers also publish sh.row_mass.
        const double budget = static_cast<double>(rejection::TopPBudgetUnits(s.top_p, sh.row_mass));
#pragma unroll
        for (int j = 0; j < kFilterBinsPerThread; ++j) {
          if (c[j] > 0 && mabove < budget) rank_cut = kFilterBinsPerThread * t + j;
          mabove += m[j];
        }
      }
      if (rank_cut >= 0) atomicMax(&sh.cut_rank, rank_cut);
      __syncthreads();
      const int cut = sh.cut_rank;  // >= 0: the top non-empty bin always qualifies
      const int cut_j = cut - kFilterBinsPerThread * t;
      if (cut_j >= 0 && cut_j < kFilterBinsPerThread) {
        sh.cut_above = above[cut_j];
        sh.num_candidates = above[cut_j] + c[cut_j];
      }
      __syncthreads();
      const uint32_t cut_bin = static_cast<uint32_t>(kFilterBins - 1 - cut);
      if (cut >= 0 && sh.num_candidates <= kFilterCandidates) {
        // 3. The candidates: every element of bins >= the cut, gathered from
        // every slice into the first slice's shared memory.
        // One test per quad: candidates are rare, a branch per element was
        // most of this pass's instructions. (The first slice's addresses are
        // mapped where a candidate is stored: held across the pass, they
        // cost registers the loads need.)
        ForEachSliceQuad<D>(row_ptr, v, slice, [&](int32_t x0, const float (&z)[4], int n) {
          uint32_t key[4];
          bool any = false;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            key[i] = OrderedKey(z[i]);
            any = any || (i < n && (key[i] >> kFilterBinShift) >= cut_bin);
          }
          if (!any) return;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (i < n && (key[i] >> kFilterBinShift) >= cut_bin) {
              const uint32_t at = atomicAdd(FilterSliceShared(&sh.cursor, row_slices, 0), 1u);
              FilterSliceShared(sh.cand_key, row_slices, 0)[at] = key[i];
              FilterSliceShared(sh.cand_weight, row_slices, 0)[at] = rejection::ScaledLogitWeight(z[i], row_max, scale);
              FilterSliceShared(sh.cand_index, row_slices, 0)[at] = x0 + i;
            }
          }
        });
        candidates = true;
        first_prefix = cut_bin << kFilterBinShift;
        first_mask = 0xffe00000u;
        first_shift = 13;
        count_above_cut = sh.cut_above;
      }
      // Every candidate is in the first slice's shared memory, and no block
      // reads another's bins any more.
      FilterSlicesSync(row_slices);
      if (!candidates) {
        FilterWholeRow<D>(sh, row_ptr, v, slice, row_slices, rank, s.top_k, s.top_p, row_max, scale, norm);
        return;
      }
      if (rank != 0) {
        // The first slice's block searches the candidates; the others wait
        // to share its kept-mass pass over the row, if it takes one (its
        // word arrives in their own shared memory: the first block may have
        // left by the time they read it when there is no pass to share).
        FilterSlicesSync(row_slices);
        if (sh.share_pass != 0) ShareRowPass<D>(sh, row_ptr, v, sh.share_threshold, row_max, scale, row_slices, rank);
        return;
      }
      sharing_slices = row_slices;
    }
    // Every element the thresholds can fall on is a candidate now.
    if (candidates) {
      const uint32_t n = sh.num_candidates;
      uint32_t kept_from = 0;
      if (top_k) {
        const uint32_t k = static_cast<uint32_t>(s.top_k);
        if (n <= kFilterDirect) {
          kept_from = DirectTopK(sh, n, k);
        } else {
          if (t == 0) sh.remaining = k - count_above_cut;
          __syncthreads();
          kept_from = FilterRadixOnCandidates(sh, false, first_prefix, first_mask, first_shift, 0, 0, false, s.top_p);
        }
      }
      threshold = kept_from;
      // The set top-p searches (and the kept elements after it): direct
      // when it is small, digit rounds otherwise.
      const bool direct = CollectDirectSet(sh, n, kept_from);
      if (top_p) {
        if (direct) {
          threshold = DirectTopP(sh, top_k, s.top_p);
        } else {
          if (t == 0) {
            sh.above = 0;
            sh.budget = rejection::TopPBudgetUnits(s.top_p, sh.row_mass);
          }
          __syncthreads();
          threshold = FilterRadixOnCandidates(sh, true, 0, 0, 24, 0, kept_from, top_k, s.top_p);
        }
      }
      // Threshold 0 keeps the whole row: its mass comes from the row.
      mass_from_row = !direct || threshold == 0;
      if (mass_from_row) {
        // Step 4 reads only the (chunk, lane) groups that hold a kept
        // element: every other group's lane sum is 0 without reading it.
        for (int i = t; i < kFilterGroupWords; i += kFilterThreads) sh.group_bits[i] = threshold == 0 ? ~0u : 0u;
        __syncthreads();
        for (uint32_t i = t; threshold != 0 && i < n; i += kFilterThreads) {
          if (sh.cand_key[i] >= threshold) {
            const int32_t x = sh.cand_index[i];
            const int32_t group = (x / rejection::kNormalizerChunk) * kThreads +
                                  (x % rejection::kNormalizerChunk) / rejection::kLaneWidth % kThreads;
            atomicOr(&sh.group_bits[group / 32], 1u << (group % 32));
          }
        }
      }
    }
    __syncthreads();
    if (sharing_slices > 1) {
      // Thread r tells slice r whether to share the pass, and at which
      // threshold; the group bits stay here, read by the slices that share.
      if (t > 0 && t < sharing_slices) {
        *FilterSliceShared(&sh.share_pass, sharing_slices, t) = mass_from_row ? 1u : 0u;
        *FilterSliceShared(&sh.share_threshold, sharing_slices, t) = threshold;
      }
      FilterSlicesSync(sharing_slices);
      if (!mass_from_row) sharing_slices = 1;  // they have left
    }
    if (!mass_from_row) DirectKeptMass(sh, threshold, rejection::NumChunks(v));
  } else {
    for (int i = t; i < kFilterGroupWords; i += kFilterThreads) sh.group_bits[i] = ~0u;
  }
  __syncthreads();
  FinishRow<D>(sh, row_ptr, v, threshold, mass_from_row, row_max, scale, norm, sharing_slices, 0);
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_FILTER_SEARCH_CUH_
