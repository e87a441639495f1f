#include "client/loadgen/load_workload.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/loadgen/region_transport.h"
#include "client/region.h"
#include "client/tree_requests.h"

#include <fstream>
#include <sstream>

namespace specverify::loadgen {
namespace {

// The most bytes a pool of generated requests may hold in the loadgen.
constexpr int64_t kMaxPoolBytes = int64_t{2} << 30;

// Points every region reference of `request` `delta` bytes further on.
void ShiftRegionRefs(v1::VerifyRequest* request, int64_t delta) {
  const auto shift = [delta](v1::TensorRef* ref) { ref->set_offset_bytes(ref->offset_bytes() + delta); };
  for (v1::SequenceDraft& seq : *request->mutable_sequences()) {
    if (seq.has_draft_kv_ref()) shift(seq.mutable_draft_kv_ref());
    if (seq.has_sampled()) {
      v1::SampledTarget* st = seq.mutable_sampled();
      if (st->has_target() && st->target().has_values_ref()) {
        shift(st->mutable_target()->mutable_values_ref());
      }
      if (st->has_draft() && st->draft().has_values_ref()) {
        shift(st->mutable_draft()->mutable_values_ref());
      }
    }
  }
  if (request->has_kv_output()) shift(request->mutable_kv_output());
}

}  // namespace

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
  pool_slots_ = pool_size();
  requests_.reserve(static_cast<size_t>(pool_slots_ * region->copies()));
  for (int32_t k = 1; k < region->copies(); ++k) {
    for (int64_t slot = 0; slot < pool_slots_; ++slot) {
      v1::VerifyRequest copy = requests_[static_cast<size_t>(slot)];
      ShiftRegionRefs(&copy, k * region->stretch_bytes());
      requests_.push_back(std::move(copy));
    }
  }
  return region->Publish();
}

absl::StatusOr<v1::VerifyResponse> LoadWorkload::RegionRowsInline(
    int64_t i, const v1::VerifyResponse& response) const {
  const v1::VerifyRequest& request = Request(i);
  int64_t rows = 0;
  for (const v1::SequenceResult& result : response.results()) rows += result.kv_row_count();
  const int64_t row_bytes = client::TensorRefRowBytes(request.kv_output());
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
  if (total > kMaxGreedyWorkloadSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pool_requests=", config.pool_requests, " x --sequences_per_request=",
        config.sequences_per_request, " is ", total, " sequences; the limit is ",
        kMaxGreedyWorkloadSequences, " (lower --pool_requests)"));
  }
  // The pool holds every draft row up to three times (workload, expected
  // packed rows, messages): keep it bounded like the sampled pool.
  const int64_t bytes = total * config.gamma_max * config.row_bytes * 3;
  if (bytes > kMaxPoolBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pool_requests=", config.pool_requests, " x --sequences_per_request=",
        config.sequences_per_request, " x up to ", config.gamma_max, " rows of --row_bytes=",
        config.row_bytes, " would hold ", bytes, " bytes; the limit is ", kMaxPoolBytes,
        " (lower --pool_requests)"));
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
  const int32_t slot = static_cast<int32_t>(i % pool_slots());
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
  const int32_t slot = static_cast<int32_t>(i % pool_slots());
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

namespace {

// --tree's shape; random trees (random:N) return an empty shape and N.
absl::StatusOr<std::pair<TreeShape, int32_t>> TreeShapeOf(const std::string& spec) {
  if (spec == "medusa") return std::make_pair(MedusaStyleShape(), 0);
  if (spec == "eagle") return std::make_pair(EagleStyleShape(), 0);
  if (spec.rfind("random:", 0) == 0) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(spec.substr(7), &n) || n < 1 || n > kMaxTreeNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tree=", spec, ": random:N needs N in [1, ", kMaxTreeNodes, "]"));
    }
    return std::make_pair(TreeShape{}, n);
  }
  if (spec.rfind("file:", 0) == 0) {
    std::ifstream in(spec.substr(5));
    if (!in) return absl::NotFoundError(absl::StrCat("--tree=", spec, ": cannot read the file"));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<TreeShape> shape = ParseTreePaths(text.str());
    if (!shape.ok()) return shape.status();
    return std::make_pair(*std::move(shape), 0);
  }
  absl::StatusOr<TreeShape> shape = ParseTreeSpec(spec);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tree=", spec, ": expected WIDTHxDEPTH, random:N, medusa, eagle or file:PATH (",
        shape.status().message(), ")"));
  }
  return std::make_pair(*std::move(shape), 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TreeLoadWorkload>> TreeLoadWorkload::Create(
    const WorkloadConfig& config) {
  absl::StatusOr<std::pair<TreeShape, int32_t>> shape = TreeShapeOf(config.tree);
  if (!shape.ok()) return shape.status();
  const int64_t pooled_trees = int64_t{config.pool_requests} * config.sequences_per_request;
  if (pooled_trees > kMaxBatchSequences) {
    // The tree generators build one batch's worth of trees.
    return absl::InvalidArgumentError(absl::StrCat(
        "--tree: --pool_requests=", config.pool_requests, " x --sequences_per_request=",
        config.sequences_per_request, " is ", pooled_trees, " trees; the limit is ",
        kMaxBatchSequences, " (lower --pool_requests)"));
  }
  std::unique_ptr<TreeLoadWorkload> load(new TreeLoadWorkload(config));
  const int32_t trees = static_cast<int32_t>(pooled_trees);
  if (config.mode == WorkloadMode::kGreedy) {
    TreeWorkloadOptions o;
    o.num_trees = trees;
    o.shape = shape->first;
    if (shape->second > 0) o.num_nodes = shape->second;
    o.level_acceptance = {config.alpha};
    o.row_bytes = config.row_bytes;
    o.vocab_size = std::max(config.vocab_size, 8);
    o.seed = config.seed;
    absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
    if (!w.ok()) return w.status();
    load->greedy_ = *std::move(w);
    for (int32_t r = 0; r < config.pool_requests; ++r) {
      absl::StatusOr<v1::VerifyRequest> request = client::BuildTreeGreedyRequest(
          *load->greedy_, r * config.sequences_per_request, config.sequences_per_request,
          ToProto(config.kv_return));
      if (!request.ok()) return request.status();
      load->requests_.push_back(*std::move(request));
    }
    return load;
  }
  if (config.kind != SampleValueKind::kProbabilities || config.method != SampleMethod::kExact) {
    return absl::InvalidArgumentError(
        "--tree with --mode=sampled takes --kind=probs and --method=exact");
  }
  TreeSampledWorkloadOptions o;
  o.num_trees = trees;
  o.shape = shape->first;
  if (shape->second > 0) o.num_nodes = shape->second;
  o.level_acceptance = {config.alpha};
  o.vocab_size = std::max(config.vocab_size, 8);
  o.dtype = config.dtype;
  o.has_draft_probs = config.draft_probs;
  o.sequences_per_request = config.sequences_per_request;
  o.seed = config.seed;
  absl::StatusOr<TreeSampledWorkload> w = GenerateTreeSampledWorkload(o);
  if (!w.ok()) return w.status();
  load->sampled_ = *std::move(w);
  load->expected_ = ReferenceTreeOutcome(*load->sampled_);
  // Every node carries a KV row of --row_bytes, returned as --kv_return says
  // (as greedy trees and sampled chains do); none with --kv_return=none.
  for (int32_t r = 0; r < client::TreeSampledRequestCount(*load->sampled_); ++r) {
    absl::StatusOr<v1::VerifyRequest> request = client::BuildTreeSampledRequest(
        *load->sampled_, r, "", load->sampled_row_bytes(), ToProto(config.kv_return));
    if (!request.ok()) return request.status();
    load->requests_.push_back(*std::move(request));
  }
  return load;
}

bool TreeLoadWorkload::ReturnsKvHandle() const {
  return config_.kv_return == KvReturnMode::kHandle && config_.row_bytes > 0;
}

int64_t TreeLoadWorkload::sampled_row_bytes() const {
  return config_.kv_return == KvReturnMode::kNone ? 0 : config_.row_bytes;
}

AnswerCheck TreeLoadWorkload::Check(int64_t i, const v1::VerifyResponse& response,
                                    std::optional<std::span<const std::byte>> fetched_kv) const {
  const int32_t slot = static_cast<int32_t>(i % pool_slots());
  const int32_t per = config_.sequences_per_request;
  AnswerCheck check;
  check.verified = response.verified();
  check.sequences = response.results_size();
  for (const v1::SequenceResult& result : response.results()) {
    check.accepted_tokens += result.accepted_length();
  }
  const std::vector<int32_t>& offsets = greedy_ ? greedy_->node_offsets : sampled_->node_offsets;
  for (int32_t s = slot * per; s < std::min<int32_t>(slot * per + per, offsets.size() - 1); ++s) {
    check.draft_tokens += offsets[s + 1] - offsets[s];
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
  const v1::VerifyResponse& answer = returns_into_region() ? *region_answer : response;
  if (greedy_) {
    v1::VerifyResponse with_rows = answer;
    v1::KvReturn kv = ToProto(config_.kv_return);
    if (fetched_kv.has_value()) {
      with_rows.set_kv_inline(std::string(reinterpret_cast<const char*>(fetched_kv->data()),
                                          fetched_kv->size()));
      kv = v1::KV_RETURN_INLINE;
    }
    check.status = client::CheckTreeGreedyResponse(*greedy_, slot * per, per, kv, with_rows);
  } else if (fetched_kv.has_value()) {
    v1::VerifyResponse with_rows = answer;
    with_rows.set_kv_inline(std::string(reinterpret_cast<const char*>(fetched_kv->data()), fetched_kv->size()));
    check.status = client::CheckTreeSampledResponse(*sampled_, expected_, slot, with_rows, sampled_row_bytes());
  } else {
    check.status = client::CheckTreeSampledResponse(*sampled_, expected_, slot, answer, sampled_row_bytes());
  }
  if (!check.status.ok()) {
    check.status = absl::Status(check.status.code(),
                                absl::StrCat("request ", i, " (pool slot ", slot, "): ",
                                             check.status.message()));
  }
  return check;
}

absl::StatusOr<std::unique_ptr<LoadWorkload>> CreateLoadWorkload(const WorkloadConfig& config) {
  if (!config.tree.empty()) {
    absl::StatusOr<std::unique_ptr<TreeLoadWorkload>> w = TreeLoadWorkload::Create(config);
    if (!w.ok()) return w.status();
    return std::unique_ptr<LoadWorkload>(*std::move(w));
  }
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
