#include "server/batcher/batch_builder.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

#include "kernels/sampling/rejection_validate.h"
#include "kernels/tree/tree_reference.h"

namespace specverify::server {

namespace {

// Every payload byte the server copies on the host goes through here, so the
// per-request count (ServerTiming.host_copy_in_bytes) cannot miss one.
void CopyPayload(void* dst, const void* src, size_t bytes, int64_t* copied) {
  if (bytes == 0) return;  // src may be null for an empty field
  std::memcpy(dst, src, bytes);
  *copied += static_cast<int64_t>(bytes);
}

// A tree's parents as sent, or a chain's (-1, 0, 1, ...) when the chain
// rides in a tree batch (the tree kernels give a chain the chain's results).
void CopyParents(const v1::SequenceDraft& seq, int32_t* parents, int64_t* copied) {
  const int32_t n = seq.draft_tokens_size();
  if (seq.parent_indices_size() > 0) {
    CopyPayload(parents, seq.parent_indices().data(), sizeof(int32_t) * n, copied);
  } else {
    for (int32_t j = 0; j < n; ++j) parents[j] = j - 1;
  }
}

int64_t SampledRowBytes(const BatchKey& key) {
  return int64_t{key.vocab_size} * SampleDtypeBytes(key.value_dtype);
}

// The data plane's per-request tables: where each sequence's KV rows are in
// its region, and where a KV_RETURN_REGION request's packed rows go. `s` is
// the request's first sequence in the batch; `delivery` the next free entry.
void FillRegionTables(const PendingRequest& r, const BatchKey& key, int32_t s,
                      RegionTables& tables, int32_t* delivery) {
  const int32_t n = r.shape.num_sequences;
  if (key.kv_in_regions) {
    for (int32_t i = 0; i < n; ++i) tables.kv_sources[s + i] = r.regions.kv[i];
  }
  if (r.shape.kv_return == v1::KV_RETURN_REGION) {
    PackedDelivery& d = tables.deliveries[(*delivery)++];
    d = PackedDelivery{};
    d.first_sequence = s;
    d.num_sequences = n;
    d.max_rows = static_cast<int32_t>(r.shape.total_draft_rows);
    d.destination = r.regions.kv_output;
  }
}

void BuildGreedyInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                       const BatchKey& key, Batch* batch) {
  GreedyHostInputs& in = batch->inputs;
  const int64_t rb = key.row_bytes;
  const bool copy_kv = rb > 0 && !key.kv_in_regions;
  int32_t delivery = 0;
  in.row_bytes = rb;
  int32_t* offsets = in.draft_offsets.data();
  int32_t* draft = in.draft_tokens.data();
  int32_t* target = in.target_tokens.data();
  std::byte* kv = in.draft_kv.data();
  offsets[0] = 0;
  int32_t s = 0;
  for (const auto& r : requests) {
    FillRegionTables(*r, key, s, batch->regions, &delivery);
    int64_t copied = 0;
    for (const v1::SequenceDraft& seq : r->request->sequences()) {
      const int32_t gamma = seq.draft_tokens_size();
      CopyPayload(draft, seq.draft_tokens().data(), sizeof(int32_t) * gamma, &copied);
      CopyPayload(target, seq.greedy().target_tokens().data(), sizeof(int32_t) * (gamma + 1),
                  &copied);
      if (key.tree) CopyParents(seq, in.parent_indices.data() + offsets[s], &copied);
      if (copy_kv) {
        CopyPayload(kv, seq.draft_kv().data().data(), static_cast<size_t>(gamma * rb), &copied);
        kv += gamma * rb;
      }
      draft += gamma;
      target += gamma + 1;
      offsets[s + 1] = offsets[s] + gamma;
      ++s;
    }
    r->host_copy_in_bytes = copied;
  }
}

void BuildSampledInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                        const BatchKey& key, Batch* batch) {
  GreedyHostInputs& in = batch->inputs;
  SampledHostInputs& sampled = batch->sampled;
  const int64_t rb = key.row_bytes;
  in.row_bytes = rb;
  int32_t* offsets = in.draft_offsets.data();
  int32_t* draft = in.draft_tokens.data();
  std::byte* kv = in.draft_kv.data();
  std::byte* target_values = sampled.target_values.data();
  std::byte* draft_values = sampled.draft_values.data();
  const bool copy_kv = rb > 0 && !key.kv_in_regions;
  const int64_t value_row_bytes = SampledRowBytes(key);
  RegionTables& tables = batch->regions;
  int32_t delivery = 0;
  offsets[0] = 0;
  int32_t s = 0;
  for (const auto& r : requests) {
    FillRegionTables(*r, key, s, tables, &delivery);
    int64_t copied = 0;
    int32_t index_in_request = 0;
    for (const v1::SequenceDraft& seq : r->request->sequences()) {
      const int32_t gamma = seq.draft_tokens_size();
      const v1::SampledTarget& st = seq.sampled();
      CopyPayload(draft, seq.draft_tokens().data(), sizeof(int32_t) * gamma, &copied);
      if (key.tree) CopyParents(seq, in.parent_indices.data() + offsets[s], &copied);
      if (key.values_in_regions) {
        // Read in place: row j of the sequence is the region's row j.
        const int64_t target_row0 = int64_t{offsets[s]} + s;
        const std::byte* t0 = r->regions.target[index_in_request];
        for (int32_t j = 0; j <= gamma; ++j) {
          tables.target_rows[target_row0 + j] = t0 + j * value_row_bytes;
        }
        if (key.has_draft_probs) {
          const std::byte* d0 = r->regions.draft[index_in_request];
          for (int32_t j = 0; j < gamma; ++j) {
            tables.draft_rows[offsets[s] + j] = d0 + j * value_row_bytes;
          }
        }
      } else {
        const std::string& target_bytes = st.target().values().data();
        CopyPayload(target_values, target_bytes.data(), target_bytes.size(), &copied);
        target_values += target_bytes.size();
        if (key.has_draft_probs) {
          const std::string& draft_bytes = st.draft().values().data();
          CopyPayload(draft_values, draft_bytes.data(), draft_bytes.size(), &copied);
          draft_values += draft_bytes.size();
        }
      }
      if (copy_kv) {
        CopyPayload(kv, seq.draft_kv().data().data(), static_cast<size_t>(gamma * rb), &copied);
        kv += gamma * rb;
      }
      SequenceSamplingParams& p = sampled.sequences[s];
      p = SequenceSamplingParams{};
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
    r->host_copy_in_bytes = copied;
  }
}

}  // namespace

StagingShape StagingShapeOf(std::span<const std::unique_ptr<PendingRequest>> requests,
                            const BatchKey& key) {
  StagingShape shape;
  for (const auto& r : requests) {
    shape.sequences += r->shape.num_sequences;
    shape.draft_rows += r->shape.total_draft_rows;
  }
  shape.kv_bytes = shape.draft_rows * key.row_bytes;
  shape.kv_from_regions = key.kv_in_regions && key.row_bytes > 0;
  shape.tree = key.tree;
  for (const auto& r : requests) {
    shape.deliveries += r->shape.kv_return == v1::KV_RETURN_REGION ? 1 : 0;
  }
  if (key.mode == VerifyMode::kSampled) {
    shape.sampled = true;
    const int64_t row = SampledRowBytes(key);
    shape.values_from_regions = key.values_in_regions;
    shape.draft_rows_from_regions = key.values_in_regions && key.has_draft_probs;
    if (!key.values_in_regions) {
      shape.target_value_bytes = (shape.draft_rows + shape.sequences) * row;
      shape.draft_value_bytes = key.has_draft_probs ? shape.draft_rows * row : 0;
    }
  }
  return shape;
}

void BuildBatchInputs(std::span<const std::unique_ptr<PendingRequest>> requests,
                      const BatchKey& key, Batch* batch) {
  if (key.mode == VerifyMode::kSampled) {
    BuildSampledInputs(requests, key, batch);
  } else {
    BuildGreedyInputs(requests, key, batch);
  }
}

absl::Status RequestOutcomeStatus(const Batch& batch, int32_t first_sequence, int32_t n) {
  const SampledHostResults& r = batch.sampled_results;
  if (batch.key.mode != VerifyMode::kSampled || r.status_codes.empty()) {
    return absl::OkStatus();
  }
  absl::Status status =
      batch.key.tree
          ? TreeOutcomeStatus(r.status_codes.data() + first_sequence,
                              r.error_positions.data() + first_sequence, n)
          : RejectionOutcomeStatus(r.status_codes.data() + first_sequence,
                                   r.error_positions.data() + first_sequence, n);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(
      absl::StrCat("sampled verification refused the request's ", status.message()));
}

}  // namespace specverify::server
