#include "client/loadgen/load_workload.h"

#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/loadgen/region_transport.h"

namespace specverify::loadgen {

v1::KvReturn ToProto(KvReturnMode mode) {
  switch (mode) {
    case KvReturnMode::kHandle: return v1::KV_RETURN_HANDLE;
    case KvReturnMode::kInline: return v1::KV_RETURN_INLINE;
    case KvReturnMode::kNone: return v1::KV_RETURN_NONE;
    // Built and checked as INLINE; UseRegion turns the requests into REGION
    // and RegionRowsInline the answers back.
    case KvReturnMode::kRegion: return v1::KV_RETURN_INLINE;
  }
  return v1::KV_RETURN_UNSPECIFIED;
}

int64_t LoadWorkload::RegionBytesNeeded(bool return_into_region) const {
  constexpr int64_t kAlign = 16;
  const auto aligned = [](int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  int64_t total = 0;
  for (const v1::VerifyRequest& r : requests_) {
    int64_t rows = 0, row_bytes = 0;
    for (const v1::SequenceDraft& seq : r.sequences()) {
      rows += seq.draft_tokens_size();
      if (seq.has_draft_kv()) {
        total += aligned(static_cast<int64_t>(seq.draft_kv().data().size()));
        row_bytes = static_cast<int64_t>(seq.draft_kv().data().size()) / seq.draft_tokens_size();
      }
      if (seq.has_sampled()) {
        total += aligned(static_cast<int64_t>(seq.sampled().target().values().data().size()));
        total += aligned(static_cast<int64_t>(seq.sampled().draft().values().data().size()));
      }
    }
    if (return_into_region) total += aligned(rows * row_bytes);
  }
  return total + kAlign;
}

absl::Status LoadWorkload::UseRegion(RegionTransport* region, bool return_into_region) {
  region_ = region;
  return_into_region_ = return_into_region;
  for (v1::VerifyRequest& r : requests_) {
    if (absl::Status s = region->writer().MoveInputsToRegion(&r, return_into_region); !s.ok()) {
      return s;
    }
  }
  return region->Publish();
}

absl::StatusOr<v1::VerifyResponse> LoadWorkload::RegionRowsInline(
    int64_t i, const v1::VerifyResponse& response) const {
  const v1::VerifyRequest& request = Request(i);
  int64_t rows = 0;
  for (const v1::SequenceResult& result : response.results()) rows += result.kv_row_count();
  int64_t row_bytes = request.kv_output().shape_size() > 0 ? 1 : 0;
  for (int d = 1; d < request.kv_output().shape_size(); ++d) row_bytes *= request.kv_output().shape(d);
  if (request.kv_output().dtype() == v1::DATA_TYPE_FLOAT32) row_bytes *= 4;
  if (request.kv_output().dtype() == v1::DATA_TYPE_FLOAT16 ||
      request.kv_output().dtype() == v1::DATA_TYPE_BFLOAT16) {
    row_bytes *= 2;
  }
  v1::VerifyResponse as_inline = response;
  if (absl::Status s = region_->Read(request.kv_output().offset_bytes(), rows * row_bytes,
                                     as_inline.mutable_kv_inline());
      !s.ok()) {
    return s;
  }
  return as_inline;
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
  absl::StatusOr<v1::VerifyResponse> region_answer;
  if (returns_into_region()) {
    region_answer = RegionRowsInline(i, response);
    if (!region_answer.ok()) {
      check.status = region_answer.status();
      return check;
    }
  }
  check.status = client::CheckGreedyResponse(
      workload_, options, returns_into_region() ? *region_answer : response, fetched_kv);
  if (!check.status.ok()) {
    check.status = absl::Status(check.status.code(),
                                absl::StrCat("request ", i, " (pool slot ", slot, "): ",
                                             check.status.message()));
  }
  return check;
}

absl::StatusOr<std::unique_ptr<SampledLoadWorkload>> SampledLoadWorkload::Create(
    const WorkloadConfig& config) {
  const int64_t total = int64_t{config.pool_requests} * config.sequences_per_request;
  // The pool holds every row twice (workload and messages): keep it bounded.
  const int64_t row_bytes = int64_t{config.vocab_size} * SampleDtypeBytes(config.dtype);
  const int64_t bytes =
      total * (2 * int64_t{config.gamma_max} + 1) * row_bytes * 2;
  constexpr int64_t kMaxPoolBytes = int64_t{2} << 30;
  if (bytes > kMaxPoolBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode=sampled: --pool_requests=", config.pool_requests, " x --sequences_per_request=",
        config.sequences_per_request, " x up to ", 2 * config.gamma_max + 1, " rows of --vocab=",
        config.vocab_size, " would hold ", bytes, " bytes; the limit is ", kMaxPoolBytes,
        " (lower --pool_requests)"));
  }
  SamplingWorkloadOptions options;
  options.num_sequences = static_cast<int32_t>(total);
  options.gamma_min = config.gamma_min;
  options.gamma_max = config.gamma_max;
  options.vocab_size = config.vocab_size;
  options.dtype = config.dtype;
  options.kind = config.kind;
  options.shape = DistributionShape::kMixed;
  options.has_draft_probs = config.draft_probs;
  options.sequences_per_request = config.sequences_per_request;
  options.seed = config.seed;
  absl::StatusOr<SamplingWorkload> workload = GenerateSamplingWorkload(options);
  if (!workload.ok()) return workload.status();

  std::unique_ptr<SampledLoadWorkload> load(
      new SampledLoadWorkload(config, std::move(*workload)));
  load->settings_.method = config.method;
  load->settings_.kv_row_bytes = config.row_bytes;
  load->settings_.kv_return = ToProto(config.kv_return);
  load->expected_ = client::SampledReference(load->workload_, load->settings_);
  load->requests_.reserve(config.pool_requests);
  for (int32_t r = 0; r < config.pool_requests; ++r) {
    absl::StatusOr<v1::VerifyRequest> request =
        client::BuildSampledRequest(load->workload_, r, load->settings_);
    if (!request.ok()) return request.status();
    load->requests_.push_back(std::move(*request));
  }
  return load;
}

bool SampledLoadWorkload::ReturnsKvHandle() const {
  return config_.kv_return == KvReturnMode::kHandle && config_.row_bytes > 0;
}

AnswerCheck SampledLoadWorkload::Check(int64_t i, const v1::VerifyResponse& response,
                                       std::optional<std::span<const std::byte>> fetched_kv) const {
  const int32_t slot = static_cast<int32_t>(i % pool_size());
  const int32_t first = slot * config_.sequences_per_request;
  AnswerCheck check;
  check.verified = response.verified();
  check.sequences = response.results_size();
  for (const v1::SequenceResult& result : response.results()) {
    check.accepted_tokens += result.accepted_length();
  }
  for (int32_t s = 0; s < config_.sequences_per_request; ++s) {
    check.draft_tokens += workload_.gamma(first + s);
  }
  if (!check.verified) return check;
  absl::StatusOr<v1::VerifyResponse> region_answer;
  if (returns_into_region()) {
    region_answer = RegionRowsInline(i, response);
    if (!region_answer.ok()) {
      check.status = region_answer.status();
      return check;
    }
  }
  check.status = client::CheckSampledResponse(
      workload_, slot, settings_, expected_, returns_into_region() ? *region_answer : response);
  if (check.status.ok() && fetched_kv.has_value()) {
    // The handle's rows: each sequence's first k draft rows, in order.
    const int64_t rb = config_.row_bytes;
    int64_t at = 0;
    for (int32_t s = 0; s < config_.sequences_per_request && check.status.ok(); ++s) {
      const int32_t k = response.results(s).accepted_length();
      for (int32_t j = 0; j < k && check.status.ok(); ++j) {
        for (int64_t b = 0; b < rb; ++b, ++at) {
          if (at >= static_cast<int64_t>(fetched_kv->size()) ||
              (*fetched_kv)[at] != client::SyntheticKvByte(first + s, j, b)) {
            check.status = absl::FailedPreconditionError(absl::StrCat(
                "fetched KV of sequence ", s, " row ", j, " byte ", b, " differs"));
            break;
          }
        }
      }
    }
    if (check.status.ok() && at != static_cast<int64_t>(fetched_kv->size())) {
      check.status = absl::FailedPreconditionError(
          absl::StrCat("fetched KV is ", fetched_kv->size(), " bytes, expected ", at));
    }
  }
  if (!check.status.ok()) {
    check.status = absl::Status(check.status.code(),
                                absl::StrCat("request ", i, " (pool slot ", slot, "): ",
                                             check.status.message()));
  }
  return check;
}

absl::StatusOr<std::unique_ptr<LoadWorkload>> CreateLoadWorkload(const WorkloadConfig& config) {
  if (config.mode == WorkloadMode::kSampled) {
    absl::StatusOr<std::unique_ptr<SampledLoadWorkload>> w = SampledLoadWorkload::Create(config);
    if (!w.ok()) return w.status();
    return std::unique_ptr<LoadWorkload>(*std::move(w));
  }
  absl::StatusOr<std::unique_ptr<GreedyLoadWorkload>> w = GreedyLoadWorkload::Create(config);
  if (!w.ok()) return w.status();
  return std::unique_ptr<LoadWorkload>(*std::move(w));
}

}  // namespace specverify::loadgen
