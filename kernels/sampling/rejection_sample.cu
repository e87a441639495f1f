#include "kernels/sampling/rejection_sample.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>

#include "kernels/sampling/philox.h"
#include "kernels/sampling/race_result.cuh"
#include "kernels/sampling/rejection_core.h"

namespace specverify {
namespace {

using rejection::ChunkStats;
using rejection::RaceCandidate;
using rejection::RowNormalizer;
using rejection::RowProbability;

// One thread per lane of the fixed chunk order (rejection_core.h).
constexpr int kThreads = rejection::kChunkLanes;
constexpr int kWarps = kThreads / 32;
constexpr int kRounds = rejection::kNormalizerChunk / (kThreads * rejection::kLaneWidth);
// The occupancies the race kernel is compiled for (__launch_bounds__ min
// blocks): 3 blocks of 256 threads leave 80 registers per thread (4 blocks
// forced 64 registers and spilled); 2 blocks leave 128, and the
// log-probability and logits races, which spill a few bytes at 80, run
// without spills (H100, B=8: log-probabilities 14.97 -> 14.72 us, logits
// 56.8 -> 56.3 us, bench/sampling/results/2026-11-25-race-floors). The
// launcher plans 2 blocks per SM (RejectionRaceBlocksPerSm), always one
// wave, and takes the kernel compiled for its plan; 3 is what
// RejectionScratch::race_blocks_per_sm can ask for.
constexpr int kRaceBlocksPerSm = 3;
constexpr int kRaceBlocksPerSmSmall = 2;
// The row pass holds a chunk's 16 values per thread in registers between its
// maximum and its weights. fp32 rows: 6 blocks of 256 threads per SM (<= 40
// registers; 4, 5, 7 and 8 were all slower at B=8 and B=32). A block is a
// latency chain (its loads, two block reductions), so 16-bit rows, whose
// chunk is half the bytes, take 8 (<= 32 registers; bf16 spills nothing,
// fp16 16 bytes): H100, bf16 logits B=8 49.0 -> 48.1 us, fp16 49.1 -> 48.4,
// bf16 B=16 75.7 -> 74.2 (bench/sampling/results/2026-11-27-rowpass-occupancy).
constexpr int kRowPassBlocksPerSm = 6;
constexpr int kRowPassBlocksPerSm16Bit = 8;
template <SampleDtype D>
constexpr int RowPassBlocksPerSm() {
  return D == SampleDtype::kFloat32 ? kRowPassBlocksPerSm : kRowPassBlocksPerSm16Bit;
}
// RowPassRunKernel: blocks per SM, and the most consecutive chunks of a row
// one block takes.
constexpr int kRowPassRunBlocksPerSm = 5;
constexpr int32_t kRowPassMaxChunksPerBlock = 8;
// Single-chunk waves from which the launcher takes runs.
constexpr int64_t kRowPassRunMinWaves = 16;
// The filter: 512 threads, two blocks per SM, and up to kFilterMaxSlices
// blocks per row (a thread-block cluster on sm_90) so that B=8's 72 target
// rows keep every SM reading instead of half of them.
constexpr int kFilterThreads = 512;
constexpr int kFilterBlocksPerSm = 2;
constexpr int kFilterMaxSlices = 8;
// The race sweep streams its row share through shared memory with
// asynchronous copies (sm_80+), kStageLookahead quads per thread in flight,
// without holding registers for them: 4 quads of two rows is 32 KB per block
// in flight. Against the register-staged loop it replaced (H200, two runs
// of one session): b=128 79.6 -> 74.7 us, b=32 29.4 -> 28.2 us; no gain at
// b=8, where the sweep is instruction-bound. A ring of
// kStageLookahead + 1 slots lets a slot be refilled one iteration after it
// was read, when its values have certainly left shared memory.
constexpr int kStageLookahead = 4;
constexpr int kStageSlots = kStageLookahead + 1;
// A race share's length is a multiple of this many quads (see AcceptRaceKernel).
constexpr int32_t kShareQuads = 32;
constexpr int kStageBytesPerRow = kStageSlots * kThreads * 16;  // 16 B: a quad of fp32
constexpr int kRaceStageBytes = 2 * kStageBytesPerRow;         // target and draft rows: 40 KB
constexpr int kMaxChunks = (1 << 20) / rejection::kNormalizerChunk;  // V <= 2^20
constexpr uint32_t kFullMask = 0xffffffffu;
__device__ constexpr float kInfinity = __builtin_huge_valf();
__device__ constexpr float kFloatMinNormal = 1.17549435e-38f;  // 2^-126

constexpr int32_t kRowBadElement = 1;
constexpr int32_t kRowBadSum = 2;

struct DeviceRowNorm {
  RowNormalizer norm;
  int32_t flags;  // kRowBadElement | kRowBadSum
};

// Per-sequence race result: one word that every race block folds its
// winners into with one atomicMax (race_result.cuh), the OR of the value
// flags, and a ticket counter whose last taker writes the outcome. All three
// start at zero, and that block leaves them at zero.
struct ScratchLayout {
  unsigned long long* race_words = nullptr;  // [max_sequences]
  uint32_t* race_flags = nullptr;            // [max_sequences]: 1 invalid target element, 2 invalid draft element
  uint32_t* race_tickets = nullptr;          // [max_sequences]
  ChunkStats* chunks = nullptr;              // [max_rows * max_chunks]; argmax -1 marks an invalid element
  DeviceRowNorm* norms = nullptr;            // [max_rows]: target rows, then draft rows
  // [max_target_rows * max_chunks * kWarps]: each warp's maximum in the row
  // pass of a filtered batch's target rows (NaN where a chunk took the
  // general path), from which the filter bounds its candidates and picks
  // the groups of 512 values that can hold them.
  float* warp_max = nullptr;
  // [max_rows]: each row's 1/T (0 for greedy rows), written by the row pass
  // where it looked the sequence up, so the combine needs no offsets search
  // and temperature read on its chain.
  float* row_inv_t = nullptr;
  size_t zeroed_bytes = 0;                   // prefix cleared once by InitRejectionScratch
  size_t bytes = 0;
};

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

int64_t MaxRows(const RejectionScratchLimits& l) {
  return 2 * static_cast<int64_t>(l.max_total_draft_tokens) + l.max_sequences;
}
int32_t MaxRaceBlocks(int32_t vocab) {
  const int32_t quads = (vocab + 3) / 4;
  return std::max(1, (quads + kThreads - 1) / kThreads);
}

ScratchLayout Carve(void* base, const RejectionScratchLimits& l) {
  ScratchLayout s;
  auto* p = static_cast<char*>(base);
  size_t off = 0;
  const auto take = [&](size_t n) {
    char* at = p == nullptr ? nullptr : p + off;
    off += AlignUp(n);
    return at;
  };
  const int64_t rows = MaxRows(l);
  const int32_t chunks = rejection::NumChunks(l.max_vocab_size);
  s.race_words = reinterpret_cast<unsigned long long*>(take(sizeof(unsigned long long) * l.max_sequences));
  s.race_flags = reinterpret_cast<uint32_t*>(take(sizeof(uint32_t) * l.max_sequences));
  s.race_tickets = reinterpret_cast<uint32_t*>(take(sizeof(uint32_t) * l.max_sequences));
  s.zeroed_bytes = off;
  s.chunks = reinterpret_cast<ChunkStats*>(take(sizeof(ChunkStats) * rows * chunks));
  s.norms = reinterpret_cast<DeviceRowNorm*>(take(sizeof(DeviceRowNorm) * rows));
  const int64_t target_rows = static_cast<int64_t>(l.max_total_draft_tokens) + l.max_sequences;
  s.warp_max = reinterpret_cast<float*>(take(sizeof(float) * target_rows * chunks * kWarps));
  s.row_inv_t = reinterpret_cast<float*>(take(sizeof(float) * rows));
  s.bytes = off;
  return s;
}

// ------------------------------------------------------------ helpers --

template <SampleDtype D>
__device__ __forceinline__ float LoadOne(const void* row, int32_t x) {
  return rejection::LoadValue(row, D, x);
}

// A quad of stored values as it sits in memory: 16 B of fp32, 8 B of fp16/bf16.
template <SampleDtype D>
using PackedQuad = std::conditional_t<D == SampleDtype::kFloat32, float4, uint2>;

template <SampleDtype D>
__device__ __forceinline__ void UnpackQuad(const PackedQuad<D>& v, float out[4]) {
  if constexpr (D == SampleDtype::kFloat32) {
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    const uint16_t h[4] = {static_cast<uint16_t>(v.x), static_cast<uint16_t>(v.x >> 16), static_cast<uint16_t>(v.y),
                           static_cast<uint16_t>(v.y >> 16)};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // fp16 -> fp32 is exact, so the hardware conversion (one instruction)
      // gives Float16BitsToFloat's bits (NaN payloads aside: invalid either way).
      out[i] = D == SampleDtype::kFloat16 ? __half2float(__ushort_as_half(h[i])) : detmath::BFloat16BitsToFloat(h[i]);
    }
  }
}

// Four consecutive values x..x+3 of a row (`pad`, zero by default, past
// `end`); one 16- or 8-byte load when the row is aligned for it.
template <SampleDtype D>
__device__ __forceinline__ void Load4(const void* row, int32_t x, int32_t end, bool vector_ok, float out[4],
                                      float pad = 0.0f) {
  if (vector_ok && x + 3 < end) {
    UnpackQuad<D>(__ldg(reinterpret_cast<const PackedQuad<D>*>(static_cast<const char*>(row) +
                                                                int64_t{x} * SampleDtypeBytes(D))),
                  out);
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = x + i < end ? LoadOne<D>(row, x + i) : pad;
}

// The sequence of row r: the largest i in [0, b) with key(i) <= r, key(i) =
// offsets[i] + i * extra. The whole warp calls it with the same arguments
// (every lane gets the answer): each step probes 32 evenly spaced keys at
// once and keeps the span from the last one <= r, so b <= 32 takes one
// memory round trip and b <= 1024 two, where a binary search took log2(b)
// dependent loads. The row pass looks up every block's sequence (its
// temperature) before it can weigh a value: ncu put the pass's two largest
// piles of stall samples on the waits for the offsets and the temperature.
__device__ int32_t SequenceOfRowWarp(const int32_t* offsets, int32_t b, int64_t r, int32_t extra) {
  const int lane = threadIdx.x % 32;
  int32_t lo = 0, count = b;  // the answer lies in [lo, lo + count); key(lo) <= r
  while (count > 1) {
    const int32_t step = (count + 31) / 32;
    const int32_t j = lo + lane * step;
    const bool at_or_below =
        j < lo + count && static_cast<int64_t>(offsets[j]) + static_cast<int64_t>(j) * extra <= r;
    // Lane 0 probes lo itself, whose key is <= r.
    const unsigned below = __ballot_sync(kFullMask, at_or_below) | 1u;
    const int32_t last = 31 - __clz(static_cast<int>(below));
    lo += last * step;
    count = min(step, count - last * step);
  }
  return lo;
}

// Sum over the block in the fixed pairwise order s[t] += s[t + stride].
__device__ double BlockFixedOrderSum(double partial, double* shared) {
  const int t = threadIdx.x;
  shared[t] = partial;
  __syncthreads();
#pragma unroll
  for (int stride = kThreads / 2; stride >= 32; stride /= 2) {
    if (t < stride) shared[t] = detmath::AddD(shared[t], shared[t + stride]);
    __syncthreads();
  }
  double v = t < 32 ? shared[t] : 0.0;
  if (t < 32) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = detmath::AddD(v, __shfl_down_sync(kFullMask, v, offset));
  }
  __syncthreads();
  return v;  // valid in thread 0
}

struct MaxArg {
  float value;
  int32_t index;  // -1: none
};

__device__ __forceinline__ bool MaxBeats(const MaxArg& a, const MaxArg& b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ MaxArg BlockMaxArg(MaxArg m, MaxArg* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxArg o{__shfl_down_sync(kFullMask, m.value, offset), __shfl_down_sync(kFullMask, m.index, offset)};
    if (MaxBeats(o, m)) m = o;
  }
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < kWarps ? shared[threadIdx.x] : MaxArg{0.0f, -1};
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const MaxArg o{__shfl_down_sync(kFullMask, m.value, offset), __shfl_down_sync(kFullMask, m.index, offset)};
      if (MaxBeats(o, m)) m = o;
    }
    if (threadIdx.x == 0) shared[0] = m;
  }
  __syncthreads();
  const MaxArg result = shared[0];
  __syncthreads();
  return result;
}

__device__ RaceCandidate ShuffleCandidate(const RaceCandidate& c, int offset) {
  return RaceCandidate{__shfl_down_sync(kFullMask, c.key, offset), __shfl_down_sync(kFullMask, c.token, offset)};
}

__device__ void WarpRaceOne(RaceCandidate& c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const RaceCandidate o = ShuffleCandidate(c, offset);
    if (rejection::RaceBeats(o, c)) c = o;
  }
}

// Both races' warp winners into lane 0; a race no lane entered is skipped
// (the target race usually: warps stop feeding it at their first residual
// entrant).
__device__ void WarpRace(RaceCandidate& a, RaceCandidate& b) {
  if (__any_sync(kFullMask, a.token >= 0)) WarpRaceOne(a);
  if (__any_sync(kFullMask, b.token >= 0)) WarpRaceOne(b);
}

// Helpers of the race's hopeless test (AcceptRaceKernel).

__device__ __forceinline__ float WarpMin(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = fminf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// max(a, b), NaN if either is NaN (fmaxf drops a NaN operand).
__device__ __forceinline__ float MaxKeepingNaN(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
#endif
}

// min(a, b), NaN if either is NaN (fminf drops a NaN operand).
__device__ __forceinline__ float MinKeepingNaN(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? __int_as_float(0x7fffffff) : fminf(a, b);
#endif
}

// a[e] for an index known only at run time, by selects: indexing a register
// array with it would move the array to local memory.
template <typename T>
__device__ __forceinline__ T Pick(const T (&a)[4], int e) {
  return e == 0 ? a[0] : (e == 1 ? a[1] : (e == 2 ? a[2] : a[3]));
}

// An upper bound on the computed race key Div(-LogDet(u), w) of an entrant of
// weight w > 0, without the logarithm: -ln u <= (1 - u) / u. The 0.1% margin
// covers LogDet's 2 ulp, the key's rounding, and this function's own
// roundings and approximate reciprocal (1 ulp; exact enough for a bound: it
// never decides a token). +inf where the reciprocal is not that accurate
// (u * w not normal, or above 2^125).
__device__ __forceinline__ float KeyUpperBound(float u, float one_minus_u, float w) {
  const float denominator = __fmul_rn(u, w);
  if (!(denominator >= kFloatMinNormal && denominator <= 4.2535296e37f)) return kInfinity;
  float reciprocal;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(reciprocal) : "f"(denominator));
  return __fmul_rn(__fmul_rn(one_minus_u, reciprocal), 1.001f);
}

// 1.001 x the bound on the winner's key, the form the hopeless test uses;
// +inf (never prune) while the bound is +inf or not a normal float (a
// subnormal key could round to a tie, which the lower index would win).
__device__ __forceinline__ float PruneScale(float bound) {
  return bound >= kFloatMinNormal ? detmath::Mul(bound, 1.001f) : kInfinity;
}

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
};

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

// The largest and smallest of a thread's 16 stored values, NaN if any is.
// 16-bit values on sm_80+: two at a time in their own format (max.NaN /
// min.NaN on bf16x2 or f16x2 pairs, then one conversion each), half the
// instructions of comparing them one at a time as floats in a pass that is
// issue-bound on 16-bit rows (bf16 B=32 116 -> 110 us, B=128 394 -> 370;
// bench/sampling/results/2026-11-27-hmax). Conversion is exact and monotone, so
// the results are the float comparisons' (but for the sign of a zero
// maximum and NaN payloads: no weight or validity depends on either).
template <SampleDtype D>
__device__ __forceinline__ void ChunkMaxMin(const PackedQuad<D> (&raw)[kRounds], const float (&v)[kRounds][4],
                                            float& m, float& low) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (D != SampleDtype::kFloat32) {
    uint32_t hi = raw[0].x, lo = raw[0].x;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (r == 0 && half == 0) continue;
        const uint32_t pair = half == 0 ? raw[r].x : raw[r].y;
        if constexpr (D == SampleDtype::kBFloat16) {
          asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(hi) : "r"(pair));
          asm("min.NaN.bf16x2 %0, %0, %1;" : "+r"(lo) : "r"(pair));
        } else {
          asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(hi) : "r"(pair));
          asm("min.NaN.f16x2 %0, %0, %1;" : "+r"(lo) : "r"(pair));
        }
      }
    }
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
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      m = MaxKeepingNaN(m, v[r][i]);
      low = MinKeepingNaN(low, v[r][i]);
    }
  }
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
  float v[kRounds][4];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) UnpackQuad<D>(raw[r], v[r]);
  float m, low;
  ChunkMaxMin<D>(raw, v, m, low);
  // Validity without a per-element poison: a NaN makes both NaN, +inf the
  // maximum and -inf the minimum infinite.
  const bool bad = __syncthreads_or(!(detmath::IsFinite(m) && detmath::IsFinite(low)));
  m = BlockMax(m, max_shared);
  const float scale = rejection::LogitScale(inv_t);
  // Every exponent t = (v - m) * scale is <= 0 (m is the maximum), and t is
  // monotone in v: when the thread's smallest value gives t >= -125, every
  // weight is Exp2DetNonPositive(t), bit for bit ScaledLogitWeight's
  // Exp2Det, seven instructions shorter per element in a pass that is
  // issue-bound on them. Wider rows (and invalid ones) take the full exp.
  const bool exponents_in_range = !bad && detmath::Mul(detmath::Sub(low, m), scale) >= -125.0f;
  float partial = 0.0f;
  if (exponents_in_range) {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial = detmath::Add(partial, detmath::Exp2DetNonPositive(detmath::Mul(detmath::Sub(v[r][i], m), scale)));
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i) partial = detmath::Add(partial, rejection::ScaledLogitWeight(v[r][i], m, scale));
    }
  }
  const double sum = BlockFixedOrderSum(static_cast<double>(partial), sum_shared);
  return ChunkStats{m, bad ? -1 : begin, sum};
}

// Any other chunk: a row's partial last chunk, a greedy row (argmax), the
// full-row check. Loads its own values.
template <SampleDtype D>
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
  if (a.mode == RowPassMode::kNormalize) {
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
  if (a.mode == RowPassMode::kCheck || !greedy) {
    stats.sum = BlockFixedOrderSum(static_cast<double>(partial), sum_shared);
  }
  return stats;
}

// Row statistics of one row's temperature (the row's sequence). Every lane
// of the calling warp asks for the same slot.
__device__ __forceinline__ float RowTemperature(const RowPassArgs& a, int64_t slot) {
  const bool is_draft = slot >= a.num_target_rows;
  const int64_t row = is_draft ? slot - a.num_target_rows : slot;
  return a.in.sequences[SequenceOfRowWarp(a.in.draft_offsets, a.in.num_sequences, row, is_draft ? 0 : 1)].temperature;
}

// One block per (row, chunk). A block's life is a chain of latencies (its
// row's address, the chunk's loads, two block reductions), so it carries no
// more: the chunk's values are requested before the row's sequence is looked
// up (the full-chunk case needs no sequence to load), and the chunks are
// combined by CombineRowsKernel, not by a last-block ticket (its fence and
// atomic round trips held every block ~1.5 us longer).
template <SampleDtype D>
__global__ void __launch_bounds__(kThreads, RowPassBlocksPerSm<D>()) RowPassKernel(RowPassArgs a) {
  __shared__ double sum_shared[kThreads];
  __shared__ MaxArg max_shared[kWarps];
  const RejectionBatchInput& in = a.in;
  const int64_t order = blockIdx.x / a.num_chunks;
  const int64_t slot = !a.targets_last             ? order
                       : order < a.num_draft_rows ? a.num_target_rows + order
                                                  : order - a.num_draft_rows;
  const int32_t c = blockIdx.x % a.num_chunks;
  const bool is_draft = slot >= a.num_target_rows;
  const void* row_ptr = SampledRowAddress(in, is_draft, is_draft ? slot - a.num_target_rows : slot);
  const int32_t begin = c * rejection::kNormalizerChunk;
  const int32_t end = min(in.vocab_size, begin + rejection::kNormalizerChunk);
  const bool full = a.mode == RowPassMode::kNormalize && in.vocab_size % 4 == 0 &&
                    end - begin == rejection::kNormalizerChunk;
  PackedQuad<D> raw[kRounds];
  if (full) LoadChunk<D>(row_ptr, begin, raw);
  const float temperature = RowTemperature(a, slot);
  const bool greedy = !(temperature > 0.0f);
  const float inv_t = greedy ? 0.0f : rejection::InverseTemperature(temperature);
  const ChunkStats stats = (full && !greedy)
                               ? FullChunkStats<D>(raw, begin, inv_t, sum_shared, reinterpret_cast<float*>(max_shared))
                               : GeneralChunkStats<D>(a, row_ptr, begin, end, greedy, inv_t, sum_shared, max_shared);
  if (threadIdx.x == 0) {
    a.scratch.chunks[slot * a.num_chunks + c] = stats;
    if (c == 0) a.scratch.row_inv_t[slot] = inv_t;
  }
  if (a.targets_last && !is_draft && threadIdx.x < kWarps) {
    // FullChunkStats leaves each warp's maximum in max_shared; other chunks
    // record none (NaN).
    a.scratch.warp_max[(slot * a.num_chunks + c) * kWarps + threadIdx.x] =
        (full && !greedy) ? reinterpret_cast<const float*>(max_shared)[threadIdx.x] : __int_as_float(0x7fffffff);
  }
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
// SM (at 6 it spilled 32-44 bytes; H200, runs of 8, B=128: fp32 487.1 vs
// 424.6 us, bf16 429.2 vs 414.5). The same statistics, bit for bit, as
// RowPassKernel's.
template <SampleDtype D>
__global__ void __launch_bounds__(kThreads, kRowPassRunBlocksPerSm) RowPassRunKernel(RowPassArgs a) {
  __shared__ double sum_shared[kThreads];
  __shared__ MaxArg max_shared[kWarps];
  const RejectionBatchInput& in = a.in;
  const int64_t order = blockIdx.x / a.blocks_per_row;
  const int64_t slot = !a.targets_last             ? order
                       : order < a.num_draft_rows ? a.num_target_rows + order
                                                  : order - a.num_draft_rows;
  const int32_t c_first = static_cast<int32_t>(blockIdx.x % a.blocks_per_row) * a.chunks_per_block;
  const int32_t c_end = min(a.num_chunks, c_first + a.chunks_per_block);
  const bool is_draft = slot >= a.num_target_rows;
  const void* row_ptr = SampledRowAddress(in, is_draft, is_draft ? slot - a.num_target_rows : slot);
  const auto is_full = [&](int32_t c) {
    return a.mode == RowPassMode::kNormalize && in.vocab_size % 4 == 0 &&
           min(in.vocab_size, (c + 1) * rejection::kNormalizerChunk) - c * rejection::kNormalizerChunk ==
               rejection::kNormalizerChunk;
  };
  if (is_full(c_first)) PrefetchChunk<D>(row_ptr, c_first * rejection::kNormalizerChunk);
  const float temperature = RowTemperature(a, slot);
  const bool greedy = !(temperature > 0.0f);
  const float inv_t = greedy ? 0.0f : rejection::InverseTemperature(temperature);
  if (c_first == 0 && threadIdx.x == 0) a.scratch.row_inv_t[slot] = inv_t;
  for (int32_t c = c_first; c < c_end; ++c) {
    const int32_t begin = c * rejection::kNormalizerChunk;
    const int32_t end = min(in.vocab_size, begin + rejection::kNormalizerChunk);
    const bool full = is_full(c);
    PackedQuad<D> raw[kRounds];
    if (full) LoadChunk<D>(row_ptr, begin, raw);
    if (c + 1 < c_end && is_full(c + 1)) PrefetchChunk<D>(row_ptr, begin + rejection::kNormalizerChunk);
    const ChunkStats stats = (full && !greedy)
                                 ? FullChunkStats<D>(raw, begin, inv_t, sum_shared, reinterpret_cast<float*>(max_shared))
                                 : GeneralChunkStats<D>(a, row_ptr, begin, end, greedy, inv_t, sum_shared, max_shared);
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
  // bench/sampling/results/2026-11-27-evict-first).
  const float inv_t = __ldcg(&a.scratch.row_inv_t[slot]);
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
  const bool normalize = a.mode == RowPassMode::kNormalize;
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
  // Exact logits: the normalizers of the rows the race samples (target row
  // k; draft row k when k < gamma), as the deciding lane read them.
  RowNormalizer target_norm;
  RowNormalizer draft_norm;
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
                           const SequenceSamplingParams& s, const DecisionInputs& preloaded) {
  using Traits = RaceModeTraits<M>;
  const RejectionBatchInput& in = a.in;
  const int64_t target_row0 = static_cast<int64_t>(first) + i;
  const int64_t draft_slot0 = a.num_target_rows + first;
  const DeviceRowNorm* norms = a.scratch.norms;
  Decision d{kRejectionOk, -1, 0, -1, -1, false, RowNormalizer{}, RowNormalizer{}};
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
      d.target_norm = ShuffleNorm(tn.norm, source);
      d.draft_norm = ShuffleNorm(dn.norm, source);
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
      d.next = d.target_norm.argmax;
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
// and is computed only for the hopeful entrants.
template <typename BoundWeight, typename LowerWeight, typename ExactWeight, typename PossibleMask>
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
  if (!rb.seeded) {
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
// certainty test stops feeding the target race as in RaceQuad.
template <bool kResidual, typename Quad>
__device__ __forceinline__ void RaceBoundedQuad(const Quad& quad, const Philox4x32& bits, int32_t x0,
                                                BlockBounds& block, RaceBound& residual_bound,
                                                RaceBound& target_bound, bool& feed_target,
                                                RaceCandidate& best_residual, RaceCandidate& best_target) {
  if constexpr (kResidual) {
    if (feed_target) feed_target = !__any_sync(kFullMask, quad.CertainResidual());
    ReadBlockBound(residual_bound, &block.residual);
    RaceOneQuad(
        bits, [&](int e) { return quad.BoundResidual(e); }, [&](int e) { return quad.LowerResidual(e); },
        [&](int e) { return quad.ExactResidual(e); }, [&] { return quad.PossiblyWeighted(); }, x0, residual_bound,
        best_residual, &block.residual);
  }
  if (feed_target) {
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
template <RaceMode M, RowRace R>
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
    RaceBoundedQuad<kResidual>(LogProbabilityQuad<R>{w, tv, dv, x0},
                               RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q)), x0,
                               block, residual_bound, target_bound, feed_target, best_residual, best_target);
  } else if constexpr (Traits::kLogitsExact) {
    // Rows were checked by the normalizer pass: no value checks here.
    RaceBoundedQuad<kResidual>(LogitQuad<R>{w, tv, dv, x0},
                               RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q)), x0,
                               block, residual_bound, target_bound, feed_target, best_residual, best_target);
  } else {
    float p[4], r[4];
    QuadWeights<M, R>(w, tv, dv, x0, in_share, checks, p, r);
    const auto weight_p = [&](int e) { return Pick(p, e); };
    const auto weight_r = [&](int e) { return Pick(r, e); };
    const Philox4x32 bits = RaceBits(w.seed, w.sequence_index, w.position, static_cast<uint32_t>(q));
    if constexpr (kResidual) {
      if (feed_target) {
        const bool lane_has_residual = r[0] > 0.0f || r[1] > 0.0f || r[2] > 0.0f || r[3] > 0.0f;
        feed_target = !__any_sync(kFullMask, lane_has_residual);
      }
      ReadBlockBound(residual_bound, &block.residual);
      RaceOneQuad(
          bits, weight_r, weight_r, weight_r, [] { return 0xfu; }, x0, residual_bound, best_residual,
          &block.residual);
    }
    if (feed_target) {
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

// Sweeps one share of the sampled row (RaceQuad per quad) and returns the
// thread's best entrant of each race and the value-check bits (1 target, 2
// draft). Thread t takes quads q_begin + t + 256 j, j = 0, 1, ...: the same
// trip count for every thread of the block.
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
    for (int32_t q = q_first, j = 0; j < iterations; ++j, q += kThreads) {
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
      RaceQuad<M, R>(w, tv, dv, q, in_share, block, checks, residual_bound, target_bound, feed_target, best_residual,
                     best_target);
    }
  } else {
    for (int32_t q = q_first, j = 0; j < iterations; ++j, q += kThreads) {
      const bool in_share = q < w.q_end;
      float tv[4] = {kPad, kPad, kPad, kPad}, dv[4] = {kPad, kPad, kPad, kPad};
      if (in_share) {
        Load4<D>(w.target_row, 4 * q, w.vocab_size, w.vector_ok, tv, kPad);
        if constexpr (kDraftRow) Load4<D>(w.draft_row, 4 * q, w.vocab_size, w.vector_ok, dv, kPad);
      }
      RaceQuad<M, R>(w, tv, dv, q, in_share, block, checks, residual_bound, target_bound, feed_target, best_residual,
                     best_target);
    }
  }
  constexpr SampleValueKind kKind = RaceModeTraits<M>::kKind;
  flags |= (ChecksPassedFor<kKind>(checks.target_poison, checks.target_low) ? 0 : 1) |
           (ChecksPassedFor<kKind>(checks.draft_poison, checks.draft_low) ? 0 : 2);
}

template <SampleDtype D, RaceMode M, int kMinBlocksPerSm>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) AcceptRaceKernel(RaceArgs a) {
  using Traits = RaceModeTraits<M>;
  __shared__ unsigned long long warp_words[kWarps];
  __shared__ int32_t warp_flags[kWarps];
  extern __shared__ __align__(16) unsigned char race_stage[];  // kRaceStageBytes
  __shared__ BlockBounds block_bounds;
  __shared__ Decision block_decision;
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
    const Decision decided = Decide<D, M>(a, i, first, gamma, s, preloaded);
    if (threadIdx.x == 0) {
      block_decision = decided;
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
  if (Traits::kLogitsExact) {
    share.target_probability.norm = d.target_norm;
    if (use_draft_row) share.draft_probability.norm = d.draft_norm;
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
  flags = (__ballot_sync(kFullMask, flags & 1) ? 1 : 0) | (__ballot_sync(kFullMask, flags & 2) ? 2 : 0);
  if (threadIdx.x % 32 == 0) {
    warp_words[warp] = race_result::Better(race_result::Word(best_residual, false), race_result::Word(best_target, true));
    warp_flags[warp] = flags;
  }
  __syncthreads();
  // One atomic per block and race result, then a ticket: the block that
  // takes the sequence's last one reads the folded word and flags, writes
  // the outcome and clears the three (no merging kernel after the grid).
  if (threadIdx.x == 0) {
    unsigned long long word = warp_words[0];
    int32_t block_flags = warp_flags[0];
    for (int w = 1; w < kWarps; ++w) {
      word = race_result::Better(word, warp_words[w]);
      block_flags |= warp_flags[w];
    }
    if (word != race_result::kNoWord) atomicMax(&a.scratch.race_words[i], word);
    if (block_flags != 0) atomicOr(&a.scratch.race_flags[i], static_cast<uint32_t>(block_flags));
    if (race_result::TakeTicket(&a.scratch.race_tickets[i]) + 1 == static_cast<uint32_t>(a.blocks_per_sequence)) {
      const unsigned long long final_word = atomicExch(&a.scratch.race_words[i], race_result::kNoWord);
      const uint32_t final_flags = atomicExch(&a.scratch.race_flags[i], 0u);
      a.scratch.race_tickets[i] = 0;
      if (final_flags & 1) return WriteOutcome(a, i, gamma, kRejectionBadTargetValue, k, k, -1);
      if (final_flags & 2) return WriteOutcome(a, i, gamma, kRejectionBadDraftValue, k, k, -1);
      if (final_word == race_result::kNoWord) return WriteOutcome(a, i, gamma, kRejectionEmptyTargetRow, k, k, -1);
      WriteOutcome(a, i, gamma, kRejectionOk, -1, k, race_result::Token(final_word));
    }
  }
}

// Whether the current device takes programmatic dependent launches (sm_90+),
// cached per device ordinal.
cudaError_t DeviceTakesDependentLaunch(bool* yes) {
  static constexpr int kDevices = 64;
  static int8_t cache[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  static std::mutex mu;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  if (device >= 0 && device < kDevices && cache[device] != 0) {
    *yes = cache[device] == 2;
    return cudaSuccess;
  }
  int major = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); e != cudaSuccess) {
    return e;
  }
  *yes = major >= 9;
  if (device >= 0 && device < kDevices) cache[device] = *yes ? 2 : 1;
  return cudaSuccess;
}

// Resident blocks per SM of a race kernel on the current device, queried once
// per kernel (the answer depends only on the compiled kernel and the device
// architecture; the process drives one kind of device). Also asks, once, for
// the shared-memory carveout that holds 3 blocks' staging rings.
cudaError_t RaceBlocksThatFit(void (*race)(RaceArgs), int32_t* fit) {
  struct Entry {
    void (*kernel)(RaceArgs);
    int32_t blocks;
  };
  static constexpr int kEntries = 24;  // 3 dtypes x 4 modes x 2 occupancies
  static Entry cache[kEntries] = {};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache) {
    if (e.kernel == race) {
      *fit = e.blocks;
      return cudaSuccess;
    }
  }
  if (cudaError_t e = cudaFuncSetAttribute(race, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared);
      e != cudaSuccess) {
    return e;
  }
  int blocks = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, race, kThreads, kRaceStageBytes);
      e != cudaSuccess) {
    return e;
  }
  *fit = std::max(1, blocks);
  for (Entry& e : cache) {
    if (e.kernel == nullptr) {
      e = Entry{race, *fit};
      break;
    }
  }
  return cudaSuccess;
}

// Whether the filter kernel the current device runs has clusters: sm_90
// code, not the portable PTX compiled for an older architecture. Asked once
// per kernel.
template <SampleDtype D>
cudaError_t FilterHasClusters(bool* yes) {
  static std::atomic<int> known{0};  // 0 unknown, 1 no, 2 yes
  if (const int k = known.load(std::memory_order_relaxed); k != 0) {
    *yes = k == 2;
    return cudaSuccess;
  }
  bool dependent = false;
  if (cudaError_t e = DeviceTakesDependentLaunch(&dependent); e != cudaSuccess) return e;
  cudaFuncAttributes attributes{};
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, FilterKernel<D>); e != cudaSuccess) return e;
  *yes = dependent && attributes.binaryVersion >= 90;
  known.store(*yes ? 2 : 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// Clusters of `slices` filter blocks that the device holds at once, asked
// once per kernel and size (a host query: safe inside stream capture).
template <SampleDtype D>
cudaError_t FilterClustersThatFit(int32_t slices, int32_t* clusters) {
  static std::atomic<int32_t> known[kFilterMaxSlices + 1] = {};  // 0 unknown, else clusters + 1
  if (const int32_t k = known[slices].load(std::memory_order_relaxed); k != 0) {
    *clusters = k - 1;
    return cudaSuccess;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(slices));
  config.blockDim = dim3(kFilterThreads);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(slices);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int n = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveClusters(&n, FilterKernel<D>, &config); e != cudaSuccess) return e;
  *clusters = n;
  known[slices].store(n + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// The most slices per row (<= kFilterMaxSlices) whose clusters all run at
// once: more would leave some rows to a second wave.
template <SampleDtype D>
cudaError_t FilterSlicesThatFit(int64_t rows, int32_t* slices) {
  *slices = 1;
  bool clusters_available = false;
  if (cudaError_t e = FilterHasClusters<D>(&clusters_available); e != cudaSuccess || !clusters_available) return e;
  for (int32_t s = kFilterMaxSlices; s >= 2; --s) {
    int32_t fit = 0;
    if (cudaError_t e = FilterClustersThatFit<D>(s, &fit); e != cudaSuccess) return e;
    if (rows <= fit) {
      *slices = s;
      break;
    }
  }
  return cudaSuccess;
}

template <SampleDtype D>
cudaError_t LaunchFilter(const RejectionBatchInput& in, const ScratchLayout& layout, int64_t num_target_rows,
                         int32_t requested_slices, const cudaLaunchAttribute* dependent, cudaStream_t stream) {
  int32_t slices = 1;
  bool clusters_available = false;
  if (cudaError_t e = FilterHasClusters<D>(&clusters_available); e != cudaSuccess) return e;
  if (requested_slices > 0) {
    slices = clusters_available ? std::min(requested_slices, kFilterMaxSlices) : 1;
  } else if (cudaError_t e = FilterSlicesThatFit<D>(num_target_rows, &slices); e != cudaSuccess) {
    return e;
  }
  cudaLaunchAttribute attributes[2];
  int n = 0;
  if (dependent != nullptr) attributes[n++] = *dependent;
  if (slices > 1) {
    attributes[n].id = cudaLaunchAttributeClusterDimension;
    attributes[n].val.clusterDim.x = static_cast<unsigned>(slices);
    attributes[n].val.clusterDim.y = 1;
    attributes[n].val.clusterDim.z = 1;
    ++n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(num_target_rows * slices));
  config.blockDim = dim3(kFilterThreads);
  config.stream = stream;
  config.attrs = n > 0 ? attributes : nullptr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, FilterKernel<D>, FilterArgs{in, layout, slices});
}

template <SampleDtype D>
cudaError_t LaunchTyped(const RejectionSampleParams& params, const RejectionScratch& scratch, cudaStream_t stream) {
  const RejectionBatchInput& in = params.input;
  const ScratchLayout layout = Carve(scratch.device, scratch.limits);
  const int64_t num_target_rows = static_cast<int64_t>(in.total_draft_tokens) + in.num_sequences;
  const int64_t num_draft_rows = in.has_draft_probs ? in.total_draft_tokens : 0;
  const bool logits_exact = in.kind == SampleValueKind::kLogits && in.method == SampleMethod::kExact;
  const bool row_pass = logits_exact || in.validate_full_rows;
  const int32_t num_chunks = rejection::NumChunks(in.vocab_size);
  bool dependent = false;
  if (cudaError_t e = DeviceTakesDependentLaunch(&dependent); e != cudaSuccess) return e;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (row_pass) {
    RowPassArgs args{in,
                     layout,
                     num_target_rows,
                     num_draft_rows,
                     num_chunks,
                     logits_exact ? RowPassMode::kNormalize : RowPassMode::kCheck,
                     logits_exact && in.any_top_k_top_p,
                     0,
                     0};
    const int64_t rows = num_target_rows + num_draft_rows;
    // Runs were measured on the normalizer pass only: the full-row check of
    // probability rows keeps one chunk per block unless a test asks.
    args.chunks_per_block = scratch.row_pass_chunks_per_block > 0
                                ? std::min(scratch.row_pass_chunks_per_block, num_chunks)
                            : logits_exact ? RejectionRowPassChunksPerBlock(D, rows, num_chunks, scratch.num_sms)
                                           : 1;
    args.blocks_per_row = (num_chunks + args.chunks_per_block - 1) / args.chunks_per_block;
    const int64_t blocks = rows * args.blocks_per_row;
    if (args.chunks_per_block == 1) {
      RowPassKernel<D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    } else {
      RowPassRunKernel<D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    }
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>((num_target_rows + num_draft_rows + kCombineThreads / 32 - 1) /
                                                (kCombineThreads / 32)));
    config.blockDim = dim3(kCombineThreads);
    config.stream = stream;
    config.attrs = dependent ? &attribute : nullptr;
    config.numAttrs = dependent ? 1 : 0;
    if (cudaError_t e = cudaLaunchKernelEx(&config, CombineRowsKernel, args); e != cudaSuccess) return e;
  }
  if (logits_exact && in.any_top_k_top_p) {
    if (cudaError_t e = LaunchFilter<D>(in, layout, num_target_rows, scratch.filter_slices,
                                        dependent ? &attribute : nullptr, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  // Log-probabilities need no row pass (unless validate_full_rows): the race
  // kernel converts the two scalars per position and the sampled row(s) as it
  // reads them.
  const auto race_kernel = [&](auto min_blocks) -> void (*)(RaceArgs) {
    constexpr int kMin = decltype(min_blocks)::value;
    return logits_exact                          ? AcceptRaceKernel<D, RaceMode::kLogitsExact, kMin>
           : in.method == SampleMethod::kSigmoid ? AcceptRaceKernel<D, RaceMode::kSigmoid, kMin>
           : in.kind == SampleValueKind::kLogProbabilities ? AcceptRaceKernel<D, RaceMode::kLogProbabilities, kMin>
                                                           : AcceptRaceKernel<D, RaceMode::kProbabilities, kMin>;
  };
  void (*race)(RaceArgs) = race_kernel(std::integral_constant<int, kRaceBlocksPerSm>{});
  // Never plan for more blocks per SM than fit (registers: 80 or 128 per
  // thread, kRaceBlocksPerSm; shared memory: 40 KB of staging a block): a
  // plan beyond that is a second wave. A plan of 2 or fewer takes the
  // kernel compiled for 2.
  int32_t fit = 0;
  if (cudaError_t e = RaceBlocksThatFit(race, &fit); e != cudaSuccess) return e;
  int32_t blocks_per_sm = std::min(
      scratch.race_blocks_per_sm > 0 ? scratch.race_blocks_per_sm : RejectionRaceBlocksPerSm(in.num_sequences), fit);
  if (blocks_per_sm <= kRaceBlocksPerSmSmall) {
    race = race_kernel(std::integral_constant<int, kRaceBlocksPerSmSmall>{});
    if (cudaError_t e = RaceBlocksThatFit(race, &fit); e != cudaSuccess) return e;
    blocks_per_sm = std::min(blocks_per_sm, fit);
  }
  RaceArgs args{in, params.output, layout, num_target_rows,
                RejectionRaceBlocksPerSequence(in.num_sequences, in.vocab_size, scratch.num_sms, blocks_per_sm),
                logits_exact,
                !logits_exact && in.validate_full_rows};
  const int64_t blocks = static_cast<int64_t>(args.blocks_per_sequence) * in.num_sequences;
  {
    // After a row pass the race is a programmatic dependent of the combine
    // (or filter) grid: it waits for it before its decision reads the
    // normalizers, and its launch overlaps that grid.
    cudaLaunchConfig_t race_config{};
    race_config.gridDim = dim3(static_cast<unsigned>(blocks));
    race_config.blockDim = dim3(kThreads);
    race_config.dynamicSmemBytes = kRaceStageBytes;
    race_config.stream = stream;
    race_config.attrs = (dependent && row_pass) ? &attribute : nullptr;
    race_config.numAttrs = (dependent && row_pass) ? 1 : 0;
    return cudaLaunchKernelEx(&race_config, race, args);
  }
}

}  // namespace

int32_t RejectionRowPassChunksPerBlock(SampleDtype dtype, int64_t rows, int32_t num_chunks, int32_t num_sms) {
  // Measured on the H100 (bench/sampling/results/2026-11-26-rowpass): runs
  // of 8 pay where the pass is issue-bound and many waves long, i.e. 16-bit
  // rows from B = 32 on (bf16 B = 128: 475.5 -> 417.0 us, B = 32: 131.7 ->
  // 126.3); fp32 rows, which read twice the bytes per instruction, lose at
  // every B (B = 128: 496.7 -> 540.6), as does a short pass (bf16 B = 8,
  // 6.5 waves: 51.5 -> 55.8), where the runs leave SMs idle at the tail.
  // Waves are counted at 6 one-chunk blocks per SM, the occupancy the
  // crossover was measured at; with 16-bit rows at 8 the same batches take
  // runs, and each side of the threshold is still the faster kernel (bf16
  // B=16 one-chunk 73.6 against runs 75.7 us, B=24 97.7 against 97.0;
  // run 5 of bench/sampling/results/2026-11-27-rowpass-occupancy).
  if (dtype == SampleDtype::kFloat32) return 1;
  const int64_t single_chunk_waves = rows * num_chunks / (int64_t{kRowPassBlocksPerSm} * std::max(1, num_sms));
  if (single_chunk_waves < kRowPassRunMinWaves) return 1;
  return std::min(kRowPassMaxChunksPerBlock, num_chunks);
}

int32_t RejectionRaceBlocksPerSm(int32_t num_sequences) {
  // Two at every batch size. Below 32 sequences a block's share is a few
  // quads per thread and the sweep's per-block fixed costs (decision,
  // seeding the bounds, the merge) dominate, so fewer, larger shares win
  // (H200, 2026-11-21: b=8 13.7 vs 14.6 us). From 32 on a third block per SM
  // won on the H200 that day (b=128: 60.8 vs 63.0 us), but the race then
  // streams at what DRAM gives this pattern whatever the plan (H100,
  // 2026-11-26, probabilities b=128: 65.5 / 63.5 / 64.9 us at 1 / 2 / 3
  // blocks per SM), and the kernel compiled for 2 runs its sweep without
  // spills (b=32 21.2 vs 21.6 us, b=64 37.6 vs 38.8). Past 264 sequences
  // (G=1, several waves) 3 blocks leave a short last wave: b=512 218 vs 274
  // us (bench/sampling/results/2026-11-26-item5).
  (void)num_sequences;
  return 2;
}

int32_t RejectionRaceBlocksPerSequence(int32_t num_sequences, int32_t vocab_size, int32_t num_sms,
                                       int32_t blocks_per_sm) {
  if (blocks_per_sm <= 0) blocks_per_sm = RejectionRaceBlocksPerSm(num_sequences);
  // Rounded down: b * G must not exceed the blocks that fit in one wave, or a
  // handful of blocks run alone in a second one (the H100 run at b=8 with G=50,
  // 400 blocks for 396 slots, cost 24.3 us against 19.2 us in one wave).
  const int32_t wanted = std::max(1, blocks_per_sm) * std::max(1, num_sms) / std::max(1, num_sequences);
  return std::clamp(wanted, 1, MaxRaceBlocks(vocab_size));
}

cudaError_t RejectionFilterSlices(SampleDtype dtype, int64_t num_target_rows, int32_t* slices) {
  switch (dtype) {
    case SampleDtype::kFloat32: return FilterSlicesThatFit<SampleDtype::kFloat32>(num_target_rows, slices);
    case SampleDtype::kFloat16: return FilterSlicesThatFit<SampleDtype::kFloat16>(num_target_rows, slices);
    case SampleDtype::kBFloat16: return FilterSlicesThatFit<SampleDtype::kBFloat16>(num_target_rows, slices);
  }
  return cudaErrorInvalidValue;
}

size_t RejectionScratchBytes(const RejectionScratchLimits& limits) { return Carve(nullptr, limits).bytes; }

cudaError_t InitRejectionScratch(void* device_memory, size_t bytes, const RejectionScratchLimits& limits,
                                 cudaStream_t stream, RejectionScratch* scratch) {
  if (scratch == nullptr || device_memory == nullptr || limits.max_sequences < 1 || limits.max_vocab_size < 1 ||
      limits.max_vocab_size > (1 << 20) || limits.max_total_draft_tokens < limits.max_sequences ||
      bytes < RejectionScratchBytes(limits)) {
    return cudaErrorInvalidValue;
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  int sms = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
    return e;
  }
  // Race words and flags start at zero; every launch leaves them at zero again.
  if (cudaError_t e = cudaMemsetAsync(device_memory, 0, Carve(nullptr, limits).zeroed_bytes, stream);
      e != cudaSuccess) {
    return e;
  }
  *scratch = RejectionScratch{device_memory, bytes, limits, sms, 0};
  return cudaSuccess;
}

cudaError_t LaunchRejectionSample(const RejectionSampleParams& params, const RejectionScratch& scratch,
                                  cudaStream_t stream) {
  const RejectionBatchInput& in = params.input;
  if (in.num_sequences == 0) return cudaSuccess;
  if (scratch.device == nullptr || in.num_sequences > scratch.limits.max_sequences ||
      in.total_draft_tokens > scratch.limits.max_total_draft_tokens ||
      in.vocab_size > scratch.limits.max_vocab_size || in.vocab_size < 1) {
    return cudaErrorInvalidValue;
  }
  switch (in.dtype) {
    case SampleDtype::kFloat32: return LaunchTyped<SampleDtype::kFloat32>(params, scratch, stream);
    case SampleDtype::kFloat16: return LaunchTyped<SampleDtype::kFloat16>(params, scratch, stream);
    case SampleDtype::kBFloat16: return LaunchTyped<SampleDtype::kBFloat16>(params, scratch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace specverify
