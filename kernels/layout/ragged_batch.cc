#include "kernels/layout/ragged_batch.h"

#include "absl/strings/str_cat.h"

namespace specverify {

absl::Status ValidateGreedyPointers(const GreedyVerifyParams& params) {
  const GreedyBatchInput& in = params.input;
  const GreedyBatchOutput& out = params.output;
  if (in.draft_offsets == nullptr || in.draft_tokens == nullptr ||
      in.target_tokens == nullptr) {
    return absl::InvalidArgumentError(
        "draft_offsets, draft_tokens and target_tokens must all be set");
  }
  if ((in.row_bytes > 0) != (in.draft_kv != nullptr)) {
    return absl::InvalidArgumentError(
        "draft_kv must be set exactly when row_bytes > 0");
  }
  if (out.accepted_lengths == nullptr || out.next_tokens == nullptr ||
      out.mismatch == nullptr || out.packed_row_offsets == nullptr) {
    return absl::InvalidArgumentError(
        "accepted_lengths, next_tokens, mismatch and packed_row_offsets must "
        "all be set");
  }
  if ((in.row_bytes > 0) != (out.packed_kv != nullptr)) {
    return absl::InvalidArgumentError(
        "packed_kv must be set exactly when row_bytes > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateGreedyBatch(const GreedyVerifyParams& params,
                                 const LayoutLimits& limits) {
  const GreedyBatchInput& in = params.input;
  if (in.num_sequences < 1 || in.num_sequences > limits.max_sequences) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sequences is ", in.num_sequences,
                     "; must lie in [1, ", limits.max_sequences, "]"));
  }
  if (in.row_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_bytes is ", in.row_bytes, "; must be >= 0"));
  }
  if (absl::Status s = ValidateGreedyPointers(params); !s.ok()) return s;
  if (in.draft_offsets[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "draft_offsets[0] is ", in.draft_offsets[0], "; must be 0"));
  }
  for (int32_t i = 0; i < in.num_sequences; ++i) {
    const int64_t gamma =
        int64_t{in.draft_offsets[i + 1]} - int64_t{in.draft_offsets[i]};
    if (gamma < 1 || gamma > limits.max_draft_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", i, ": draft length (draft_offsets[", i + 1,
          "] - draft_offsets[", i, "]) is ", gamma, "; must lie in [1, ",
          limits.max_draft_tokens, "]"));
    }
  }
  const auto check_tokens = [&](const int32_t* tokens, int32_t seq,
                                int64_t begin, int64_t count,
                                const char* field) -> absl::Status {
    for (int64_t j = 0; j < count; ++j) {
      const int32_t token = tokens[begin + j];
      if (token < 0 || (limits.vocab_size > 0 && token >= limits.vocab_size)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", seq, ": ", field, "[", j, "] is ", token,
            limits.vocab_size > 0
                ? absl::StrCat("; must lie in [0, ", limits.vocab_size, ")")
                : std::string("; must be >= 0")));
      }
    }
    return absl::OkStatus();
  };
  for (int32_t i = 0; i < in.num_sequences; ++i) {
    const int64_t begin = in.draft_offsets[i];
    const int64_t gamma = in.draft_offsets[i + 1] - begin;
    absl::Status s = check_tokens(in.draft_tokens, i, begin, gamma, "draft_tokens");
    if (!s.ok()) return s;
    s = check_tokens(in.target_tokens, i, begin + i, gamma + 1, "target_tokens");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace specverify
