// CUDA rejection-sampling verification (rejection_params.h, docs/SAMPLING.md).
// Produces the same tokens as ReferenceRejectionSample for the same inputs
// (tests/kernels/sampling/rejection_cuda_test.cc).
//
// Work per batch (seed 004: acceptance needs two scalars per position; only
// one row per sequence is swept):
//   probabilities / sigmoid: one race launch. Grid
//     (G, b): in every block of sequence i, warp 0 decides acceptance from
//     the 2 * gamma_i scalars (lane-parallel over positions) for the block;
//     then the block races over 1/G of the recovery-or-bonus row, streamed
//     through shared memory with cp.async (sm_80+), pruning with a bound on
//     the winner's key that its warps share, and publishes its winner with
//     ONE 64-bit atomicMax into the sequence's packed result word (smallest
//     key wins, ties to the lower token; race_result.cuh), then takes a
//     ticket (an acq_rel atomic); the block that takes the sequence's last
//     ticket reads the word, writes every output and clears the word, flags
//     and ticket, so graph replays need no memset. (A finalize kernel after
//     the grid did this until 2026-11-26: H100, B=8 13.06 -> 12.64 us, fp32
//     logits B=8 56.4 -> 54.5.) With output.race_slots each block instead
//     stores its winner in its slot and the host folds the G slots after the
//     result copy (FinishRejectionOutcomes): no ticket, no read-back, ~1 us
//     less per launch. G is chosen for 2 blocks per SM
//     (RejectionRaceBlocksPerSm), in one wave up to 2 x SMs sequences (G=1
//     beyond); the race kernel is compiled for 2 blocks per SM.
//   logits, exact: a normalizer pass first (one block per 4096-logit chunk of
//     every target and draft row, online max + fixed-order double sum; for
//     long passes over 16-bit rows one block per run of 4 or 8 chunks of a row,
//     RejectionRowPassChunksPerBlock), a
//     combine kernel that folds each row's chunks (one warp per row), then,
//     with top-k/top-p, a filter pass (radix select; on sm_90 a cluster of
//     up to 8 blocks per target row, each reading a slice of it, so that a
//     small batch's rows still occupy every SM), then the launch above; on
//     sm_90 each launch after the first is a programmatic dependent of the
//     one before.
//   validate_full_rows: the check pass (same shape as the normalizer pass) over
//     every row first.
// Bad inputs (draft id outside [0, V), NaN/Inf/negative values read) end up
// in output.status_codes / error_positions: no extra synchronization; the
// host converts them with RejectionOutcomeStatus after its one result copy.
//
// Graph-capturable: no allocation, no synchronization, no host reads of
// device memory.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_SAMPLE_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_SAMPLE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sampling/rejection_params.h"

namespace specverify {

// What the scratch must hold; the largest batch the executor will form.
struct RejectionScratchLimits {
  int32_t max_sequences = 0;          // b
  int32_t max_total_draft_tokens = 0; // offsets[b]
  int32_t max_vocab_size = 0;         // V
};

// Device scratch, sized and zeroed once at start-up. Not shareable between
// concurrently running launches (it holds the per-sequence result words).
struct RejectionScratch {
  void* device = nullptr;
  size_t bytes = 0;
  RejectionScratchLimits limits;
  int32_t num_sms = 0;  // of the device the scratch was initialized on
  // Race blocks per SM the launcher aims for; 0 (the default) lets it choose
  // by batch size (RejectionRaceBlocksPerSm). The benchmark sets 1 or 2 to
  // measure the choice; larger values are taken as 2, the occupancy the race
  // kernel is compiled for.
  int32_t race_blocks_per_sm = 0;
  // Blocks per target row of the top-k / top-p filter, 1-8; 0 (the default)
  // lets the launcher choose: the most whose clusters fit on the device at
  // once (RejectionFilterSlices). Devices below sm_90 always take 1. Tests set
  // it to reach each path.
  int32_t filter_slices = 0;
  // Consecutive chunks of one row that a normalizer / check-pass block takes
  // (1-8); 0 (the default) lets the launcher choose
  // (RejectionRowPassChunksPerBlock). The benchmark sweeps it (--row-chunks);
  // tests set it to reach runs of several chunks on small rows.
  int32_t row_pass_chunks_per_block = 0;
};

// Bytes of device memory LaunchRejectionSample needs for batches within
// `limits`.
size_t RejectionScratchBytes(const RejectionScratchLimits& limits);

// Adopts `device_memory` (at least RejectionScratchBytes(limits) bytes,
// 256-byte aligned, e.g. from cudaMalloc), zeroes its tickets on `stream` and
// records the current device's SM count. Call once at start-up.
cudaError_t InitRejectionScratch(void* device_memory, size_t bytes, const RejectionScratchLimits& limits,
                                 cudaStream_t stream, RejectionScratch* scratch);

// Enqueues the verification of one batch on `stream`.
// REQUIRES: every pointer of params is device memory; the batch passed
// ValidateRejectionBatch on its host copy; it fits scratch.limits.
// Returns cudaErrorInvalidValue for a batch outside the scratch limits, else
// the launch status. Per-sequence input errors are reported in the outputs.
cudaError_t LaunchRejectionSample(const RejectionSampleParams& params, const RejectionScratch& scratch,
                                  cudaStream_t stream);

// Chunks per row-pass block the launcher takes for `rows` rows of
// `num_chunks` chunks of `dtype` when RejectionScratch::row_pass_chunks_per_block
// is 0: 8 for 16-bit rows whose single-chunk pass would be 32 waves or more
// on `num_sms` SMs, 4 for those of 6 waves or more, else 1 (never more than
// num_chunks).
int32_t RejectionRowPassChunksPerBlock(SampleDtype dtype, int64_t rows, int32_t num_chunks, int32_t num_sms);

// Race blocks per SM the launcher plans for a batch of `num_sequences` when
// RejectionScratch::race_blocks_per_sm is 0.
int32_t RejectionRaceBlocksPerSm(int32_t num_sequences);

// Race slots per sequence (RejectionBatchOutput::race_slots_per_sequence)
// that LaunchRejectionSample needs for this batch on this scratch: the race's
// blocks per sequence. Host queries only (cached): safe inside stream capture.
cudaError_t RejectionRaceSlotsPerSequence(const RejectionBatchInput& in, const RejectionScratch& scratch,
                                          int32_t* slots);

// The most race slots (num_sequences * slots per sequence) any batch within
// `limits` needs on a device of `num_sms` SMs: what to reserve at start-up.
int64_t RejectionRaceSlotsBound(const RejectionScratchLimits& limits, int32_t num_sms);

// Blocks per target row the filter uses for `num_target_rows` filtered
// rows of `dtype` on the current device when RejectionScratch::filter_slices
// is 0 (exposed for the benchmark report).
cudaError_t RejectionFilterSlices(SampleDtype dtype, int64_t num_target_rows, int32_t* slices);

// Blocks per sequence the race uses for this batch (exposed for the benchmark
// report); blocks_per_sm 0 chooses as the launcher does.
int32_t RejectionRaceBlocksPerSequence(int32_t num_sequences, int32_t vocab_size, int32_t num_sms,
                                       int32_t blocks_per_sm = 0);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_SAMPLE_H_
