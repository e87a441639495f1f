// The dynamic batcher (DESIGN.md "Batcher"; Triton's dynamic batch scheduler
// shape without its data races).
//
// Requests queue per batch key (mode, KV dtype, row_bytes, vocab). A key's
// queue is ready to flush when it holds max_batch_sequences sequences, or
// max_batch_bytes payload bytes, or its oldest request has waited
// max_queue_delay; while draining every non-empty queue is ready. A batch
// takes whole requests from the head of one queue (a request is never split)
// up to the sequence and byte limits; a request larger than max_batch_bytes
// on its own forms a batch alone.
//
// Before dispatch, queued requests whose deadline passed are answered
// DEADLINE_EXCEEDED and cancelled ones CANCELLED: neither is executed. The
// arena range for the batch's packed rows (its upper bound) is reserved
// before dispatch; if the arena cannot hold it the batch's requests answer
// RESOURCE_EXHAUSTED and nothing is overwritten. At most the backend's
// max_batches_in_flight() batches are submitted at a time; meanwhile queues
// keep filling (bigger batches under load).
//
// One thread runs the loop: RunOnce(), then wait on a condition variable
// until an enqueue, a completion, or the next timer (the oldest request's
// delay budget or the earliest deadline). Enqueue notifies outside the lock.
// Tests construct the batcher without its thread and drive RunOnce() with a
// FakeClock: no sleeps.
//
// Thread safety: Enqueue, StartDrain, WaitIdle and the accessors may be
// called from any thread. Completion callbacks (PendingRequest::done) never
// run under the batcher's lock.
#ifndef SPECVERIFY_SERVER_BATCHER_BATCHER_H_
#define SPECVERIFY_SERVER_BATCHER_BATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/arena/kv_arena.h"
#include "server/backend/backend.h"
#include "server/batcher/pending_request.h"
#include "server/common/clock.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {

struct BatcherOptions {
  int32_t max_batch_sequences = 256;        // [1, kMaxBatchSequences]
  int64_t max_batch_bytes = int64_t{64} << 20;
  absl::Duration max_queue_delay = absl::Microseconds(200);
  int32_t max_queue_sequences = 16384;      // >= max_batch_sequences

  Backend* backend = nullptr;       // required
  KvArena* arena = nullptr;         // required
  ServerMetrics* metrics = nullptr; // required
  Clock* clock = nullptr;           // RealClock when null
  // False in unit tests: they call RunOnce() themselves.
  bool start_thread = true;
  // Called once (on a backend thread) when the backend reports a sticky
  // failure; the server stops serving.
  std::function<void(const absl::Status&)> on_backend_failure;
};

class Batcher {
 public:
  static absl::StatusOr<std::unique_ptr<Batcher>> Create(const BatcherOptions& options);
  ~Batcher();  // Stop()

  // Queues a validated request. On error (RESOURCE_EXHAUSTED: queue full;
  // UNAVAILABLE: draining or stopped) the request is not queued and its
  // `done` is not called: the caller answers.
  absl::Status Enqueue(std::unique_ptr<PendingRequest> request);

  // One pass of the loop: answers expired and cancelled requests, dispatches
  // every ready batch the in-flight limit allows. Returns when the next timer
  // fires (InfiniteFuture when nothing waits on time).
  absl::Time RunOnce();

  // Makes the loop run now (e.g. a queued request's client cancelled).
  void Poke() { Wake(); }

  // Stops accepting requests and flushes queued ones without waiting for
  // their delay budget.
  void StartDrain();
  // Waits (real time) until nothing is queued or in flight, or `deadline`.
  // True when idle.
  bool WaitIdle(absl::Time deadline);
  // Stops the thread, answers still-queued requests UNAVAILABLE and waits for
  // in-flight batches to complete. Idempotent.
  void Stop();

  int64_t queued_sequences();
  int in_flight_batches();

 private:
  struct Queue {
    std::deque<std::unique_ptr<PendingRequest>> requests;
    int64_t sequences = 0;
    int64_t bytes = 0;
  };
  struct Rejection {
    std::unique_ptr<PendingRequest> request;
    absl::Status status;
    RejectReason reason;
  };
  struct FormedBatch {
    BatchKey key;
    std::vector<std::unique_ptr<PendingRequest>> requests;
  };
  struct InFlight;

  explicit Batcher(const BatcherOptions& options);
  void Loop();
  bool ReadyLocked(const Queue& q, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(FormedBatch formed, absl::Time now);
  void Complete(std::shared_ptr<InFlight> flight, std::unique_ptr<Batch> batch,
                absl::Status status);
  void FinishBatchLocked(int32_t sequences) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reject(std::vector<Rejection>& rejections);
  void Wake();

  const BatcherOptions options_;
  Clock* const clock_;
  ServerMetrics* const metrics_;
  const bool backend_packs_;
  const int max_in_flight_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  absl::flat_hash_map<BatchKey, Queue> queues_ ABSL_GUARDED_BY(mu_);
  int64_t queued_sequences_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_sequences_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_batch_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  // The timer the loop waits for; InfiniteFuture while it runs (or has no
  // thread), so that any request's timer counts as earlier and wakes it.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool backend_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// ExecutionPathLabel (metrics) to the wire enum.
v1::ExecutionPath ToWirePath(ExecutionPathLabel path);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BATCHER_BATCHER_H_
