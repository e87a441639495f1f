// Host-side checks of a rejection-sampling batch, and the translation of the
// per-sequence codes every implementation writes into absl::Status.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_VALIDATE_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/layout/ragged_batch.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify {

struct RejectionLimits {
  int32_t max_sequences = kMaxBatchSequences;
  int32_t max_draft_tokens = kMaxDraftTokens;
  int32_t max_vocab_size = 1 << 20;
};

// Checks a host-resident batch before staging: sizes and offsets, each gamma
// in [1, max_draft_tokens], every draft id in [0, V), pointers present (draft
// values iff has_draft_probs), method/kind compatibility, sigmoid constants,
// and each sequence's temperature / top_k / top_p. Returns kInvalidArgument
// naming the field, the sequence index (and position) and the limit.
// Does NOT read target/draft values: the implementations check the elements
// they read (or every element with validate_full_rows).
absl::Status ValidateRejectionBatch(const RejectionSampleParams& params,
                                    const RejectionLimits& limits = {});

// kOk, or kInvalidArgument for the first sequence whose status code is not
// kRejectionOk, naming it, the position and what was wrong. Reads host copies
// of output.status_codes and output.error_positions. A kRejectionRacePending
// code left unfinished is kInternal.
absl::Status RejectionOutcomeStatus(const int32_t* status_codes, const int32_t* error_positions,
                                    int32_t num_sequences);

// Human-readable name of a code ("draft token out of range", ...).
const char* RejectionCodeName(int32_t code);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_VALIDATE_H_
