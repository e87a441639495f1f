// CUDA token-tree verification (issue #14; tree_params.h, docs/TREES.md).
// Bit-identical to the CPU reference (tree_reference.h) for the same inputs;
// tests/kernels/tree/tree_cuda_test.cc checks that. Plain C++ header: only
// cuda_runtime_api.h types, so g++ translation units include it.
//
//   LaunchTreeGreedyVerifyPack  ONE launch for a ragged batch of trees: a
//       block per tree loads the tree, marks each node whose token equals the
//       target at its parent, takes the lowest such child per node (shared
//       atomicMin), walks from the root, issues the loads of its path's first
//       KV rows, obtains the batch-wide exclusive prefix of path depths by
//       decoupled look-back (Merrill & Garland 2016; trees are dealt in
//       scheduling order by a ticket counter, so every predecessor is
//       resident), then writes its results, its accepted_nodes CSR entries
//       and its packed rows (or, with TreeRowDestinations, its rows where
//       its request answers them: after the rows of the request's earlier
//       trees, whose first tree's offset it reads once that tree's
//       look-back word is published).
//   LaunchTreeSample  ONE launch: a thread-block cluster per tree (up to 16
//       blocks of 256 threads on sm_90) walks the tree redundantly in
//       every block (the scalar decisions need p(x), q(x) and a coin: all
//       prefetched for every node at once), and runs the passes over V that
//       the walk needs (a residual mass after a rejection with draft rows;
//       the final race) split by 4096-element chunks over the cluster's
//       blocks, combined through distributed shared memory in a fixed order.
//       Writes per-tree slots of path_nodes.
//   LaunchTreePack  the pack of the sampled path (same kernel as the greedy
//       launch, reading the paths instead of walking); sampled verify + pack
//       is therefore two launches, capturable into one graph.
//
// Every launcher is asynchronous on `stream`, allocates nothing, never
// synchronizes and never reads device memory from the host, so it can be
// captured in a CUDA graph.
#ifndef SPECVERIFY_KERNELS_TREE_TREE_CUDA_H_
#define SPECVERIFY_KERNELS_TREE_TREE_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/cuda_status.h"
#include "kernels/tree/tree_params.h"

namespace specverify {

// Look-back state of the greedy and pack launches for batches of up to
// max_trees trees. One scratch per stream (launches on one stream are
// ordered, so the greedy and pack launches may share it).
struct TreeScratch {
  void* data = nullptr;  // device, 256-byte aligned
  size_t bytes = 0;
  int32_t max_trees = 0;
};

size_t TreeScratchBytes(int32_t max_trees);

// Zeroes the look-back state: REQUIRED once after allocation, before the
// first launch on `stream` (each launch retires its own epoch, as the greedy
// chain kernel's; see greedy_cuda.h for the 2^32-launch caveat).
cudaError_t InitTreeScratch(const TreeScratch& scratch, cudaStream_t stream);

struct TreeScratchBuffer {
  DeviceBuffer buffer;
  TreeScratch view;
};
// Allocation + initialization (start-up only: synchronizes `stream`).
absl::StatusOr<TreeScratchBuffer> AllocateTreeScratch(int32_t max_trees, cudaStream_t stream);

// Greedy batch on the device. Every pointer in `params` is device memory.
struct TreeGreedyDeviceBatch {
  TreeGreedyVerifyParams params;
  int64_t total_nodes = 0;  // == draft_offsets[b], host-known
};

// Host-side checks (pointers set, b <= scratch.max_trees, total_nodes in
// [b, b * kMaxTreeNodes], row_bytes >= 0). Cannot check device contents:
// REQUIRES the host copy passed ValidateTreeGreedyBatch.
absl::Status ValidateTreeGreedyDeviceBatch(const TreeGreedyDeviceBatch& batch, const TreeScratch& scratch);

cudaError_t LaunchTreeGreedyVerifyPack(const TreeGreedyDeviceBatch& batch, const TreeScratch& scratch,
                                       cudaStream_t stream);

// Sampled: `cluster_blocks` = blocks per tree, 0 = choose (16 from V >
// 15 * 4096 on, 8 if the device cannot schedule clusters of 16; else one per
// 4096-element chunk up to 8); 9..16 need the non-portable cluster size
// (sm_90) and give cudaErrorInvalidValue where the device cannot run them.
// REQUIRES the host copy passed ValidateTreeSampleBatch (the kernel itself
// checks ids, parents and every value it reads). Returns
// cudaErrorInvalidValue for options the kernel does not support, and
// cudaErrorNotSupported where TreeSamplingSupported says no.
cudaError_t LaunchTreeSample(const TreeSampleParams& params, cudaStream_t stream, int32_t cluster_blocks = 0);

// *yes: LaunchTreeSample runs on the current device. Its kernel needs
// thread-block clusters: an sm_90+ device running this build's sm_90 code
// (kernels/common/sm90_code.h), not an A100 or a build's portable PTX.
cudaError_t TreeSamplingSupported(bool* yes);

// Pack of per-tree paths (TreePackParams); REQUIRES accepted_lengths[i] in
// [0, n_i] and path_nodes[offsets[i] + d] in [0, n_i) (the sampled kernel
// guarantees both).
cudaError_t LaunchTreePack(const TreePackParams& params, const TreeScratch& scratch, cudaStream_t stream);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_TREE_TREE_CUDA_H_
