#include "server/backend/batch_worker.h"

namespace specverify::server {

BatchWorker::BatchWorker(Execute execute)
    : execute_(std::move(execute)), thread_([this] { Loop(); }) {}

BatchWorker::~BatchWorker() { Shutdown(); }

void BatchWorker::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(Item{std::move(batch), std::move(done)});
      return;
    }
  }
  done(std::move(batch), absl::UnavailableError("the backend has shut down"));
}

void BatchWorker::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void BatchWorker::Loop() {
  for (;;) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status status = execute_(*item.batch);
    item.done(std::move(item.batch), std::move(status));
  }
}

}  // namespace specverify::server
