// The CPU backend: the greedy CPU reference (kernels/greedy/greedy_reference.h)
// and, for sampled batches, the rejection-sampling reference
// (kernels/sampling/rejection_reference.h), run on one backend thread, with the independent phases (verify, pack) of a
// large batch split into sequence ranges over a small fixed thread pool.
// The arena lives in host memory.
#ifndef SPECVERIFY_SERVER_BACKEND_CPU_BACKEND_H_
#define SPECVERIFY_SERVER_BACKEND_CPU_BACKEND_H_

#include <functional>
#include <memory>

#include "server/backend/backend.h"
#include "server/backend/batch_worker.h"
#include "server/backend/staging.h"
#include "server/backend/thread_pool.h"

namespace specverify::server {

struct CpuBackendOptions {
  // Threads that share one batch (>= 1; the backend thread is one of them).
  int threads = 4;
  // Below this much work (draft rows + packed KV bytes / 64) a batch runs on
  // one thread: handing ranges to the pool costs a few microseconds.
  int64_t min_parallel_work = 1 << 14;
  // Submitted-not-completed batches the batcher may keep (>= 1).
  int max_batches_in_flight = 2;
};

class CpuBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(
      const CpuBackendOptions& options);
  ~CpuBackend() override;

  BackendDescription Describe() const override;
  absl::StatusOr<std::unique_ptr<ArenaMemory>> AllocateArenaMemory(
      int64_t bytes) override;
  int max_batches_in_flight() const override { return options_.max_batches_in_flight; }
  absl::StatusOr<std::unique_ptr<StagingLease>> AcquireStaging(const StagingShape& shape,
                                                                Batch* batch) override {
    return staging_.Acquire(shape, batch);
  }
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) override;
  absl::Status health() const override { return absl::OkStatus(); }
  void Shutdown() override;

 private:
  explicit CpuBackend(const CpuBackendOptions& options);
  absl::Status Execute(Batch& batch);
  // Rejection sampling (kernels/sampling/rejection_reference.h), then the
  // greedy pack phases on the sampled accepted lengths.
  absl::Status ExecuteSampled(Batch& batch);
  // Token trees (docs/TREES.md), greedy or sampled, on the tree references.
  absl::Status ExecuteTree(Batch& batch);
  // Runs fn over [0, num_sequences) split into one range per pool thread
  // (plus the caller), or as one range when `work` is under
  // min_parallel_work: handing ranges to the pool costs microseconds.
  void ForEachSequenceRange(int64_t work, int32_t num_sequences,
                            const std::function<void(int32_t begin, int32_t end)>& fn);
  // Packs a chain batch once its accepted lengths are in batch.results: the
  // packed offsets, then each accepted row copied once, in parallel ranges,
  // from its region or staging to where it is answered
  // (accepted_row_copies.h).
  void PackAcceptedRows(Batch& batch, const GreedyVerifyParams& params, int64_t work);

  const CpuBackendOptions options_;
  HostStagingPool staging_{options_.max_batches_in_flight};
  ThreadPool pool_;
  BatchWorker worker_;  // declared last: its thread uses pool_
};

// The CPU model from /proc/cpuinfo, or "cpu".
std::string CpuModelName();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CPU_BACKEND_H_
