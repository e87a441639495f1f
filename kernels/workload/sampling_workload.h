// Synthetic rejection-sampling workloads (issue #8): random target and draft
// distributions of several shapes, draft tokens sampled from q, stored in any
// dtype as probabilities, logits or log-probabilities (log-softmax, -inf where
// the probability is 0), reproducible from a seed on any machine
// (only SplitMix64 and det_math.h arithmetic: no libm, no std:: distributions).
// Shared by the tests, the benchmark and the load generator.
#ifndef SPECVERIFY_KERNELS_WORKLOAD_SAMPLING_WORKLOAD_H_
#define SPECVERIFY_KERNELS_WORKLOAD_SAMPLING_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify {

enum class DistributionShape : uint8_t {
  kPeaked = 0,    // logits ~ 3 * N(0, 1) plus a few boosted tokens: most mass on a handful
  kFlat = 1,      // logits ~ 0.1 * N(0, 1): close to uniform
  kDisjoint = 2,  // target on the lower half of the vocabulary, draft on the upper half
  kIdentical = 3, // q == p
  kMixed = 4,     // sequence i uses shape i % 4
};

struct SamplingWorkloadOptions {
  int32_t num_sequences = 8;
  int32_t gamma_min = 8;  // gamma drawn uniformly per sequence from [gamma_min, gamma_max]
  int32_t gamma_max = 8;
  int32_t vocab_size = 32000;  // >= 2
  SampleDtype dtype = SampleDtype::kFloat32;
  SampleValueKind kind = SampleValueKind::kProbabilities;
  DistributionShape shape = DistributionShape::kPeaked;
  // false: a deterministic drafter; draft rows are not stored (q one-hot on the
  // draft token), the tokens are still drawn from q.
  bool has_draft_probs = true;
  // How far the draft's logits stray from the target's (standard deviation of
  // the added noise): 0 gives q == p, larger values lower acceptance.
  float draft_noise = 1.0f;
  // Per-sequence sampling parameters (logits only; probabilities and
  // log-probabilities are stored after temperature, so these stay neutral for them).
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  // (Log-)probability rows only: every target and draft distribution keeps
  // its caller_top_k most likely tokens (ties at the cut kept too),
  // renormalized, the rest at probability 0 (log-probability -inf): what an
  // engine that applies top-k before sending the rows sends. The draft
  // tokens are drawn from the filtered q. 0: every token kept.
  int32_t caller_top_k = 0;
  // Sequences are grouped into requests of this many; a request's seed is
  // derived from `seed` and its number, sequence_index counts within it.
  int32_t sequences_per_request = 1;
  uint64_t seed = 1;
};

struct SamplingWorkload {
  SamplingWorkloadOptions options;
  std::vector<int32_t> draft_offsets;       // [b + 1]
  std::vector<int32_t> draft_tokens;        // [offsets[b]]
  std::vector<std::byte> target_values;     // [(offsets[b] + b) * V] of dtype
  std::vector<std::byte> draft_values;      // [offsets[b] * V] of dtype; empty without draft probs
  std::vector<SequenceSamplingParams> sequences;  // [b]

  int32_t num_sequences() const { return options.num_sequences; }
  int32_t gamma(int32_t i) const { return draft_offsets[i + 1] - draft_offsets[i]; }
  int64_t total_draft_rows() const { return draft_offsets.back(); }
  int64_t total_target_rows() const { return draft_offsets.back() + options.num_sequences; }
  // Sequence i belongs to request i / sequences_per_request, at
  // sequences[i].sequence_index within it, whose VerifyRequest.seed is
  // sequences[i].seed.
  int32_t request_of(int32_t i) const { return i / options.sequences_per_request; }

  // A host view of the inputs (valid while this workload lives).
  RejectionBatchInput input() const;
};

// Checks the options and builds the workload. Sequence i draws from a stream
// keyed by (seed, i): the first n sequences do not depend on num_sequences.
absl::StatusOr<SamplingWorkload> GenerateSamplingWorkload(const SamplingWorkloadOptions& options);

// Host output buffers for b sequences, every byte set to `poison`.
struct RejectionHostOutputs {
  RejectionHostOutputs(int32_t num_sequences, uint8_t poison);
  std::vector<int32_t> accepted_lengths;
  std::vector<int32_t> next_tokens;
  std::vector<uint8_t> mismatch;
  std::vector<int32_t> status_codes;
  std::vector<int32_t> error_positions;
  RejectionBatchOutput view();
};

// What a correct verifier answers for this workload: the CPU reference's
// outcome (sampling is a deterministic function of the inputs and the seeds),
// the oracle the load generator checks a server against when it sends the
// sequences grouped as request_of() says.
RejectionHostOutputs ReferenceOutcome(const SamplingWorkload& w);

// Stores float values in a dtype (round to nearest even), appending to `out`.
void AppendAsDtype(const float* values, int64_t count, SampleDtype dtype, std::vector<std::byte>& out);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_WORKLOAD_SAMPLING_WORKLOAD_H_
