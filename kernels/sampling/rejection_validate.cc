#include "kernels/sampling/rejection_validate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/sampling/rejection_core.h"

namespace specverify {

absl::Status ValidateRejectionBatch(const RejectionSampleParams& params, const RejectionLimits& limits) {
  const RejectionBatchInput& in = params.input;
  const RejectionBatchOutput& out = params.output;
  if (in.num_sequences < 0 || in.num_sequences > limits.max_sequences) {
    return absl::InvalidArgumentError(absl::StrCat("num_sequences is ", in.num_sequences,
                                                   ", outside [0, ", limits.max_sequences, "]"));
  }
  if (in.vocab_size < 1 || in.vocab_size > limits.max_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size is ", in.vocab_size, ", outside [1, ",
                                                   limits.max_vocab_size, "]"));
  }
  if (in.method == SampleMethod::kSigmoid) {
    if (in.kind != SampleValueKind::kLogits) {
      return absl::InvalidArgumentError("method SIGMOID_APPROXIMATION requires LOGITS");
    }
    if (!std::isfinite(in.sigmoid_alpha) || !std::isfinite(in.sigmoid_beta) ||
        !(in.sigmoid_alpha < in.sigmoid_beta)) {
      return absl::InvalidArgumentError(absl::StrCat("sigmoid_alpha (", in.sigmoid_alpha,
                                                     ") must be finite and < sigmoid_beta (",
                                                     in.sigmoid_beta, ")"));
    }
  }
  if (in.draft_offsets == nullptr || in.sequences == nullptr ||
      (in.target_values == nullptr && in.target_rows == nullptr)) {
    return absl::InvalidArgumentError(
        "draft_offsets, sequences and target_values (or target_rows) must be set");
  }
  if (in.has_draft_probs != (in.draft_values != nullptr || in.draft_rows != nullptr)) {
    return absl::InvalidArgumentError("draft_values (or draft_rows) must be set iff has_draft_probs");
  }
  if (out.accepted_lengths == nullptr || out.next_tokens == nullptr || out.mismatch == nullptr ||
      out.status_codes == nullptr || out.error_positions == nullptr) {
    return absl::InvalidArgumentError("every output pointer must be set");
  }
  if (in.num_sequences > 0 && in.draft_offsets[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat("draft_offsets[0] is ", in.draft_offsets[0], ", not 0"));
  }
  if (in.total_draft_tokens != (in.num_sequences > 0 ? in.draft_offsets[in.num_sequences] : 0)) {
    return absl::InvalidArgumentError(absl::StrCat("total_draft_tokens is ", in.total_draft_tokens,
                                                   ", but draft_offsets[b] is ",
                                                   in.num_sequences > 0 ? in.draft_offsets[in.num_sequences] : 0));
  }
  bool any_filter = false;
  for (int32_t i = 0; i < in.num_sequences; ++i) {
    const int32_t gamma = in.draft_offsets[i + 1] - in.draft_offsets[i];
    if (gamma < 1 || gamma > limits.max_draft_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": gamma (draft_tokens count) is ",
                                                     gamma, ", outside [1, ", limits.max_draft_tokens, "]"));
    }
    if (gamma > 0 && in.draft_tokens == nullptr) return absl::InvalidArgumentError("draft_tokens must be set");
    for (int32_t j = 0; j < gamma; ++j) {
      const int32_t x = in.draft_tokens[in.draft_offsets[i] + j];
      if (x < 0 || x >= in.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": draft_tokens[", j, "] is ", x,
                                                       ", outside [0, ", in.vocab_size, ")"));
      }
    }
    const SequenceSamplingParams& s = in.sequences[i];
    if (rejection::SequenceParamsCode(in.kind, in.method, s) != kRejectionOk) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", i, ": sampling parameters out of range (temperature ", s.temperature, ", top_k ",
          s.top_k, ", top_p ", s.top_p, ", sequence_index ", s.sequence_index,
          "): probabilities and log-probabilities take top_k 0 and top_p 1; logits need a finite "
          "temperature >= 0, "
          "top_k >= 0, top_p in (0, 1]; sigmoid needs temperature > 0 and no top-k/top-p"));
    }
    any_filter = any_filter || rejection::IsFiltered(s);
  }
  if (any_filter && !in.any_top_k_top_p) {
    return absl::InvalidArgumentError("a sequence uses top_k/top_p but any_top_k_top_p is false");
  }
  return absl::OkStatus();
}

const char* RejectionCodeName(int32_t code) {
  switch (code) {
    case kRejectionOk: return "ok";
    case kRejectionDraftTokenOutOfRange: return "draft token id outside [0, vocab)";
    case kRejectionBadTargetValue:
      return "target value is NaN, infinite or a negative probability (log-probabilities: NaN or +inf)";
    case kRejectionBadDraftValue:
      return "draft value is NaN, infinite or a negative probability (log-probabilities: NaN or +inf)";
    case kRejectionEmptyTargetRow: return "target row to sample from has no positive probability";
    case kRejectionBadSequenceParams: return "temperature, top_k or top_p out of range";
    case kRejectionBadRowSum: return "probability row sum is zero or not finite";
    case kRejectionRacePending: return "sampled token not finished on the host (FinishRejectionOutcomes)";
    default: return "unknown error code";
  }
}

absl::Status RejectionOutcomeStatus(const int32_t* status_codes, const int32_t* error_positions,
                                    int32_t num_sequences) {
  for (int32_t i = 0; i < num_sequences; ++i) {
    if (status_codes[i] == kRejectionOk) continue;
    if (status_codes[i] == kRejectionRacePending) {
      // Not the caller's input: the server skipped the host's half of the race.
      return absl::InternalError(absl::StrCat("sequence ", i, ": ", RejectionCodeName(status_codes[i])));
    }
    const char* field = "target";
    switch (status_codes[i]) {
      case kRejectionDraftTokenOutOfRange: field = "draft_tokens"; break;
      case kRejectionBadDraftValue: field = "draft"; break;
      case kRejectionBadSequenceParams: field = "sampling parameters"; break;
      case kRejectionBadRowSum: field = "target or draft row"; break;
      default: break;
    }
    return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ", position ", error_positions[i], ": ",
                                                   field, ": ", RejectionCodeName(status_codes[i])));
  }
  return absl::OkStatus();
}

}  // namespace specverify
