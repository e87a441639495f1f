// CUDA token-tree verification. See tree_cuda.h for the contract and
// docs/TREES.md for the semantics these kernels reproduce bit for bit.
#include <cooperative_groups.h>
#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/common/sm90_code.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/tree/tree_core.h"
#include "kernels/tree/tree_cuda.h"
#include "kernels/tree/tree_reference.h"

namespace specverify {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// --- Look-back (one tile = one tree) ------------------------------------------
//
// Status word, one 64-bit store: bits 63..32 the launch epoch, 31..30 the
// flag (0 invalid, 1 aggregate, 2 inclusive prefix), 29..0 the value (total
// accepted rows < 2^30: b <= 4096 trees of <= 1024 nodes). A word of an
// earlier launch carries an older epoch and reads as invalid, so nothing is
// reset between launches (the scheme of kernels/greedy/greedy_cuda.cu).
constexpr unsigned kFlagAggregate = 1;
constexpr unsigned kFlagInclusive = 2;
constexpr int kValueBits = 30;
constexpr unsigned kValueMask = (1u << kValueBits) - 1;

__host__ __device__ constexpr unsigned long long StatusWord(unsigned epoch, unsigned flag, unsigned value) {
  return (static_cast<unsigned long long>(epoch) << 32) | (static_cast<unsigned long long>(flag) << kValueBits) |
         value;
}

struct LookbackState {
  unsigned int epoch;        // launches completed on this scratch
  unsigned int ticket_base;  // first ticket of the running launch
  unsigned int ticket;       // tree dispenser
  unsigned int pad;
  // unsigned long long status[max_trees] follows.
};

template <typename T>
using DeviceAtomicRef = cuda::atomic_ref<T, cuda::thread_scope_device>;

constexpr size_t kScratchAlign = 256;

// 256 threads: one thread per 16-byte unit of a 4 KiB row, 8 warps for the
// look-back window; 4 blocks of ~14 KB shared memory per SM keep the batch of
// 32-128 trees in one wave.
constexpr int kPackThreads = 256;
constexpr int kPackWarps = kPackThreads / kWarpSize;
// Rows whose first 16-byte units are loaded before the look-back (their
// latency overlaps it) and rows in flight per thread afterwards.
constexpr int kRowsInFlight = 8;
static_assert(kMaxTreeNodes % kPackThreads == 0, "nodes per thread in registers");

template <int kVec>
struct VecType;
template <>
struct VecType<16> {
  using type = uint4;
};
template <>
struct VecType<8> {
  using type = uint2;
};
template <>
struct VecType<4> {
  using type = unsigned int;
};
template <>
struct VecType<1> {
  using type = unsigned char;
};

struct PackSharedStorage {
  int first_good[kMaxTreeNodes + 1];  // greedy: lowest-index matching child of node v at [v + 1]
  int has_child[kMaxTreeNodes + 1];   // greedy: node v has a child
  int target[kMaxTreeNodes + 1];      // greedy: the target token at node v (row v + 1)
  int path[kMaxTreeNodes];
  int tree;
  unsigned epoch;
  unsigned ticket_base;
  int depth;
  int next;
  int mismatch;
  int warp_first_inclusive[kPackWarps];
  int warp_sum[kPackWarps];
  std::byte* rows_out;  // with row destinations: where this tree's first accepted row goes
};

// Exclusive prefix of accepted rows before `tile`, by the whole block, 256
// predecessors per step (greedy_cuda.cu's BlockLookback for one tree per tile).
__device__ int BlockLookback(unsigned long long* status, int tile, unsigned epoch, PackSharedStorage& smem) {
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  int exclusive = 0;
  for (int window_top = tile - 1;; window_top -= kPackThreads) {
    const int pred = window_top - tid;
    unsigned flag = kFlagInclusive;  // before tile 0: an inclusive prefix of 0
    unsigned value = 0;
    bool invalid;
    do {
      if (pred >= 0) {
        const unsigned long long word =
            DeviceAtomicRef<unsigned long long>(status[pred]).load(cuda::memory_order_relaxed);
        const bool current = static_cast<unsigned>(word >> 32) == epoch;
        flag = current ? static_cast<unsigned>(word >> kValueBits) & 3u : 0u;
        value = static_cast<unsigned>(word) & kValueMask;
      }
      invalid = flag == 0;
    } while (__syncthreads_or(invalid));
    const unsigned inclusive = __ballot_sync(kFullMask, flag == kFlagInclusive);
    if (lane == 0) {
      smem.warp_first_inclusive[warp] = inclusive != 0 ? warp * kWarpSize + __ffs(inclusive) - 1 : kPackThreads;
    }
    __syncthreads();
    int stop = kPackThreads;
#pragma unroll
    for (int w = 0; w < kPackWarps; ++w) stop = min(stop, smem.warp_first_inclusive[w]);
    int sum = tid <= stop ? static_cast<int>(value) : 0;
#pragma unroll
    for (int delta = kWarpSize / 2; delta > 0; delta /= 2) sum += __shfl_xor_sync(kFullMask, sum, delta);
    if (lane == 0) smem.warp_sum[warp] = sum;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kPackWarps; ++w) exclusive += smem.warp_sum[w];
    __syncthreads();  // warp_sum / warp_first_inclusive are reused by the next step
    if (stop < kPackThreads) return exclusive;
  }
}

// What the walk kernel needs, for both the greedy walk and the pack of given paths.
struct PackArgs {
  int32_t num_trees;
  const int32_t* node_offsets;
  const int32_t* draft_tokens;       // greedy only
  const int32_t* parent_indices;     // greedy only
  const int32_t* target_tokens;      // greedy only
  const int32_t* given_lengths;      // pack only
  const int32_t* given_paths;        // pack only, per-tree slots
  const std::byte* draft_kv;
  const std::byte* const* kv_sources;  // optional: tree i's rows at kv_sources[i]
  int32_t kv_source_alignment;
  int64_t row_bytes;
  int32_t* accepted_lengths;         // greedy only
  int32_t* next_tokens;              // greedy only
  uint8_t* mismatch;                 // greedy only
  int32_t* packed_row_offsets;
  int32_t* accepted_nodes;
  std::byte* packed_kv;
  TreeRowDestinations row_destinations;  // optional: rows answered straight into their outputs
};

// kGreedy: walk the tree from its target tokens; otherwise read the given path.
template <int kVec, bool kGreedy>
__global__ void __launch_bounds__(kPackThreads) TreeWalkPackKernel(PackArgs a, LookbackState* state,
                                                                   bool dynamic_trees) {
  using V = typename VecType<kVec>::type;
  __shared__ PackSharedStorage smem;
  unsigned long long* status = reinterpret_cast<unsigned long long*>(state + 1);
  const int tid = threadIdx.x;
  const int b = a.num_trees;

  // (1) The tree. When the whole grid is resident at once, blockIdx serves
  // and the tree's loads start at once; otherwise trees are dealt from a
  // ticket counter in scheduling order, so every predecessor of a tree is
  // resident or done and the look-back cannot deadlock.
  int tree = blockIdx.x;
  if (tid == 0) {
    smem.epoch = DeviceAtomicRef<unsigned int>(state->epoch).load(cuda::memory_order_relaxed);
    if (dynamic_trees) {
      smem.ticket_base = DeviceAtomicRef<unsigned int>(state->ticket_base).load(cuda::memory_order_relaxed);
      smem.tree = static_cast<int>(
          DeviceAtomicRef<unsigned int>(state->ticket).fetch_add(1u, cuda::memory_order_relaxed) -
          smem.ticket_base);
    }
  }
  if (dynamic_trees) {
    __syncthreads();
    tree = smem.tree;
  }
  const int first = a.node_offsets[tree];
  const int n = min(a.node_offsets[tree + 1] - first, kMaxTreeNodes);

  // (2) The path.
  if constexpr (kGreedy) {
    const int32_t* target = a.target_tokens + first + tree;  // n + 1 tokens
    for (int v = tid; v <= n; v += kPackThreads) {
      smem.first_good[v] = INT_MAX;
      smem.has_child[v] = 0;
      smem.target[v] = target[v];
    }
    // The node loads do not depend on the barrier: issue them first.
    int parent[kMaxTreeNodes / kPackThreads], token[kMaxTreeNodes / kPackThreads];
#pragma unroll
    for (int q = 0; q < kMaxTreeNodes / kPackThreads; ++q) {
      const int j = tid + q * kPackThreads;
      if (j < n) {
        parent[q] = a.parent_indices[first + j];
        token[q] = a.draft_tokens[first + j];
      }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMaxTreeNodes / kPackThreads; ++q) {
      const int j = tid + q * kPackThreads;
      // A parent outside [-1, j) (the host validator rejects it) makes the
      // node unreachable instead of an out-of-bounds access.
      if (j >= n || parent[q] < -1 || parent[q] >= j) continue;
      atomicOr(&smem.has_child[parent[q] + 1], 1);  // siblings write together: an atomic, not a racy store
      if (token[q] == smem.target[parent[q] + 1]) atomicMin(&smem.first_good[parent[q] + 1], j);
    }
    __syncthreads();
    if (tid == 0) {
      int v = -1, depth = 0;
      for (int c = smem.first_good[0]; c != INT_MAX; c = smem.first_good[c + 1]) {
        smem.path[depth++] = c;
        v = c;
      }
      smem.depth = depth;
      smem.next = smem.target[v + 1];
      smem.mismatch = smem.has_child[v + 1];
    }
  } else {
    if (tid == 0) smem.depth = min(max(a.given_lengths[tree], 0), n);
    __syncthreads();
    for (int d = tid; d < smem.depth; d += kPackThreads) {
      smem.path[d] = min(max(a.given_paths[first + d], 0), n - 1);
    }
  }
  __syncthreads();
  const int depth = smem.depth;
  const unsigned epoch = smem.epoch;  // written by thread 0 before a barrier

  // (3) First round of row loads, before the prefix is known.
  const int64_t rb = a.row_bytes;
  const int units = static_cast<int>(rb / kVec);
  // This tree's rows: in the worker's region (one more dependent load) or
  // staged contiguously with the batch's.
  const V* src = units == 0                 ? nullptr
                 : a.kv_sources != nullptr ? reinterpret_cast<const V*>(a.kv_sources[tree])
                                           : reinterpret_cast<const V*>(a.draft_kv) + int64_t{first} * units;
  const int first_rows = min(depth, kRowsInFlight);
  V early[kRowsInFlight];
  if (tid < units) {
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (k < first_rows) early[k] = src[int64_t{smem.path[k]} * units + tid];
    }
  }

  // (4) Prefix of depths over the batch.
  // With row destinations, where this tree's rows go, loaded before the
  // look-back so that its latency covers theirs.
  const TreeRowDestinations& to = a.row_destinations;
  int origin = 0;
  std::byte* base = nullptr;
  if (to.destinations != nullptr && tid == 0) {
    // The host checked origins[i] in [0, i]; clamped again because device
    // memory cannot be trusted, and an origin after the tree would be
    // waited for forever.
    origin = min(max(to.origins[tree], 0), tree);
    base = to.destinations[tree];
  }
  int prefix = 0;
  if (tree != 0) {
    if (tid == 0) {
      DeviceAtomicRef<unsigned long long>(status[tree]).store(StatusWord(epoch, kFlagAggregate, depth),
                                                              cuda::memory_order_relaxed);
    }
    prefix = BlockLookback(status, tree, epoch, smem);
  }
  if (tid == 0) {
    const unsigned long long inclusive = StatusWord(epoch, kFlagInclusive, prefix + depth);
    if (to.destinations == nullptr) {
      // The inclusive word first: the look-backs of later trees wait for it.
      DeviceAtomicRef<unsigned long long>(status[tree]).store(inclusive, cuda::memory_order_relaxed);
      a.packed_row_offsets[tree] = prefix;
    } else {
      // The offset first, released by the inclusive word: a later tree of
      // the same request reads it once it has acquired that word (below).
      a.packed_row_offsets[tree] = prefix;
      DeviceAtomicRef<unsigned long long>(status[tree]).store(inclusive, cuda::memory_order_release);
      // Rows answered into a request's output land after the rows of the
      // request's earlier trees, from its first tree (the origin) on. The
      // origin's offset: its inclusive word is published (the origin is
      // resident or done, as in the look-back, and needs nothing of this
      // tree), then the offset stored before it is visible.
      int origin_prefix = 0;
      if (origin == tree) {
        origin_prefix = prefix;
      } else if (origin > 0) {
        unsigned long long word;
        do {
          word = DeviceAtomicRef<unsigned long long>(status[origin]).load(cuda::memory_order_acquire);
        } while (static_cast<unsigned>(word >> 32) != epoch ||
                 (static_cast<unsigned>(word >> kValueBits) & 3u) != kFlagInclusive);
        origin_prefix = DeviceAtomicRef<int32_t>(a.packed_row_offsets[origin]).load(cuda::memory_order_relaxed);
      }
      smem.rows_out = base == nullptr ? nullptr : base + int64_t{prefix - origin_prefix} * a.row_bytes;
    }
    if constexpr (kGreedy) {
      a.accepted_lengths[tree] = depth;
      a.next_tokens[tree] = smem.next;
      a.mismatch[tree] = static_cast<uint8_t>(smem.mismatch);
    }
    if (tree == b - 1) {
      a.packed_row_offsets[b] = prefix + depth;
      // Every tree has read the epoch and its ticket (each published before
      // this last tree's look-back could end), and the next launch on the
      // stream starts after this one ends: retire both.
      DeviceAtomicRef<unsigned int>(state->epoch).store(epoch + 1, cuda::memory_order_relaxed);
      if (dynamic_trees) {
        DeviceAtomicRef<unsigned int>(state->ticket_base)
            .store(smem.ticket_base + static_cast<unsigned>(b), cuda::memory_order_relaxed);
      }
    }
  }
  for (int d = tid; d < depth; d += kPackThreads) a.accepted_nodes[prefix + d] = smem.path[d];

  // (5) Rows: the early round, then the rest, kRowsInFlight loads per thread.
  if (units == 0) return;
  V* out = reinterpret_cast<V*>(a.packed_kv) + int64_t{prefix} * units;  // the tree's first accepted row
  if (to.destinations != nullptr) {
    __syncthreads();  // smem.rows_out
    if (smem.rows_out == nullptr) return;
    out = reinterpret_cast<V*>(smem.rows_out);
  }
  if (tid < units) {
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (k < first_rows) out[int64_t{k} * units + tid] = early[k];
    }
  }
  for (int k0 = 0; k0 < depth; k0 += kRowsInFlight) {
    const int rows = min(kRowsInFlight, depth - k0);
    // Rows of the early round start at unit kPackThreads.
    for (int u = (k0 < first_rows ? kPackThreads : 0) + tid; u < units; u += kPackThreads) {
      V v[kRowsInFlight];
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        if (k < rows) v[k] = src[int64_t{smem.path[k0 + k]} * units + u];
      }
#pragma unroll
      for (int k = 0; k < kRowsInFlight; ++k) {
        if (k < rows) out[int64_t{k0 + k} * units + u] = v[k];
      }
    }
  }
}

// Widest vector that divides the row and aligns both buffers (`src`: the
// address, or the alignment every source is known to have).
int PackVectorBytes(int64_t row_bytes, uintptr_t src, uintptr_t dst) {
  const auto aligned = [&](int v) { return row_bytes % v == 0 && src % v == 0 && dst % v == 0; };
  if (row_bytes == 0) return 16;
  if (aligned(16)) return 16;
  if (aligned(8)) return 8;
  if (aligned(4)) return 4;
  return 1;
}

// Blocks of TreeWalkPackKernel<kVec, kGreedy> the current device holds at
// once (cached per device: a host query, no device work, capturable).
template <int kVec, bool kGreedy>
cudaError_t ResidentBlocks(int* blocks) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < kMaxDevices) {
    if (const int cached = cache[device].load(std::memory_order_relaxed); cached > 0) {
      *blocks = cached;
      return cudaSuccess;
    }
  }
  int per_sm = 0, sms = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, TreeWalkPackKernel<kVec, kGreedy>,
                                                                     kPackThreads, 0);
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
    return e;
  }
  *blocks = std::max(1, per_sm * sms);
  if (device < kMaxDevices) cache[device].store(*blocks, std::memory_order_relaxed);
  return cudaSuccess;
}

template <int kVec, bool kGreedy>
cudaError_t LaunchWalkPackVec(const PackArgs& a, LookbackState* state, cudaStream_t stream) {
  int resident = 0;
  if (cudaError_t e = ResidentBlocks<kVec, kGreedy>(&resident); e != cudaSuccess) return e;
  const bool dynamic_trees = a.num_trees > resident;
  TreeWalkPackKernel<kVec, kGreedy><<<static_cast<unsigned>(a.num_trees), kPackThreads, 0, stream>>>(a, state,
                                                                                                    dynamic_trees);
  return cudaGetLastError();
}

template <bool kGreedy>
cudaError_t LaunchWalkPack(const PackArgs& a, const TreeScratch& scratch, cudaStream_t stream) {
  if (a.num_trees < 1 || a.num_trees > scratch.max_trees || scratch.data == nullptr) return cudaErrorInvalidValue;
  if (a.row_bytes < 0 || a.row_bytes / 16 > INT_MAX) return cudaErrorInvalidValue;
  auto* state = static_cast<LookbackState*>(scratch.data);
  if (a.kv_sources != nullptr && (a.kv_source_alignment < 1 ||
                                  (a.kv_source_alignment & (a.kv_source_alignment - 1)) != 0)) {
    return cudaErrorInvalidValue;
  }
  const TreeRowDestinations& to = a.row_destinations;
  if (to.destinations != nullptr &&
      (to.origins == nullptr || to.alignment < 1 || to.alignment > 16 || (to.alignment & (to.alignment - 1)) != 0)) {
    return cudaErrorInvalidValue;
  }
  const uintptr_t src = a.kv_sources != nullptr ? static_cast<uintptr_t>(a.kv_source_alignment)
                                                : reinterpret_cast<uintptr_t>(a.draft_kv);
  // Destinations: the packed buffer's address and the alignment every
  // output is known to have.
  const uintptr_t dst = reinterpret_cast<uintptr_t>(a.packed_kv) |
                        (to.destinations != nullptr ? static_cast<uintptr_t>(to.alignment) : 0);
  switch (PackVectorBytes(a.row_bytes, src, dst)) {
    case 16: return LaunchWalkPackVec<16, kGreedy>(a, state, stream);
    case 8: return LaunchWalkPackVec<8, kGreedy>(a, state, stream);
    case 4: return LaunchWalkPackVec<4, kGreedy>(a, state, stream);
    case 1: return LaunchWalkPackVec<1, kGreedy>(a, state, stream);
    default: return cudaErrorInvalidValue;
  }
}

// --- Sampled tree verification ---------------------------------------------------

constexpr int kSampleThreads = rejection::kChunkLanes;  // one chunk per block step, in the lane order
constexpr int kSampleWarps = kSampleThreads / kWarpSize;
constexpr int kMaxClusterBlocks = 16;
// Chunks a block may own: V <= 2^20 (RejectionLimits) with one block.
constexpr int kMaxChunks = (1 << 20) / rejection::kNormalizerChunk;
constexpr int kRoundsPerChunk = rejection::kNormalizerChunk / (kSampleThreads * rejection::kLaneWidth);
static_assert(rejection::kLaneWidth == 4, "a lane group is one Philox call's 4 words");
static_assert(kSampleThreads == 256, "the chunk fold below spells out strides 128, 64, 32");

enum WalkAction : int { kActionEmit = 0, kActionMassPass = 1, kActionFail = 2 };

// Per-pass results a block publishes to its cluster (double-buffered by pass
// parity: a block writes buffer P % 2 only after every block passed the
// cluster barrier of pass P - 1, i.e. finished reading pass P - 2's).
struct PassSlot {
  double chunk_sum[kMaxChunks];
  rejection::RaceCandidate best_residual;
  rejection::RaceCandidate best_target;
  int bad_target;  // some target element read was invalid
  int bad_draft;   // lowest rejected-slot index with an invalid draft element, INT_MAX if none
};

struct SampleSharedStorage {
  int parent[kMaxTreeNodes];
  int token[kMaxTreeNodes];
  int first_child[kMaxTreeNodes + 1];  // at [v + 1]
  int next_sibling[kMaxTreeNodes];
  float pt[kMaxTreeNodes];  // target value at the node's token, in its parent's row
  float pq[kMaxTreeNodes];  // draft value at the node's token, in its own row
  int rejected[kMaxTreeNodes];
  float mass_f[kMaxTreeNodes];
  PassSlot slot[2];
  double lanes[2][kSampleThreads];  // lane sums of a chunk, double-buffered by chunk parity
  double gathered[kMaxChunks];
  rejection::RaceCandidate warp_best[2][kSampleWarps];
  int warp_bad_draft[kSampleWarps];
  rejection::RaceCandidate cluster_best[2][kMaxClusterBlocks];
  int cluster_bad_target[kMaxClusterBlocks];
  int cluster_bad_draft[kMaxClusterBlocks];
  // Walk state (written by thread 0 of each block; every block of a cluster
  // holds the same values).
  int first_bad_token;
  int first_bad_parent;
  int v;
  int cand;
  int k;  // rejected children at v
  int depth;
  int action;
  int code;
  int position;
  int next;
  int row_reads;
  int passes;
  int pass_failed;  // written by thread 0 only at the end of a pass
  double mass;
};

template <SampleDtype kDtype>
__device__ __forceinline__ float LoadOne(const void* base, int64_t index) {
  return rejection::LoadValue(base, kDtype, index);
}

// Four consecutive values x0 .. x0+3 of a row (0 past `end`); one vector
// load when all four exist and the layout allows it (kVec: V % 4 == 0 and
// the base aligned to 4 elements; x0 is a multiple of 4).
template <SampleDtype kDtype, bool kVec>
__device__ __forceinline__ void Load4(const void* base, int64_t row_start, int x0, int end, float out[4]) {
  const bool full = x0 + 3 < end;
  if constexpr (kVec && kDtype == SampleDtype::kFloat32) {
    if (full) {
      const float4 v = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + row_start + x0);
      out[0] = v.x;
      out[1] = v.y;
      out[2] = v.z;
      out[3] = v.w;
      return;
    }
  } else if constexpr (kVec) {
    if (full) {
      const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + row_start + x0);
      const uint16_t h[4] = {static_cast<uint16_t>(v.x & 0xffffu), static_cast<uint16_t>(v.x >> 16),
                             static_cast<uint16_t>(v.y & 0xffffu), static_cast<uint16_t>(v.y >> 16)};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        out[i] = kDtype == SampleDtype::kFloat16 ? detmath::Float16BitsToFloat(h[i])
                                                 : detmath::BFloat16BitsToFloat(h[i]);
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = x0 + i < end ? LoadOne<kDtype>(base, row_start + x0 + i) : 0.0f;
}

struct SampleTreeArgs {
  TreeSampleParams p;
  int cluster_blocks;
};

// A target (draft) row as a base and an element offset: the staged rows'
// index arithmetic, or the row table's address when the rows are read where
// the worker's region holds them (kTables: a kernel of its own, so the
// staged rows' kernel is the one before row tables; reading the table or the
// staged rows behind a run-time test cost the residual loop 3-5% with draft
// rows, tree_bench on the H100).
struct RowRef {
  const void* base;
  int64_t start;
};
template <bool kTables>
__device__ __forceinline__ RowRef TargetRow(const RejectionBatchInput& in, int64_t row) {
  if constexpr (kTables) return RowRef{in.target_rows[row], 0};
  return RowRef{in.target_values, row * in.vocab_size};
}
template <bool kTables>
__device__ __forceinline__ RowRef DraftRow(const RejectionBatchInput& in, int64_t row) {
  if constexpr (kTables) return RowRef{in.draft_rows[row], 0};
  return RowRef{in.draft_values, row * in.vocab_size};
}

// R_k(x) from p(x): the rejected siblings' draft values (or one-hot tokens)
// applied in rejection order; flags an invalid draft value by its slot.
template <SampleDtype kDtype, bool kDraft, bool kTables>
__device__ __forceinline__ float ResidualAt(const SampleSharedStorage& s, const RejectionBatchInput& in,
                                            int64_t draft_row0, int k, int x, float p, int& bad_draft) {
  float r = p;
  for (int q_slot = 0; q_slot < k; ++q_slot) {
    const int node = s.rejected[q_slot];
    float q;
    if constexpr (kDraft) {
      const RowRef row = DraftRow<kTables>(in, draft_row0 + node);
      q = LoadOne<kDtype>(row.base, row.start + x);
      if (!rejection::ValueIsValid(SampleValueKind::kProbabilities, q)) bad_draft = min(bad_draft, q_slot);
    } else {
      q = s.token[node] == x ? 1.0f : 0.0f;
    }
    r = tree::ResidualStep(r, s.mass_f[q_slot], q);
  }
  return r;
}

// ResidualAt for the four elements x0 .. x0+3 (< end) at once: each rejected
// sibling's draft values come in one vector load, all k loads independent.
// Per element the same operations in the same order as ResidualAt.
template <SampleDtype kDtype, bool kVec, bool kDraft, bool kTables>
__device__ __forceinline__ void ResidualAt4(const SampleSharedStorage& s, const RejectionBatchInput& in,
                                            int64_t draft_row0, int k, int x0, int end, float r[4],
                                            int& bad_draft) {
  for (int q_slot = 0; q_slot < k; ++q_slot) {
    const int node = s.rejected[q_slot];
    float q[4];
    if constexpr (kDraft) {
      const RowRef row = DraftRow<kTables>(in, draft_row0 + node);
      Load4<kDtype, kVec>(row.base, row.start, x0, end, q);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (x0 + i < end && !rejection::ValueIsValid(SampleValueKind::kProbabilities, q[i])) {
          bad_draft = min(bad_draft, q_slot);
        }
      }
    } else {
      const int token = s.token[node];
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = token == x0 + i ? 1.0f : 0.0f;
    }
    const float mass_f = s.mass_f[q_slot];
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = tree::ResidualStep(r[i], mass_f, q[i]);
  }
}

__device__ __forceinline__ rejection::RaceCandidate WarpBest(rejection::RaceCandidate c) {
#pragma unroll
  for (int delta = kWarpSize / 2; delta > 0; delta /= 2) {
    rejection::RaceCandidate o;
    o.key = __shfl_down_sync(kFullMask, c.key, delta);
    o.token = __shfl_down_sync(kFullMask, c.token, delta);
    if (rejection::RaceBeats(o, c)) c = o;
  }
  return c;
}

// Thread-block clusters (and cluster_group) exist from sm_90 on. The portable
// PTX of the build (compute_75) gets a kernel that traps; the launcher never
// starts it (cudaErrorNotSupported where the device does not run sm_90 code,
// kernels/common/sm90_code.h).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SV_TREE_HAS_CLUSTERS 1
#else
#define SV_TREE_HAS_CLUSTERS 0
#endif

#if SV_TREE_HAS_CLUSTERS
// One pass over V at the current node by the whole cluster: the residual
// mass Z (emit == false) or the race (emit == true). Updates the walk state
// (thread 0 of every block, identically).
template <SampleDtype kDtype, bool kVec, bool kDraft, bool kTables>
__device__ void ClusterPass(SampleSharedStorage& s, const TreeSampleParams& p, cg::cluster_group& cluster,
                            int cluster_blocks, int rank, bool emit, int64_t target_row0, int64_t draft_row0) {
  const RejectionBatchInput& in = p.input;
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int vocab = in.vocab_size;
  const int num_chunks = rejection::NumChunks(vocab);
  const int parity = s.passes & 1;
  PassSlot& slot = s.slot[parity];
  const int k = s.k;
  const int row = s.v + 1;
  // The row where it is: staged, or in the worker's region (row table).
  const RowRef target_row = TargetRow<kTables>(in, target_row0 + row);
  const SequenceSamplingParams& seq = in.sequences[blockIdx.x / cluster_blocks];
  const auto seq_index = static_cast<uint32_t>(seq.sequence_index);
  bool bad_target = false;
  int bad_draft = INT_MAX;
  rejection::RaceCandidate best_r = rejection::NoCandidate();
  rejection::RaceCandidate best_t = rejection::NoCandidate();
  int m = 0;
  for (int c = rank; c < num_chunks; c += cluster_blocks, ++m) {
    const int begin = c * rejection::kNormalizerChunk;
    const int end = min(vocab, begin + rejection::kNormalizerChunk);
    // All of this thread's target values of the chunk first: four vector
    // loads in flight per thread before any arithmetic.
    float pvs[kRoundsPerChunk][4];
#pragma unroll
    for (int round = 0; round < kRoundsPerChunk; ++round) {
      const int x0 = begin + (round * kSampleThreads + tid) * rejection::kLaneWidth;
      Load4<kDtype, kVec>(target_row.base, target_row.start, x0, end, pvs[round]);
    }
    float lane_sum = 0.0f;
#pragma unroll
    for (int round = 0; round < kRoundsPerChunk; ++round) {
      const int x0 = begin + (round * kSampleThreads + tid) * rejection::kLaneWidth;
      if (x0 >= end) continue;
      const float* pv = pvs[round];
      float rv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) rv[i] = pv[i];
      if (k > 0) ResidualAt4<kDtype, kVec, kDraft, kTables>(s, in, draft_row0, k, x0, end, rv, bad_draft);
      Philox4x32 bits{};
      if (emit) bits = RaceBits(seq.seed, seq_index, static_cast<uint32_t>(row), static_cast<uint32_t>(x0 / 4));
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int x = x0 + i;
        if (x >= end) continue;  // (not break: keeps the loop unrolled, bits.v[i] in registers)
        if (!rejection::ValueIsValid(SampleValueKind::kProbabilities, pv[i])) bad_target = true;
        const float r = rv[i];
        if (!emit) {
          lane_sum = detmath::Add(lane_sum, r);
          continue;
        }
        // Exponential race. Exact pruning: E = -log u >= 1 - u, so an entrant
        // whose (1 - u) exceeds 1.001 x (best key x weight) in both races
        // cannot win either (the margin covers the rounding of E, the key
        // and the product); its logarithm is skipped.
        const float u = UniformOpenFloat(bits.v[i]);
        const float lower = 1.0f - u;
        const bool may_r = k > 0 && r > 0.0f && (best_r.token < 0 || lower <= 1.001f * best_r.key * r);
        const bool may_t = pv[i] > 0.0f && (best_t.token < 0 || lower <= 1.001f * best_t.key * pv[i]);
        if (!may_r && !may_t) continue;
        const float e = RaceExponential(bits.v[i]);
        if (may_r) rejection::RaceOffer(best_r, e, r, x);
        if (may_t) rejection::RaceOffer(best_t, e, pv[i], x);
      }
    }
    if (!emit) {
      // The chunk's sum in the fixed order of ChunkSumFixedOrder: float per
      // lane (above), then the 256 lane sums folded pairwise in double,
      // s[t] += s[t + stride] for stride 128, 64, ..., 1. Warp 0 evaluates the
      // strides 128, 64, 32 for its lane t directly from the eight lanes t +
      // 32 j, associated exactly as those three steps associate them, then
      // the strides 16 .. 1 by shuffles: one barrier per chunk. The lane sums
      // alternate between two buffers, so the next chunk's writes never meet
      // warp 0's reads of this one (a barrier lies between them).
      double* lanes = s.lanes[m & 1];
      lanes[tid] = static_cast<double>(lane_sum);
      __syncthreads();
      if (warp == 0) {
        const double* l = lanes + lane;
        const double a = detmath::AddD(detmath::AddD(l[0], l[128]), detmath::AddD(l[64], l[192]));
        const double b = detmath::AddD(detmath::AddD(l[32], l[160]), detmath::AddD(l[96], l[224]));
        double v = detmath::AddD(a, b);
#pragma unroll
        for (int stride = kWarpSize / 2; stride > 0; stride /= 2) {
          v = detmath::AddD(v, __shfl_down_sync(kFullMask, v, stride));
        }
        if (lane == 0) slot.chunk_sum[m] = v;
      }
    }
  }
  // Block results.
  const bool block_bad_target = __syncthreads_or(bad_target);
  bad_draft = __reduce_min_sync(kFullMask, bad_draft);
  if (emit) {
    best_r = WarpBest(best_r);
    best_t = WarpBest(best_t);
    if (lane == 0) {
      s.warp_best[0][warp] = best_r;
      s.warp_best[1][warp] = best_t;
    }
  }
  if (lane == 0) s.warp_bad_draft[warp] = bad_draft;
  __syncthreads();
  if (tid == 0) {
    int bd = INT_MAX;
    rejection::RaceCandidate br = rejection::NoCandidate(), bt = rejection::NoCandidate();
    for (int w = 0; w < kSampleWarps; ++w) {
      bd = min(bd, s.warp_bad_draft[w]);
      if (emit) {
        if (rejection::RaceBeats(s.warp_best[0][w], br)) br = s.warp_best[0][w];
        if (rejection::RaceBeats(s.warp_best[1][w], bt)) bt = s.warp_best[1][w];
      }
    }
    slot.bad_target = block_bad_target ? 1 : 0;
    slot.bad_draft = bd;
    slot.best_residual = br;
    slot.best_target = bt;
  }
  // Cluster exchange through distributed shared memory.
  cluster.sync();
  if (!emit) {
    for (int c = tid; c < num_chunks; c += kSampleThreads) {
      const PassSlot* owner = cluster.map_shared_rank(&slot, static_cast<unsigned>(c % cluster_blocks));
      s.gathered[c] = owner->chunk_sum[c / cluster_blocks];
    }
  }
  if (tid < cluster_blocks) {
    const PassSlot* owner = cluster.map_shared_rank(&slot, static_cast<unsigned>(tid));
    s.cluster_bad_target[tid] = owner->bad_target;
    s.cluster_bad_draft[tid] = owner->bad_draft;
    s.cluster_best[0][tid] = owner->best_residual;
    s.cluster_best[1][tid] = owner->best_target;
  }
  __syncthreads();
  if (tid == 0) {
    int any_bad_target = 0, bd = INT_MAX;
    rejection::RaceCandidate br = rejection::NoCandidate(), bt = rejection::NoCandidate();
    for (int r = 0; r < cluster_blocks; ++r) {
      any_bad_target |= s.cluster_bad_target[r];
      bd = min(bd, s.cluster_bad_draft[r]);
      if (rejection::RaceBeats(s.cluster_best[0][r], br)) br = s.cluster_best[0][r];
      if (rejection::RaceBeats(s.cluster_best[1][r], bt)) bt = s.cluster_best[1][r];
    }
    s.passes += 1;
    s.row_reads += 1 + (kDraft ? k : 0);
    s.pass_failed = 0;
    if (any_bad_target) {
      s.action = kActionFail;
      s.code = kRejectionBadTargetValue;
      s.position = row;
      s.pass_failed = 1;
    } else if (bd != INT_MAX) {
      s.action = kActionFail;
      s.code = kRejectionBadDraftValue;
      s.position = s.rejected[bd];
      s.pass_failed = 1;
    } else if (!emit) {
      double z = 0.0;
      for (int c = 0; c < num_chunks; ++c) z = detmath::AddD(z, s.gathered[c]);
      s.mass = z;
    } else {
      const rejection::RaceCandidate& winner = br.token >= 0 ? br : bt;
      if (winner.token < 0) {
        s.action = kActionFail;
        s.code = kRejectionEmptyTargetRow;
        s.position = row;
        s.pass_failed = 1;
      } else {
        s.next = winner.token;
      }
    }
  }
  __syncthreads();
}

// The scalar walk (thread 0 of each block): follows accepted children until
// the node must emit, a residual mass is needed, or a value is bad.
#endif  // SV_TREE_HAS_CLUSTERS

template <SampleDtype kDtype, bool kDraft, bool kTables>
__device__ void WalkScalar(SampleSharedStorage& s, const TreeSampleParams& p, int first, int64_t draft_row0,
                           const SequenceSamplingParams& seq, bool writer) {
  const RejectionBatchInput& in = p.input;
  const auto seq_index = static_cast<uint32_t>(seq.sequence_index);
  for (;;) {
    const int c = s.cand;
    if (c < 0 || !tree::UsableMass(s.mass)) {
      s.action = kActionEmit;
      return;
    }
    const int x = s.token[c];
    const float pv = s.pt[c];
    const auto fail = [&s](int code, int position) {
      s.action = kActionFail;
      s.code = code;
      s.position = position;
    };
    if (!rejection::ValueIsValid(SampleValueKind::kProbabilities, pv)) return fail(kRejectionBadTargetValue, s.v + 1);
    int bad_draft = INT_MAX;
    const float r = ResidualAt<kDtype, kDraft, kTables>(s, in, draft_row0, s.k, x, pv, bad_draft);
    if (bad_draft != INT_MAX) return fail(kRejectionBadDraftValue, s.rejected[bad_draft]);
    const float q = kDraft ? s.pq[c] : 1.0f;
    if (!rejection::ValueIsValid(SampleValueKind::kProbabilities, q)) return fail(kRejectionBadDraftValue, c);
    if (tree::AcceptChild(AcceptCoin(seq.seed, seq_index, static_cast<uint32_t>(c)), r, q, s.mass)) {
      if (writer) p.path_nodes[first + s.depth] = c;
      s.depth += 1;
      s.v = c;
      s.k = 0;
      s.mass = 1.0;
      s.cand = s.first_child[c + 1];
      continue;
    }
    s.rejected[s.k] = c;
    s.mass_f[s.k] = static_cast<float>(s.mass);
    s.k += 1;
    const int sibling = s.next_sibling[c];
    if (sibling < 0) {
      s.action = kActionEmit;
      return;
    }
    s.cand = sibling;
    if (kDraft) {
      s.action = kActionMassPass;
      return;
    }
    s.mass = tree::OneHotNextMass(s.mass, r, tree::ResidualStep(r, s.mass_f[s.k - 1], 1.0f));
  }
}

template <SampleDtype kDtype, bool kVec, bool kDraft, bool kTables>
__global__ void __launch_bounds__(kSampleThreads) TreeSampleKernel(SampleTreeArgs args) {
#if !SV_TREE_HAS_CLUSTERS
  __trap();
#else
  __shared__ SampleSharedStorage s;
  cg::cluster_group cluster = cg::this_cluster();
  const TreeSampleParams& p = args.p;
  const RejectionBatchInput& in = p.input;
  const int cluster_blocks = args.cluster_blocks;
  const int rank = static_cast<int>(cluster.block_rank());
  const int tree = blockIdx.x / cluster_blocks;
  const int tid = threadIdx.x;
  const bool writer = rank == 0 && tid == 0;
  const int first = in.draft_offsets[tree];
  const int n = in.draft_offsets[tree + 1] - first;
  const int64_t target_row0 = int64_t{first} + tree;
  const int64_t draft_row0 = first;
  const SequenceSamplingParams seq = in.sequences[tree];

  // (1) Structure, checks and scalar prefetch.
  if (tid == 0) {
    s.first_bad_token = INT_MAX;
    s.first_bad_parent = INT_MAX;
    s.v = -1;
    s.k = 0;
    s.depth = 0;
    s.code = rejection::SequenceParamsCode(in.kind, in.method, seq);
    s.position = -1;
    s.next = -1;
    s.row_reads = 0;
    s.passes = 0;
    s.mass = 1.0;
    s.action = s.code == kRejectionOk ? kActionEmit : kActionFail;
  }
  const bool n_ok = n >= 1 && n <= kMaxTreeNodes;
  for (int v = tid; v <= min(max(n, 0), kMaxTreeNodes); v += kSampleThreads) s.first_child[v] = -1;
  __syncthreads();
  if (n_ok) {
    for (int j = tid; j < n; j += kSampleThreads) {
      const int parent = p.parent_indices[first + j];
      const int token = in.draft_tokens[first + j];
      s.parent[j] = parent;
      s.token[j] = token;
      if (token < 0 || token >= in.vocab_size) atomicMin(&s.first_bad_token, j);
      if (parent < -1 || parent >= j) atomicMin(&s.first_bad_parent, j);
    }
  }
  __syncthreads();
  const bool structure_ok = n_ok && s.first_bad_token == INT_MAX && s.first_bad_parent == INT_MAX;
  if (structure_ok) {
    if (tid < kWarpSize) {
      // Sibling lists, last chunk of 32 nodes first: a node's next sibling is
      // the next same-parent lane of its chunk, else the first node with its
      // parent in a later chunk (first_child, updated per chunk).
      const int lane = tid;
      for (int base = ((n - 1) / kWarpSize) * kWarpSize; base >= 0; base -= kWarpSize) {
        const int j = base + lane;
        const bool valid = j < n;
        const int parent = valid ? s.parent[j] : -2 - lane;  // invalid lanes match nobody
        const unsigned group = __match_any_sync(kFullMask, parent);
        const unsigned higher = lane == kWarpSize - 1 ? 0u : group & (~0u << (lane + 1));
        const int next = higher != 0 ? base + __ffs(higher) - 1 : (valid ? s.first_child[parent + 1] : -1);
        __syncwarp();
        if (valid) {
          s.next_sibling[j] = next;
          if ((group & ((1u << lane) - 1u)) == 0) s.first_child[parent + 1] = j;
        }
        __syncwarp();
      }
    } else {
      for (int j = tid - kWarpSize; j < n; j += kSampleThreads - kWarpSize) {
        const int x = s.token[j];
        const RowRef target_row = TargetRow<kTables>(in, target_row0 + s.parent[j] + 1);
        s.pt[j] = LoadOne<kDtype>(target_row.base, target_row.start + x);
        if constexpr (kDraft) {
          const RowRef draft_row = DraftRow<kTables>(in, draft_row0 + j);
          s.pq[j] = LoadOne<kDtype>(draft_row.base, draft_row.start + x);
        } else {
          s.pq[j] = 1.0f;
        }
      }
    }
  }
  __syncthreads();
  // Every thread reads the checks' outcome before thread 0 rewrites it: the
  // compiler loads s.code in every thread even under `if (tid == 0)`, and
  // that load raced thread 0's writes below (racecheck on the H100).
  const int code_so_far = s.code;
  __syncthreads();
  if (tid == 0) {
    if (code_so_far != kRejectionOk) {
      // Already refused by the sequence parameters: nothing to add.
    } else if (!n_ok) {
      s.action = kActionFail;
      s.code = kTreeBadParent;  // unreachable after host validation; keeps the walk in bounds
      s.position = 0;
    } else if (s.first_bad_token != INT_MAX) {
      s.action = kActionFail;
      s.code = kRejectionDraftTokenOutOfRange;
      s.position = s.first_bad_token;
    } else if (s.first_bad_parent != INT_MAX) {
      s.action = kActionFail;
      s.code = kTreeBadParent;
      s.position = s.first_bad_parent;
    } else {
      s.cand = s.first_child[0];
    }
  }
  __syncthreads();

  // (2) Walk; passes over V where the walk needs them. Every block of the
  // cluster takes the same decisions (same data, same arithmetic), so all
  // reach the same cluster barriers.
  // Thread 0 rewrites the walk state: every read of it by the other threads
  // is followed by a barrier before thread 0 can write again.
  const bool start_ok = s.action != kActionFail;
  __syncthreads();
  if (start_ok) {
    for (;;) {
      if (tid == 0) WalkScalar<kDtype, kDraft, kTables>(s, p, first, draft_row0, seq, writer);
      __syncthreads();
      const int action = s.action;
      __syncthreads();
      if (action == kActionFail) break;
      ClusterPass<kDtype, kVec, kDraft, kTables>(s, p, cluster, cluster_blocks, rank, action == kActionEmit, target_row0,
                                        draft_row0);
      const bool failed = s.pass_failed != 0;  // ClusterPass ended with a barrier
      // Every thread has read pass_failed before thread 0 rewrites the walk
      // state for the next pass.
      __syncthreads();
      if (action == kActionEmit || failed) break;
    }
  }

  // (3) Results.
  if (writer) {
    const bool ok = s.action != kActionFail;
    p.output.accepted_lengths[tree] = ok ? s.depth : 0;
    p.output.next_tokens[tree] = ok ? s.next : -1;
    p.output.mismatch[tree] = (!ok || s.first_child[s.v + 1] >= 0) ? 1 : 0;
    p.output.status_codes[tree] = ok ? kRejectionOk : s.code;
    p.output.error_positions[tree] = ok ? -1 : s.position;
    if (p.row_reads != nullptr) p.row_reads[tree] = ok ? s.row_reads : 0;
  }
  // No block may leave while another can still read its shared memory.
  cluster.sync();
#endif  // SV_TREE_HAS_CLUSTERS
}

// Clusters of more than 8 blocks need the non-portable size and a device
// that schedules them; whether it does is asked once per kernel (a host
// query, so the decision is also safe inside stream capture, where a refused
// launch would invalidate the capture).
template <SampleDtype kDtype, bool kVec, bool kDraft, bool kTables>
bool LargeClustersSchedulable(int32_t blocks) {
  static std::atomic<int> known{0};  // 0 unknown, 1 yes, 2 no (for 16 blocks: the only large size chosen)
  if (blocks == kMaxClusterBlocks) {
    if (const int k = known.load(std::memory_order_relaxed); k != 0) return k == 1;
  }
  auto* kernel = &TreeSampleKernel<kDtype, kVec, kDraft, kTables>;
  bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
  if (ok) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(kSampleThreads);
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = static_cast<unsigned>(blocks);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0;
  }
  (void)cudaGetLastError();  // a refused query leaves nothing behind
  if (blocks == kMaxClusterBlocks) known.store(ok ? 1 : 2, std::memory_order_relaxed);
  return ok;
}

template <SampleDtype kDtype, bool kVec, bool kDraft, bool kTables>
cudaError_t LaunchSampleKernel(SampleTreeArgs args, bool automatic, cudaStream_t stream) {
  auto* kernel = &TreeSampleKernel<kDtype, kVec, kDraft, kTables>;
  if (args.cluster_blocks > 8 && !LargeClustersSchedulable<kDtype, kVec, kDraft, kTables>(args.cluster_blocks)) {
    if (!automatic) return cudaErrorInvalidValue;
    args.cluster_blocks = 8;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(args.p.input.num_sequences * args.cluster_blocks));
  config.blockDim = dim3(kSampleThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned>(args.cluster_blocks);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args);
}

template <SampleDtype kDtype, bool kTables>
cudaError_t DispatchSampleRows(const SampleTreeArgs& args, bool vec, bool automatic, cudaStream_t stream) {
  const bool draft = args.p.input.has_draft_probs;
  if (vec) {
    return draft ? LaunchSampleKernel<kDtype, true, true, kTables>(args, automatic, stream)
                 : LaunchSampleKernel<kDtype, true, false, kTables>(args, automatic, stream);
  }
  return draft ? LaunchSampleKernel<kDtype, false, true, kTables>(args, automatic, stream)
               : LaunchSampleKernel<kDtype, false, false, kTables>(args, automatic, stream);
}

// Rows through row tables or staged (LaunchTreeSample checked that the
// draft rows come the same way).
template <SampleDtype kDtype>
cudaError_t DispatchSample(const SampleTreeArgs& args, bool vec, bool automatic, cudaStream_t stream) {
  return args.p.input.target_rows != nullptr ? DispatchSampleRows<kDtype, true>(args, vec, automatic, stream)
                                             : DispatchSampleRows<kDtype, false>(args, vec, automatic, stream);
}

}  // namespace

size_t TreeScratchBytes(int32_t max_trees) {
  const size_t bytes = sizeof(LookbackState) + sizeof(unsigned long long) * static_cast<size_t>(std::max(max_trees, 1));
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

cudaError_t InitTreeScratch(const TreeScratch& scratch, cudaStream_t stream) {
  if (scratch.data == nullptr || scratch.bytes < TreeScratchBytes(scratch.max_trees)) return cudaErrorInvalidValue;
  return cudaMemsetAsync(scratch.data, 0, TreeScratchBytes(scratch.max_trees), stream);
}

absl::StatusOr<TreeScratchBuffer> AllocateTreeScratch(int32_t max_trees, cudaStream_t stream) {
  if (max_trees < 1 || max_trees > kMaxBatchSequences) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_trees is ", max_trees, "; must lie in [1, ", kMaxBatchSequences, "]"));
  }
  TreeScratchBuffer out;
  SV_ASSIGN_OR_RETURN(out.buffer, DeviceBuffer::Create(TreeScratchBytes(max_trees)));
  out.view = TreeScratch{out.buffer.data(), out.buffer.size(), max_trees};
  SV_CUDA_RETURN_IF_ERROR(InitTreeScratch(out.view, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return out;
}

absl::Status ValidateTreeGreedyDeviceBatch(const TreeGreedyDeviceBatch& batch, const TreeScratch& scratch) {
  const TreeGreedyVerifyParams& p = batch.params;
  const int32_t b = p.input.num_sequences;
  if (b < 1 || b > scratch.max_trees) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sequences is ", b, "; the tree scratch serves [1, ", scratch.max_trees, "]"));
  }
  if (absl::Status s = ValidateTreeRowDestinations(p.row_destinations, b, /*origins_readable=*/false); !s.ok()) {
    return s;
  }
  if (batch.total_nodes < b || batch.total_nodes > int64_t{b} * kMaxTreeNodes) {
    return absl::InvalidArgumentError(absl::StrCat("total_nodes is ", batch.total_nodes, "; must lie in [", b,
                                                   ", ", int64_t{b} * kMaxTreeNodes, "]"));
  }
  if (p.input.row_bytes < 0 || p.input.row_bytes / 16 > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("row_bytes is ", p.input.row_bytes, "; out of range"));
  }
  if (absl::Status s = ValidateGreedyPointers(GreedyVerifyParams{p.input, p.output}); !s.ok()) return s;
  if (p.parent_indices == nullptr || p.accepted_nodes == nullptr) {
    return absl::InvalidArgumentError("parent_indices and accepted_nodes must be set");
  }
  return absl::OkStatus();
}

cudaError_t LaunchTreeGreedyVerifyPack(const TreeGreedyDeviceBatch& batch, const TreeScratch& scratch,
                                       cudaStream_t stream) {
  const TreeGreedyVerifyParams& p = batch.params;
  PackArgs a{};
  a.num_trees = p.input.num_sequences;
  a.node_offsets = p.input.draft_offsets;
  a.draft_tokens = p.input.draft_tokens;
  a.parent_indices = p.parent_indices;
  a.target_tokens = p.input.target_tokens;
  a.draft_kv = p.input.draft_kv;
  a.kv_sources = p.kv_sources;
  a.kv_source_alignment = p.kv_source_alignment;
  a.row_bytes = p.input.row_bytes;
  a.accepted_lengths = p.output.accepted_lengths;
  a.next_tokens = p.output.next_tokens;
  a.mismatch = p.output.mismatch;
  a.packed_row_offsets = p.output.packed_row_offsets;
  a.accepted_nodes = p.accepted_nodes;
  a.packed_kv = p.output.packed_kv;
  a.row_destinations = p.row_destinations;
  return LaunchWalkPack<true>(a, scratch, stream);
}

cudaError_t LaunchTreePack(const TreePackParams& p, const TreeScratch& scratch, cudaStream_t stream) {
  PackArgs a{};
  a.num_trees = p.num_trees;
  a.node_offsets = p.node_offsets;
  a.given_lengths = p.accepted_lengths;
  a.given_paths = p.path_nodes;
  a.draft_kv = p.draft_kv;
  a.kv_sources = p.kv_sources;
  a.kv_source_alignment = p.kv_source_alignment;
  a.row_bytes = p.row_bytes;
  a.packed_row_offsets = p.packed_row_offsets;
  a.accepted_nodes = p.accepted_nodes;
  a.packed_kv = p.packed_kv;
  a.row_destinations = p.row_destinations;
  return LaunchWalkPack<false>(a, scratch, stream);
}

cudaError_t TreeSamplingSupported(bool* yes) {
  // The portable PTX's TreeSampleKernel traps (SV_TREE_HAS_CLUSTERS).
  void (*const kernel)(SampleTreeArgs) = &TreeSampleKernel<SampleDtype::kFloat32, false, false, false>;
  static Sm90CodeCache cache(reinterpret_cast<const void*>(kernel));
  return cache.Ask(yes);
}

cudaError_t LaunchTreeSample(const TreeSampleParams& params, cudaStream_t stream, int32_t cluster_blocks) {
  const RejectionBatchInput& in = params.input;
  if (in.num_sequences < 1 || in.vocab_size < 1 || in.vocab_size > (1 << 20) ||
      in.kind != SampleValueKind::kProbabilities || in.method != SampleMethod::kExact || in.validate_full_rows ||
      params.path_nodes == nullptr || params.parent_indices == nullptr ||
      // One row source for both: row tables (target_rows set) or staged values.
      (in.target_rows == nullptr && in.target_values == nullptr) ||
      in.has_draft_probs != ((in.target_rows != nullptr ? in.draft_rows : in.draft_values) != nullptr)) {
    return cudaErrorInvalidValue;
  }
  bool supported = false;
  if (TreeSamplingSupported(&supported) != cudaSuccess) return cudaErrorUnknown;
  if (!supported) return cudaErrorNotSupported;
  const int32_t chunks = rejection::NumChunks(in.vocab_size);
  // Default: 16 blocks per tree from 16 chunks on (more SMs reading each
  // row; 16 needs the non-portable cluster size, sm_90; 8 where the device
  // cannot schedule clusters of 16), else a block per chunk up to 8.
  const bool automatic = cluster_blocks == 0;
  if (automatic) cluster_blocks = chunks >= kMaxClusterBlocks ? kMaxClusterBlocks : std::min(8, chunks);
  if (cluster_blocks < 1 || cluster_blocks > kMaxClusterBlocks) return cudaErrorInvalidValue;
  const int64_t elem = SampleDtypeBytes(in.dtype);
  // Rows read through row tables are 16-byte aligned by contract
  // (rejection_params.h); staged rows by their base.
  const auto aligned = [&](const void* values, const void* const* rows) {
    return rows != nullptr || reinterpret_cast<uintptr_t>(values) % (4 * elem) == 0;
  };
  const bool vec = in.vocab_size % 4 == 0 && aligned(in.target_values, in.target_rows) &&
                   (!in.has_draft_probs || aligned(in.draft_values, in.draft_rows));
  const SampleTreeArgs args{params, cluster_blocks};
  switch (in.dtype) {
    case SampleDtype::kFloat32: return DispatchSample<SampleDtype::kFloat32>(args, vec, automatic, stream);
    case SampleDtype::kFloat16: return DispatchSample<SampleDtype::kFloat16>(args, vec, automatic, stream);
    case SampleDtype::kBFloat16: return DispatchSample<SampleDtype::kBFloat16>(args, vec, automatic, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace specverify
