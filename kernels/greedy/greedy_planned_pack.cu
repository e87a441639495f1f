// Host-decided greedy pack. See greedy_planned_pack.h for the contract.
#include "kernels/greedy/greedy_planned_pack.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/greedy/block_copy.cuh"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/layout/ragged_batch.h"

namespace specverify {
namespace {

constexpr int kPlannedThreads = 256;
// Loads in flight per thread: with 16-byte vectors one round covers a whole
// block of kPlannedPackBlockBytes (narrower vectors loop). Evict-first
// loads: each draft row is read once (0.2-0.6 us back to back at the stress
// and headline points, runs 1 and 5 of bench/greedy/results/2026-11-27-hostplan/).
constexpr int kPlannedUnroll = static_cast<int>(kPlannedPackBlockBytes / (kPlannedThreads * 16));

// grid (ceil(max_accepted / rows_per_block), b): block (c, s) copies rows
// [c * rows_per_block, min((c + 1) * rows_per_block, k_s)) of sequence s.
// Source and destination of that range are contiguous, and the block's
// three offsets are independent loads: the copy starts one round trip in.
// Chunks in x: blocks are issued x first, so the blocks in flight stream
// neighbouring rows of one sequence (grid (b, chunks) measured 0.5 us slower
// at the stress point: run 2 of bench/greedy/results/2026-11-27-hostplan/).
template <int kVec>
__global__ void __launch_bounds__(kPlannedThreads)
    PlannedPackKernel(const GreedyPlannedPack p, int rows_per_block) {
  const int seq = blockIdx.y;
  const int first_packed = p.packed_row_offsets[seq];
  const int accepted = p.packed_row_offsets[seq + 1] - first_packed;
  const int first_draft = p.draft_offsets[seq];
  const int row0 = blockIdx.x * rows_per_block;
  if (row0 >= accepted) return;
  const int rows = min(rows_per_block, accepted - row0);
  const int64_t rb = p.row_bytes;
  greedy_copy::BlockCopyContiguous<kVec, kPlannedThreads, kPlannedUnroll, true>(
      p.draft_kv + (int64_t{first_draft} + row0) * rb,
      p.packed_kv + (int64_t{first_packed} + row0) * rb, rows * rb / kVec);
}

template <int kVec>
struct PlannedLaunch {
  static cudaError_t Run(const GreedyPlannedPack& p, cudaStream_t stream) {
    const int rows_per_block = static_cast<int>(
        std::clamp<int64_t>(kPlannedPackBlockBytes / p.row_bytes, 1, kMaxDraftTokens));
    const dim3 grid(static_cast<unsigned>((p.max_accepted + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>(p.num_sequences));
    PlannedPackKernel<kVec><<<grid, kPlannedThreads, 0, stream>>>(p, rows_per_block);
    return cudaGetLastError();
  }
};

}  // namespace

absl::Status ValidateGreedyPlannedPack(const GreedyPlannedPack& pack) {
  if (pack.num_sequences < 1 || pack.num_sequences > kMaxBatchSequences) {
    return absl::InvalidArgumentError(absl::StrCat("planned pack: num_sequences ",
                                                   pack.num_sequences, " outside [1, ",
                                                   kMaxBatchSequences, "]"));
  }
  if (pack.row_bytes < 1 || pack.row_bytes > kMaxGreedyRowBytes) {
    return absl::InvalidArgumentError(absl::StrCat("planned pack: row_bytes ", pack.row_bytes,
                                                   " outside [1, ", kMaxGreedyRowBytes, "]"));
  }
  if (pack.max_accepted < 0 || pack.max_accepted > kMaxDraftTokens) {
    return absl::InvalidArgumentError(absl::StrCat("planned pack: max_accepted ",
                                                   pack.max_accepted, " outside [0, ",
                                                   kMaxDraftTokens, "]"));
  }
  if (pack.draft_offsets == nullptr || pack.packed_row_offsets == nullptr ||
      pack.draft_kv == nullptr || pack.packed_kv == nullptr) {
    return absl::InvalidArgumentError(
        "planned pack: draft_offsets, packed_row_offsets, draft_kv and packed_kv must all be set");
  }
  return absl::OkStatus();
}

cudaError_t LaunchGreedyPlannedPack(const GreedyPlannedPack& pack, cudaStream_t stream) {
  if (!ValidateGreedyPlannedPack(pack).ok()) return cudaErrorInvalidValue;
  if (pack.max_accepted == 0) return cudaSuccess;
  return greedy_copy::DispatchVector<PlannedLaunch>(
      greedy_copy::CopyVectorBytes(pack.draft_kv, pack.packed_kv, pack.row_bytes), pack,
      stream);
}

}  // namespace specverify
