// The dynamic batcher (DESIGN.md "Batcher"): latency first, continuous
// batching under load.
//
// Requests queue per batch key (mode, KV dtype, row_bytes, vocab, sampling
// parameters). A backend slot that is free takes whatever is queued at once:
// an idle server adds no wait (Triton's dynamic batcher at its default delay
// of 0 behaves so). While every slot is busy, requests accumulate and form
// the next batch the moment a slot frees. Optionally, a batch below
// preferred_batch_sequences waits up to max_queue_delay for company (both 0
// by default: never wait). Across keys the queue whose oldest request is
// oldest goes first, so no key starves another. A batch takes whole requests
// of one key (a request is never split) up to max_batch_sequences and
// max_batch_bytes; a request larger than max_batch_bytes goes alone.
//
// Per-client fairness (issue #15). Within a key, requests queue per client
// (PendingRequest::client) and a batch takes them round-robin over those
// clients, one request per client per turn, oldest first within a client;
// the turn order carries over from batch to batch. A request therefore waits
// behind at most one request of each other client, however many a flooding
// client has queued. A client may have at most max_queued_sequences_per_client
// sequences queued (RESOURCE_EXHAUSTED naming that limit beyond), and the
// arena's per-client quota is charged with a request's row upper bound from
// enqueue until it finishes (kv_arena.h).
//
// Devices (issue #16): the batcher feeds every executor of a DeviceSet. Each
// device has its own in-flight slots (its backend's max_batches_in_flight);
// a formed batch goes to the device in service with the least work in flight
// (the bytes its batches read, ValidatedRequest::device_bytes; ties go round
// the devices), among those its key allows (a batch whose CUDA regions live
// on one GPU runs there). A device whose backend reports a sticky fault is
// taken out of service: its running batches are answered INTERNAL, later
// batches go to the others, and requests only it could run are answered
// FAILED_PRECONDITION. The server stops (on_backend_failure) when no device
// is left, or at the first fault with stop_on_device_failure.
//
// Where dispatch runs: on the thread that enqueued the request when a slot is
// free (no hand-off to another thread on the idle path), else on the
// batcher's thread when a completion frees a slot or a timer fires. Dispatch
// acquires the backend's staging for the batch and copies every request's
// payload into it once (batch_builder.h), reserves the arena range for the
// packed rows (its upper bound; RESOURCE_EXHAUSTED and nothing overwritten
// when it does not fit), and submits. At most the backend's
// max_batches_in_flight() batches are submitted at a time.
//
// Before dispatch, queued requests whose deadline passed are answered
// DEADLINE_EXCEEDED and cancelled ones CANCELLED: neither is executed.
//
// The completion answers each request; inline KV rows are copied once from
// host-readable packed rows (the backend's, or the host arena) into the
// response. The batch (and with it the backend's staging) is released before
// its in-flight slot is given back, so the next dispatch always finds staging.
//
// Tests construct the batcher without its thread and with dispatch on enqueue
// off, and drive RunOnce() with a FakeClock: no sleeps.
//
// Thread safety: Enqueue, StartDrain, WaitIdle and the accessors may be
// called from any thread. Completion callbacks (PendingRequest::done) never
// run under the batcher's lock.
#ifndef SPECVERIFY_SERVER_BATCHER_BATCHER_H_
#define SPECVERIFY_SERVER_BATCHER_BATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
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
#include "server/devices/device_set.h"
#include "server/metrics/server_metrics.h"

namespace specverify::server {

struct BatcherOptions {
  int32_t max_batch_sequences = 256;        // [1, kMaxBatchSequences]
  int64_t max_batch_bytes = int64_t{64} << 20;
  // A batch below preferred_batch_sequences waits up to max_queue_delay for
  // more sequences; 0 = never wait.
  int32_t preferred_batch_sequences = 0;    // [0, max_batch_sequences]
  absl::Duration max_queue_delay = absl::ZeroDuration();
  int32_t max_queue_sequences = 16384;      // >= max_batch_sequences
  // Sequences one client may have queued; 0 = no limit but the global one.
  int32_t max_queued_sequences_per_client = 0;

  // The executors: `devices`, or else the one device {backend, arena}.
  DeviceSet* devices = nullptr;
  Backend* backend = nullptr;
  KvArena* arena = nullptr;
  ServerMetrics* metrics = nullptr; // required
  Clock* clock = nullptr;           // RealClock when null
  // False in unit tests: they call RunOnce() themselves.
  bool start_thread = true;
  // Enqueue dispatches on the caller's thread when a slot is free. False in
  // unit tests that stage queues before calling RunOnce().
  bool dispatch_on_enqueue = true;
  // Called once (on a backend thread) when the last device in service (or,
  // with stop_on_device_failure, any device) reports a sticky failure; the
  // server stops serving.
  std::function<void(const absl::Status&)> on_backend_failure;
  // Called once per device taken out of service while others go on.
  std::function<void(int device, const absl::Status&)> on_device_failure;
  bool stop_on_device_failure = false;
};

class Batcher {
 public:
  static absl::StatusOr<std::unique_ptr<Batcher>> Create(const BatcherOptions& options);
  ~Batcher();  // Stop()

  // Queues a validated request. On error (RESOURCE_EXHAUSTED: queue full,
  // the client's queued-sequence limit or arena quota; UNAVAILABLE: draining
  // or stopped) the request is not queued and its `done` is not called: the
  // caller answers. `reason`, when given, receives why on error.
  absl::Status Enqueue(std::unique_ptr<PendingRequest> request,
                       RejectReason* reason = nullptr);

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
  const DeviceSet& devices() const { return *devices_; }
  // Sequences `client` has queued now.
  int64_t queued_sequences(const std::string& client);
  int in_flight_batches();
  int in_flight_batches(int device);

 private:
  // One client's requests under one batch key, oldest first.
  struct ClientRequests {
    std::string client;
    std::deque<std::unique_ptr<PendingRequest>> requests;
  };
  struct Queue {
    // The clients with requests under this key, in the order the next batch
    // visits them; a client that gave a request moves to the back.
    std::list<ClientRequests> clients;
    // Each client's entry in `clients` (list iterators survive splice).
    absl::flat_hash_map<std::string, std::list<ClientRequests>::iterator> by_client;
    int64_t sequences = 0;
    int64_t bytes = 0;
    bool empty() const { return clients.empty(); }
  };
  struct Rejection {
    std::unique_ptr<PendingRequest> request;
    absl::Status status;
    RejectReason reason;
  };
  struct FormedBatch {
    BatchKey key;
    int device = 0;
    int64_t work_bytes = 0;  // sum of device_bytes
    std::vector<std::unique_ptr<PendingRequest>> requests;
  };
  // One device's batches in flight.
  struct DeviceLoad {
    int max_batches = 1;
    int batches = 0;
    int64_t work_bytes = 0;
  };
  struct InFlight;

  explicit Batcher(const BatcherOptions& options);
  void Loop();
  bool ReadyLocked(const Queue& q, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Arrival of the oldest request queued under `q` (not empty).
  static absl::Time OldestArrival(const Queue& q);
  // Bookkeeping of a request leaving `q` (dispatched or answered).
  void DequeuedLocked(Queue& q, const PendingRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the arena charge of a request that is finishing, less the bytes
  // a handle published for it took over.
  void ReleaseArenaCharge(PendingRequest& r, int64_t kept_by_handle = 0);
  // Forms every batch that may go now (under mu_); RunOnce's step 2.
  void FormBatchesLocked(absl::Time now, std::vector<FormedBatch>* batches)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(FormedBatch formed, absl::Time now);
  // Answers a formed batch's requests with `status` (nothing was submitted).
  void FailFormed(FormedBatch& formed, const absl::Status& status, RejectReason reason);
  void Complete(std::shared_ptr<InFlight> flight, std::unique_ptr<Batch> batch,
                absl::Status status);
  // Batches in flight on every device (the sum of loads_' counts).
  int InFlightLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishBatchLocked(int device, int32_t sequences, int64_t work_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The device in service with a free slot and the least work in flight
  // that may run a batch pinned to `cuda_ordinal`; -1 when none.
  int PickDeviceLocked(int32_t cuda_ordinal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A batch failed on `device`: takes the device out when its backend
  // reports a sticky fault; returns the status the requests get.
  absl::Status OnBatchFailed(int device, const absl::Status& status);
  void Reject(std::vector<Rejection>& rejections);
  void Wake();

  const BatcherOptions options_;
  // {backend, arena} as a one-device set when no DeviceSet was given.
  const std::unique_ptr<DeviceSet> own_devices_;
  DeviceSet* const devices_;
  // The per-client quota every device's arena shares (kv_arena.h).
  ClientQuota& quota_;
  Clock* const clock_;
  ServerMetrics* const metrics_;
  const bool backend_packs_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  absl::flat_hash_map<BatchKey, Queue> queues_ ABSL_GUARDED_BY(mu_);
  int64_t queued_sequences_ ABSL_GUARDED_BY(mu_) = 0;
  // Queued sequences per client, across keys; a client leaves the table when
  // it has none queued, so its size is bounded by the queue, not by how many
  // clients ever connected.
  absl::flat_hash_map<std::string, int64_t> client_queued_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceLoad> loads_ ABSL_GUARDED_BY(mu_);
  int next_device_ ABSL_GUARDED_BY(mu_) = 0;  // where a tie starts
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
