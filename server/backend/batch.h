// What the batcher hands a backend: one ragged batch in host memory, laid out
// exactly as kernels/layout/ragged_batch.h (CSR offsets, tokens, KV rows
// contiguous), so a device backend stages it with one memcpy per array, and
// the arena range where the accepted rows are to be packed.
#ifndef SPECVERIFY_SERVER_BACKEND_BATCH_H_
#define SPECVERIFY_SERVER_BACKEND_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/time/time.h"
#include "kernels/layout/ragged_batch.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {

enum class VerifyMode { kGreedy, kSampled };

// Sequences merge into one batch only when all four agree.
struct BatchKey {
  VerifyMode mode = VerifyMode::kGreedy;
  int32_t kv_dtype = 0;     // v1::DataType of the KV rows; 0 when none travel
  int64_t row_bytes = 0;    // 0 when no KV rows are staged
  int32_t vocab_size = 0;   // 0: unknown

  friend bool operator==(const BatchKey&, const BatchKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BatchKey& k) {
    return H::combine(std::move(h), k.mode, k.kv_dtype, k.row_bytes, k.vocab_size);
  }
};

// Inputs, host memory, in the ragged layout.
struct GreedyHostInputs {
  std::vector<int32_t> draft_offsets;   // [b + 1]
  std::vector<int32_t> draft_tokens;    // [offsets[b]]
  std::vector<int32_t> target_tokens;   // [offsets[b] + b]
  std::vector<std::byte> draft_kv;      // [offsets[b] * row_bytes]
  int64_t row_bytes = 0;

  int32_t num_sequences() const {
    return draft_offsets.empty() ? 0 : static_cast<int32_t>(draft_offsets.size()) - 1;
  }
  int64_t total_draft_rows() const {
    return draft_offsets.empty() ? 0 : draft_offsets.back();
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

  void Resize(int32_t b) {
    accepted_lengths.resize(b);
    next_tokens.resize(b);
    mismatch.resize(b);
    packed_row_offsets.resize(b + 1);
  }
};

struct Batch {
  uint64_t id = 0;
  BatchKey key;
  GreedyHostInputs inputs;
  // Destination of the packed rows, in the backend's memory space (the arena
  // memory the backend allocated): capacity total_draft_rows * row_bytes.
  // Null iff row_bytes == 0.
  std::byte* packed_kv = nullptr;

  // Filled by the backend.
  GreedyHostResults results;
  ExecutionPathLabel path = ExecutionPathLabel::kCpu;
  absl::Duration device_time;
  // False when nothing was verified (no-op backend).
  bool verified = true;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BATCH_H_
