// One backend thread that runs submitted batches in order and calls their
// completions: what makes Backend::Submit asynchronous for the CPU and no-op
// backends (the CUDA executor has its own stream-driven equivalent).
//
// Thread safety: Post may be called from any thread.
#ifndef SPECVERIFY_SERVER_BACKEND_BATCH_WORKER_H_
#define SPECVERIFY_SERVER_BACKEND_BATCH_WORKER_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/backend/backend.h"

namespace specverify::server {

class BatchWorker {
 public:
  using Execute = std::function<absl::Status(Batch&)>;
  explicit BatchWorker(Execute execute);
  ~BatchWorker();  // runs what was posted, then joins

  void Submit(std::unique_ptr<Batch> batch, BatchDone done);
  // Runs every queued batch, then stops; later Submits fail UNAVAILABLE.
  void Shutdown();

 private:
  struct Item {
    std::unique_ptr<Batch> batch;
    BatchDone done;
  };
  void Loop();

  const Execute execute_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BATCH_WORKER_H_
