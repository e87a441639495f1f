// Fragment of kernels/sampling/rejection_sample.cu: device helpers every
// kernel shares: loads of a row's values, the sequence of a row, fixed-order
// block sums, block and warp arg-max and race reductions, the race's bound
// arithmetic.
// Included once, inside that file's anonymous namespace, after rejection_kernel_layout.cuh;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_DEVICE_HELPERS_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_DEVICE_HELPERS_CUH_

// ------------------------------------------------------------ helpers --

// fp16 -> fp32 is exact, so the hardware conversion (one instruction) gives
// Float16BitsToFloat's bits (NaN payloads aside: invalid either way). The
// software conversion's branches for infinities, NaNs and subnormals, in
// LoadOne, made RowPassRunKernel<fp16> spill 48 bytes a thread at its 40
// registers (bench/sampling/results/2026-11-29-fp16-scalar-load).
__device__ __forceinline__ float Float16BitsToFloatHw(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// One stored fp16 or bf16 value as a float (exact).
template <SampleDtype D>
__device__ __forceinline__ float StoredHalfToFloat(uint16_t h) {
  return D == SampleDtype::kFloat16 ? Float16BitsToFloatHw(h) : detmath::BFloat16BitsToFloat(h);
}

template <SampleDtype D>
__device__ __forceinline__ float LoadOne(const void* row, int32_t x) {
  if constexpr (D == SampleDtype::kFloat16) return Float16BitsToFloatHw(static_cast<const uint16_t*>(row)[x]);
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
    for (int i = 0; i < 4; ++i) out[i] = StoredHalfToFloat<D>(h[i]);
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

// N sums over the block, each in the fixed pairwise order s[t] += s[t +
// stride] (rejection_core.h), side by side so that they share the tree's
// barriers. shared holds N * kThreads doubles; the sums are valid in thread 0.
// Strides 32 and below stay in warp 0 (the stride-32 step from shared
// memory, then shuffles): the same additions with one barrier fewer than a
// barrier per stride.
template <int N>
__device__ __forceinline__ void BlockFixedOrderSums(double (&partials)[N], double* shared) {
  const int t = threadIdx.x;
#pragma unroll
  for (int k = 0; k < N; ++k) shared[k * kThreads + t] = partials[k];
  __syncthreads();
#pragma unroll
  for (int stride = kThreads / 2; stride >= 64; stride /= 2) {
    if (t < stride) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        double* sums = shared + k * kThreads;
        sums[t] = detmath::AddD(sums[t], sums[t + stride]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < N; ++k) partials[k] = 0.0;
  if (t < 32) {
#pragma unroll
    for (int k = 0; k < N; ++k) partials[k] = detmath::AddD(shared[k * kThreads + t], shared[k * kThreads + t + 32]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        partials[k] = detmath::AddD(partials[k], __shfl_down_sync(kFullMask, partials[k], offset));
      }
    }
  }
  __syncthreads();
}

__device__ double BlockFixedOrderSum(double partial, double* shared) {
  double sums[1] = {partial};
  BlockFixedOrderSums<1>(sums, shared);
  return sums[0];  // valid in thread 0
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

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_DEVICE_HELPERS_CUH_
