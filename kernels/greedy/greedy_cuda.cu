// CUDA greedy verify-and-pack. See greedy_cuda.h for the contract.
//
// Fused path, per block (one tile = up to kFusedMaxTileRows consecutive draft
// rows of the flattened batch, sized by bytes so that a large batch fills the
// GPU in one wave: 32 sequences x 128 rows x 4 KiB spread over 256 blocks
// instead of seed 000's one SM):
//   1. the tile is blockIdx.x when the whole grid is resident, else the next
//      ticket of a counter (tickets follow scheduling order, so every
//      predecessor of a tile is resident: the look-back cannot deadlock);
//   2. the first round of KV loads for the tile's draft rows goes out at once,
//      speculatively (the rows are contiguous; acceptance is not known yet);
//   3. the sequences overlapping the tile come from a two-level parallel
//      search of draft_offsets (one round trip for b < 256, two otherwise);
//   4. verify: warp-ballot scan of each overlapping sequence, all chunks of a
//      draft loaded before the first ballot; or, for small batches (b < 256,
//      <= 1024 draft rows), every block verifies the whole batch with one
//      thread per position and needs no other block's prefix;
//   5. otherwise the tile aggregate is published and the block looks back
//      over its predecessors, 256 per step (Merrill & Garland 2016,
//      "Single-pass Parallel Prefix Scan with Decoupled Look-back"); the
//      status words carry a launch epoch, so nothing is reset between
//      launches and the path stays one launch;
//   6. offsets of the sequences that start in the tile, then the stores of the
//      accepted rows (16-byte vectors on the fast path) and any later rounds.
// Fused tiles of 32-64 KiB in one wave (sm_90, 16-byte vectors) take the
// prefix-first path instead: a verify kernel, then a pack kernel launched as
// its programmatic dependent (see "Prefix-first verify-and-pack" below).
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "absl/strings/str_cat.h"
#include "kernels/common/sm90_code.h"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/greedy/block_copy.cuh"
#include "kernels/greedy/greedy_pdl.cuh"

namespace specverify {
namespace {

using greedy_copy::BlockCopyContiguous;
using greedy_copy::DispatchVector;
using greedy_copy::kCopyUnroll;
using greedy_copy::VecType;

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kFusedWarps = kFusedThreadsPerBlock / kWarpSize;
constexpr int kFusedMinBlocksPerSm = 3;
// Redundant (look-back free) mode of the fused kernel: b < 256 sequences and
// at most 4 draft positions per thread (1024 rows), e.g. b = 32 x gamma = 32.
constexpr int kRedundantPositionsPerThread = 4;
// Ballot verify kernel: 8 warps (sequences) per block. Any multiple of 32 up
// to 1024 works; 256 keeps blocks small enough for 8 resident per SM.
constexpr int kVerifyThreadsPerBlock = 256;
constexpr int kNaiveThreadsPerBlock = 128;
// Two-step pack: a block copies up to this many bytes of one sequence
// (same per-block byte budget as the fused tiles, so both paths are compared
// at equal parallelism).
constexpr int kPackThreadsPerBlock = 256;

// Look-back status word, published with one 64-bit store so a reader never
// sees a flag without its value:
//   bits 63..32  epoch of the launch that wrote it (LookbackState::epoch)
//   bits 31..30  flag: 0 invalid, 1 aggregate of the tile, 2 inclusive prefix
//   bits 29..0   value (row counts < 2^30, checked at scratch sizing)
// A word from an earlier launch carries an older epoch and reads as invalid,
// so nothing is ever reset between launches. It could alias only if exactly
// a multiple of 2^32 launches on one scratch separated two uses of the same
// tile slot; InitGreedyScratch zeroes the state (see greedy_cuda.h).
constexpr unsigned kFlagAggregate = 1;
constexpr unsigned kFlagInclusive = 2;
constexpr int kValueBits = 30;
constexpr unsigned kValueMask = (1u << kValueBits) - 1;
constexpr int64_t kMaxLookbackRows = int64_t{1} << kValueBits;

__host__ __device__ constexpr unsigned long long StatusWord(unsigned epoch,
                                                            unsigned flag,
                                                            unsigned value) {
  return (static_cast<unsigned long long>(epoch) << 32) |
         (static_cast<unsigned long long>(flag) << kValueBits) | value;
}

struct LookbackState {
  unsigned int epoch;        // launches completed on this scratch
  unsigned int ticket_base;  // first ticket of the running launch
  unsigned int ticket;       // tile dispenser (grids larger than resident)
  unsigned int pad;          // keeps status 16-byte aligned
  // unsigned long long status[max_tiles] follows.
};

constexpr size_t kScratchAlign = 256;
constexpr size_t AlignUp(size_t v) {
  return (v + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

int64_t MaxFusedTiles(const GreedyScratchLimits& limits) {
  return (limits.max_total_draft_rows + kFusedMinTileRows - 1) /
         kFusedMinTileRows;
}

size_t LookbackBytes(const GreedyScratchLimits& limits) {
  return AlignUp(sizeof(LookbackState) +
                 sizeof(unsigned long long) * MaxFusedTiles(limits));
}

template <typename T>
using DeviceAtomicRef = cuda::atomic_ref<T, cuda::thread_scope_device>;

// --- Shared device functions ------------------------------------------------

// k = first j < limit with draft[j] != target[j], else limit; *next =
// target[k]. Whole warp calls it (convergent); every lane returns the same
// values. All ceil((limit + 1) / 32) chunks are loaded before the first
// ballot, so a long accepted run costs one memory round trip, not one per
// chunk; every lane runs the same ballots whatever the outcome (no
// acceptance-driven divergence, seed 000 Opt A). target[k] comes from the
// lane that loaded it (a shuffle). REQUIRES 1 <= limit <= gamma <=
// kMaxDraftTokens, so target[0 .. limit] lies inside the sequence's gamma + 1
// tokens.
__device__ __forceinline__ int BallotAcceptedLength(const int32_t* draft,
                                                    const int32_t* target,
                                                    int limit, int lane,
                                                    int* next) {
  constexpr int kMaxChunks = (kMaxDraftTokens + 1 + kWarpSize - 1) / kWarpSize;
  const int chunks = (limit + kWarpSize) / kWarpSize;  // covers 0 .. limit
  int32_t t[kMaxChunks];
  bool mismatch[kMaxChunks];
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const int j = c * kWarpSize + lane;
    t[c] = c < chunks && j <= limit ? target[j] : 0;
    mismatch[c] = c < chunks && j < limit && draft[j] != t[c];
  }
  // Fixed trip counts and no early exit keep t[] in registers (an early
  // return inside the unrolled loop put it in local memory).
  int k = limit;
  bool found = false;
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const unsigned mask = __ballot_sync(kFullMask, mismatch[c]);
    if (!found && mask != 0) {
      found = true;
      k = c * kWarpSize + __ffs(mask) - 1;
    }
  }
  int value = 0;
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const int32_t from_lane = __shfl_sync(kFullMask, t[c], k % kWarpSize);
    if (c == k / kWarpSize) value = from_lane;
  }
  *next = value;
  return k;
}

__device__ __forceinline__ void WriteVerifyOutputs(const GreedyBatchOutput& out,
                                                   int seq, int k, int gamma,
                                                   int next) {
  out.accepted_lengths[seq] = k;
  out.next_tokens[seq] = next;
  out.mismatch[seq] = k < gamma ? 1 : 0;
}

// --- Verify-only kernels ------------------------------------------------------

__global__ void NaiveGreedyVerifyKernel(GreedyVerifyParams p) {
  const int seq = blockIdx.x * blockDim.x + threadIdx.x;
  if (seq >= p.input.num_sequences) return;
  const int first = p.input.draft_offsets[seq];
  const int gamma = p.input.draft_offsets[seq + 1] - first;
  const int32_t* draft = p.input.draft_tokens + first;
  const int32_t* target = p.input.target_tokens + first + seq;
  int k = 0;
  while (k < gamma && draft[k] == target[k]) ++k;
  WriteVerifyOutputs(p.output, seq, k, gamma, target[k]);
}

// kAllowDependents: the primary grid of the prefix-first path, which lets
// its programmatic dependent (SpeculativePackKernel) be scheduled at once.
// (Prefetching every token line into L2 before that, so the token loads
// would not queue behind the dependent's reads, measured no faster: 15.07
// vs 14.94 us, bench/greedy/results/2026-11-24-greedy/SUMMARY.md.)
template <bool kAllowDependents>
__global__ void __launch_bounds__(kVerifyThreadsPerBlock)
    BallotGreedyVerifyKernel(GreedyVerifyParams p) {
  if constexpr (kAllowDependents) greedy_pdl::AllowDependentLaunch();
  const int lane = threadIdx.x % kWarpSize;
  const int seq = blockIdx.x * (kVerifyThreadsPerBlock / kWarpSize) +
                  threadIdx.x / kWarpSize;
  if (seq >= p.input.num_sequences) return;  // whole warp leaves together
  const int first = p.input.draft_offsets[seq];
  const int gamma = p.input.draft_offsets[seq + 1] - first;
  const int32_t* draft = p.input.draft_tokens + first;
  const int32_t* target = p.input.target_tokens + first + seq;
  int next = 0;
  const int k = BallotAcceptedLength(draft, target, gamma, lane, &next);
  if (lane == 0) WriteVerifyOutputs(p.output, seq, k, gamma, next);
}

// --- Two-step pack -------------------------------------------------------------

// grid (b, ceil(max_gamma / rows_per_block)): block (s, c) copies rows
// [c * rows_per_block, min((c + 1) * rows_per_block, k_s)) of sequence s.
// Both the source and the destination of that range are contiguous.
template <int kVec>
__global__ void __launch_bounds__(kPackThreadsPerBlock)
    PackAcceptedRowsKernel(GreedyVerifyParams p, int rows_per_block) {
  const int seq = blockIdx.x;
  const int b = p.input.num_sequences;
  if (seq == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    p.output.packed_row_offsets[b] =
        p.output.packed_row_offsets[b - 1] + p.output.accepted_lengths[b - 1];
  }
  const int64_t rb = p.input.row_bytes;
  if (rb == 0) return;
  const int k = p.output.accepted_lengths[seq];
  const int row0 = blockIdx.y * rows_per_block;
  if (row0 >= k) return;
  const int rows = min(rows_per_block, k - row0);
  const int64_t src_row = int64_t{p.input.draft_offsets[seq]} + row0;
  const int64_t dst_row = int64_t{p.output.packed_row_offsets[seq]} + row0;
  BlockCopyContiguous<kVec, kPackThreadsPerBlock>(
      p.input.draft_kv + src_row * rb, p.output.packed_kv + dst_row * rb,
      rows * rb / kVec);
}

// --- The tile's sequences (both verify-and-pack kernels) -----------------------

// The sequences overlapping a tile of draft rows [tile_start, tile_end):
// s_first = the largest s with offsets[s] <= tile_start (level 1 samples every
// `stride`-th offset, level 2 searches the bucket that holds it), and n_seq,
// how many of s_first, s_first + 1, ... start before tile_end (all but the
// first start inside the tile, so at most tile_rows + 1). Leaves
// offsets[s_first ..] in tile_offsets and, when b < kFusedThreadsPerBlock,
// offsets[0 .. b] in all_offsets (one load then serves both). Every thread of
// the block calls it: its counts are block barriers.
struct TileSequences {
  int s_first;
  int n_seq;
};

__device__ __forceinline__ TileSequences FindTileSequences(
    const int32_t* offsets, int b, int tile_start, int tile_end, int tile_rows,
    int tid, int* all_offsets, int* tile_offsets) {
  const int stride = (b + kFusedThreadsPerBlock) / kFusedThreadsPerBlock;
  const int sample = tid * stride;
  const int sample_value = sample <= b ? offsets[sample] : INT_MAX;
  if (stride == 1) all_offsets[tid] = sample_value;
  const int bucket = __syncthreads_count(sample_value <= tile_start) - 1;
  int s_first = bucket * stride;
  if (stride > 1) {
    const int probe = s_first + 1 + tid;
    s_first += __syncthreads_count(tid < stride - 1 && probe <= b &&
                                   offsets[probe] <= tile_start);
  }
  const int available = min(tile_rows + 1, b - s_first + 1);
  int my_offset = INT_MAX;
  if (tid < available) {
    my_offset = stride == 1 ? all_offsets[s_first + tid] : offsets[s_first + tid];
    tile_offsets[tid] = my_offset;
  }
  return TileSequences{
      s_first, __syncthreads_count(s_first + tid < b && my_offset < tile_end)};
}

// --- Prefix-first verify-and-pack (sm_90) ------------------------------------
//
// Two launches for the batches whose fused tiles would be 32-64 KiB (about
// 12-25 MiB of draft KV at 4 KiB rows). In one kernel the prefix chain
// (offsets -> tokens -> ballot -> look-back) held every store back until the
// tile's reads were done, and reads and writes ran as two phases (70% of a
// D2D copy, docs/PERFORMANCE_LOG.md runs 6-7). Here:
//   1. BallotGreedyVerifyKernel<true> writes the accepted lengths (tokens
//      only, 8 bytes per draft row) and lets its dependent start at once;
//   2. SpeculativePackKernel, its programmatic dependent, one block per 1/4
//      of a fused tile (<= 16 KiB): every thread loads its <= 4 16-byte
//      vectors of the tile into registers first, speculatively (rows are
//      contiguous, acceptance unknown), finds the sequences overlapping the
//      tile (offsets: inputs), then waits for the verify grid, sums the
//      accepted lengths before its tile (L2 hits; no look-back, no block
//      waits for another block) and stores the accepted rows.
// Reading rejected rows costs their bytes (at alpha = 0.9 the batch reads
// 16 MiB to pack 14.4); reading only accepted rows waits for the verify grid
// first. Measured on the H100 (bench/greedy/results/2026-11-24-greedy,
// SUMMARY.md): at b = 32, gamma = 128, alpha = 0.9 this path takes 15.1 us
// per event pair (D2D copy 11.7, the fused look-back kernel 16.6-17.1); this
// kernel changed to load only accepted rows after the wait took 15.9-16.1
// (reverted), although the experiment's own kernels in that order measured
// 14.5 (not yet explained; the experiment's "prefix known" kernels read
// packed offsets computed beforehand, so they are not this kernel's
// equivalents); the 64 KiB shared-memory TMA tiles of the first version
// 16.1-16.3.

// Vectors per thread of a speculative pack block: 256 x 4 x 16 B = 16 KiB.
constexpr int kSpeculativeVectors = 4;
constexpr int64_t kSpeculativeTileBytes =
    int64_t{kFusedThreadsPerBlock} * kSpeculativeVectors * 16;
constexpr int kSpeculativeMaxTileRows = kFusedMaxTileRows / 4;

struct SpeculativePackSharedStorage {
  int all_offsets[kFusedThreadsPerBlock];       // offsets[0 .. b] when b < 256
  int offsets[kSpeculativeMaxTileRows + 1];     // offsets[s_first .. + n_seq]
  int row_dest[kSpeculativeMaxTileRows];        // packed row, or -1 (rejected)
  int tile_prefix;  // accepted rows before the tile, summed by warps 1..7
};
static_assert(kSpeculativeMaxTileRows <= kWarpSize);  // n_seq fits warp 0

// One block per tile of tile_rows draft rows (tile_rows * row_bytes <=
// kSpeculativeTileBytes, tile_rows <= kSpeculativeMaxTileRows). REQUIRES
// row_bytes a multiple of 16 with both KV buffers 16-byte aligned, row_bytes
// > 0; launched right after BallotGreedyVerifyKernel<true> on its stream,
// as its programmatic dependent on sm_90 (elsewhere griddepcontrol.wait is
// nothing and stream order alone must hold: the host launches it only on
// sm_90).
__global__ void __launch_bounds__(kFusedThreadsPerBlock)
    SpeculativePackKernel(GreedyVerifyParams p, int tile_rows, int total_rows) {
  __shared__ SpeculativePackSharedStorage smem;
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int b = p.input.num_sequences;
  const int32_t* offsets = p.input.draft_offsets;
  const int tile_start = blockIdx.x * tile_rows;
  const int tile_end = min(tile_start + tile_rows, total_rows);
  const int64_t rb = p.input.row_bytes;
  const int units_per_row = static_cast<int>(rb / 16);
  const int tile_units = (tile_end - tile_start) * units_per_row;  // <= 1024

  // (1) The whole tile, speculatively: inputs only, so the loads are in
  // flight while the verify grid still runs.
  const uint4* src = reinterpret_cast<const uint4*>(p.input.draft_kv) +
                     int64_t{tile_start} * units_per_row;
  uint4 v[kSpeculativeVectors];
#pragma unroll
  for (int u = 0; u < kSpeculativeVectors; ++u) {
    const int i = tid + u * kFusedThreadsPerBlock;
    if (i < tile_units) v[u] = __ldcs(src + i);
  }

  // (2) The sequences overlapping the tile (inputs only): as the fused
  // kernel's step (3). Its barriers also publish tile_prefix = 0.
  if (tid == 0) smem.tile_prefix = 0;
  const TileSequences overlap = FindTileSequences(
      offsets, b, tile_start, tile_end, tile_rows, tid, smem.all_offsets, smem.offsets);
  const int s_first = overlap.s_first;
  const int n_seq = overlap.n_seq;

  // (3) The verify grid's accepted lengths: this tile's prefix = accepted
  // rows of the sequences before s_first (every thread sums a share, one
  // shared atomic each) + those of s_first before tile_start; warp 0 scans
  // the overlapping sequences' accepted rows in the tile (n_seq <= 32).
  // Two barriers after the wait, no cub block primitives.
  greedy_pdl::WaitForPrimaryGrid();
  const int32_t* accepted = p.output.accepted_lengths;
  int before = 0;
  int first = 0;
  int k = 0;
  if (warp == 0 && lane < n_seq) {
    first = smem.offsets[lane];
    k = accepted[s_first + lane];
  }
  for (int s = tid; s < s_first; s += kFusedThreadsPerBlock) before += accepted[s];
  if (warp == 0) {
    if (lane == 0) before += min(k, tile_start - first);  // first <= tile_start
#pragma unroll
    for (int delta = kWarpSize / 2; delta > 0; delta /= 2) {
      before += __shfl_xor_sync(kFullMask, before, delta);
    }
  }
  if (warp != 0 && before != 0) atomicAdd(&smem.tile_prefix, before);
  __syncthreads();
  if (warp == 0) {
    const int tile_prefix = smem.tile_prefix + before;
    const int in_tile =
        lane < n_seq ? max(0, min(first + k, tile_end) - max(first, tile_start)) : 0;
    int inclusive = in_tile;
#pragma unroll
    for (int delta = 1; delta < kWarpSize; delta *= 2) {
      const int y = __shfl_up_sync(kFullMask, inclusive, delta);
      if (lane >= delta) inclusive += y;
    }
    const int dest = tile_prefix + inclusive - in_tile;
    if (lane < n_seq) {
      if (first >= tile_start) p.output.packed_row_offsets[s_first + lane] = dest;
      const int lo = max(first, tile_start);
      const int end = min(smem.offsets[lane + 1], tile_end);
      for (int r = lo; r < end; ++r) {
        smem.row_dest[r - tile_start] = r - lo < in_tile ? dest + (r - lo) : -1;
      }
    }
    if (blockIdx.x == gridDim.x - 1 && lane == kWarpSize - 1) {
      p.output.packed_row_offsets[b] = tile_prefix + inclusive;
    }
  }
  __syncthreads();

  // (4) The accepted rows' vectors.
  uint4* dst = reinterpret_cast<uint4*>(p.output.packed_kv);
#pragma unroll
  for (int u = 0; u < kSpeculativeVectors; ++u) {
    const int i = tid + u * kFusedThreadsPerBlock;
    if (i < tile_units) {
      const int row = i / units_per_row;
      const int d = smem.row_dest[row];
      if (d >= 0) dst[int64_t{d} * units_per_row + (i - row * units_per_row)] = v[u];
    }
  }
}

// --- Fused verify-and-pack -----------------------------------------------------

struct FusedSharedStorage {
  typename cub::BlockScan<int, kFusedThreadsPerBlock>::TempStorage scan;
  int tile;
  unsigned epoch;
  unsigned ticket_base;
  // offsets[0 .. b] when b < kFusedThreadsPerBlock (then one load serves both
  // the search and the overlap list).
  int all_offsets[kFusedThreadsPerBlock];
  // offsets[s_first .. s_first + n_seq], n_seq <= kFusedMaxTileRows
  int offsets[kFusedMaxTileRows + 1];
  int accepted_in_tile[kFusedMaxTileRows];  // per overlapping sequence
  int first_in_tile[kFusedMaxTileRows];     // first draft row inside the tile
  int end_in_tile[kFusedMaxTileRows];       // one past its last row inside
  int dest_in_tile[kFusedMaxTileRows];      // exclusive scan of accepted_in_tile
  // Per draft row of the tile: its packed row relative to the tile's prefix,
  // or -1 when rejected.
  int row_dest[kFusedMaxTileRows];
  int k_all[kFusedThreadsPerBlock];         // redundant mode: every k
  int dest_all[kFusedThreadsPerBlock];      // redundant mode: every offset
  int warp_first_inclusive[kFusedWarps];    // look-back, per warp
  int warp_sum[kFusedWarps];
};

// Exclusive prefix of accepted rows before `tile`, by the whole block: 256
// predecessors per step (a warp-wide window of 32 made tile 1023 of a
// 1024-tile batch walk 32 dependent steps when every tile starts at once).
// Threads are ordered nearest predecessor first; the nearest inclusive prefix
// ends the walk, aggregates nearer than it are added to it.
__device__ __forceinline__ int BlockLookback(unsigned long long* status,
                                            int tile, unsigned epoch,
                                            FusedSharedStorage& smem, int tid,
                                            int lane, int warp) {
  int exclusive = 0;
  for (int window_top = tile - 1;; window_top -= kFusedThreadsPerBlock) {
    const int pred = window_top - tid;
    unsigned flag = kFlagInclusive;  // before tile 0: an inclusive prefix of 0
    unsigned value = 0;
    bool invalid;
    do {
      if (pred >= 0) {
        const unsigned long long word =
            DeviceAtomicRef<unsigned long long>(status[pred]).load(
                cuda::memory_order_relaxed);
        const bool current = static_cast<unsigned>(word >> 32) == epoch;
        flag = current ? static_cast<unsigned>(word >> kValueBits) & 3u : 0u;
        value = static_cast<unsigned>(word) & kValueMask;
      }
      invalid = flag == 0;
    } while (__syncthreads_or(invalid));
    const unsigned inclusive = __ballot_sync(kFullMask, flag == kFlagInclusive);
    if (lane == 0) {
      smem.warp_first_inclusive[warp] =
          inclusive != 0 ? warp * kWarpSize + __ffs(inclusive) - 1
                         : kFusedThreadsPerBlock;
    }
    __syncthreads();
    int stop = kFusedThreadsPerBlock;
#pragma unroll
    for (int w = 0; w < kFusedWarps; ++w) {
      stop = min(stop, smem.warp_first_inclusive[w]);
    }
    int sum = tid <= stop ? static_cast<int>(value) : 0;
#pragma unroll
    for (int delta = kWarpSize / 2; delta > 0; delta /= 2) {
      sum += __shfl_xor_sync(kFullMask, sum, delta);
    }
    if (lane == 0) smem.warp_sum[warp] = sum;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kFusedWarps; ++w) exclusive += smem.warp_sum[w];
    if (stop < kFusedThreadsPerBlock) return exclusive;
  }
}

// 3 blocks per SM: caps registers at 85 (the speculative first round keeps
// 8 vectors live across verification; unbounded, ptxas took 123 and only 2
// blocks fit an SM).
template <int kVec>
__global__ void __launch_bounds__(kFusedThreadsPerBlock, kFusedMinBlocksPerSm)
    FusedGreedyVerifyPackKernel(GreedyVerifyParams p, int tile_rows,
                                int num_tiles, int total_rows,
                                bool dynamic_tiles, bool redundant,
                                LookbackState* state) {
  using V = typename VecType<kVec>::type;
  __shared__ FusedSharedStorage smem;
  unsigned long long* status = reinterpret_cast<unsigned long long*>(state + 1);
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int b = p.input.num_sequences;
  const int32_t* offsets = p.input.draft_offsets;

  // (1) The tile. When the grid fits on the GPU at once every block is
  // resident, so predecessors always make progress and blockIdx serves;
  // otherwise tiles are dealt in scheduling order from a ticket counter.
  int tile = blockIdx.x;
  if (tid == 0) {
    smem.epoch = DeviceAtomicRef<unsigned int>(state->epoch)
                     .load(cuda::memory_order_relaxed);
    if (dynamic_tiles) {
      smem.ticket_base = DeviceAtomicRef<unsigned int>(state->ticket_base)
                             .load(cuda::memory_order_relaxed);
      smem.tile = static_cast<int>(
          DeviceAtomicRef<unsigned int>(state->ticket)
              .fetch_add(1u, cuda::memory_order_relaxed) -
          smem.ticket_base);
    }
  }
  if (dynamic_tiles) {
    __syncthreads();
    tile = smem.tile;
  }
  const int tile_start = tile * tile_rows;
  const int tile_end = min(tile_start + tile_rows, total_rows);

  // (2) First round of KV loads, speculative: the tile's draft rows are
  // contiguous and known now, so their loads go out before the offsets and
  // tokens that say which rows are accepted (for small batches the whole
  // tile, so the copy's round trip overlaps verification). Rejected rows of
  // this round are read and dropped: at most one round per tile.
  const int64_t rb = p.input.row_bytes;
  const unsigned units_per_row = static_cast<unsigned>(rb / kVec);
  // 32-bit: FusedTileRows keeps a tile under 2^30 bytes.
  const unsigned tile_units =
      static_cast<unsigned>(tile_end - tile_start) * units_per_row;
  const V* src = reinterpret_cast<const V*>(p.input.draft_kv) +
                 int64_t{tile_start} * units_per_row;
  V v[kCopyUnroll];
#pragma unroll
  for (int u = 0; u < kCopyUnroll; ++u) {
    const unsigned i = tid + u * kFusedThreadsPerBlock;
    if (i < tile_units) v[u] = src[i];
  }

  // (3) The sequences overlapping the tile (FindTileSequences).
  const TileSequences overlap = FindTileSequences(
      offsets, b, tile_start, tile_end, tile_rows, tid, smem.all_offsets, smem.offsets);
  const int s_first = overlap.s_first;
  const int n_seq = overlap.n_seq;
  const unsigned epoch = smem.epoch;

  int tile_prefix = 0;
  if (redundant) {
    // (4r) Small batch: every block verifies the whole batch, one thread per
    // draft position with all token loads in flight at once, so each block
    // knows every accepted length and its tile's prefix without waiting for
    // any other block (no look-back). all_offsets holds offsets[0 .. b].
    const int* all = smem.all_offsets;
    if (tid < b) smem.k_all[tid] = all[tid + 1] - all[tid];
    const int bonus = tid < b ? p.input.target_tokens[all[tid + 1] + tid] : 0;
    int seq_of[kRedundantPositionsPerThread];
    int32_t target_of[kRedundantPositionsPerThread];
    bool mismatch_of[kRedundantPositionsPerThread];
#pragma unroll
    for (int u = 0; u < kRedundantPositionsPerThread; ++u) {
      const int j = tid + u * kFusedThreadsPerBlock;
      int lo = 0;
      if (j < total_rows) {
        int hi = b - 1;  // largest s with all[s] <= j
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (all[mid] <= j) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
      }
      seq_of[u] = j < total_rows ? lo : -1;
    }
#pragma unroll
    for (int u = 0; u < kRedundantPositionsPerThread; ++u) {
      const int j = tid + u * kFusedThreadsPerBlock;
      target_of[u] = seq_of[u] >= 0 ? p.input.target_tokens[j + seq_of[u]] : 0;
      mismatch_of[u] =
          seq_of[u] >= 0 && p.input.draft_tokens[j] != target_of[u];
    }
    __syncthreads();  // k_all initialized to gamma
#pragma unroll
    for (int u = 0; u < kRedundantPositionsPerThread; ++u) {
      if (mismatch_of[u]) {
        const int j = tid + u * kFusedThreadsPerBlock;
        atomicMin(&smem.k_all[seq_of[u]], j - all[seq_of[u]]);
      }
    }
    __syncthreads();
    // Outputs of the sequences that start in this tile: the correction from
    // the thread that loaded it, the bonus from thread `seq`.
#pragma unroll
    for (int u = 0; u < kRedundantPositionsPerThread; ++u) {
      const int seq = seq_of[u];
      if (seq >= 0 && all[seq] >= tile_start && all[seq] < tile_end) {
        const int j = tid + u * kFusedThreadsPerBlock;
        const int k = smem.k_all[seq];
        if (mismatch_of[u] && j - all[seq] == k) {
          WriteVerifyOutputs(p.output, seq, k, all[seq + 1] - all[seq],
                             target_of[u]);
        }
      }
    }
    if (tid < b && all[tid] >= tile_start && all[tid] < tile_end) {
      const int gamma = all[tid + 1] - all[tid];
      if (smem.k_all[tid] == gamma) {
        WriteVerifyOutputs(p.output, tid, gamma, gamma, bonus);
      }
    }
    int dest_all = 0;
    int batch_total = 0;
    cub::BlockScan<int, kFusedThreadsPerBlock>(smem.scan).ExclusiveSum(
        tid < b ? smem.k_all[tid] : 0, dest_all, batch_total);
    if (tid < b) smem.dest_all[tid] = dest_all;
    for (int q = tid; q < n_seq; q += kFusedThreadsPerBlock) {
      const int first = smem.offsets[q];
      const int gamma = smem.offsets[q + 1] - first;
      const int k = smem.k_all[s_first + q];
      const int lo = max(first, tile_start);
      smem.first_in_tile[q] = lo;
      smem.end_in_tile[q] = min(first + gamma, tile_end);
      smem.accepted_in_tile[q] = max(0, min(first + k, tile_end) - lo);
    }
    __syncthreads();
    tile_prefix = smem.dest_all[s_first] +
                  min(max(tile_start - smem.offsets[0], 0), smem.k_all[s_first]);
  }

  // (4) Verify. A tile that does not hold a sequence's first row needs its
  // acceptance only up to the tile end, so it scans no further.
  for (int q = redundant ? n_seq : warp; q < n_seq; q += kFusedWarps) {
    const int seq = s_first + q;
    const int first = smem.offsets[q];
    const int gamma = smem.offsets[q + 1] - first;
    const int32_t* draft = p.input.draft_tokens + first;
    const int32_t* target = p.input.target_tokens + first + seq;
    const bool owner = first >= tile_start;
    const int limit = owner ? gamma : min(gamma, tile_end - first);
    int next = 0;
    const int k = BallotAcceptedLength(draft, target, limit, lane, &next);
    if (lane == 0) {
      const int lo = max(first, tile_start);
      smem.first_in_tile[q] = lo;
      smem.end_in_tile[q] = min(first + gamma, tile_end);
      smem.accepted_in_tile[q] = max(0, min(first + k, tile_end) - lo);
      if (owner) WriteVerifyOutputs(p.output, seq, k, gamma, next);
    }
  }
  __syncthreads();

  int dest = 0;
  int tile_aggregate = 0;
  cub::BlockScan<int, kFusedThreadsPerBlock>(smem.scan).ExclusiveSum(
      tid < n_seq ? smem.accepted_in_tile[tid] : 0, dest, tile_aggregate);
  if (tid < n_seq) smem.dest_in_tile[tid] = dest;
  __syncthreads();
  for (int q = warp; q < n_seq; q += kFusedWarps) {
    const int lo = smem.first_in_tile[q];
    const int accepted_end = lo + smem.accepted_in_tile[q];
    const int d = smem.dest_in_tile[q];
    for (int r = lo + lane; r < smem.end_in_tile[q]; r += kWarpSize) {
      smem.row_dest[r - tile_start] = r < accepted_end ? d + (r - lo) : -1;
    }
  }

  // (5) Decoupled look-back (its first barrier also publishes row_dest).
  if (redundant) {
    __syncthreads();
  } else if (tile == 0) {
    if (tid == 0) {
      DeviceAtomicRef<unsigned long long>(status[0]).store(
          StatusWord(epoch, kFlagInclusive, tile_aggregate),
          cuda::memory_order_relaxed);
    }
    __syncthreads();
  } else {
    if (tid == 0) {
      DeviceAtomicRef<unsigned long long>(status[tile]).store(
          StatusWord(epoch, kFlagAggregate, tile_aggregate),
          cuda::memory_order_relaxed);
    }
    tile_prefix = BlockLookback(status, tile, epoch, smem, tid, lane, warp);
    if (tid == 0) {
      DeviceAtomicRef<unsigned long long>(status[tile]).store(
          StatusWord(epoch, kFlagInclusive, tile_prefix + tile_aggregate),
          cuda::memory_order_relaxed);
    }
  }
  if (tile == num_tiles - 1 && tid == 0) {
    p.output.packed_row_offsets[b] = tile_prefix + tile_aggregate;
    // Every tile has read the epoch (each published before this tile's
    // look-back could end), and the next launch on this stream starts after
    // this one ends: retire the epoch and this launch's tickets. Tiles still
    // looking back compare against the epoch they hold in a register.
    DeviceAtomicRef<unsigned int>(state->epoch)
        .store(epoch + 1, cuda::memory_order_relaxed);
    if (dynamic_tiles) {
      DeviceAtomicRef<unsigned int>(state->ticket_base)
          .store(smem.ticket_base + num_tiles, cuda::memory_order_relaxed);
    }
  }

  // (6) Offsets of the sequences that start in this tile.
  if (tid < n_seq && smem.offsets[tid] >= tile_start) {
    p.output.packed_row_offsets[s_first + tid] =
        tile_prefix + smem.dest_in_tile[tid];
  }

  // (7) Stores of the first round, then later rounds (tiles over one round:
  // large batches) loading accepted rows only.
  if (rb == 0 || tile_aggregate == 0) return;
  V* dst = reinterpret_cast<V*>(p.output.packed_kv);
  for (unsigned base = tid;; base += kFusedThreadsPerBlock * kCopyUnroll) {
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const unsigned i = base + u * kFusedThreadsPerBlock;
      if (i < tile_units) {
        const unsigned row = i / units_per_row;
        const int d = smem.row_dest[row];
        if (d >= 0) {
          dst[int64_t{tile_prefix + d} * units_per_row +
              (i - row * units_per_row)] = v[u];
        }
      }
    }
    const unsigned next_base = base + kFusedThreadsPerBlock * kCopyUnroll;
    if (next_base >= tile_units) break;
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const unsigned i = next_base + u * kFusedThreadsPerBlock;
      if (i < tile_units && smem.row_dest[i / units_per_row] >= 0) v[u] = src[i];
    }
  }
}

// --- Host side ---------------------------------------------------------------

// Widest access (16, 8, 4, 2, 1 bytes) that divides row_bytes and both base
// addresses, so every row of both buffers starts aligned for it.
int CopyVectorBytes(const GreedyVerifyParams& p) {
  return greedy_copy::CopyVectorBytes(p.input.draft_kv, p.output.packed_kv, p.input.row_bytes);
}

// Blocks of the fused kernel the device holds at once (occupancy x SMs),
// computed once per device and vector width: a host-only query, so it is
// allowed while a stream is being captured. Returns 0 when unknown (the
// launch then takes the tile counter).
constexpr int kMaxCachedDevices = 64;

template <int kVec>
int FusedResidentBlocks() {
  static std::atomic<int> cache[kMaxCachedDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  std::atomic<int>* slot = device < kMaxCachedDevices ? &cache[device] : nullptr;
  if (slot != nullptr) {
    if (const int cached = slot->load(std::memory_order_relaxed); cached != 0) {
      return cached;
    }
  }
  int sms = 0;
  int per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, FusedGreedyVerifyPackKernel<kVec>, kFusedThreadsPerBlock,
          0) != cudaSuccess) {
    return 0;
  }
  const int resident = sms * per_sm;
  if (slot != nullptr) slot->store(resident, std::memory_order_relaxed);
  return resident;
}

// The prefix-first path (sm_90): the verify kernel, then SpeculativePackKernel
// as its programmatic dependent over tiles of fused_tile_rows / 4 rows.
cudaError_t LaunchPrefixFirst(const GreedyDeviceBatch& batch,
                              int fused_tile_rows, cudaStream_t stream) {
  constexpr int kSeqPerBlock = kVerifyThreadsPerBlock / kWarpSize;
  const int b = batch.params.input.num_sequences;
  BallotGreedyVerifyKernel<true><<<(b + kSeqPerBlock - 1) / kSeqPerBlock,
                                   kVerifyThreadsPerBlock, 0, stream>>>(
      batch.params);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const int tile_rows = fused_tile_rows / 4;
  const int64_t num_tiles =
      (batch.total_draft_rows + tile_rows - 1) / tile_rows;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(num_tiles));
  config.blockDim = dim3(kFusedThreadsPerBlock);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, SpeculativePackKernel, batch.params,
                            tile_rows,
                            static_cast<int>(batch.total_draft_rows));
}

// Whether the current device takes programmatic dependent launches of this
// file's kernels: sm_90+ running their sm_90 code (sm90_code.h).
bool DeviceTakesDependentLaunch() {
  static Sm90CodeCache cache(
      reinterpret_cast<const void*>(&SpeculativePackKernel));
  bool yes = false;
  return cache.Ask(&yes) == cudaSuccess && yes;
}

template <int kVec>
struct FusedLaunch {
  static cudaError_t Run(const GreedyDeviceBatch& batch,
                         const GreedyScratch& scratch, cudaStream_t stream) {
    const int resident = FusedResidentBlocks<kVec>();
    const int64_t rb = batch.params.input.row_bytes;
    const int tile_rows =
        FusedTileRows(rb, GreedyPackBytesUpperBound(batch), resident);
    const int64_t num_tiles =
        (batch.total_draft_rows + tile_rows - 1) / tile_rows;
    if (num_tiles > MaxFusedTiles(scratch.limits) || num_tiles < 1) {
      return cudaErrorInvalidValue;
    }
    // Prefix-first path: fused tiles of more than one register round (32
    // KiB) and at most 64 KiB in one wave (the former staged tiles), on
    // sm_90. Its pack tiles are a quarter of those: <= 16 KiB, >= 1 row.
    if constexpr (kVec == 16) {
      const int64_t tile_bytes = int64_t{tile_rows} * rb;
      static_assert(kFusedMinTileRows % 4 == 0 &&
                    kFusedMaxTileRows / 4 == kSpeculativeMaxTileRows);
      if (tile_bytes > int64_t{kFusedThreadsPerBlock} * kCopyUnroll * kVec &&
          tile_bytes <= 4 * kSpeculativeTileBytes && num_tiles <= resident &&
          DeviceTakesDependentLaunch()) {
        return LaunchPrefixFirst(batch, tile_rows, stream);
      }
    }
    const bool dynamic_tiles = num_tiles > resident;
    const bool redundant =
        !dynamic_tiles &&
        batch.params.input.num_sequences < kFusedThreadsPerBlock &&
        batch.total_draft_rows <=
            int64_t{kFusedThreadsPerBlock} * kRedundantPositionsPerThread;
    FusedGreedyVerifyPackKernel<kVec><<<static_cast<int>(num_tiles),
                                        kFusedThreadsPerBlock, 0, stream>>>(
        batch.params, tile_rows, static_cast<int>(num_tiles),
        static_cast<int>(batch.total_draft_rows), dynamic_tiles, redundant,
        static_cast<LookbackState*>(scratch.data));
    return cudaGetLastError();
  }
};

template <int kVec>
struct PackLaunch {
  static cudaError_t Run(const GreedyDeviceBatch& batch, cudaStream_t stream) {
    const int64_t rb = batch.params.input.row_bytes;
    // The same per-block byte budget as the smallest fused tiles.
    const int rows_per_block = FusedTileRows(rb, 0, 1);
    // row_bytes == 0: one thread still writes packed_row_offsets[b].
    const dim3 grid(rb == 0 ? 1 : batch.params.input.num_sequences,
                    rb == 0 ? 1
                            : (batch.max_gamma + rows_per_block - 1) /
                                  rows_per_block);
    PackAcceptedRowsKernel<kVec><<<grid, kPackThreadsPerBlock, 0, stream>>>(
        batch.params, rows_per_block);
    return cudaGetLastError();
  }
};

cudaError_t LaunchFused(const GreedyDeviceBatch& batch,
                        const GreedyScratch& scratch, cudaStream_t stream) {
  return DispatchVector<FusedLaunch>(CopyVectorBytes(batch.params), batch,
                                     scratch, stream);
}

cudaError_t LaunchTwoStep(const GreedyDeviceBatch& batch,
                          GreedyScanKernel scan, const GreedyScratch& scratch,
                          cudaStream_t stream) {
  if (cudaError_t e = LaunchGreedyVerifyOnly(batch, scan, stream);
      e != cudaSuccess) {
    return e;
  }
  const GreedyVerifyParams& p = batch.params;
  const int b = p.input.num_sequences;
  const size_t cub_offset = LookbackBytes(scratch.limits);
  size_t needed = 0;
  if (cudaError_t e = cub::DeviceScan::ExclusiveSum(
          nullptr, needed, p.output.accepted_lengths,
          p.output.packed_row_offsets, b, stream);
      e != cudaSuccess) {
    return e;
  }
  if (cub_offset + needed > scratch.bytes) return cudaErrorInvalidValue;
  void* temp = static_cast<char*>(scratch.data) + cub_offset;
  if (cudaError_t e = cub::DeviceScan::ExclusiveSum(
          temp, needed, p.output.accepted_lengths, p.output.packed_row_offsets,
          b, stream);
      e != cudaSuccess) {
    return e;
  }
  return DispatchVector<PackLaunch>(CopyVectorBytes(p), batch, stream);
}

}  // namespace

const char* GreedyPathName(GreedyPath path) {
  switch (path) {
    case GreedyPath::kFused: return "fused";
    case GreedyPath::kTwoStep: return "two_step";
    case GreedyPath::kNaiveTwoStep: return "naive_two_step";
  }
  return "unknown";
}

int32_t FusedTileRows(int64_t row_bytes, int64_t pack_bytes_upper_bound,
                      int resident_blocks) {
  if (row_bytes <= 0) return kFusedMaxTileRows;
  // At most 1 GiB per tile keeps its vector count within 32 bits.
  const int64_t tile_bytes = std::min<int64_t>(
      int64_t{1} << 30,
      std::max(kFusedMinTileBytes,
               pack_bytes_upper_bound / std::max(1, resident_blocks)));
  // Rounded up: for a large batch, tiles <= resident blocks (one wave, no
  // ticket counter) matter more than one more round of loads per tile.
  int32_t rows = kFusedMinTileRows;
  while (rows < kFusedMaxTileRows && rows * row_bytes < tile_bytes &&
         2 * rows * row_bytes <= (int64_t{1} << 30)) {
    rows *= 2;
  }
  return rows;
}

cudaError_t GetGreedyScratchBytes(const GreedyScratchLimits& limits,
                                  size_t* bytes) {
  if (limits.max_sequences < 1 || limits.max_total_draft_rows < 1 ||
      limits.max_total_draft_rows >= kMaxLookbackRows) {
    return cudaErrorInvalidValue;
  }
  size_t cub_bytes = 0;
  if (cudaError_t e = cub::DeviceScan::ExclusiveSum(
          nullptr, cub_bytes, static_cast<const int*>(nullptr),
          static_cast<int*>(nullptr), limits.max_sequences);
      e != cudaSuccess) {
    return e;
  }
  *bytes = LookbackBytes(limits) + AlignUp(cub_bytes);
  return cudaSuccess;
}

cudaError_t InitGreedyScratch(const GreedyScratch& scratch,
                              cudaStream_t stream) {
  const size_t lookback = LookbackBytes(scratch.limits);
  if (scratch.data == nullptr || scratch.bytes < lookback) {
    return cudaErrorInvalidValue;
  }
  return cudaMemsetAsync(scratch.data, 0, lookback, stream);
}

absl::StatusOr<GreedyScratchBuffer> AllocateGreedyScratch(
    const GreedyScratchLimits& limits, cudaStream_t stream) {
  size_t bytes = 0;
  SV_CUDA_RETURN_IF_ERROR(GetGreedyScratchBytes(limits, &bytes));
  GreedyScratchBuffer scratch;
  SV_ASSIGN_OR_RETURN(scratch.buffer, DeviceBuffer::Create(bytes));
  scratch.view = GreedyScratch{scratch.buffer.data(), bytes, limits};
  SV_CUDA_RETURN_IF_ERROR(InitGreedyScratch(scratch.view, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return scratch;
}

absl::Status ValidateGreedyDeviceBatch(const GreedyDeviceBatch& batch,
                                       const GreedyScratch& scratch) {
  const GreedyBatchInput& in = batch.params.input;
  const int32_t b = in.num_sequences;
  if (b < 1 || b > scratch.limits.max_sequences) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sequences is ", b, "; must lie in [1, ",
                     scratch.limits.max_sequences, "] (scratch limit)"));
  }
  if (batch.max_gamma < 1 || batch.max_gamma > kMaxDraftTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_gamma is ", batch.max_gamma, "; must lie in [1, ",
                     kMaxDraftTokens, "]"));
  }
  const int64_t upper = std::min<int64_t>(int64_t{b} * batch.max_gamma,
                                          scratch.limits.max_total_draft_rows);
  if (batch.total_draft_rows < b || batch.total_draft_rows > upper) {
    return absl::InvalidArgumentError(absl::StrCat(
        "total_draft_rows is ", batch.total_draft_rows, "; must lie in [", b,
        ", ", upper, "] (num_sequences * max_gamma, scratch limit ",
        scratch.limits.max_total_draft_rows, ")"));
  }
  if (in.row_bytes < 0 || in.row_bytes > kMaxGreedyRowBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_bytes is ", in.row_bytes, "; must lie in [0, ",
                     kMaxGreedyRowBytes, "]"));
  }
  if (absl::Status s = ValidateGreedyPointers(batch.params); !s.ok()) return s;
  // Host-only checks (no CUDA call, so this runs without a device). CUB's
  // share of the scratch is checked again at launch.
  if (scratch.data == nullptr) {
    return absl::InvalidArgumentError("scratch.data must be set");
  }
  if (scratch.bytes < LookbackBytes(scratch.limits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scratch.bytes is ", scratch.bytes,
                     "; its limits need at least ",
                     LookbackBytes(scratch.limits)));
  }
  return absl::OkStatus();
}

cudaError_t LaunchGreedyVerifyOnly(const GreedyDeviceBatch& batch,
                                   GreedyScanKernel kernel,
                                   cudaStream_t stream) {
  const int b = batch.params.input.num_sequences;
  if (b < 1) return cudaErrorInvalidValue;
  switch (kernel) {
    case GreedyScanKernel::kNaive:
      NaiveGreedyVerifyKernel<<<(b + kNaiveThreadsPerBlock - 1) /
                                    kNaiveThreadsPerBlock,
                                kNaiveThreadsPerBlock, 0, stream>>>(
          batch.params);
      return cudaGetLastError();
    case GreedyScanKernel::kBallot: {
      constexpr int kSeqPerBlock = kVerifyThreadsPerBlock / kWarpSize;
      BallotGreedyVerifyKernel<false><<<(b + kSeqPerBlock - 1) / kSeqPerBlock,
                                 kVerifyThreadsPerBlock, 0, stream>>>(
          batch.params);
      return cudaGetLastError();
    }
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchGreedyVerifyPack(const GreedyDeviceBatch& batch,
                                   GreedyPath path,
                                   const GreedyScratch& scratch,
                                   cudaStream_t stream) {
  if (batch.params.input.row_bytes < 0 ||
      batch.params.input.row_bytes > kMaxGreedyRowBytes ||
      batch.params.input.num_sequences < 1 ||
      batch.params.input.num_sequences > scratch.limits.max_sequences ||
      batch.total_draft_rows > scratch.limits.max_total_draft_rows ||
      scratch.data == nullptr) {
    return cudaErrorInvalidValue;
  }
  switch (path) {
    case GreedyPath::kFused:
      return LaunchFused(batch, scratch, stream);
    case GreedyPath::kTwoStep:
      return LaunchTwoStep(batch, GreedyScanKernel::kBallot, scratch, stream);
    case GreedyPath::kNaiveTwoStep:
      return LaunchTwoStep(batch, GreedyScanKernel::kNaive, scratch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace specverify
