// The workload seen by the load generator: "build request i" and "check
// response i", for greedy drafts and for sampled ones (rejection sampling,
// checked against the CPU reference keyed by the request seed).
//
// Thread safety: after construction every method is const and may be called
// from any number of threads at once.
#ifndef SPECVERIFY_CLIENT_LOADGEN_LOAD_WORKLOAD_H_
#define SPECVERIFY_CLIENT_LOADGEN_LOAD_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/loadgen/config.h"
#include "client/sampled_requests.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::loadgen {

// What one answer contributed, once checked.
struct AnswerCheck {
  // False for answers the server marked verified=false (the no-op backend):
  // their content is not verification output and is not checked.
  bool verified = true;
  // OK, or the first difference from the oracle (a wrong answer).
  absl::Status status;
  int64_t sequences = 0;
  int64_t draft_tokens = 0;     // sum of gamma
  int64_t accepted_tokens = 0;  // sum of k as the server reported it
};

class RegionTransport;

class LoadWorkload {
 public:
  virtual ~LoadWorkload() = default;

  // Requests are drawn from a fixed pool; request number i is the message
  // i % pool_size(), which asks what pool slot i % pool_slots() asks (the
  // messages outnumber the slots when a region holds several copies of the
  // slots' tensors). The returned message lives as long as the workload.
  int64_t pool_size() const { return static_cast<int64_t>(requests_.size()); }
  int64_t pool_slots() const { return pool_slots_ > 0 ? pool_slots_ : pool_size(); }
  const v1::VerifyRequest& Request(int64_t i) const {
    return requests_[static_cast<size_t>(i % pool_size())];
  }

  // --transport=shm|cuda: bytes a region needs to hold every pool request's
  // tensors (and, with `return_into_region`, their output rows) once.
  int64_t RegionBytesNeeded(bool return_into_region) const;
  // Moves every pool request's tensors into `region` (which must outlive the
  // workload's checks); with `return_into_region` each request gets its own
  // output rows there and answers are checked from them. A region of
  // several copies (--region_copies) adds one message per slot and copy,
  // reading (and writing) that copy: request i uses copy
  // (i / pool_slots()) % copies.
  absl::Status UseRegion(RegionTransport* region, bool return_into_region);

  // Checks the answer to request number i. `fetched_kv`, when given, are the
  // bytes read back through FetchKv for the answer's handle.
  virtual AnswerCheck Check(int64_t i, const v1::VerifyResponse& response,
                            std::optional<std::span<const std::byte>> fetched_kv) const = 0;

  // Whether answers to request i carry a KV handle worth fetching/releasing.
  virtual bool ReturnsKvHandle() const = 0;

 protected:
  // A KV_RETURN_REGION answer as the INLINE answer it stands for: its packed
  // rows read from the region into kv_inline, so one oracle checks both.
  absl::StatusOr<v1::VerifyResponse> RegionRowsInline(int64_t i,
                                                      const v1::VerifyResponse& response) const;
  bool returns_into_region() const { return region_ != nullptr && return_into_region_; }

  std::vector<v1::VerifyRequest> requests_;

 private:
  RegionTransport* region_ = nullptr;
  bool return_into_region_ = false;
  int64_t pool_slots_ = 0;  // 0: one message per slot
};

// Greedy verification drafts from GenerateGreedyWorkload, checked with the
// workload's own oracle (client/greedy_requests.h).
class GreedyLoadWorkload final : public LoadWorkload {
 public:
  static absl::StatusOr<std::unique_ptr<GreedyLoadWorkload>> Create(const WorkloadConfig& config);

  AnswerCheck Check(int64_t i, const v1::VerifyResponse& response,
                    std::optional<std::span<const std::byte>> fetched_kv) const override;
  bool ReturnsKvHandle() const override;

  const GreedyWorkload& workload() const { return workload_; }

 private:
  GreedyLoadWorkload(WorkloadConfig config, GreedyWorkload workload)
      : config_(std::move(config)), workload_(std::move(workload)) {}

  WorkloadConfig config_;
  GreedyWorkload workload_;
};

// Sampled verification drafts from GenerateSamplingWorkload (--mode=sampled),
// each answer checked against the CPU reference recomputed for the fixed
// seeds (client/sampled_requests.h); KV rows are synthetic bytes per
// (sequence, position) when --row_bytes > 0.
class SampledLoadWorkload final : public LoadWorkload {
 public:
  static absl::StatusOr<std::unique_ptr<SampledLoadWorkload>> Create(const WorkloadConfig& config);

  AnswerCheck Check(int64_t i, const v1::VerifyResponse& response,
                    std::optional<std::span<const std::byte>> fetched_kv) const override;
  bool ReturnsKvHandle() const override;

 private:
  SampledLoadWorkload(WorkloadConfig config, SamplingWorkload workload)
      : config_(std::move(config)), workload_(std::move(workload)) {}

  WorkloadConfig config_;
  SamplingWorkload workload_;
  client::SampledRequestSettings settings_;
  RejectionHostOutputs expected_{0, 0};
};

// Token-tree drafts (--tree; docs/TREES.md): greedy trees checked against
// the workload's own oracle, sampled trees against the CPU reference; both
// carry a KV row of --row_bytes per node, checked wherever it is returned.
class TreeLoadWorkload final : public LoadWorkload {
 public:
  static absl::StatusOr<std::unique_ptr<TreeLoadWorkload>> Create(const WorkloadConfig& config);
  AnswerCheck Check(int64_t i, const v1::VerifyResponse& response,
                    std::optional<std::span<const std::byte>> fetched_kv) const override;
  bool ReturnsKvHandle() const override;

 private:
  explicit TreeLoadWorkload(WorkloadConfig config) : config_(std::move(config)) {}
  // KV bytes per node of sampled trees: --row_bytes, 0 with --kv_return=none.
  int64_t sampled_row_bytes() const;
  WorkloadConfig config_;
  std::optional<TreeGreedyWorkload> greedy_;
  std::optional<TreeSampledWorkload> sampled_;
  TreeSampledExpected expected_;
};

// The workload --mode and --tree ask for.
absl::StatusOr<std::unique_ptr<LoadWorkload>> CreateLoadWorkload(const WorkloadConfig& config);

v1::KvReturn ToProto(KvReturnMode mode);

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_LOAD_WORKLOAD_H_
