// Row copies of the zero-copy data plane (docs/DATA_PLANE.md), beside the
// verify kernels of a batch and on the same stream:
//
//  * Gather: a batch whose draft KV rows live in workers' registered regions
//    gets them copied, on the device, into the contiguous draft_kv layout of
//    kernels/layout/ragged_batch.h. The verify-and-pack kernels then run
//    unchanged; their fused path streams a tile's rows as one contiguous run
//    (TMA bulk loads), which rows scattered over regions cannot offer. When
//    the host already decided the batch (greedy_planned_pack.h), the same
//    gather over the packed offsets copies only the accepted rows, straight
//    to their packed place -- or, with a destination per sequence, straight
//    into the KV_RETURN_REGION output of the request it belongs to, so
//    those rows are copied once, not packed and then delivered.
//  * Deliver: the packed rows of each request that asked for KV_RETURN_REGION
//    are copied from the batch's packed buffer into that request's output
//    tensor. How many rows a request packed is known only on the device
//    (packed_row_offsets), so the copy reads the offsets there: no host sync.
//
// Both copy device memory to device memory (or to host memory the device
// maps), never through the host. Each has a CPU reference beside it; the CPU
// backend runs the references on host addresses.
#ifndef SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_H_
#define SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"


namespace specverify {

struct RowGatherParams {
  int32_t num_sequences = 0;               // b
  int64_t total_rows = 0;                  // host-known offsets[b]: sizes the grid
  int32_t max_rows = 0;                    // host-known max gamma_i: sizes the grid
  int64_t row_bytes = 0;                   // > 0
  const int32_t* draft_offsets = nullptr;  // [b + 1], read-only
  // [b] sequence i's gamma_i rows, contiguous, read-only.
  const std::byte* const* sources = nullptr;
  std::byte* rows = nullptr;               // [offsets[b] * row_bytes], write-only
  // Optional, [b]: where sequence i's rows go instead of rows + offsets[i] *
  // row_bytes (then `rows` may be null); a null entry skips the sequence.
  // The ranges must not overlap.
  std::byte* const* destinations = nullptr;
};

// One output tensor: the rows [packed_row_offsets[first_sequence],
// packed_row_offsets[first_sequence + num_sequences]) of the packed buffer go
// to destination, in order.
struct PackedDelivery {
  int32_t first_sequence = 0;
  int32_t num_sequences = 0;
  int32_t max_rows = 0;                    // upper bound of the rows (sum of gamma)
  int32_t reserved = 0;
  std::byte* destination = nullptr;        // capacity max_rows * row_bytes
};

struct PackedDeliveryParams {
  int32_t num_deliveries = 0;
  int32_t max_rows = 0;                    // host-known max over deliveries: sizes the grid
  int64_t row_bytes = 0;                   // > 0
  const PackedDelivery* deliveries = nullptr;    // [num_deliveries], read-only
  const int32_t* packed_row_offsets = nullptr;   // [b + 1], read-only (the pack's output)
  const std::byte* packed_kv = nullptr;          // read-only
};

// Each sequence's accepted rows copied once, from where they are to where
// they are answered, when the accepted lengths are known only where the
// copy runs (a sampled batch: the sampler wrote them on the device). Sequence
// i's first accepted_lengths[i] rows of sources[i] go to destinations[i],
// after the accepted rows of sequences origins[i] .. i-1: with destination
// the packed buffer and origin 0 they land at their packed offsets; with a
// request's kv_output and its first sequence, as the request's rows lie in
// it. Replaces gathering every row, packing the accepted ones and delivering
// them again.
struct AcceptedRowCopyParams {
  int32_t num_sequences = 0;                  // b
  int32_t max_rows = 0;                       // host-known bound of every k_i: sizes the grid
  int64_t row_bytes = 0;                      // > 0
  const int32_t* accepted_lengths = nullptr;  // [b], 0 <= k_i <= max_rows, read-only
  const std::byte* const* sources = nullptr;  // [b] sequence i's rows, contiguous
  std::byte* const* destinations = nullptr;   // [b] (a null entry skips the sequence)
  const int32_t* origins = nullptr;           // [b], origins[i] <= i
};

// Checks the host-known fields and that every pointer is set.
absl::Status ValidateRowGather(const RowGatherParams& p);
absl::Status ValidatePackedDelivery(const PackedDeliveryParams& p);
absl::Status ValidateAcceptedRowCopy(const AcceptedRowCopyParams& p);

// CPU references (host memory). The launchers are in row_copy_cuda.h.
void ReferenceRowGather(const RowGatherParams& p);
void ReferencePackedDelivery(const PackedDeliveryParams& p);
void ReferenceAcceptedRowCopy(const AcceptedRowCopyParams& p);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_H_
