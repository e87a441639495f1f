// The no-op backend (--device=noop): the transport ceiling the service is
// measured against. Requests go through the same RPC layer, parsing,
// validation, batching and response assembly; the batch is "executed" by
// reporting accepted_length = gamma and next_token = the last target token
// for every sequence, and all gamma draft rows "packed" (copied into the
// arena as they lie), so handles, FetchKv and inline answers move as many
// bytes as a real server's largest answer. Answers carry verified = false
// and path EXECUTION_PATH_NOOP.
#ifndef SPECVERIFY_SERVER_BACKEND_NOOP_BACKEND_H_
#define SPECVERIFY_SERVER_BACKEND_NOOP_BACKEND_H_

#include <memory>

#include "server/backend/backend.h"
#include "server/backend/batch_worker.h"
#include "server/backend/staging.h"

namespace specverify::server {

class NoopBackend final : public Backend {
 public:
  NoopBackend();
  ~NoopBackend() override;

  BackendDescription Describe() const override;
  absl::StatusOr<std::unique_ptr<ArenaMemory>> AllocateArenaMemory(
      int64_t bytes) override;
  int max_batches_in_flight() const override { return kBatchesInFlight; }
  absl::StatusOr<std::unique_ptr<StagingLease>> AcquireStaging(const StagingShape& shape,
                                                                Batch* batch) override {
    return staging_.Acquire(shape, batch);
  }
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) override;
  absl::Status health() const override { return absl::OkStatus(); }
  void Shutdown() override;

 private:
  static absl::Status Execute(Batch& batch);
  static constexpr int kBatchesInFlight = 2;
  HostStagingPool staging_{kBatchesInFlight};
  BatchWorker worker_;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_NOOP_BACKEND_H_
