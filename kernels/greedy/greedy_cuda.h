// CUDA greedy verify-and-pack (seed 000, extended) on the ragged layout of
// kernels/layout/ragged_batch.h. Plain C++ header: no kernel code, only
// cuda_runtime_api.h types, so g++ translation units (the executor, tests)
// include it.
//
// Three complete paths produce identical results (bit-exact with
// ReferenceGreedyVerifyPack):
//   kFused         one launch: warp-ballot verify of a tile of draft rows, a
//                  single-pass prefix over accepted rows across blocks
//                  (decoupled look-back; small batches verify the whole
//                  batch in every block instead), 16-byte row copies. Any b,
//                  any gamma. On sm_90, batches of about 12-25 MiB of draft
//                  KV (fused tiles of 32-64 KiB, 16-byte aligned rows) take
//                  two launches instead: ballot verify, then a pack kernel
//                  launched as its programmatic dependent, which reads its
//                  rows before the verify ends and stores the accepted ones
//                  after it (no look-back).
//   kTwoStep       ballot verify kernel, cub::DeviceScan::ExclusiveSum, a
//                  multi-block pack kernel (3 kernels + CUB's own launches).
//   kNaiveTwoStep  as kTwoStep with a thread-per-sequence serial scan: kept
//                  only as the benchmark baseline of seed 000.
//
// Every launcher is asynchronous on `stream`, allocates nothing, never
// synchronizes and never reads device memory from the host, so each path can
// be captured into a CUDA graph.
//
// Thread safety: a GreedyScratch may be used by one stream at a time (the
// fused path's look-back state lives in it). Use one scratch per stream.
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_CUDA_H_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/cuda_status.h"
#include "kernels/layout/ragged_batch.h"

namespace specverify {

enum class GreedyPath : int32_t {
  kFused = 0,
  kTwoStep = 1,
  kNaiveTwoStep = 2,
};

// "fused", "two_step", "naive_two_step" (metric labels, CSV columns).
const char* GreedyPathName(GreedyPath path);

// The verify-only kernels, for the benchmark's scan comparison (seed 000 Opt A
// vs naive). They write accepted_lengths, next_tokens and mismatch only.
enum class GreedyScanKernel : int32_t {
  kNaive = 0,   // one thread per sequence, serial early-exit loop
  kBallot = 1,  // one warp per sequence, ceil(gamma/32) __ballot_sync rounds
};

// One batch on the device. What the host knows without reading device memory
// travels beside the params: the executor built the batch, so it knows them.
struct GreedyDeviceBatch {
  // Every pointer is device memory; layout and shapes as in ragged_batch.h.
  GreedyVerifyParams params;
  // == draft_offsets[b]: sizes the fused grid and bounds packed_kv.
  int64_t total_draft_rows = 0;
  // max_i gamma_i, in [1, kMaxDraftTokens]: sizes the two-step pack grid.
  int32_t max_gamma = 0;
};

// Upper bound of the bytes the batch packs (every row accepted).
inline int64_t GreedyPackBytesUpperBound(const GreedyDeviceBatch& batch) {
  return batch.total_draft_rows * batch.params.input.row_bytes;
}

// The largest batch a scratch area serves. The executor sizes scratch once,
// at start-up, for its maximum batch.
struct GreedyScratchLimits {
  // max_total_draft_rows must stay below 2^30 (look-back values are 30 bits).
  int32_t max_sequences = kMaxBatchSequences;
  int64_t max_total_draft_rows = int64_t{kMaxBatchSequences} * kMaxDraftTokens;
};

// A view of device scratch: look-back tile state for kFused, CUB temporary
// storage for the two-step paths. Owned by the caller.
struct GreedyScratch {
  void* data = nullptr;  // device, 256-byte aligned (cudaMalloc gives that)
  size_t bytes = 0;
  GreedyScratchLimits limits;
};

// Bytes of scratch needed for `limits` (host only, no device work).
cudaError_t GetGreedyScratchBytes(const GreedyScratchLimits& limits,
                                  size_t* bytes);

// Zeroes the look-back state. REQUIRED once after allocation, before the
// first launch on `stream`; never needed per batch (each fused launch tags
// its look-back words with a launch epoch and retires the epoch itself).
// A stale word could be mistaken for a current one only when exactly a
// multiple of 2^32 fused launches on this scratch separate two uses of the
// same tile slot; a server that wants to rule even that out calls this again
// (stream-ordered, cheap) every 2^31 launches.
cudaError_t InitGreedyScratch(const GreedyScratch& scratch,
                              cudaStream_t stream);

// Owning scratch: allocation + initialization in one call (start-up only:
// synchronizes `stream` so the memory is ready when it returns).
struct GreedyScratchBuffer {
  DeviceBuffer buffer;
  GreedyScratch view;
};
absl::StatusOr<GreedyScratchBuffer> AllocateGreedyScratch(
    const GreedyScratchLimits& limits, cudaStream_t stream);

// Checks the host-side fields of a device batch against the scratch limits:
// num_sequences in [1, limits.max_sequences], total_draft_rows in
// [b, min(b * max_gamma, limits.max_total_draft_rows)], max_gamma in
// [1, kMaxDraftTokens], row_bytes in [0, kMaxGreedyRowBytes], every pointer
// set (draft_kv and packed_kv exactly when row_bytes > 0).
// kInvalidArgument naming the field.
// It cannot check device contents: REQUIRES the offsets really are a valid
// ragged layout with those totals (ValidateGreedyBatch on the host copy).
absl::Status ValidateGreedyDeviceBatch(const GreedyDeviceBatch& batch,
                                       const GreedyScratch& scratch);

// Runs `path` on `stream`. REQUIRES ValidateGreedyDeviceBatch(batch, scratch)
// is OK; returns cudaErrorInvalidValue for a shape the scratch cannot serve
// and the launch error otherwise. Packed rows beyond the accepted total are
// never written.
cudaError_t LaunchGreedyVerifyPack(const GreedyDeviceBatch& batch,
                                   GreedyPath path,
                                   const GreedyScratch& scratch,
                                   cudaStream_t stream);

// Verify only (no offsets, no pack): accepted_lengths, next_tokens, mismatch.
cudaError_t LaunchGreedyVerifyOnly(const GreedyDeviceBatch& batch,
                                   GreedyScanKernel kernel,
                                   cudaStream_t stream);

// Tuning constants of the fused path, from the H100 runs recorded in
// docs/PERFORMANCE.md (issue #4):
//  * 256 threads per block: 8 warps verify 8 sequences at once.
//  * tiles of at least 16 KiB (one round of 16-byte loads in flight per
//    thread for small batches) and, for large batches, about one tile per
//    resident block: with every tile starting at once, 1024 tiles of 16 KiB
//    cost 1.9x a D2D copy at 15 MB (look-back chains), fewer and larger tiles
//    keep the prefix walk to one or two block-wide steps.
inline constexpr int kFusedThreadsPerBlock = 256;
inline constexpr int64_t kFusedMinTileBytes = 16 * 1024;
inline constexpr int32_t kFusedMinTileRows = 4;
inline constexpr int32_t kFusedMaxTileRows = 128;
// Largest KV row the CUDA paths accept (keeps a fused tile's vector count
// within 32 bits: kFusedMinTileRows * 2^28 = 2^30).
inline constexpr int64_t kMaxGreedyRowBytes = int64_t{1} << 28;

// Draft rows per fused tile: the smallest power of two in
// [kFusedMinTileRows, kFusedMaxTileRows] whose tile holds max(
// kFusedMinTileBytes, pack bytes upper bound / resident_blocks) bytes (tiles
// stay under 1 GiB); kFusedMaxTileRows when row_bytes == 0.
// resident_blocks: fused blocks the device holds at once.
int32_t FusedTileRows(int64_t row_bytes, int64_t pack_bytes_upper_bound,
                      int resident_blocks);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_CUDA_H_
