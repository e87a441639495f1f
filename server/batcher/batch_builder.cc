#include "server/batcher/batch_builder.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

#include "kernels/sampling/rejection_validate.h"

namespace specverify::server {

void BuildGreedyInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                       const BatchKey& key, GreedyHostInputs* inputs) {
  int32_t b = 0;
  int64_t rows = 0;
  for (const auto& r : requests) {
    b += r->shape.num_sequences;
    rows += r->shape.total_draft_rows;
  }
  const int64_t rb = key.row_bytes;
  inputs->row_bytes = rb;
  inputs->draft_offsets.resize(b + 1);
  inputs->draft_tokens.resize(rows);
  inputs->target_tokens.resize(rows + b);
  inputs->draft_kv.resize(rb > 0 ? rows * rb : 0);

  int32_t* offsets = inputs->draft_offsets.data();
  int32_t* draft = inputs->draft_tokens.data();
  int32_t* target = inputs->target_tokens.data();
  std::byte* kv = inputs->draft_kv.data();
  offsets[0] = 0;
  int32_t s = 0;
  for (const auto& r : requests) {
    for (const v1::SequenceDraft& seq : r->request->sequences()) {
      const int32_t gamma = seq.draft_tokens_size();
      std::memcpy(draft, seq.draft_tokens().data(), sizeof(int32_t) * gamma);
      std::memcpy(target, seq.greedy().target_tokens().data(),
                  sizeof(int32_t) * (gamma + 1));
      if (rb > 0) {
        std::memcpy(kv, seq.draft_kv().data().data(), static_cast<size_t>(gamma * rb));
        kv += gamma * rb;
      }
      draft += gamma;
      target += gamma + 1;
      offsets[s + 1] = offsets[s] + gamma;
      ++s;
    }
  }
}

namespace {

void BuildSampledInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                        const BatchKey& key, Batch* batch) {
  GreedyHostInputs& in = batch->inputs;
  SampledHostInputs& sampled = batch->sampled;
  int32_t b = 0;
  int64_t rows = 0;
  for (const auto& r : requests) {
    b += r->shape.num_sequences;
    rows += r->shape.total_draft_rows;
  }
  const int64_t rb = key.row_bytes;
  const int64_t row_value_bytes = int64_t{key.vocab_size} * SampleDtypeBytes(key.value_dtype);
  in.row_bytes = rb;
  in.draft_offsets.resize(b + 1);
  in.draft_tokens.resize(rows);
  in.target_tokens.assign(rows + b, 0);
  in.draft_kv.resize(rb > 0 ? rows * rb : 0);
  sampled.target_values.resize((rows + b) * row_value_bytes);
  sampled.draft_values.resize(key.has_draft_probs ? rows * row_value_bytes : 0);
  sampled.sequences.resize(b);

  int32_t* offsets = in.draft_offsets.data();
  int32_t* draft = in.draft_tokens.data();
  std::byte* kv = in.draft_kv.data();
  std::byte* target_values = sampled.target_values.data();
  std::byte* draft_values = sampled.draft_values.data();
  offsets[0] = 0;
  int32_t s = 0;
  for (const auto& r : requests) {
    int32_t index_in_request = 0;
    for (const v1::SequenceDraft& seq : r->request->sequences()) {
      const int32_t gamma = seq.draft_tokens_size();
      const v1::SampledTarget& st = seq.sampled();
      std::memcpy(draft, seq.draft_tokens().data(), sizeof(int32_t) * gamma);
      const std::string& target_bytes = st.target().values().data();
      std::memcpy(target_values, target_bytes.data(), target_bytes.size());
      target_values += target_bytes.size();
      if (key.has_draft_probs) {
        const std::string& draft_bytes = st.draft().values().data();
        std::memcpy(draft_values, draft_bytes.data(), draft_bytes.size());
        draft_values += draft_bytes.size();
      }
      if (rb > 0) {
        std::memcpy(kv, seq.draft_kv().data().data(), static_cast<size_t>(gamma * rb));
        kv += gamma * rb;
      }
      SequenceSamplingParams& p = sampled.sequences[s];
      p.seed = r->request->seed();
      p.sequence_index = index_in_request++;
      p.temperature = st.temperature();
      p.top_k = st.top_k();
      // The proto's "0 = all" is the kernels' 1.
      p.top_p = st.top_p() == 0.0f ? 1.0f : st.top_p();
      if (key.value_kind == SampleValueKind::kProbabilities) {
        p.temperature = 1.0f;  // ignored for probabilities; keep it neutral
      }
      draft += gamma;
      offsets[s + 1] = offsets[s] + gamma;
      ++s;
    }
  }
}

}  // namespace

void BuildBatchInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                      const BatchKey& key, Batch* batch) {
  if (key.mode == VerifyMode::kSampled) {
    BuildSampledInputs(requests, key, batch);
  } else {
    BuildGreedyInputs(requests, key, &batch->inputs);
  }
}

absl::Status RequestOutcomeStatus(const Batch& batch, int32_t first_sequence, int32_t n) {
  const SampledHostResults& r = batch.sampled_results;
  if (batch.key.mode != VerifyMode::kSampled || r.status_codes.empty()) {
    return absl::OkStatus();
  }
  absl::Status status = RejectionOutcomeStatus(r.status_codes.data() + first_sequence,
                                               r.error_positions.data() + first_sequence, n);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat("sampled verification refused the request's ", status.message()));
}

}  // namespace specverify::server
