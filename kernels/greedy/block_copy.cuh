// Block-wide copy of contiguous vectors, shared by the greedy pack kernels
// (the two-step pack in greedy_cuda.cu, the host-decided pack in
// greedy_planned_pack.cu). Device code only; private to kernels/greedy.
#ifndef SPECVERIFY_KERNELS_GREEDY_BLOCK_COPY_CUH_
#define SPECVERIFY_KERNELS_GREEDY_BLOCK_COPY_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace specverify::greedy_copy {

// Copy loops keep this many independent vector loads in flight per thread.
inline constexpr int kCopyUnroll = 8;

template <int kVec>
struct VecType;
template <>
struct VecType<16> { using type = uint4; };
template <>
struct VecType<8> { using type = uint2; };
template <>
struct VecType<4> { using type = uint32_t; };
template <>
struct VecType<2> { using type = uint16_t; };
template <>
struct VecType<1> { using type = uint8_t; };

// Copies `units` vectors from src to dst, threads of a block striding, with
// kUnroll loads in flight before the stores. Both pointers kVec-aligned.
// A caller whose blocks copy a known number of bytes passes the unroll that
// covers them (every predicated-off slot still costs the loop). kEvictFirst:
// loads marked evict-first (ld.global.cs) for rows read exactly once.
template <int kVec, int kThreads, int kUnroll = kCopyUnroll, bool kEvictFirst = false>
__device__ __forceinline__ void BlockCopyContiguous(
    const std::byte* __restrict__ src, std::byte* __restrict__ dst,
    int64_t units) {
  using V = typename VecType<kVec>::type;
  const V* s = reinterpret_cast<const V*>(src);
  V* d = reinterpret_cast<V*>(dst);
  for (int64_t base = threadIdx.x; base < units;
       base += int64_t{kThreads} * kUnroll) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t{u} * kThreads;
      if (i < units) v[u] = kEvictFirst ? __ldcs(s + i) : s[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t{u} * kThreads;
      if (i < units) d[i] = v[u];
    }
  }
}

// The widest vector (16, 8, 4, 2 or 1 bytes) that divides both addresses and
// the row size.
inline int CopyVectorBytes(const void* src, const void* dst, int64_t row_bytes) {
  const auto a = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                 static_cast<uint64_t>(row_bytes);
  int vec = 16;
  while (vec > 1 && a % static_cast<uint64_t>(vec) != 0) vec /= 2;
  return vec;
}

// Launch<kVec>::Run(args...) for the vector width `vec`.
template <template <int> class Launch, typename... Args>
cudaError_t DispatchVector(int vec, Args&&... args) {
  switch (vec) {
    case 16: return Launch<16>::Run(args...);
    case 8: return Launch<8>::Run(args...);
    case 4: return Launch<4>::Run(args...);
    case 2: return Launch<2>::Run(args...);
    case 1: return Launch<1>::Run(args...);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace specverify::greedy_copy

#endif  // SPECVERIFY_KERNELS_GREEDY_BLOCK_COPY_CUH_
