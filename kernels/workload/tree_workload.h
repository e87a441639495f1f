// Synthetic token-tree workloads (issue #14) with their own oracle: tree
// shapes (random with 1-4 children per node, full WIDTHxDEPTH trees, chains,
// Medusa-style path lists), and greedy tree batches whose target tokens are
// built so that the accepted path is known by construction (per-level
// acceptance), not by running a verifier. Shared by tests, the benchmark and
// the load generator.
#ifndef SPECVERIFY_KERNELS_WORKLOAD_TREE_WORKLOAD_H_
#define SPECVERIFY_KERNELS_WORKLOAD_TREE_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/tree/tree_params.h"
#include "kernels/workload/random.h"

namespace specverify {

// A tree shape: parents[j] in [-1, j) for node j (topological order).
struct TreeShape {
  std::vector<int32_t> parents;
  int32_t num_nodes() const { return static_cast<int32_t>(parents.size()); }
};

// parents = -1, 0, 1, ..., n-2.
TreeShape ChainShape(int32_t n);
// Every node down to `depth` levels has `width` children: width + width^2 +
// ... + width^depth nodes, breadth-first order. kInvalidArgument when that
// exceeds kMaxTreeNodes or width/depth < 1.
absl::StatusOr<TreeShape> FullTreeShape(int32_t width, int32_t depth);
// Parses "WIDTHxDEPTH" (e.g. "2x3") into FullTreeShape.
absl::StatusOr<TreeShape> ParseTreeSpec(std::string_view spec);
// Random tree of exactly n nodes: nodes are expanded breadth-first, each with
// a uniform number of children in [min_children, max_children] (1 <= min <=
// max), until n nodes exist.
TreeShape RandomTreeShape(int32_t n, int32_t min_children, int32_t max_children, SplitMix64& rng);
// Medusa-style path list (Cai et al. 2024, "medusa_choices"): one path per
// line, child ranks separated by commas or spaces, e.g.
//   0
//   1
//   0,0
//   0,1
// Each path names a node by the ranks of the children on the way from the
// root; a path's prefix must appear on an earlier line. Blank lines and '#'
// comments are skipped. The node order is the line order.
absl::StatusOr<TreeShape> ParseTreePaths(std::string_view text);
// A Medusa-style default of 26 nodes (4 top-level heads, depth 4), and an
// EAGLE-2-style static expansion (depth 5, top-4 expansion of the 4 best
// nodes per level, 64 nodes). Approximations of those projects' default
// shapes, documented in docs/TREES.md; the point is their profile (wide
// and shallow vs. deeper and narrow), not the exact lists.
TreeShape MedusaStyleShape();
TreeShape EagleStyleShape();

struct TreeWorkloadOptions {
  int32_t num_trees = 32;
  // Shapes: when `shape` has nodes every tree takes it; otherwise each tree
  // is RandomTreeShape(num_nodes, min_children, max_children).
  TreeShape shape;
  int32_t num_nodes = 64;
  int32_t min_children = 1;
  int32_t max_children = 4;
  // Probability that the walk moves one level deeper, per level (index =
  // depth of the current node, 0 = root); the last entry repeats. Empty
  // means 0.6 at every level.
  std::vector<double> level_acceptance;
  // Probability that a node's token copies an earlier sibling's (duplicate
  // sibling tokens); 0 gives distinct sibling tokens.
  double duplicate_sibling_rate = 0.0;
  int64_t row_bytes = 0;
  int32_t vocab_size = 32000;  // >= 8
  uint64_t seed = 1;
};

// What a correct greedy tree verifier must produce.
struct TreeGreedyExpected {
  std::vector<int32_t> accepted_lengths;    // [b]
  std::vector<int32_t> next_tokens;         // [b]
  std::vector<uint8_t> mismatch;            // [b]
  std::vector<int32_t> packed_row_offsets;  // [b + 1]
  std::vector<int32_t> accepted_nodes;      // [total accepted], CSR at packed_row_offsets
  std::vector<std::byte> packed_kv;         // [total accepted * row_bytes]
};

struct TreeGreedyWorkload {
  TreeWorkloadOptions options;
  std::vector<int32_t> node_offsets;    // [b + 1]
  std::vector<int32_t> draft_tokens;    // [offsets[b]]
  std::vector<int32_t> parent_indices;  // [offsets[b]]
  std::vector<int32_t> target_tokens;   // [offsets[b] + b]
  std::vector<std::byte> draft_kv;      // [offsets[b] * row_bytes]
  TreeGreedyExpected expected;

  int32_t num_trees() const { return options.num_trees; }
  int64_t total_nodes() const { return node_offsets.back(); }
  GreedyBatchInput input() const;  // host view, valid while this lives
};

// Tree i draws from a stream keyed by (seed, i). The walk is decided first
// (level by level with level_acceptance; the child to follow uniformly among
// the node's children whose token is not shared with a lower-index sibling),
// then target tokens are set: at a node on the path, the followed child's
// token; at the last node, a token no child carries; elsewhere random.
absl::StatusOr<TreeGreedyWorkload> GenerateTreeGreedyWorkload(const TreeWorkloadOptions& options);

// Sampled tree workloads (probabilities). Rows are random weights u^3 with
// planted mass so that the walk goes about as deep as asked: at a node of
// depth d with children c_1..c_m, the target row puts 0.9 * a_d on c_1's
// token and (1 - a_d) / (2 (m - 1)) on each other child's; every draft row
// (node c's own) puts 0.9 on c's token. So c_1 is accepted with probability
// about a_d, with or without draft rows; later siblings rarely. The oracle
// is the CPU reference (sampling is a deterministic function of the inputs
// and the seeds), as for chains (sampling_workload.h).
struct TreeSampledWorkloadOptions {
  int32_t num_trees = 8;
  TreeShape shape;  // every tree takes it when it has nodes, else random trees:
  int32_t num_nodes = 64;
  int32_t min_children = 1;
  int32_t max_children = 4;
  std::vector<double> level_acceptance;  // a_d, last entry repeats; empty: 0.7
  int32_t vocab_size = 32000;            // >= 8
  SampleDtype dtype = SampleDtype::kFloat32;
  bool has_draft_probs = true;
  // Trees are grouped into requests of this many (seed per request,
  // sequence_index within it), as sampling_workload.h.
  int32_t sequences_per_request = 1;
  uint64_t seed = 1;
};

struct TreeSampledWorkload {
  TreeSampledWorkloadOptions options;
  std::vector<int32_t> node_offsets;      // [b + 1]
  std::vector<int32_t> draft_tokens;      // [offsets[b]]
  std::vector<int32_t> parent_indices;    // [offsets[b]]
  std::vector<std::byte> target_values;   // [(offsets[b] + b) * V] of dtype
  std::vector<std::byte> draft_values;    // [offsets[b] * V]; empty without draft rows
  std::vector<SequenceSamplingParams> sequences;  // [b]

  int32_t num_trees() const { return options.num_trees; }
  int64_t total_nodes() const { return node_offsets.back(); }
  int32_t request_of(int32_t i) const { return i / options.sequences_per_request; }
  RejectionBatchInput input() const;  // host view, valid while this lives
};

absl::StatusOr<TreeSampledWorkload> GenerateTreeSampledWorkload(const TreeSampledWorkloadOptions& options);

// The CPU reference's outcome for a sampled tree workload.
struct TreeSampledExpected {
  std::vector<int32_t> accepted_lengths, next_tokens, status_codes, error_positions;
  std::vector<uint8_t> mismatch;
  std::vector<int32_t> path_nodes;  // per-tree slots: tree i's path at offsets[i] .. + depth
};
TreeSampledExpected ReferenceTreeOutcome(const TreeSampledWorkload& w);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_WORKLOAD_TREE_WORKLOAD_H_
