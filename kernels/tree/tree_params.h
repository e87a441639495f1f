// Token-tree verification (issue #14): the data contract shared by the CPU
// reference (tree_reference.h) and the CUDA kernels (tree_cuda.h).
// Semantics, proofs and RNG keying: docs/TREES.md.
//
// A tree batch is the ragged batch of kernels/layout/ragged_batch.h (greedy)
// or of kernels/sampling/rejection_params.h (sampled) plus one array,
// `parent_indices`, aligned with draft_tokens. Tree i has n_i nodes:
//
//   draft_offsets   [b + 1]            n_i = offsets[i+1] - offsets[i] (node offsets)
//   draft_tokens    [offsets[b]]       node j of tree i at offsets[i] + j, in topological order
//   parent_indices  [offsets[b]]       parent of node j, tree-local: -1 (a child of the root,
//                                      the last committed token) or in [0, j)
//   target rows     n_i + 1 per tree   at offsets[i] + i + r: r = 0 the root, r = j + 1 node j
//                                      (greedy: target_tokens, the argmax after that node;
//                                      sampled: target_values rows of V)
//   draft rows      n_i per tree       sampled, optional: draft_values row offsets[i] + j is
//                                      the distribution node j's token was drawn from
//   draft_kv        one row per node   row offsets[i] + j
//
// A chain is the tree with parent_indices = -1, 0, 1, ..., n-2: every layout
// above then coincides with the chain layout, and every implementation gives
// the chain's results bit for bit (tested).
//
// Results per tree: accepted_lengths[i] = depth of the accepted path (0 = no
// node accepted), next_tokens[i], mismatch[i] = 1 iff the last accepted node
// (or the root) has children (the next token is a correction, not a bonus:
// the chain's k < gamma), the accepted nodes (tree-local indices, from the
// root's child down) and their KV rows packed in path order.
#ifndef SPECVERIFY_KERNELS_TREE_TREE_PARAMS_H_
#define SPECVERIFY_KERNELS_TREE_TREE_PARAMS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/layout/ragged_batch.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify {

// Most nodes one tree may have in any implementation (the kernels keep a
// tree's structure in shared memory). The server's --max_tree_nodes (default
// 256) must not exceed it.
inline constexpr int32_t kMaxTreeNodes = 1024;
// The server's default --max_tree_nodes.
inline constexpr int32_t kDefaultMaxTreeNodes = 256;

// Optional destinations of the accepted rows, for batches in which some
// requests take their rows straight into their own output (a worker's
// region: KV_RETURN_REGION) instead of the packed buffer, so nothing copies
// them a second time. Tree i's rows go to destinations[i], after the accepted
// rows of trees origins[i] .. i-1 (the earlier trees of its request): at
// destinations[i] + (packed_row_offsets[i] - packed_row_offsets[origins[i]])
// * row_bytes. Destination packed_kv with origin 0 is the packed place; a
// null destination writes none of the tree's rows (accepted_nodes and the
// offsets are written as always). The plan of kernels/layout/row_copy.h's
// AcceptedRowCopyParams, for trees.
struct TreeRowDestinations {
  std::byte* const* destinations = nullptr;  // [b]; null: every tree at its packed place
  const int32_t* origins = nullptr;          // [b], origins[i] in [0, i]
  int32_t alignment = 1;                     // a power of two (<= 16) dividing every destination
};

// Greedy tree verify-and-pack. `input` and `output` keep the meaning of the
// greedy chain batch, with draft_offsets as node offsets and target_tokens as
// n_i + 1 tokens per tree (above). Walk: from the root, move to the
// lowest-index child whose token equals the target token at the current node,
// until none does; next = the target token at the last node.
struct TreeGreedyVerifyParams {
  GreedyBatchInput input;
  const int32_t* parent_indices = nullptr;  // [offsets[b]], read-only
  // accepted_lengths = path depth; packed_row_offsets = exclusive prefix of
  // the depths ([b] = total); packed_kv rows of tree i's path, in path order,
  // at packed_row_offsets[i].
  GreedyBatchOutput output;
  // [offsets[b]] capacity, write-only: tree i's path (tree-local node
  // indices) at accepted_nodes[packed_row_offsets[i] + d], d < depth (CSR
  // sharing the packed offsets).
  int32_t* accepted_nodes = nullptr;
  // Optional, [b]: tree i's n_i KV rows, contiguous, where they are (a
  // worker's region) instead of input.draft_kv + offsets[i] * row_bytes, so
  // only the accepted rows are read and nothing gathers the others first.
  // kv_source_alignment: a power of two (<= 16) dividing every entry.
  const std::byte* const* kv_sources = nullptr;
  int32_t kv_source_alignment = 1;
  // Optional: where each tree's accepted rows go instead of packed_kv.
  TreeRowDestinations row_destinations{};
};

// Sampled tree verification: SpecInfer's multi-candidate rule (docs/TREES.md).
// `input` as in rejection_params.h with node offsets and n_i + 1 target rows
// per tree. Supported: kind == kProbabilities (fp32, fp16, bf16), method ==
// kExact, validate_full_rows == false; with or without draft rows.
// `output`: accepted_lengths = depth, next_tokens, mismatch as above,
// status_codes (RejectionCode or kTreeBadParent), error_positions (see
// TreeErrorPosition); greedy_target_tokens must be null.
struct TreeSampleParams {
  RejectionBatchInput input;
  const int32_t* parent_indices = nullptr;  // [offsets[b]], read-only
  RejectionBatchOutput output;
  // [offsets[b]], write-only: tree i's path (tree-local node indices) at
  // path_nodes[offsets[i] + d], d < accepted_lengths[i] (per-tree slots, so no
  // prefix is needed; LaunchTreePack / ReferenceTreePack turn it into the
  // packed CSR). Entries past the depth are not written.
  int32_t* path_nodes = nullptr;
  // Optional [b], write-only (null: not written): rows of V elements the
  // verification of tree i read in full (one per row per pass over V), for
  // the benchmark's read floor. 0 on error.
  int32_t* row_reads = nullptr;
};

// Per-tree outcome code beyond RejectionCode: a parent index outside [-1, j)
// (the host validator rejects it first; the kernels check it again because
// they cannot trust device memory).
inline constexpr int32_t kTreeBadParent = 16;

// error_positions[i] of a sampled tree: for kRejectionBadTargetValue and
// kRejectionEmptyTargetRow the target row r (0 = the root, j + 1 = node j);
// for every other code the node index j; -1 for the sequence parameters and
// when the code is kRejectionOk.

// Packs the accepted paths of a sampled tree batch (the second launch of the
// sampled path, or any path given per tree).
struct TreePackParams {
  int32_t num_trees = 0;                     // b
  const int32_t* node_offsets = nullptr;     // [b + 1], read-only (draft_offsets)
  const int32_t* accepted_lengths = nullptr; // [b], read-only, depth in [0, n_i]
  const int32_t* path_nodes = nullptr;       // [offsets[b]], read-only, per-tree slots as above
  const std::byte* draft_kv = nullptr;       // [offsets[b] * row_bytes]; null iff row_bytes == 0
  int64_t row_bytes = 0;
  // Optional, as in TreeGreedyVerifyParams: tree i's rows at kv_sources[i].
  const std::byte* const* kv_sources = nullptr;
  int32_t kv_source_alignment = 1;
  int32_t* packed_row_offsets = nullptr;     // [b + 1], write-only
  int32_t* accepted_nodes = nullptr;         // [offsets[b]] capacity, write-only, CSR
  std::byte* packed_kv = nullptr;            // [offsets[b] * row_bytes]; null iff row_bytes == 0
  // Optional, as in TreeGreedyVerifyParams.
  TreeRowDestinations row_destinations{};
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_TREE_TREE_PARAMS_H_
