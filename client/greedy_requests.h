// Turning a synthetic GreedyWorkload (kernels/workload/greedy_workload.h) into
// VerifyRequests, and checking VerifyResponses against the workload's own
// oracle. Shared by the integration tests and the load generator.
//
// A request covers the contiguous sequence range [first_sequence,
// first_sequence + num_sequences) of the workload; its expected packed KV is
// the matching contiguous slice of GreedyExpected::packed_kv (rows are packed
// in sequence order), and its row offsets are the workload's packed offsets
// rebased to the range's first sequence.
#ifndef SPECVERIFY_CLIENT_GREEDY_REQUESTS_H_
#define SPECVERIFY_CLIENT_GREEDY_REQUESTS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/workload/greedy_workload.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::client {

struct GreedyRequestOptions {
  int32_t first_sequence = 0;
  int32_t num_sequences = 1;
  std::string request_id;
  v1::KvReturn kv_return = v1::KV_RETURN_UNSPECIFIED;
  // draft_kv is sent as shape [gamma, row_bytes] of this 1-byte dtype when
  // the workload has KV rows (row_bytes > 0).
  v1::DataType kv_dtype = v1::DATA_TYPE_UINT8;
  // Sends the workload's vocab_size so the server checks token ranges.
  bool send_vocab_size = true;
};

// Builds the request for a sequence range. INVALID_ARGUMENT when the range
// lies outside the workload.
absl::StatusOr<v1::VerifyRequest> BuildGreedyRequest(
    const GreedyWorkload& workload, const GreedyRequestOptions& options);

// The packed KV bytes a correct server returns for the range.
std::span<const std::byte> ExpectedPackedKv(const GreedyWorkload& workload,
                                            int32_t first_sequence,
                                            int32_t num_sequences);

// The KV return mode the server applies: UNSPECIFIED becomes HANDLE when the
// workload has rows, else NONE.
v1::KvReturn EffectiveKvReturn(const GreedyWorkload& workload,
                               v1::KvReturn requested);

struct GreedyCheckOptions {
  int32_t first_sequence = 0;
  int32_t num_sequences = 1;
  v1::KvReturn kv_return = v1::KV_RETURN_UNSPECIFIED;
  // Expect verified results. False for the no-op backend, whose answers are
  // then checked for its fixed shape: accepted_length = gamma, next_token =
  // the last target token, mismatch false, and every draft row of the range
  // as its KV rows (handle size, inline and fetched bytes).
  bool expect_verified = true;
  std::string request_id;  // checked when non-empty
};

// Checks every field of `response` against the workload's oracle: result
// count, accepted lengths, next tokens, mismatch flags, row offsets and
// counts, the handle's row_bytes/num_rows/dtype (HANDLE), the inline bytes
// (INLINE), and `fetched_kv` (bytes read back through FetchKv) when given.
// Returns OK, or FAILED_PRECONDITION describing the first difference
// precisely (field, sequence index, expected and actual values).
absl::Status CheckGreedyResponse(
    const GreedyWorkload& workload, const GreedyCheckOptions& options,
    const v1::VerifyResponse& response,
    std::optional<std::span<const std::byte>> fetched_kv = std::nullopt);

// Convenience: fetched bytes as a span.
inline std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_GREEDY_REQUESTS_H_
