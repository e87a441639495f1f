// Turning a synthetic SamplingWorkload (kernels/workload/sampling_workload.h)
// into sampled VerifyRequests, and checking VerifyResponses against the CPU
// reference recomputed for the same seeds. Shared by the integration tests
// and the load generator.
//
// Request r covers the workload's sequences [r * spr, (r + 1) * spr) with
// spr = options.sequences_per_request: exactly the grouping request_of()
// describes, so VerifyRequest.seed and each sequence's index within the
// request are the ones the oracle used. Sampling is a deterministic function
// of the inputs and the seeds, so a correct server answers every field
// exactly as the reference (any backend, any batch composition).
#ifndef SPECVERIFY_CLIENT_SAMPLED_REQUESTS_H_
#define SPECVERIFY_CLIENT_SAMPLED_REQUESTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/workload/sampling_workload.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::client {

// What a request adds to the workload's rows: the method and, optionally,
// synthetic draft KV rows (the workload carries none).
struct SampledRequestSettings {
  SampleMethod method = SampleMethod::kExact;
  float sigmoid_alpha = -4.0f;  // SIGMOID only: alpha < 0 < beta
  float sigmoid_beta = 4.0f;
  bool validate_full_rows = false;
  // > 0: each draft position carries a row of this many UINT8 bytes, a
  // deterministic function of (sequence, position, byte) (SyntheticKvByte).
  int64_t kv_row_bytes = 0;
  v1::KvReturn kv_return = v1::KV_RETURN_NONE;
  bool send_vocab_size = true;
};

// The expected outcome of every sequence of the workload under `settings`:
// ReferenceOutcome for the exact method, the reference with the sigmoid
// constants otherwise.
RejectionHostOutputs SampledReference(const SamplingWorkload& workload,
                                      const SampledRequestSettings& settings);

// Byte `k` of the KV row of (sequence, position).
std::byte SyntheticKvByte(int32_t sequence, int32_t position, int64_t k);

// `kv` as the UINT8 [rows, row_bytes] draft KV of `sequence`: row j byte k
// is SyntheticKvByte(sequence, j, k) (chain positions and tree nodes alike).
void SetSyntheticDraftKv(int32_t sequence, int32_t rows, int64_t row_bytes, v1::Tensor* kv);

v1::DataType ToProtoDtype(SampleDtype dtype);
// The wire kind of a row kind (DISTRIBUTION_KIND_PROBABILITIES, _LOGITS, _LOG_PROBABILITIES).
v1::DistributionKind ToProtoKind(SampleValueKind kind);

// Builds request number `request` (INVALID_ARGUMENT when outside the workload).
absl::StatusOr<v1::VerifyRequest> BuildSampledRequest(const SamplingWorkload& workload,
                                                      int32_t request,
                                                      const SampledRequestSettings& settings,
                                                      const std::string& request_id = "");

// Number of requests the workload groups its sequences into.
int32_t SampledRequestCount(const SamplingWorkload& workload);

// Checks `response` to request number `request` against `expected`
// (SampledReference): result count, accepted lengths, next tokens, mismatch,
// row offsets and counts, verified, exact (false iff sigmoid), and the inline
// KV rows for KV_RETURN_INLINE. OK, or FAILED_PRECONDITION naming the first
// difference (field, sequence index within the request, expected, actual).
// A request with a refused sequence is expected to fail, never to answer:
// use ExpectedRequestStatus for it.
absl::Status CheckSampledResponse(const SamplingWorkload& workload, int32_t request,
                                  const SampledRequestSettings& settings,
                                  const RejectionHostOutputs& expected,
                                  const v1::VerifyResponse& response);

// OK when the reference accepts every sequence of the request, else the
// "sequence i, position j" the server must name in its INVALID_ARGUMENT.
absl::Status ExpectedRequestStatus(const SamplingWorkload& workload, int32_t request,
                                   const RejectionHostOutputs& expected);

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_SAMPLED_REQUESTS_H_
