// The host's half of a host-finished race (RejectionBatchOutput::race_slots):
// after the one copy of a batch's results, each pending sequence's winner is
// the best of its race blocks' slots. Taking the merge off the device saves
// the last block's ticket and read-back (~1 us per launch on the H100,
// bench/sampling/results/2026-11-28-balance run 3); folding a few hundred
// 16-byte slots on the host costs well under a microsecond.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_FINISH_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_FINISH_H_

#include <cstdint>

#include "kernels/sampling/rejection_params.h"

namespace specverify {

// Completes every kRejectionRacePending outcome of `host_output` (host copies
// of the five per-sequence outputs; its race_slots are not read) from
// `slots`, the host copy of the launch's race_slots, `slots_per_sequence`
// per sequence as for the launch, as the device merge would have: an
// invalid target value read by any block, else an invalid draft value, is
// that error at position k with k 0 and no token; no entrant in any slot is
// kRejectionEmptyTargetRow; else the best slot's token, k kept. Outcomes
// not pending (decided without a race) are left as they are.
void FinishRejectionOutcomes(int32_t num_sequences, const RejectionRaceSlot* slots, int32_t slots_per_sequence,
                             const RejectionBatchOutput& host_output);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_FINISH_H_
