#include "bench/greedy/bench_kernels.cuh"

#include <cuda_runtime.h>

namespace specverify::bench {
namespace {

__global__ void EmptyKernel() {}

__global__ void SpinKernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void FillPatternKernel(std::byte* dst, int64_t bytes, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < bytes;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    x ^= x >> 15;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    dst[i] = static_cast<std::byte>(x | 1u);  // never zero
  }
}

}  // namespace

cudaError_t LaunchEmptyKernel(cudaStream_t stream) {
  EmptyKernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t LaunchSpinKernel(int64_t cycles, cudaStream_t stream) {
  SpinKernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

cudaError_t LaunchFillPattern(std::byte* dst, int64_t bytes, uint32_t seed,
                              cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  FillPatternKernel<<<1024, 256, 0, stream>>>(dst, bytes, seed);
  return cudaGetLastError();
}

}  // namespace specverify::bench
