// The layout of a CUDA executor slot's results section (device and pinned
// alike), shared by the launches (cuda_executor_launch.cc) and the
// completion (cuda_executor.cc). Private to server/backend/cuda.
#ifndef SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_RESULT_LAYOUT_H_
#define SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_RESULT_LAYOUT_H_

#include <cstdint>

#include "kernels/sampling/rejection_params.h"
#include "server/backend/staging.h"

namespace specverify::server {

// status_codes / error_positions are the rejection-sampling outcome codes.
// Greedy batches decided on the device copy them back too (2-3 KiB at most);
// host-decided ones copy nothing back.
// Tree batches add accepted_nodes (the paths' CSR, copied back) and
// path_nodes (the sampled kernel's per-tree slots, device only), [rows] each.
// Sampled chains add race_slots (RejectionRaceSlot, 16 bytes each, copied
// back for the completion to fold: FinishRejectionOutcomes).
struct ResultLayout {
  int64_t accepted = 0, next = 0, packed_offsets = 0, status_codes = 0, error_positions = 0,
          mismatch = 0, accepted_nodes = 0, path_nodes = 0, race_slots = 0, total = 0;
};
inline ResultLayout LayoutResults(int64_t b, int64_t tree_rows = 0, int64_t race_slots = 0) {
  ResultLayout l;
  l.next = StagingAlignUp(4 * b);
  l.packed_offsets = l.next + StagingAlignUp(4 * b);
  l.status_codes = l.packed_offsets + StagingAlignUp(4 * (b + 1));
  l.error_positions = l.status_codes + StagingAlignUp(4 * b);
  l.mismatch = l.error_positions + StagingAlignUp(4 * b);
  l.accepted_nodes = l.mismatch + StagingAlignUp(b);
  l.path_nodes = l.accepted_nodes + StagingAlignUp(4 * tree_rows);
  l.race_slots = l.path_nodes + StagingAlignUp(4 * tree_rows);
  l.total = race_slots > 0  ? l.race_slots + int64_t{sizeof(RejectionRaceSlot)} * race_slots
            : tree_rows > 0 ? l.path_nodes + 4 * tree_rows
                            : l.mismatch + b;
  return l;
}

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_RESULT_LAYOUT_H_
