// Host-decided greedy pack: the device only copies.
//
// A served greedy batch's tokens arrive on the host (the proto carries them
// as repeated int32), so the server decides acceptance there, while it
// stages the batch: ReferenceGreedyVerifyRange and ReferencePackedRowOffsets
// (greedy_reference.h) on the host's tokens give every k, next token and
// packed offset in a few microseconds (b = 32, gamma = 128: ~2 us on the
// H100 host). The device then copies each sequence's accepted rows to their
// packed place: no token crosses to the device, there is no verify grid, and
// no store waits for another sequence's accepted length. That dependence is
// what holds the device-side paths (greedy_cuda.h) near 78% of a D2D copy at
// the stress point (b = 32, gamma = 128, 4 KiB rows); this launch measured
// 96% (docs/PERFORMANCE.md, issue #17 item 4).
//
// Tokens that are already in device memory (a library caller) keep the
// device paths of greedy_cuda.h: bringing them to the host would cost a sync.
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_PLANNED_PACK_H_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_PLANNED_PACK_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace specverify {

// Every pointer is device memory or host memory the device maps.
struct GreedyPlannedPack {
  int32_t num_sequences = 0;                    // b
  const int32_t* draft_offsets = nullptr;       // [b + 1], the batch's ragged layout
  // [b + 1], the host's ReferencePackedRowOffsets: sequence s's k_s accepted
  // rows go to rows [packed_row_offsets[s], packed_row_offsets[s + 1]).
  const int32_t* packed_row_offsets = nullptr;
  const std::byte* draft_kv = nullptr;          // [draft_offsets[b] * row_bytes]
  int64_t row_bytes = 0;                        // in [1, kMaxGreedyRowBytes]
  std::byte* packed_kv = nullptr;               // [packed_row_offsets[b] * row_bytes]
  // Host-known max_s k_s (0: nothing to copy): sizes the grid.
  int32_t max_accepted = 0;
};

// Checks the host-known fields: num_sequences in [1, kMaxBatchSequences],
// row_bytes in [1, kMaxGreedyRowBytes], max_accepted in [0, kMaxDraftTokens],
// every pointer set. kInvalidArgument naming the field. It cannot check
// device contents: REQUIRES the offsets are the ones the host computed for
// this batch (k_s <= gamma_s, so every row read and written is in bounds).
absl::Status ValidateGreedyPlannedPack(const GreedyPlannedPack& pack);

// Copies every sequence's accepted rows, asynchronously on `stream`: one
// launch, nothing allocated, no sync, graph-capturable. Returns
// cudaErrorInvalidValue when ValidateGreedyPlannedPack fails, else the
// launch error. Packed rows beyond packed_row_offsets[b] are never written.
cudaError_t LaunchGreedyPlannedPack(const GreedyPlannedPack& pack, cudaStream_t stream);

// Tuning: each block copies up to this many bytes of one sequence's
// accepted rows (8 KiB beat 16 and 32 KiB in runs 1-3 of
// bench/greedy/results/2026-11-27-hostplan/).
inline constexpr int64_t kPlannedPackBlockBytes = 8 * 1024;

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_PLANNED_PACK_H_
