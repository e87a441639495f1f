#include "server/batcher/batch_builder.h"

#include <cstring>

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

}  // namespace specverify::server
