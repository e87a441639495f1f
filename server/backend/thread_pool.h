// A small fixed pool for splitting one batch's sequence ranges across CPU
// cores. ParallelFor blocks its caller (a backend thread, never a gRPC
// thread) and runs one of the tasks itself.
//
// Thread safety: ParallelFor may be called from several threads at once.
#ifndef SPECVERIFY_SERVER_BACKEND_THREAD_POOL_H_
#define SPECVERIFY_SERVER_BACKEND_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace specverify::server {

class ThreadPool {
 public:
  // `num_threads` >= 0 helper threads (0: everything runs on the caller).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Runs fn(0) .. fn(num_tasks - 1) and returns when all have finished.
  void ParallelFor(int num_tasks, const std::function<void(int)>& fn);

 private:
  void WorkerLoop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_THREAD_POOL_H_
