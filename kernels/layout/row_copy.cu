#include "kernels/layout/row_copy_cuda.h"

#include <cstdint>

namespace specverify {
namespace {

constexpr int kRowCopyThreads = 256;
// Rows per block: 4 KiB rows give a block 16 KiB to move, enough bytes in
// flight per block while small batches still spread over many SMs.
constexpr int kRowsPerBlock = 4;

// Copies `bytes` with the widest access both addresses and the size allow.
// Regions are the worker's memory: only their dtype alignment is promised.
__device__ __forceinline__ void BlockCopy(std::byte* dst, const std::byte* src, int64_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                 static_cast<uintptr_t>(bytes);
  if (a % 16 == 0) {
    const int64_t n = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
  } else if (a % 4 == 0) {
    const int64_t n = bytes / 4;
    auto* d = reinterpret_cast<uint32_t*>(dst);
    const auto* s = reinterpret_cast<const uint32_t*>(src);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
  } else {
    auto* d = reinterpret_cast<unsigned char*>(dst);
    const auto* s = reinterpret_cast<const unsigned char*>(src);
    for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) d[i] = s[i];
  }
}

// grid: (row chunks, sequences).
__global__ void RowGatherKernel(const RowGatherParams p) {
  const int32_t seq = blockIdx.y;
  const int32_t first = p.draft_offsets[seq];
  const int32_t rows = p.draft_offsets[seq + 1] - first;
  const int32_t row0 = blockIdx.x * kRowsPerBlock;
  if (row0 >= rows) return;
  const int32_t n = min(kRowsPerBlock, rows - row0);
  std::byte* const to =
      p.destinations != nullptr ? p.destinations[seq] : p.rows + int64_t{first} * p.row_bytes;
  if (to == nullptr) return;
  BlockCopy(to + int64_t{row0} * p.row_bytes, p.sources[seq] + int64_t{row0} * p.row_bytes,
            int64_t{n} * p.row_bytes);
}

// grid: (row chunks, deliveries).
__global__ void PackedDeliveryKernel(const PackedDeliveryParams p) {
  const PackedDelivery del = p.deliveries[blockIdx.y];
  const int32_t first = p.packed_row_offsets[del.first_sequence];
  const int32_t rows = p.packed_row_offsets[del.first_sequence + del.num_sequences] - first;
  const int32_t row0 = blockIdx.x * kRowsPerBlock;
  if (row0 >= rows) return;
  const int32_t n = min(kRowsPerBlock, rows - row0);
  BlockCopy(del.destination + int64_t{row0} * p.row_bytes,
            p.packed_kv + (int64_t{first} + row0) * p.row_bytes, int64_t{n} * p.row_bytes);
}

// grid: (row chunks, sequences). A block past its sequence's k leaves at
// once; the others add up the rows before theirs in its group (a few L2
// reads a thread), then copy.
__global__ void AcceptedRowCopyKernel(const AcceptedRowCopyParams p) {
  __shared__ int32_t warp_sums[kRowCopyThreads / 32];
  const int32_t seq = blockIdx.y;
  const int32_t rows = min(p.accepted_lengths[seq], p.max_rows);
  const int32_t row0 = blockIdx.x * kRowsPerBlock;
  std::byte* const to = p.destinations[seq];
  if (row0 >= rows || to == nullptr) return;  // the same for every thread of the block
  int32_t before = 0;
  for (int32_t j = p.origins[seq] + static_cast<int32_t>(threadIdx.x); j < seq; j += blockDim.x) {
    before += min(p.accepted_lengths[j], p.max_rows);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) before += __shfl_xor_sync(0xffffffffu, before, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = before;
  __syncthreads();
  before = 0;
#pragma unroll
  for (int w = 0; w < kRowCopyThreads / 32; ++w) before += warp_sums[w];
  const int32_t n = min(kRowsPerBlock, rows - row0);
  BlockCopy(to + (int64_t{before} + row0) * p.row_bytes, p.sources[seq] + int64_t{row0} * p.row_bytes,
            int64_t{n} * p.row_bytes);
}

unsigned RowChunks(int32_t max_rows) {
  return static_cast<unsigned>((max_rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

cudaError_t LaunchRowGather(const RowGatherParams& p, cudaStream_t stream) {
  if (!ValidateRowGather(p).ok()) return cudaErrorInvalidValue;
  if (p.num_sequences == 0 || p.max_rows == 0) return cudaSuccess;
  if (p.num_sequences > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(RowChunks(p.max_rows), static_cast<unsigned>(p.num_sequences));
  RowGatherKernel<<<grid, kRowCopyThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchPackedDelivery(const PackedDeliveryParams& p, cudaStream_t stream) {
  if (!ValidatePackedDelivery(p).ok()) return cudaErrorInvalidValue;
  if (p.num_deliveries == 0 || p.max_rows == 0) return cudaSuccess;
  if (p.num_deliveries > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(RowChunks(p.max_rows), static_cast<unsigned>(p.num_deliveries));
  PackedDeliveryKernel<<<grid, kRowCopyThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchAcceptedRowCopy(const AcceptedRowCopyParams& p, cudaStream_t stream) {
  if (!ValidateAcceptedRowCopy(p).ok()) return cudaErrorInvalidValue;
  if (p.num_sequences == 0 || p.max_rows == 0) return cudaSuccess;
  if (p.num_sequences > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(RowChunks(p.max_rows), static_cast<unsigned>(p.num_sequences));
  AcceptedRowCopyKernel<<<grid, kRowCopyThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace specverify
