// CPU reference of token-tree verification (tree_params.h, docs/TREES.md):
// the oracle the CUDA kernels are tested against bit for bit, and the CPU
// backend's implementation. Host memory only. Trees are independent, so a
// caller may split [0, b) over threads with the *Range functions; packing
// needs the serial prefix of the depths (ReferenceTreePackedRowOffsets).
#ifndef SPECVERIFY_KERNELS_TREE_TREE_REFERENCE_H_
#define SPECVERIFY_KERNELS_TREE_TREE_REFERENCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/tree/tree_params.h"

namespace specverify {

struct TreeLimits {
  int32_t max_trees = kMaxBatchSequences;
  int32_t max_tree_nodes = kDefaultMaxTreeNodes;  // <= kMaxTreeNodes
  int32_t max_vocab_size = 1 << 20;
};

// What every implementation can run: the server's backends check batches
// against these (the edge applied the configured --max_tree_nodes first).
inline TreeLimits BackendTreeLimits() {
  TreeLimits limits;
  limits.max_tree_nodes = kMaxTreeNodes;
  return limits;
}

// Checks the tree structure of a host-resident batch: b in [1, max_trees],
// offsets start at 0 and each n_i lies in [1, max_tree_nodes], and every
// parent index of node j lies in [-1, j). kInvalidArgument naming the
// field, the sequence and the node ("sequence 3, node 5: parent_indices[5] =
// 7 is not in [-1, 5)").
absl::Status ValidateTreeStructure(int32_t num_trees, const int32_t* node_offsets,
                                   const int32_t* parent_indices, const TreeLimits& limits);

// TreeRowDestinations: unset, or origins set and an alignment that is a
// power of two <= 16; with `origins_readable` (host memory), also every
// origins[i] in [0, i]. kInvalidArgument naming the field and the tree.
absl::Status ValidateTreeRowDestinations(const TreeRowDestinations& destinations, int32_t num_trees,
                                         bool origins_readable);

// Structure (above) plus the greedy layout checks of ValidateGreedyBatch
// (token ids, pointers), accepted_nodes set and the row destinations.
absl::Status ValidateTreeGreedyBatch(const TreeGreedyVerifyParams& params, const TreeLimits& limits = {});

// Structure plus ValidateRejectionBatch (ids, pointers, sequence parameters)
// and what the tree path supports: probabilities, exact, no full-row check,
// greedy_target_tokens null, path_nodes set. Unsupported options are
// kUnimplemented naming the field.
absl::Status ValidateTreeSampleBatch(const TreeSampleParams& params, const TreeLimits& limits = {});

// kOk, or kInvalidArgument for the first tree whose code is not kRejectionOk,
// naming the sequence, the node or target row, and what was wrong.
absl::Status TreeOutcomeStatus(const int32_t* status_codes, const int32_t* error_positions,
                               int32_t num_trees);

// Greedy: accepted_lengths, next_tokens, mismatch of trees [begin, end), and
// each path into accepted_nodes at the tree's node offset (per-tree slots).
// ReferenceTreeGreedyVerifyPack moves them to the packed CSR.
void ReferenceTreeGreedyWalkRange(const TreeGreedyVerifyParams& params, int32_t begin, int32_t end,
                                  int32_t* path_nodes);

// Whole greedy batch: walk, prefix, accepted_nodes CSR, pack. Single-threaded.
void ReferenceTreeGreedyVerifyPack(const TreeGreedyVerifyParams& params);

// Sampled: trees [begin, end). Writes every output of params.output and
// params.path_nodes.
void ReferenceTreeSampleRange(const TreeSampleParams& params, int32_t begin, int32_t end);
void ReferenceTreeSample(const TreeSampleParams& params);

// packed_row_offsets = exclusive prefix of accepted_lengths ([b] = total).
void ReferenceTreePackedRowOffsets(const TreePackParams& params);
// accepted_nodes CSR and packed rows of trees [begin, end); REQUIRES the
// offsets were computed.
void ReferenceTreePackRange(const TreePackParams& params, int32_t begin, int32_t end);
// Both, single-threaded.
void ReferenceTreePack(const TreePackParams& params);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_TREE_TREE_REFERENCE_H_
