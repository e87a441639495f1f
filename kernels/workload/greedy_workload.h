// Synthetic greedy verification workloads with their own oracle (seed 000
// §2.4): per sequence, an accepted length k ~ Binomial(gamma, alpha), target
// tokens that agree with the draft on 0..k-1 and disagree at k, and random KV
// rows. The expected results are derived from the construction itself, not by
// running a verifier, so they are an independent oracle for every
// implementation. Shared by tests, benchmarks and the load generator.
#ifndef SPECVERIFY_KERNELS_WORKLOAD_GREEDY_WORKLOAD_H_
#define SPECVERIFY_KERNELS_WORKLOAD_GREEDY_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/layout/ragged_batch.h"

namespace specverify {

// A workload is usually cut into many requests (the load generator pools
// --pool_requests x --sequences_per_request of them), so it is not bound by one
// batch's kMaxBatchSequences; only its draft rows must fit the int32 offsets.
inline constexpr int32_t kMaxGreedyWorkloadSequences = int32_t{1} << 24;

struct GreedyWorkloadOptions {
  int32_t num_sequences = 32;
  // gamma is drawn uniformly per sequence from [gamma_min, gamma_max];
  // equal bounds give a fixed gamma.
  int32_t gamma_min = 8;
  int32_t gamma_max = 8;
  double alpha = 0.6;        // per-position acceptance probability, [0, 1]
  int64_t row_bytes = 0;     // KV bytes per draft position, >= 0
  int32_t vocab_size = 32000;  // token ids lie in [0, vocab_size), >= 2
  uint64_t seed = 1;
};

// What a correct verifier must produce for a workload.
struct GreedyExpected {
  std::vector<int32_t> accepted_lengths;    // [b]
  std::vector<int32_t> next_tokens;         // [b]
  std::vector<uint8_t> mismatch;            // [b]
  std::vector<int32_t> packed_row_offsets;  // [b + 1]
  std::vector<std::byte> packed_kv;         // [total accepted rows * row_bytes]
};

struct GreedyWorkload {
  GreedyWorkloadOptions options;
  std::vector<int32_t> draft_offsets;  // [b + 1]
  std::vector<int32_t> draft_tokens;   // [offsets[b]]
  std::vector<int32_t> target_tokens;  // [offsets[b] + b]
  std::vector<std::byte> draft_kv;     // [offsets[b] * row_bytes]
  GreedyExpected expected;

  int32_t num_sequences() const { return options.num_sequences; }
  int64_t row_bytes() const { return options.row_bytes; }
  int32_t gamma(int32_t i) const { return draft_offsets[i + 1] - draft_offsets[i]; }
  int64_t total_draft_rows() const { return draft_offsets.back(); }

  // Per-sequence views, e.g. to build one request per sequence group.
  std::span<const int32_t> draft_tokens_of(int32_t i) const;
  std::span<const int32_t> target_tokens_of(int32_t i) const;  // gamma + 1 tokens
  std::span<const std::byte> draft_kv_of(int32_t i) const;       // gamma rows

  // A host view of the inputs (valid while this workload lives).
  GreedyBatchInput input() const;
};

// Checks the options (ranges of every field) and builds the workload.
// Sequence i draws from a stream keyed by (seed, i), so a workload's first n
// sequences are the same whatever num_sequences is.
absl::StatusOr<GreedyWorkload> GenerateGreedyWorkload(
    const GreedyWorkloadOptions& options);

// Host output buffers sized for a batch, every byte set to `poison` so that a
// verifier that leaves an element unwritten is caught.
struct GreedyHostOutputs {
  GreedyHostOutputs(const GreedyBatchInput& input, std::byte poison);

  std::vector<int32_t> accepted_lengths;
  std::vector<int32_t> next_tokens;
  std::vector<uint8_t> mismatch;
  std::vector<int32_t> packed_row_offsets;
  std::vector<std::byte> packed_kv;  // the upper bound: offsets[b] * row_bytes

  GreedyBatchOutput view();
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_WORKLOAD_GREEDY_WORKLOAD_H_
