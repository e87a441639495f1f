// Test helpers for token-tree verification: sampled tree batches built from
// float rows, random sampled batches for parity tests, and host output
// buffers poisoned so that an unwritten element is caught.
#ifndef SPECVERIFY_TESTS_KERNELS_TREE_TREE_TEST_UTIL_H_
#define SPECVERIFY_TESTS_KERNELS_TREE_TREE_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/tree/tree_params.h"
#include "kernels/workload/random.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"

namespace specverify::testing {

// A sampled tree batch assembled from explicit rows (floats stored in dtype).
class SampledTreeBatch {
 public:
  SampledTreeBatch(int32_t vocab, SampleDtype dtype, bool has_draft_probs)
      : vocab_(vocab), dtype_(dtype), has_draft_(has_draft_probs) {
    offsets_.push_back(0);
  }

  // target: n + 1 rows of V (root first); draft: n rows (ignored without
  // draft probabilities).
  void Add(const std::vector<int32_t>& parents, const std::vector<int32_t>& tokens,
           const std::vector<std::vector<float>>& target, const std::vector<std::vector<float>>& draft,
           const SequenceSamplingParams& params) {
    for (const auto& row : target) AppendAsDtype(row.data(), vocab_, dtype_, target_);
    if (has_draft_) {
      for (const auto& row : draft) AppendAsDtype(row.data(), vocab_, dtype_, draft_);
    }
    AddStructure(parents, tokens, params);
  }

  // Rows already encoded (fast path for the statistical tests).
  void AddEncoded(const std::vector<int32_t>& parents, const std::vector<int32_t>& tokens,
                  const std::vector<std::byte>& target_bytes, const std::vector<std::byte>& draft_bytes,
                  const SequenceSamplingParams& params) {
    target_.insert(target_.end(), target_bytes.begin(), target_bytes.end());
    if (has_draft_) draft_.insert(draft_.end(), draft_bytes.begin(), draft_bytes.end());
    AddStructure(parents, tokens, params);
  }

  int32_t num_trees() const { return static_cast<int32_t>(sequences_.size()); }
  int32_t total_nodes() const { return offsets_.back(); }
  int32_t vocab() const { return vocab_; }
  SampleDtype dtype() const { return dtype_; }
  bool has_draft() const { return has_draft_; }

  RejectionBatchInput input() const {
    RejectionBatchInput in;
    in.num_sequences = num_trees();
    in.vocab_size = vocab_;
    in.total_draft_tokens = offsets_.back();
    in.dtype = dtype_;
    in.kind = SampleValueKind::kProbabilities;
    in.method = SampleMethod::kExact;
    in.has_draft_probs = has_draft_;
    in.draft_offsets = offsets_.data();
    in.draft_tokens = tokens_.data();
    in.target_values = target_.data();
    in.draft_values = has_draft_ ? draft_.data() : nullptr;
    in.sequences = sequences_.data();
    return in;
  }

  std::vector<int32_t> offsets_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> parents_;
  std::vector<std::byte> target_;
  std::vector<std::byte> draft_;
  std::vector<SequenceSamplingParams> sequences_;

 private:
  void AddStructure(const std::vector<int32_t>& parents, const std::vector<int32_t>& tokens,
                    const SequenceSamplingParams& params) {
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    parents_.insert(parents_.end(), parents.begin(), parents.end());
    offsets_.push_back(offsets_.back() + static_cast<int32_t>(tokens.size()));
    sequences_.push_back(params);
  }

  int32_t vocab_;
  SampleDtype dtype_;
  bool has_draft_;
};

// Host outputs of a sampled tree batch, every byte `poison`.
struct TreeSampleOutputs {
  TreeSampleOutputs(int32_t b, int32_t total_nodes, uint8_t poison)
      : accepted_lengths(b), next_tokens(b), mismatch(b), status_codes(b), error_positions(b),
        path_nodes(total_nodes), row_reads(b) {
    for (auto* v : {&accepted_lengths, &next_tokens, &status_codes, &error_positions, &path_nodes, &row_reads}) {
      if (!v->empty()) std::memset(v->data(), poison, v->size() * sizeof(int32_t));
    }
    if (!mismatch.empty()) std::memset(mismatch.data(), poison, mismatch.size());
  }
  std::vector<int32_t> accepted_lengths, next_tokens;
  std::vector<uint8_t> mismatch;
  std::vector<int32_t> status_codes, error_positions, path_nodes, row_reads;

  TreeSampleParams params(const SampledTreeBatch& batch) {
    TreeSampleParams p;
    p.input = batch.input();
    p.parent_indices = batch.parents_.data();
    p.output.accepted_lengths = accepted_lengths.data();
    p.output.next_tokens = next_tokens.data();
    p.output.mismatch = mismatch.data();
    p.output.status_codes = status_codes.data();
    p.output.error_positions = error_positions.data();
    p.path_nodes = path_nodes.data();
    p.row_reads = row_reads.data();
    return p;
  }
};

// A random probability row: weights u^3 (peaked), a fraction of exact zeros.
inline std::vector<float> RandomProbabilityRow(int32_t vocab, SplitMix64& rng, double zero_rate = 0.1) {
  std::vector<double> w(vocab);
  double sum = 0.0;
  for (auto& x : w) {
    const double u = rng.NextDouble();
    x = rng.NextDouble() < zero_rate ? 0.0 : u * u * u;
    sum += x;
  }
  if (sum == 0.0) {
    w[0] = 1.0;
    sum = 1.0;
  }
  std::vector<float> row(vocab);
  for (int32_t x = 0; x < vocab; ++x) row[x] = static_cast<float>(w[x] / sum);
  return row;
}

struct RandomSampledTreeOptions {
  int32_t num_trees = 7;
  int32_t vocab = 97;
  SampleDtype dtype = SampleDtype::kFloat32;
  bool has_draft = true;
  int32_t min_nodes = 1;
  int32_t max_nodes = 24;
  int32_t max_children = 4;
  // Token of a child: with this probability the draft's likely token (so
  // paths go deep), else uniform; duplicates of an earlier sibling with
  // duplicate_rate.
  double follow_rate = 0.7;
  double duplicate_rate = 0.15;
  bool chains = false;  // every tree a chain
  uint64_t seed = 1;
};

// Random sampled trees whose draft tokens mostly follow the draft rows'
// argmax (so acceptance is frequent and paths are long), with duplicates.
inline SampledTreeBatch RandomSampledTrees(const RandomSampledTreeOptions& o) {
  SampledTreeBatch batch(o.vocab, o.dtype, o.has_draft);
  for (int32_t i = 0; i < o.num_trees; ++i) {
    SplitMix64 rng(DeriveSeed(o.seed, static_cast<uint64_t>(i)));
    const int32_t n = o.min_nodes + static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(o.max_nodes - o.min_nodes + 1)));
    const TreeShape shape = o.chains ? ChainShape(n) : RandomTreeShape(n, 1, o.max_children, rng);
    std::vector<std::vector<float>> target, draft;
    for (int32_t r = 0; r <= n; ++r) target.push_back(RandomProbabilityRow(o.vocab, rng));
    std::vector<int32_t> tokens(n);
    for (int32_t j = 0; j < n; ++j) {
      // The draft row of node j: a perturbation of its parent's target row.
      std::vector<float> q = target[shape.parents[j] + 1];
      const std::vector<float> noise = RandomProbabilityRow(o.vocab, rng, 0.0);
      double sum = 0.0;
      for (int32_t x = 0; x < o.vocab; ++x) sum += q[x] = 0.7f * q[x] + 0.3f * noise[x];
      for (auto& v : q) v = static_cast<float>(v / sum);
      draft.push_back(q);
      int32_t prev_sibling = -1;
      for (int32_t k = j - 1; k >= 0; --k) {
        if (shape.parents[k] == shape.parents[j]) {
          prev_sibling = k;
          break;
        }
      }
      if (prev_sibling >= 0 && rng.NextDouble() < o.duplicate_rate) {
        tokens[j] = tokens[prev_sibling];
      } else if (rng.NextDouble() < o.follow_rate) {
        tokens[j] = static_cast<int32_t>(std::max_element(q.begin(), q.end()) - q.begin() +
                                         static_cast<int64_t>(rng.NextBelow(3))) % o.vocab;
      } else {
        tokens[j] = static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(o.vocab)));
      }
    }
    SequenceSamplingParams params;
    params.seed = rng.Next();
    params.sequence_index = static_cast<int32_t>(rng.NextBelow(4));
    batch.Add(shape.parents, tokens, target, draft, params);
  }
  return batch;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_KERNELS_TREE_TREE_TEST_UTIL_H_
