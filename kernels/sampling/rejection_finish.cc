#include "kernels/sampling/rejection_finish.h"

#include <algorithm>

namespace specverify {

void FinishRejectionOutcomes(int32_t num_sequences, const RejectionRaceSlot* slots, int32_t slots_per_sequence,
                             const RejectionBatchOutput& host_output) {
  const RejectionBatchOutput& out = host_output;
  const int64_t per_sequence = slots_per_sequence;
  for (int32_t i = 0; i < num_sequences; ++i) {
    if (out.status_codes[i] != kRejectionRacePending) continue;
    uint64_t word = kRaceNoEntrant;
    uint32_t flags = 0;
    const RejectionRaceSlot* own = slots + i * per_sequence;
    for (int64_t g = 0; g < per_sequence; ++g) {
      word = std::max(word, own[g].word);
      flags |= own[g].flags;
    }
    const int32_t code = RaceOutcomeCode(word, flags);
    out.status_codes[i] = code;
    if (code == kRejectionOk) {
      out.next_tokens[i] = RaceWordToken(word);
      out.error_positions[i] = -1;
    } else {
      // error_positions[i] already holds k, where the device reports it.
      out.accepted_lengths[i] = 0;
      out.next_tokens[i] = -1;
      out.mismatch[i] = 1;
    }
  }
}

}  // namespace specverify
