#include "client/loadgen/load_workload.h"

#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"

namespace specverify::loadgen {

v1::KvReturn ToProto(KvReturnMode mode) {
  switch (mode) {
    case KvReturnMode::kHandle: return v1::KV_RETURN_HANDLE;
    case KvReturnMode::kInline: return v1::KV_RETURN_INLINE;
    case KvReturnMode::kNone: return v1::KV_RETURN_NONE;
  }
  return v1::KV_RETURN_UNSPECIFIED;
}

absl::StatusOr<std::unique_ptr<GreedyLoadWorkload>> GreedyLoadWorkload::Create(
    const WorkloadConfig& config) {
  const int64_t total = int64_t{config.pool_requests} * config.sequences_per_request;
  if (total > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pool_requests * --sequences_per_request = ", total, " sequences; the limit is 2^24"));
  }
  GreedyWorkloadOptions options;
  options.num_sequences = static_cast<int32_t>(total);
  options.gamma_min = config.gamma_min;
  options.gamma_max = config.gamma_max;
  options.alpha = config.alpha;
  options.row_bytes = config.row_bytes;
  options.vocab_size = config.vocab_size;
  options.seed = config.seed;
  absl::StatusOr<GreedyWorkload> workload = GenerateGreedyWorkload(options);
  if (!workload.ok()) return workload.status();

  std::unique_ptr<GreedyLoadWorkload> load(
      new GreedyLoadWorkload(config, std::move(*workload)));
  load->requests_.reserve(config.pool_requests);
  for (int32_t r = 0; r < config.pool_requests; ++r) {
    client::GreedyRequestOptions request_options;
    request_options.first_sequence = r * config.sequences_per_request;
    request_options.num_sequences = config.sequences_per_request;
    request_options.kv_return = ToProto(config.kv_return);
    absl::StatusOr<v1::VerifyRequest> request =
        client::BuildGreedyRequest(load->workload_, request_options);
    if (!request.ok()) return request.status();
    load->requests_.push_back(std::move(*request));
  }
  return load;
}

bool GreedyLoadWorkload::ReturnsKvHandle() const {
  return config_.kv_return == KvReturnMode::kHandle && config_.row_bytes > 0;
}

AnswerCheck GreedyLoadWorkload::Check(int64_t i, const v1::VerifyResponse& response,
                                      std::optional<std::span<const std::byte>> fetched_kv) const {
  const int32_t slot = static_cast<int32_t>(i % pool_size());
  client::GreedyCheckOptions options;
  options.first_sequence = slot * config_.sequences_per_request;
  options.num_sequences = config_.sequences_per_request;
  options.kv_return = ToProto(config_.kv_return);

  AnswerCheck check;
  check.verified = response.verified();
  check.sequences = response.results_size();
  for (const v1::SequenceResult& result : response.results()) {
    check.accepted_tokens += result.accepted_length();
  }
  for (int32_t s = 0; s < options.num_sequences; ++s) {
    check.draft_tokens += workload_.gamma(options.first_sequence + s);
  }
  // A no-op server's answers are not verification output: counted as
  // unverified, never as right or wrong.
  if (!check.verified) return check;
  check.status = client::CheckGreedyResponse(workload_, options, response, fetched_kv);
  if (!check.status.ok()) {
    check.status = absl::Status(check.status.code(),
                                absl::StrCat("request ", i, " (pool slot ", slot, "): ",
                                             check.status.message()));
  }
  return check;
}

}  // namespace specverify::loadgen
