#include "server/backend/thread_pool.h"

#include "absl/synchronization/blocking_counter.h"

namespace specverify::server {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int num_tasks, const std::function<void(int)>& fn) {
  if (num_tasks <= 0) return;
  if (num_tasks == 1 || threads_.empty()) {
    for (int i = 0; i < num_tasks; ++i) fn(i);
    return;
  }
  absl::BlockingCounter remaining(num_tasks - 1);
  {
    absl::MutexLock lock(&mu_);
    for (int i = 1; i < num_tasks; ++i) {
      tasks_.push_back([&fn, &remaining, i] {
        fn(i);
        remaining.DecrementCount();
      });
    }
  }
  fn(0);
  remaining.Wait();
}

}  // namespace specverify::server
