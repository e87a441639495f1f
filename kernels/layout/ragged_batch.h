// Ragged batch layout shared by every greedy verify-and-pack implementation
// (CPU reference, CUDA kernels, server backends).
//
// A batch holds `num_sequences` (b) sequence drafts of ragged draft length
// gamma_i. Positions are laid out CSR-style:
//
//   draft_offsets  [b + 1]               offsets[0] == 0, offsets[i+1] - offsets[i] == gamma_i
//   draft_tokens   [offsets[b]]          sequence i at draft_tokens[offsets[i] .. offsets[i+1])
//   target_tokens  [offsets[b] + b]      sequence i's gamma_i + 1 tokens start at offsets[i] + i
//   draft_kv       [offsets[b] * row_bytes]  row j of sequence i at (offsets[i] + j) * row_bytes
//
// Results:
//   accepted_lengths    [b]      k_i = first j < gamma_i with draft != target, else gamma_i
//   next_tokens         [b]      target_tokens[offsets[i] + i + k_i]
//   mismatch            [b]      1 iff k_i < gamma_i
//   packed_row_offsets  [b + 1]  exclusive prefix sum of k; [b] holds the total accepted rows
//   packed_kv           capacity offsets[b] * row_bytes (the upper bound, so sizing the
//                       buffer never needs the results: no device-to-host sync); rows of
//                       sequence i at packed_row_offsets[i] * row_bytes, in sequence order.
//
// The structs are plain views: they own nothing and say nothing about the memory
// space. Device launchers document that every pointer is device memory; the CPU
// reference requires host memory.
#ifndef SPECVERIFY_KERNELS_LAYOUT_RAGGED_BATCH_H_
#define SPECVERIFY_KERNELS_LAYOUT_RAGGED_BATCH_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace specverify {

// Longest draft a sequence may carry. Kernels are tested up to this bound;
// the server rejects longer drafts at the edge.
inline constexpr int32_t kMaxDraftTokens = 256;
// Largest batch the kernels are tested with and the server may form.
inline constexpr int32_t kMaxBatchSequences = 4096;

struct GreedyBatchInput {
  int32_t num_sequences = 0;                // b
  const int32_t* draft_offsets = nullptr;   // [b + 1], read-only
  const int32_t* draft_tokens = nullptr;    // [offsets[b]], read-only
  const int32_t* target_tokens = nullptr;   // [offsets[b] + b], read-only
  const std::byte* draft_kv = nullptr;      // [offsets[b] * row_bytes], read-only; null iff row_bytes == 0
  int64_t row_bytes = 0;                    // bytes per KV row, any value >= 0
};

struct GreedyBatchOutput {
  int32_t* accepted_lengths = nullptr;      // [b], write-only
  int32_t* next_tokens = nullptr;           // [b], write-only
  uint8_t* mismatch = nullptr;              // [b], write-only, 0 or 1
  int32_t* packed_row_offsets = nullptr;    // [b + 1], write-only
  std::byte* packed_kv = nullptr;           // capacity offsets[b] * row_bytes; null iff row_bytes == 0
};

struct GreedyVerifyParams {
  GreedyBatchInput input;
  GreedyBatchOutput output;
};

// Total draft positions of a batch whose offsets are host-visible.
inline int64_t TotalDraftRows(const GreedyBatchInput& in) {
  return in.num_sequences > 0 ? in.draft_offsets[in.num_sequences] : 0;
}

// Bytes the packed KV buffer must hold for any outcome of verification.
inline int64_t PackedKvCapacityBytes(const GreedyBatchInput& in) {
  return TotalDraftRows(in) * in.row_bytes;
}

struct LayoutLimits {
  int32_t max_sequences = kMaxBatchSequences;
  int32_t max_draft_tokens = kMaxDraftTokens;
  // Token ids must be < vocab_size when it is positive; 0 means unknown.
  int32_t vocab_size = 0;
};

// Checks only the pointers of a batch in any memory space (reads nothing they
// point to): inputs and outputs set, KV pointers exactly when row_bytes > 0.
absl::Status ValidateGreedyPointers(const GreedyVerifyParams& params);

// Checks a host-resident batch: offsets start at zero and never decrease, each
// gamma lies in [1, max_draft_tokens], every token id is >= 0 (and < vocab_size
// when known), KV pointers agree with row_bytes, and every output pointer is set.
// Returns kInvalidArgument naming the field, the sequence index and the limit.
absl::Status ValidateGreedyBatch(const GreedyVerifyParams& params,
                                 const LayoutLimits& limits = {});

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_LAYOUT_RAGGED_BATCH_H_
