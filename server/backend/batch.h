// What the batcher hands a backend: one ragged batch in host memory, laid out
// exactly as kernels/layout/ragged_batch.h (CSR offsets, tokens, KV rows
// contiguous) inside the backend's own staging (server/backend/staging.h),
// and the arena range where the accepted rows are to be packed.
#ifndef SPECVERIFY_SERVER_BACKEND_BATCH_H_
#define SPECVERIFY_SERVER_BACKEND_BATCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/time/time.h"
#include "kernels/layout/ragged_batch.h"
#include "kernels/layout/row_copy.h"
#include "kernels/sampling/rejection_params.h"
#include "server/backend/staging.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {

enum class VerifyMode { kGreedy, kSampled };

// Sequences merge into one batch only when every field agrees. The sampled
// fields are per-batch parameters of the rejection-sampling kernels
// (kernels/sampling/rejection_params.h); they stay 0 for greedy.
struct BatchKey {
  VerifyMode mode = VerifyMode::kGreedy;
  int32_t kv_dtype = 0;     // v1::DataType of the KV rows; 0 when none travel
  int64_t row_bytes = 0;    // 0 when no KV rows are staged
  int32_t vocab_size = 0;   // 0: unknown (greedy); V, the rows' width (sampled)
  // Sampled only.
  SampleDtype value_dtype = SampleDtype::kFloat32;  // of the target/draft rows
  SampleValueKind value_kind = SampleValueKind::kProbabilities;
  SampleMethod method = SampleMethod::kExact;
  bool has_draft_probs = false;
  bool validate_full_rows = false;
  float sigmoid_alpha = 0;  // SIGMOID_APPROXIMATION only, else 0
  float sigmoid_beta = 0;
  // Data plane: the KV rows (distribution rows) of every request of the batch
  // are in registered regions. A batch is all-inline or all-region for each,
  // so its staging layout has one form (server/backend/staging.h).
  bool kv_in_regions = false;
  bool values_in_regions = false;
  // Token trees (docs/TREES.md): the batch carries parent_indices and runs
  // the tree kernels; its chains travel as trees (parents -1, 0, 1, ...).
  bool tree = false;
  // Multi-device (issue #16): the CUDA device the batch's CUDA regions live
  // on, so it runs on an executor of that GPU; -1 when any device may run it.
  int32_t cuda_ordinal = -1;

  friend bool operator==(const BatchKey&, const BatchKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BatchKey& k) {
    return H::combine(std::move(h), k.mode, k.kv_dtype, k.row_bytes, k.vocab_size,
                      k.value_dtype, k.value_kind, k.method, k.has_draft_probs,
                      k.validate_full_rows, k.sigmoid_alpha, k.sigmoid_beta, k.kv_in_regions,
                      k.values_in_regions, k.tree, k.cuda_ordinal);
  }
};

// Widest distribution row a sampled request may carry: the CUDA executor
// sizes its rejection-sampling scratch for it at start-up (151,936 is Qwen's).
inline constexpr int32_t kMaxSampledVocabSize = 1 << 18;

// Inputs, host memory, in the ragged layout. Views: the memory is the
// backend's staging (Batch::staging), or a test's own vectors.
struct GreedyHostInputs {
  std::span<int32_t> draft_offsets;   // [b + 1]
  std::span<int32_t> draft_tokens;    // [offsets[b]]
  std::span<int32_t> target_tokens;   // [offsets[b] + b]
  std::span<std::byte> draft_kv;      // [offsets[b] * row_bytes]
  // Tree batches (BatchKey::tree): node j's parent, tree-local, [-1, j);
  // draft_offsets then count nodes and target_tokens hold n_i + 1 per tree.
  std::span<int32_t> parent_indices;  // [offsets[b]] or empty
  int64_t row_bytes = 0;

  int32_t num_sequences() const {
    return draft_offsets.empty() ? 0 : static_cast<int32_t>(draft_offsets.size()) - 1;
  }
  int64_t total_draft_rows() const {
    return draft_offsets.empty() ? 0 : draft_offsets.back();
  }
  // The longest draft of the batch (0 when empty).
  int32_t max_gamma() const {
    int32_t longest = 0;
    for (size_t i = 0; i + 1 < draft_offsets.size(); ++i) {
      longest = std::max(longest, draft_offsets[i + 1] - draft_offsets[i]);
    }
    return longest;
  }
  GreedyBatchInput view() const {
    GreedyBatchInput in;
    in.num_sequences = num_sequences();
    in.draft_offsets = draft_offsets.data();
    in.draft_tokens = draft_tokens.data();
    in.target_tokens = target_tokens.data();
    in.draft_kv = row_bytes > 0 ? draft_kv.data() : nullptr;
    in.row_bytes = row_bytes;
    return in;
  }
};

// Results, host memory, written by the backend before it completes the batch.
struct GreedyHostResults {
  std::vector<int32_t> accepted_lengths;     // [b]
  std::vector<int32_t> next_tokens;          // [b]
  std::vector<uint8_t> mismatch;             // [b]
  std::vector<int32_t> packed_row_offsets;   // [b + 1]
  // Tree batches: the accepted paths' node indices, CSR at
  // packed_row_offsets (empty for chain batches: their paths are 0..k-1).
  std::vector<int32_t> accepted_nodes;

  void Resize(int32_t b) {
    accepted_lengths.resize(b);
    next_tokens.resize(b);
    mismatch.resize(b);
    packed_row_offsets.resize(b + 1);
  }
};

// The rest of a sampled batch (key.mode == kSampled): the draft offsets,
// tokens and KV rows live in Batch::inputs as for greedy; inputs.target_tokens
// is sized [offsets[b] + b]; the CPU backend fills it with the
// greedy_target_tokens of the outcome, so the greedy pack phases pack the
// accepted rows (rejection_params.h, GreedyTargetForOutcome). The CUDA
// executor copies each sequence's first k rows instead (AcceptedRowCopyParams).
struct SampledHostInputs {
  std::span<std::byte> target_values;             // [(offsets[b] + b) * V] of the key's dtype
  std::span<std::byte> draft_values;              // [offsets[b] * V]; empty without draft probs
  std::span<SequenceSamplingParams> sequences;    // [b]
};

// Per-sequence outcome codes of a sampled batch (RejectionCode), [b] each.
struct SampledHostResults {
  std::vector<int32_t> status_codes;
  std::vector<int32_t> error_positions;
};

// The data plane's tables of a batch that uses regions (staging.h), in its
// staging; the addresses in them are the backend's (device addresses for
// CUDA). Empty spans when the batch has none.
struct RegionTables {
  std::span<const std::byte*> kv_sources;   // [b] each sequence's KV rows in its region
  std::span<PackedDelivery> deliveries;     // [d] KV_RETURN_REGION outputs
  std::span<const void*> target_rows;       // [rows + b] distribution rows read in place
  std::span<const void*> draft_rows;        // [rows]
};

struct Batch;

// The host view of a sampled batch for the rejection-sampling kernels, outputs
// in batch.results / batch.sampled_results (resized here) and the greedy
// target tokens in batch.inputs.target_tokens.
RejectionSampleParams SampledHostParams(Batch& batch);

struct Batch {
  uint64_t id = 0;
  BatchKey key;
  GreedyHostInputs inputs;
  SampledHostInputs sampled;  // empty for greedy
  RegionTables regions;       // empty unless the batch's key uses regions
  // What was staged (StagingShapeOf): backends lay their copies out from it.
  StagingShape shape;
  // The backend memory `inputs` and `sampled` view (Backend::AcquireStaging);
  // released with the batch, after the batcher has read its results.
  std::unique_ptr<StagingLease> staging;
  // Destination of the packed rows, in the backend's memory space (the arena
  // memory the backend allocated): capacity total_draft_rows * row_bytes.
  // Null iff row_bytes == 0.
  std::byte* packed_kv = nullptr;
  // Set by the batcher when a request of the batch takes its rows inline:
  // the backend then makes them host-readable (packed_kv_host, or
  // inline_rows_from_staging).
  bool wants_host_rows = false;
  // Set by the batcher when a request of the batch takes its rows as a
  // handle: they must be packed in the arena, where FetchKv reads them.
  bool wants_handle_rows = false;

  // Filled by the backend.
  GreedyHostResults results;
  ExecutionPathLabel path = ExecutionPathLabel::kCpu;
  absl::Duration device_time;
  // False when nothing was verified (no-op backend).
  bool verified = true;
  // False when the tokens follow an approximation (the sigmoid method).
  bool exact = true;
  SampledHostResults sampled_results;  // sampled batches, from a verifying backend
  // The packed rows, readable on the host, laid out as at packed_kv; valid
  // until the batch is destroyed. Host arenas: packed_kv itself. CUDA: a
  // pinned copy made on the batch's stream when wants_host_rows. Null when
  // the backend offers none (the batcher then reads the arena).
  const std::byte* packed_kv_host = nullptr;
  // Set by a backend that knows the accepted lengths on the host and left
  // the staged draft rows untouched (inputs.draft_kv, host memory; never for
  // rows in regions): inline answers copy each sequence's accepted rows
  // from there (its first k rows, at draft_offsets[i]) instead of from
  // packed_kv_host, so nothing packs them for those requests.
  bool inline_rows_from_staging = false;
};

inline RejectionSampleParams SampledHostParams(Batch& batch) {
  const BatchKey& key = batch.key;
  const int32_t b = batch.inputs.num_sequences();
  batch.results.Resize(b);
  batch.sampled_results.status_codes.resize(b);
  batch.sampled_results.error_positions.resize(b);
  RejectionSampleParams p;
  RejectionBatchInput& in = p.input;
  in.num_sequences = b;
  in.vocab_size = key.vocab_size;
  in.total_draft_tokens = static_cast<int32_t>(batch.inputs.total_draft_rows());
  in.dtype = key.value_dtype;
  in.kind = key.value_kind;
  in.method = key.method;
  in.has_draft_probs = key.has_draft_probs;
  in.validate_full_rows = key.validate_full_rows;
  in.any_top_k_top_p = false;
  for (const SequenceSamplingParams& s : batch.sampled.sequences) {
    in.any_top_k_top_p |= s.top_k > 0 || s.top_p < 1.0f;
  }
  if (key.method == SampleMethod::kSigmoid) {
    in.sigmoid_alpha = key.sigmoid_alpha;
    in.sigmoid_beta = key.sigmoid_beta;
  }
  in.draft_offsets = batch.inputs.draft_offsets.data();
  in.draft_tokens = batch.inputs.draft_tokens.data();
  in.target_values = batch.sampled.target_values.data();
  in.draft_values = key.has_draft_probs ? batch.sampled.draft_values.data() : nullptr;
  if (key.values_in_regions) {
    in.target_values = nullptr;
    in.draft_values = nullptr;
    in.target_rows = batch.regions.target_rows.data();
    in.draft_rows = key.has_draft_probs ? batch.regions.draft_rows.data() : nullptr;
  }
  in.sequences = batch.sampled.sequences.data();
  RejectionBatchOutput& out = p.output;
  out.accepted_lengths = batch.results.accepted_lengths.data();
  out.next_tokens = batch.results.next_tokens.data();
  out.mismatch = batch.results.mismatch.data();
  out.status_codes = batch.sampled_results.status_codes.data();
  out.error_positions = batch.sampled_results.error_positions.data();
  out.greedy_target_tokens = batch.inputs.target_tokens.data();
  return p;
}

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BATCH_H_
