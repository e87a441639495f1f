// Token-tree workloads (kernels/workload/tree_workload.h) as requests and
// their checks (docs/TREES.md): shared by the server tests and the load
// generator, as greedy_requests.h and sampled_requests.h are for chains.
#ifndef SPECVERIFY_CLIENT_TREE_REQUESTS_H_
#define SPECVERIFY_CLIENT_TREE_REQUESTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/workload/tree_workload.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::client {

// Trees [first, first + n) of a greedy tree workload as one request: draft
// tokens, parent_indices, n_i + 1 target tokens, KV rows as UINT8 [n_i,
// row_bytes] when the workload has rows.
absl::StatusOr<v1::VerifyRequest> BuildTreeGreedyRequest(const TreeGreedyWorkload& workload,
                                                         int32_t first, int32_t n,
                                                         v1::KvReturn kv_return,
                                                         const std::string& request_id = "");

// Every field of the answer against the workload's own oracle: accepted
// lengths (path depths), next tokens, mismatch, accepted_nodes, row offsets
// and counts, and the packed rows for KV_RETURN_INLINE. FAILED_PRECONDITION
// naming the first difference.
absl::Status CheckTreeGreedyResponse(const TreeGreedyWorkload& workload, int32_t first, int32_t n,
                                     v1::KvReturn kv_return, const v1::VerifyResponse& response);

// Request number r of a sampled tree workload (its trees share the request's
// seed): probabilities of the workload's dtype, draft rows when it has them.
// With kv_row_bytes > 0 every node carries a UINT8 KV row of that many bytes,
// SyntheticKvByte(tree, node, byte) (client/sampled_requests.h), returned as
// kv_return says; otherwise no KV rows and KV_RETURN_NONE.
absl::StatusOr<v1::VerifyRequest> BuildTreeSampledRequest(const TreeSampledWorkload& workload,
                                                          int32_t r,
                                                          const std::string& request_id = "",
                                                          int64_t kv_row_bytes = 0,
                                                          v1::KvReturn kv_return = v1::KV_RETURN_NONE);

// The answer to request r against the CPU reference's outcome (`expected` =
// ReferenceTreeOutcome(workload)); a request with a refused tree must fail,
// which TreeSampledRequestStatus says. With kv_row_bytes > 0 also each
// tree's kv_row_offset / kv_row_count and, when the answer carries them
// inline, the accepted path's rows in path order.
absl::Status CheckTreeSampledResponse(const TreeSampledWorkload& workload,
                                      const TreeSampledExpected& expected, int32_t r,
                                      const v1::VerifyResponse& response,
                                      int64_t kv_row_bytes = 0);
absl::Status TreeSampledRequestStatus(const TreeSampledExpected& expected,
                                      const TreeSampledWorkload& workload, int32_t r);
int32_t TreeSampledRequestCount(const TreeSampledWorkload& workload);

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_TREE_REQUESTS_H_
