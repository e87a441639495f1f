// A Backend for tests: the real CPU backend behind switches to hold batches
// (pause/resume) and to fail stickily like a faulted device. Records every
// submitted batch's size so tests can assert how requests were merged.
#ifndef SPECVERIFY_TESTS_SERVER_TESTING_CONTROLLABLE_BACKEND_H_
#define SPECVERIFY_TESTS_SERVER_TESTING_CONTROLLABLE_BACKEND_H_

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/backend/backend.h"
#include "server/backend/cpu_backend.h"
#include "server/backend/noop_backend.h"

namespace specverify::server::testing {

class ControllableBackend final : public Backend {
 public:
  explicit ControllableBackend(bool noop = false) {
    if (noop) {
      inner_ = std::make_unique<NoopBackend>();
    } else {
      CpuBackendOptions options;
      options.threads = 2;
      inner_ = *CpuBackend::Create(options);
    }
  }
  ~ControllableBackend() override { Shutdown(); }

  BackendDescription Describe() const override { return inner_->Describe(); }
  absl::StatusOr<std::unique_ptr<ArenaMemory>> AllocateArenaMemory(int64_t bytes) override {
    return inner_->AllocateArenaMemory(bytes);
  }
  int max_batches_in_flight() const override { return inner_->max_batches_in_flight(); }
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) override {
    return inner_->MapRegion(spec);
  }
  absl::StatusOr<std::unique_ptr<StagingLease>> AcquireStaging(const StagingShape& shape,
                                                                Batch* batch) override {
    return inner_->AcquireStaging(shape, batch);
  }

  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override {
    {
      absl::MutexLock lock(&mu_);
      batch_sequences_.push_back(batch->inputs.num_sequences());
      batch_vocab_sizes_.push_back(batch->key.vocab_size);
      if (paused_) {
        held_.push_back({std::move(batch), std::move(done)});
        return;
      }
    }
    Forward(std::move(batch), std::move(done));
  }

  absl::Status health() const override {
    absl::MutexLock lock(&mu_);
    return failure_;
  }
  void Shutdown() override {
    Resume();
    inner_->Shutdown();
  }

  void Pause() {
    absl::MutexLock lock(&mu_);
    paused_ = true;
  }
  void Resume() {
    std::deque<Held> held;
    {
      absl::MutexLock lock(&mu_);
      paused_ = false;
      held.swap(held_);
    }
    for (Held& h : held) Forward(std::move(h.batch), std::move(h.done));
  }
  // Lets the most recently held batch run; the others stay held.
  void ReleaseNewest() {
    Held newest;
    {
      absl::MutexLock lock(&mu_);
      if (held_.empty()) return;
      newest = std::move(held_.back());
      held_.pop_back();
    }
    Forward(std::move(newest.batch), std::move(newest.done));
  }
  // Every batch completing from now on fails with `status` (sticky).
  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  // The next batch to complete fails with `status`, the batch's own error:
  // health stays OK (a backend refusing what its device cannot run).
  void RefuseNext(absl::Status status) {
    absl::MutexLock lock(&mu_);
    refusal_ = std::move(status);
  }
  std::vector<int32_t> batch_sequences() const {
    absl::MutexLock lock(&mu_);
    return batch_sequences_;
  }
  // Submission order of the batches' keys (their vocab_size).
  std::vector<int32_t> batch_vocab_sizes() const {
    absl::MutexLock lock(&mu_);
    return batch_vocab_sizes_;
  }
  int held_batches() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(held_.size());
  }

 private:
  struct Held {
    std::unique_ptr<Batch> batch;
    BatchDone done;
  };
  void Forward(std::unique_ptr<Batch> batch, BatchDone done) {
    inner_->Submit(std::move(batch),
                   [this, done = std::move(done)](std::unique_ptr<Batch> b, absl::Status s) {
                     absl::Status failure = health();
                     if (failure.ok()) {
                       absl::MutexLock lock(&mu_);
                       failure = std::exchange(refusal_, absl::OkStatus());
                     }
                     done(std::move(b), failure.ok() ? std::move(s) : failure);
                   });
  }

  std::unique_ptr<Backend> inner_;
  mutable absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> batch_sequences_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> batch_vocab_sizes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specverify::server::testing

#endif  // SPECVERIFY_TESTS_SERVER_TESTING_CONTROLLABLE_BACKEND_H_
