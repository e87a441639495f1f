#include "server/batcher/batcher.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/batcher/batch_builder.h"
#include "server/common/echo.h"

namespace specverify::server {

v1::ExecutionPath ToWirePath(ExecutionPathLabel path) {
  switch (path) {
    case ExecutionPathLabel::kFused:
      return v1::EXECUTION_PATH_FUSED;
    case ExecutionPathLabel::kTwoStep:
      return v1::EXECUTION_PATH_TWO_STEP;
    case ExecutionPathLabel::kCpu:
      return v1::EXECUTION_PATH_CPU;
    case ExecutionPathLabel::kNoop:
      return v1::EXECUTION_PATH_NOOP;
    case ExecutionPathLabel::kSampling:
      return v1::EXECUTION_PATH_SAMPLING;
    case ExecutionPathLabel::kHostDecided:
      return v1::EXECUTION_PATH_HOST_DECIDED;
  }
  return v1::EXECUTION_PATH_UNSPECIFIED;
}

// A submitted batch's requests and its arena reservation, kept for the
// completion.
struct Batcher::InFlight {
  std::vector<std::unique_ptr<PendingRequest>> requests;
  int device = 0;
  int64_t work_bytes = 0;
  absl::Time dispatched;
  int64_t arena_offset = -1;  // -1: nothing reserved
  int64_t arena_bytes = 0;
  int32_t sequences = 0;
  int64_t input_bytes = 0;
  int64_t host_copy_in_bytes = 0;
  absl::Time submitted;  // handed to the backend (batcher clock)
};

absl::StatusOr<std::unique_ptr<Batcher>> Batcher::Create(const BatcherOptions& o) {
  if ((o.devices == nullptr && (o.backend == nullptr || o.arena == nullptr)) ||
      o.metrics == nullptr) {
    return absl::InvalidArgumentError(
        "BatcherOptions needs devices (or a backend and an arena) and metrics");
  }
  if (o.max_batch_sequences < 1 || o.max_batch_sequences > kMaxBatchSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_sequences is ", o.max_batch_sequences, "; must lie in [1, ",
        kMaxBatchSequences, "]"));
  }
  if (o.max_batch_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_bytes is ", o.max_batch_bytes, "; must be >= 1"));
  }
  if (o.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_queue_delay must be >= 0");
  }
  if (o.preferred_batch_sequences < 0 || o.preferred_batch_sequences > o.max_batch_sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preferred_batch_sequences is ", o.preferred_batch_sequences,
        "; must lie in [0, max_batch_sequences=", o.max_batch_sequences, "]"));
  }
  if (o.max_queue_sequences < o.max_batch_sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queue_sequences is ", o.max_queue_sequences,
        "; must be >= max_batch_sequences=", o.max_batch_sequences));
  }
  return std::unique_ptr<Batcher>(new Batcher(o));
}

namespace {

std::unique_ptr<DeviceSet> OneDeviceSet(const BatcherOptions& o) {
  if (o.devices != nullptr) return nullptr;
  return std::make_unique<DeviceSet>(
      std::vector<Device>{Device{o.backend->Describe().name, -1, o.backend, o.arena}});
}

}  // namespace

Batcher::Batcher(const BatcherOptions& options)
    : options_(options),
      own_devices_(OneDeviceSet(options)),
      devices_(options.devices != nullptr ? options.devices : own_devices_.get()),
      quota_(devices_->at(0).arena->quota()),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      metrics_(options.metrics),
      backend_packs_(devices_->at(0).backend->Describe().packs) {
  {
    absl::MutexLock lock(&mu_);
    loads_.resize(devices_->size());
    for (int d = 0; d < devices_->size(); ++d) {
      loads_[d].max_batches = std::max(1, devices_->at(d).backend->max_batches_in_flight());
    }
  }
  if (options_.start_thread) thread_ = std::thread([this] { Loop(); });
}

Batcher::~Batcher() { Stop(); }

void Batcher::Wake() {
  {
    absl::MutexLock lock(&mu_);
    wake_ = true;
  }
  cv_.Signal();  // outside the lock: the woken thread can take it at once
}

absl::Status Batcher::Enqueue(std::unique_ptr<PendingRequest> request, RejectReason* reason) {
  const int64_t n = request->shape.num_sequences;
  // The upper bound of the rows this request may keep in the arena, charged
  // to its client's quota until it finishes (nothing where the backend packs
  // no rows into the arena).
  const int64_t arena_bytes =
      backend_packs_ ? request->shape.total_draft_rows * request->shape.key.row_bytes : 0;
  const auto refuse = [reason](absl::Status status, RejectReason why) {
    if (reason != nullptr) *reason = why;
    return status;
  };
  int64_t queued;
  bool wake = false;
  std::vector<FormedBatch> batches;
  absl::Time now;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || draining_) {
      return refuse(absl::UnavailableError(
                        "the server is draining for shutdown and accepts no new requests"),
                    RejectReason::kShutdown);
    }
    if (backend_failed_) {
      return refuse(absl::UnavailableError("the backend failed; the server is stopping"),
                    RejectReason::kShutdown);
    }
    if (request->shape.key.cuda_ordinal >= 0) {
      if (absl::Status servable = devices_->CheckServable(request->shape.key.cuda_ordinal);
          !servable.ok()) {
        return refuse(std::move(servable), RejectReason::kShutdown);
      }
    }
    if (queued_sequences_ + n > options_.max_queue_sequences) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
                        "queue full: ", queued_sequences_, " sequences queued + ", n,
                        " would exceed max_queue_sequences=", options_.max_queue_sequences)),
                    RejectReason::kQueueFull);
    }
    const int32_t per_client = options_.max_queued_sequences_per_client;
    if (per_client > 0) {
      auto it = client_queued_.find(request->client);
      const int64_t client_queued = it == client_queued_.end() ? 0 : it->second;
      if (client_queued + n > per_client) {
        return refuse(absl::ResourceExhaustedError(absl::StrCat(
                          "client ", EchoForMessage(request->client), " has ", client_queued,
                          " sequences queued + ", n,
                          " would exceed max_queued_sequences_per_client=", per_client)),
                      RejectReason::kClientQueueLimit);
      }
    }
    // Lock order: mu_, then the quota's (it never calls back). One quota
    // serves every device's arena.
    if (absl::Status charged = quota_.Charge(request->client, arena_bytes);
        !charged.ok()) {
      return refuse(std::move(charged), RejectReason::kClientArenaQuota);
    }
    request->arena_charge = arena_bytes;
    client_queued_[request->client] += n;
    const int32_t request_key_ordinal = request->shape.key.cuda_ordinal;
    Queue& q = queues_[request->shape.key];
    q.sequences += n;
    q.bytes += request->shape.payload_bytes;
    const absl::Time request_deadline = request->deadline;
    const absl::Time delay_timer = request->arrival + options_.max_queue_delay;
    auto [entry, new_client] = q.by_client.try_emplace(request->client);
    if (new_client) {
      // Behind the clients already waiting: they have waited longer.
      entry->second = q.clients.insert(q.clients.end(), ClientRequests{request->client, {}});
    }
    entry->second->requests.push_back(std::move(request));
    queued_sequences_ += n;
    const bool slot_free = PickDeviceLocked(request_key_ordinal) >= 0;
    if (slot_free && options_.dispatch_on_enqueue) {
      // The idle path: this thread forms and dispatches, no hand-off. An
      // already-expired request is left to the loop, which answers it.
      now = clock_->Now();
      if (request_deadline > now) FormBatchesLocked(now, &batches);
    }
    // Wake the loop only when this request changes what it would do. Under
    // load (every slot busy) only an earlier deadline does: a completion
    // wakes it anyway.
    const absl::Time timer = options_.preferred_batch_sequences > 0
                                 ? std::min(delay_timer, request_deadline)
                                 : request_deadline;
    wake = timer < sleeping_until_;
    if (slot_free && batches.empty() && ReadyLocked(q, clock_->Now())) wake = true;
    if (wake) wake_ = true;
    queued = queued_sequences_;
  }
  if (wake) cv_.Signal();
  metrics_->SetQueuedSequences(queued);
  for (FormedBatch& formed : batches) Dispatch(std::move(formed), now);
  return absl::OkStatus();
}

absl::Time Batcher::OldestArrival(const Queue& q) {
  absl::Time oldest = absl::InfiniteFuture();
  for (const ClientRequests& c : q.clients) oldest = std::min(oldest, c.requests.front()->arrival);
  return oldest;
}

void Batcher::DequeuedLocked(Queue& q, const PendingRequest& r) {
  const int64_t n = r.shape.num_sequences;
  q.sequences -= n;
  q.bytes -= r.shape.payload_bytes;
  queued_sequences_ -= n;
  auto it = client_queued_.find(r.client);
  if (it != client_queued_.end() && (it->second -= n) <= 0) client_queued_.erase(it);
}

void Batcher::ReleaseArenaCharge(PendingRequest& r, int64_t kept_by_handle) {
  if (r.arena_charge > kept_by_handle) {
    quota_.Uncharge(r.client, r.arena_charge - kept_by_handle);
  }
  r.arena_charge = 0;
}

bool Batcher::ReadyLocked(const Queue& q, absl::Time now) const {
  if (q.empty()) return false;
  if (draining_ || stopping_) return true;
  const int32_t preferred = options_.preferred_batch_sequences;
  if (preferred <= 0 || q.sequences >= preferred || q.sequences >= options_.max_batch_sequences ||
      q.bytes >= options_.max_batch_bytes) {
    return true;
  }
  return now - OldestArrival(q) >= options_.max_queue_delay;
}

int Batcher::PickDeviceLocked(int32_t cuda_ordinal) {
  const int n = devices_->size();
  int best = -1;
  for (int k = 0; k < n; ++k) {
    const int d = (next_device_ + k) % n;
    const DeviceLoad& load = loads_[d];
    if (load.batches >= load.max_batches || !devices_->in_service(d) ||
        !devices_->Serves(d, cuda_ordinal)) {
      continue;
    }
    // Strictly less: a tie keeps the first in the round from next_device_.
    if (best < 0 || load.work_bytes < loads_[best].work_bytes ||
        (load.work_bytes == loads_[best].work_bytes && load.batches < loads_[best].batches)) {
      best = d;
    }
  }
  return best;
}

void Batcher::FormBatchesLocked(absl::Time now, std::vector<FormedBatch>* batches) {
  while (!backend_failed_) {
    Queue* best = nullptr;
    const BatchKey* best_key = nullptr;
    absl::Time best_oldest;
    int best_device = -1;
    for (auto& [key, q] : queues_) {
      if (!ReadyLocked(q, now)) continue;
      const absl::Time oldest = OldestArrival(q);
      if (best != nullptr && oldest >= best_oldest) continue;
      // A key whose devices are all busy waits; an older one may not.
      const int device = PickDeviceLocked(key.cuda_ordinal);
      if (device < 0) continue;
      best = &q;
      best_key = &key;
      best_oldest = oldest;
      best_device = device;
    }
    if (best == nullptr) break;
    FormedBatch formed;
    formed.key = *best_key;
    formed.device = best_device;
    int64_t sequences = 0;
    int64_t bytes = 0;
    // Round-robin over the key's clients, one request per client per turn.
    // The batch ends at the first request that does not fit; its client
    // stays in front, so that request opens the next batch.
    while (!best->clients.empty()) {
      auto client = best->clients.begin();
      const PendingRequest& r = *client->requests.front();
      const bool fits = sequences + r.shape.num_sequences <= options_.max_batch_sequences &&
                        bytes + r.shape.payload_bytes <= options_.max_batch_bytes;
      if (!fits && !formed.requests.empty()) break;
      sequences += r.shape.num_sequences;
      bytes += r.shape.payload_bytes;
      formed.work_bytes += r.shape.device_bytes;
      DequeuedLocked(*best, r);
      formed.requests.push_back(std::move(client->requests.front()));
      client->requests.pop_front();
      if (client->requests.empty()) {
        best->by_client.erase(client->client);
        best->clients.erase(client);
      } else {
        best->clients.splice(best->clients.end(), best->clients, client);
      }
    }
    in_flight_sequences_ += sequences;
    DeviceLoad& load = loads_[best_device];
    ++load.batches;
    load.work_bytes += formed.work_bytes;
    next_device_ = (best_device + 1) % devices_->size();
    metrics_->SetDeviceInFlightBatches(best_device, load.batches);
    batches->push_back(std::move(formed));
  }
  metrics_->SetInFlightSequences(in_flight_sequences_);
}

absl::Time Batcher::RunOnce() {
  const absl::Time now = clock_->Now();
  std::vector<Rejection> rejections;
  std::vector<FormedBatch> batches;
  absl::Time next_event = absl::InfiniteFuture();
  int64_t queued;
  {
    absl::MutexLock lock(&mu_);
    // 1. Answer, never execute, what expired or was cancelled while queued.
    for (auto& [key, q] : queues_) {
      for (auto client = q.clients.begin(); client != q.clients.end();) {
        std::deque<std::unique_ptr<PendingRequest>>& requests = client->requests;
        for (auto it = requests.begin(); it != requests.end();) {
          PendingRequest& r = **it;
          absl::Status status;
          RejectReason reason = RejectReason::kDeadline;
          if (r.deadline <= now) {
            status = absl::DeadlineExceededError(absl::StrCat(
                "the deadline passed after ", absl::FormatDuration(now - r.arrival),
                " in the queue; the request was not executed"));
          } else if (absl::Status servable = key.cuda_ordinal >= 0
                                                 ? devices_->CheckServable(key.cuda_ordinal)
                                                 : absl::OkStatus();
                     !servable.ok()) {
            status = std::move(servable);
            reason = RejectReason::kShutdown;
          } else if (r.is_cancelled && r.is_cancelled()) {
            status = absl::CancelledError(
                "the client cancelled the request while it was queued");
            reason = RejectReason::kCancelled;
          } else {
            ++it;
            continue;
          }
          DequeuedLocked(q, r);
          rejections.push_back({std::move(*it), std::move(status), reason});
          it = requests.erase(it);
        }
        if (requests.empty()) {
          q.by_client.erase(client->client);
          client = q.clients.erase(client);
        } else {
          ++client;
        }
      }
    }
    // 2. Form ready batches, oldest head first, while the backend has room.
    FormBatchesLocked(now, &batches);
    // 3. Drop empty queues; find the next timer.
    for (auto it = queues_.begin(); it != queues_.end();) {
      const Queue& q = it->second;
      if (q.empty()) {
        queues_.erase(it++);
        continue;
      }
      // A queue still ready here waits for an in-flight slot: a completion
      // wakes the loop, so its (past) delay timer must not make it spin.
      if (!ReadyLocked(q, now)) {
        next_event = std::min(next_event, OldestArrival(q) + options_.max_queue_delay);
      }
      for (const ClientRequests& c : q.clients) {
        for (const auto& r : c.requests) next_event = std::min(next_event, r->deadline);
      }
      ++it;
    }
    queued = queued_sequences_;
  }
  metrics_->SetQueuedSequences(queued);
  Reject(rejections);
  for (FormedBatch& formed : batches) Dispatch(std::move(formed), now);
  return next_event;
}

void Batcher::Reject(std::vector<Rejection>& rejections) {
  for (Rejection& r : rejections) {
    metrics_->OnRequestRejected(r.reason);
    ReleaseArenaCharge(*r.request);
    r.request->done(std::move(r.status));
  }
  rejections.clear();
}

void Batcher::Dispatch(FormedBatch formed, absl::Time now) {
  auto flight = std::make_shared<InFlight>();
  flight->dispatched = now;
  flight->device = formed.device;
  flight->work_bytes = formed.work_bytes;
  const Device& device = devices_->at(formed.device);
  auto batch = std::make_unique<Batch>();
  batch->key = formed.key;
  {
    absl::MutexLock lock(&mu_);
    batch->id = next_batch_id_++;
  }
  const StagingShape shape = StagingShapeOf(formed.requests, formed.key);
  absl::StatusOr<std::unique_ptr<StagingLease>> staging =
      device.backend->AcquireStaging(shape, batch.get());
  if (!staging.ok()) {
    batch.reset();
    FailFormed(formed, staging.status(), RejectReason::kBatchTooLarge);
    return;
  }
  batch->staging = *std::move(staging);
  BuildBatchInputs(formed.requests, formed.key, batch.get());
  flight->sequences = shape.sequences;
  for (const auto& r : formed.requests) {
    flight->input_bytes += r->shape.payload_bytes;
    flight->host_copy_in_bytes += r->host_copy_in_bytes;
    batch->wants_host_rows |= r->shape.kv_return == v1::KV_RETURN_INLINE;
    batch->wants_handle_rows |= r->shape.kv_return == v1::KV_RETURN_HANDLE;
    metrics_->OnQueueDelay(now - r->arrival);
  }

  const int64_t capacity = shape.kv_bytes;
  if (backend_packs_ && capacity > 0) {
    absl::StatusOr<int64_t> offset = device.arena->Reserve(capacity);
    if (!offset.ok()) {
      batch.reset();
      FailFormed(formed,
                 absl::ResourceExhaustedError(absl::StrCat(
                     offset.status().message(), " (batch of ", flight->sequences,
                     " sequences needs its upper bound of ", capacity, " bytes)")),
                 RejectReason::kArenaFull);
      return;
    }
    flight->arena_offset = *offset;
    flight->arena_bytes = capacity;
    batch->packed_kv = device.arena->memory().base() + *offset;
  }
  flight->requests = std::move(formed.requests);
  // Stamped before Submit: a backend may complete the batch before Submit
  // returns.
  flight->submitted = clock_->Now();
  device.backend->Submit(
      std::move(batch), [this, flight](std::unique_ptr<Batch> done_batch,
                                       absl::Status status) {
        Complete(flight, std::move(done_batch), std::move(status));
      });
}

void Batcher::FailFormed(FormedBatch& formed, const absl::Status& status,
                         RejectReason reason) {
  int32_t sequences = 0;
  for (const auto& r : formed.requests) sequences += r->shape.num_sequences;
  {
    absl::MutexLock lock(&mu_);
    FinishBatchLocked(formed.device, sequences, formed.work_bytes);
  }
  cv_.Signal();
  for (auto& r : formed.requests) {
    metrics_->OnRequestRejected(reason);
    ReleaseArenaCharge(*r);
    r->done(status);
  }
}

int Batcher::InFlightLocked() const {
  int batches = 0;
  for (const DeviceLoad& load : loads_) batches += load.batches;
  return batches;
}

void Batcher::FinishBatchLocked(int device, int32_t sequences, int64_t work_bytes) {
  in_flight_sequences_ -= sequences;
  DeviceLoad& load = loads_[device];
  --load.batches;
  load.work_bytes -= work_bytes;
  wake_ = true;
  metrics_->SetInFlightSequences(in_flight_sequences_);
  metrics_->SetDeviceInFlightBatches(device, load.batches);
}

absl::Status Batcher::OnBatchFailed(int device, const absl::Status& status) {
  const absl::Status health = devices_->at(device).backend->health();
  const bool fatal = !health.ok();
  // With several devices the answer names the one that failed.
  const std::string which =
      devices_->size() > 1 ? absl::StrCat("device ", devices_->at(device).name, ": ") : "";
  // A healthy device's FAILED_PRECONDITION is the batch's own (a sampled
  // token tree on a GPU without the clusters its kernel needs): the client
  // learns the code it can act on, not INTERNAL.
  const absl::Status answer =
      status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kResourceExhausted
          ? status
      : status.code() == absl::StatusCode::kFailedPrecondition && !fatal
          ? absl::FailedPreconditionError(absl::StrCat(which, status.message()))
          : absl::InternalError(
                absl::StrCat(which, "the backend failed the batch: ", status.message()));
  if (!fatal || !devices_->TakeOutOfService(device, health)) return answer;
  // First report of this device's fault: count it, then decide whether the
  // server goes on. Reported before the requests are answered, so health
  // says NOT_SERVING (or the device is listed out) by the time a client
  // sees INTERNAL.
  metrics_->OnDeviceError(device);
  metrics_->SetDeviceInService(device, false);
  const bool stop = options_.stop_on_device_failure || devices_->in_service_count() == 0;
  bool first_stop = false;
  {
    absl::MutexLock lock(&mu_);
    if (stop && !backend_failed_) {
      backend_failed_ = true;
      first_stop = true;
    }
    wake_ = true;  // requests pinned to this device are answered by the loop
  }
  cv_.Signal();
  if (first_stop) {
    if (options_.on_backend_failure) options_.on_backend_failure(devices_->status(device));
  } else if (!stop && options_.on_device_failure) {
    options_.on_device_failure(device, devices_->status(device));
  }
  return answer;
}

void Batcher::Complete(std::shared_ptr<InFlight> flight, std::unique_ptr<Batch> batch,
                       absl::Status status) {
  const absl::Time completed = clock_->Now();
  KvArena& arena = *devices_->at(flight->device).arena;
  if (!status.ok()) {
    if (flight->arena_offset >= 0) arena.Free(flight->arena_offset, flight->arena_bytes);
    batch.reset();  // the backend's staging goes back before the slot does
    const absl::Status answer = OnBatchFailed(flight->device, status);
    {
      absl::MutexLock lock(&mu_);
      FinishBatchLocked(flight->device, flight->sequences, flight->work_bytes);
    }
    cv_.Signal();
    for (auto& r : flight->requests) {
      ReleaseArenaCharge(*r);
      r->done(answer);
    }
    return;
  }

  const GreedyHostResults& res = batch->results;
  const int64_t rb = batch->key.row_bytes;
  const bool keeps_rows = backend_packs_ && rb > 0;
  const int32_t batch_requests = static_cast<int32_t>(flight->requests.size());
  std::vector<std::pair<int64_t, int64_t>> kept;  // arena ranges now owned by handles
  std::vector<std::pair<PendingRequest*, absl::Status>> answers;
  answers.reserve(flight->requests.size());
  int64_t host_copy_out_bytes = 0;

  int32_t s0 = 0;
  for (auto& r : flight->requests) {
    const int32_t n = r->shape.num_sequences;
    v1::VerifyResponse* resp = r->response;
    resp->set_request_id(r->request->request_id());
    const int32_t base_row = res.packed_row_offsets[s0];
    for (int32_t i = 0; i < n; ++i) {
      const int32_t s = s0 + i;
      v1::SequenceResult* out = resp->add_results();
      out->set_accepted_length(res.accepted_lengths[s]);
      out->set_next_token(res.next_tokens[s]);
      out->set_mismatch(res.mismatch[s] != 0);
      out->set_kv_row_offset(res.packed_row_offsets[s] - base_row);
      out->set_kv_row_count(res.accepted_lengths[s]);
      // The accepted path: a tree batch's CSR, else a chain's 0 .. k-1.
      const int32_t k = res.accepted_lengths[s];
      auto* path = out->mutable_accepted_nodes();
      path->Resize(k, 0);
      const size_t at = static_cast<size_t>(res.packed_row_offsets[s]);
      const bool from_tree = batch->key.tree && at + k <= res.accepted_nodes.size();
      for (int32_t d = 0; d < k; ++d) path->Set(d, from_tree ? res.accepted_nodes[at + d] : d);
    }
    const int64_t rows = res.packed_row_offsets[s0 + n] - base_row;
    v1::ServerTiming* timing = resp->mutable_timing();
    timing->set_queue_ns(absl::ToInt64Nanoseconds(flight->dispatched - r->arrival));
    timing->set_batch_sequences(flight->sequences);
    timing->set_batch_requests(batch_requests);
    timing->set_path(ToWirePath(batch->path));
    timing->set_device(flight->device);
    timing->set_device_ns(absl::ToInt64Nanoseconds(batch->device_time));
    timing->set_host_copy_in_bytes(r->host_copy_in_bytes);
    timing->set_submit_ns(absl::ToInt64Nanoseconds(flight->submitted - r->arrival));
    timing->set_complete_ns(absl::ToInt64Nanoseconds(completed - r->arrival));
    resp->set_verified(batch->verified);
    resp->set_exact(batch->exact);

    // A sampled request whose values the verifier refused is answered
    // INVALID_ARGUMENT (its rows are freed with the reservation's tail).
    absl::Status answer = RequestOutcomeStatus(*batch, s0, n);
    int64_t kept_by_handle = 0;  // of the request's arena charge
    if (answer.ok() && keeps_rows) {
      const int64_t offset = flight->arena_offset + int64_t{base_row} * rb;
      const int64_t bytes = rows * rb;
      if (r->shape.kv_return == v1::KV_RETURN_HANDLE) {
        absl::StatusOr<PublishedHandle> handle = arena.Publish(
            offset, bytes, rb, rows, batch->key.kv_dtype, r->owner, r->client);
        if (handle.ok()) {
          kept.emplace_back(offset, bytes);
          kept_by_handle = bytes;
          v1::KvHandle* kv = resp->mutable_kv();
          kv->set_id(handle->id);
          kv->set_row_bytes(rb);
          kv->set_num_rows(rows);
          kv->set_dtype(static_cast<v1::DataType>(batch->key.kv_dtype));
          kv->set_ttl_ms(absl::ToInt64Milliseconds(arena.handle_ttl()));
        } else {
          answer = handle.status();
        }
      } else if (r->shape.kv_return == v1::KV_RETURN_INLINE && bytes > 0) {
        // The one host copy of the rows on their way out: from the staged
        // rows themselves when the backend left them there (each
        // sequence's first k), else from its host-readable packed rows (the
        // host arena itself, or CUDA's pinned copy) straight into the
        // response.
        std::string* inline_rows = resp->mutable_kv_inline();
        inline_rows->resize(static_cast<size_t>(bytes));
        auto* dst = reinterpret_cast<std::byte*>(inline_rows->data());
        if (batch->inline_rows_from_staging) {
          const GreedyHostInputs& in = batch->inputs;
          for (int32_t s = s0; s < s0 + n; ++s) {
            const int64_t sequence_bytes =
                int64_t{res.packed_row_offsets[s + 1] - res.packed_row_offsets[s]} * rb;
            std::memcpy(dst + int64_t{res.packed_row_offsets[s] - base_row} * rb,
                        in.draft_kv.data() + int64_t{in.draft_offsets[s]} * rb,
                        static_cast<size_t>(sequence_bytes));
          }
        } else if (batch->packed_kv_host != nullptr) {
          std::memcpy(dst, batch->packed_kv_host + int64_t{base_row} * rb,
                      static_cast<size_t>(bytes));
        } else if (absl::Status read = arena.memory().CopyToHost(offset, bytes, dst);
                   !read.ok()) {
          answer = read;
        }
        if (answer.ok()) {
          timing->set_host_copy_out_bytes(bytes);
          host_copy_out_bytes += bytes;
        }
      }
    }
    ReleaseArenaCharge(*r, kept_by_handle);
    answers.emplace_back(r.get(), std::move(answer));
    s0 += n;
  }

  // Everything of the reservation that no handle owns goes back: the unused
  // tail, inline and no-return requests' rows.
  if (flight->arena_offset >= 0) {
    int64_t cursor = flight->arena_offset;
    for (const auto& [offset, bytes] : kept) {
      arena.Free(cursor, offset - cursor);
      cursor = offset + bytes;
    }
    arena.Free(cursor, flight->arena_offset + flight->arena_bytes - cursor);
  }

  BatchReport report;
  report.device = flight->device;
  report.path = batch->path;
  report.sequences = flight->sequences;
  report.requests = batch_requests;
  report.input_bytes = flight->input_bytes;
  report.draft_tokens = batch->inputs.total_draft_rows();
  report.accepted_tokens = res.packed_row_offsets.empty() ? 0 : res.packed_row_offsets.back();
  report.packed_kv_bytes = keeps_rows ? report.accepted_tokens * rb : 0;
  report.device_time = batch->device_time;
  report.exact = batch->exact;
  if (batch->key.tree) {
    report.tree_sequences = flight->sequences;
    report.tree_accepted_nodes = report.accepted_tokens;
  }
  metrics_->OnBatchExecuted(report);
  metrics_->OnPayloadHostCopy(HostCopyDirection::kIn, flight->host_copy_in_bytes);
  metrics_->OnPayloadHostCopy(HostCopyDirection::kOut, host_copy_out_bytes);

  batch.reset();  // staging back to the backend before the in-flight slot
  {
    absl::MutexLock lock(&mu_);
    FinishBatchLocked(flight->device, flight->sequences, flight->work_bytes);
  }
  cv_.Signal();
  for (auto& [request, answer] : answers) request->done(std::move(answer));
}

void Batcher::Loop() {
  // Linux delays a timed wait by the thread's timer slack (50 us by default)
  // on top of wake-up latency; with a delay budget of a few hundred
  // microseconds that overshoot alone was ~40% of the budget. Ask for 1 ns:
  // only this thread's timers are affected.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  for (;;) {
    const absl::Time next = RunOnce();
    absl::MutexLock lock(&mu_);
    // Enqueues that arrived during RunOnce saw sleeping_until_ at infinity
    // and set wake_ (unless nothing could dispatch before a completion, which
    // sets it too), so `next` plus wake_ covers every queued request.
    sleeping_until_ = next;
    while (!wake_ && !stopping_) {
      const absl::Duration wait = next - clock_->Now();
      if (wait <= absl::ZeroDuration()) break;
      // WaitWithTimeout returns true on timeout: the timer is due.
      if (cv_.WaitWithTimeout(&mu_, wait)) break;
    }
    if (stopping_) return;
    wake_ = false;
    sleeping_until_ = absl::InfiniteFuture();  // running: every timer is "earlier"
  }
}

void Batcher::StartDrain() {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    wake_ = true;
  }
  cv_.Signal();
}

bool Batcher::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queued_sequences_ == 0 && InFlightLocked() == 0;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void Batcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_ = true;
  }
  cv_.Signal();
  if (thread_.joinable()) thread_.join();
  std::vector<Rejection> rejections;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, q] : queues_) {
      for (ClientRequests& c : q.clients) {
        for (auto& r : c.requests) {
          rejections.push_back({std::move(r),
                                absl::UnavailableError(
                                    "the server shut down before the request ran"),
                                RejectReason::kShutdown});
        }
      }
    }
    queues_.clear();
    client_queued_.clear();
    queued_sequences_ = 0;
  }
  Reject(rejections);
  absl::MutexLock lock(&mu_);
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return InFlightLocked() == 0; };
  mu_.Await(absl::Condition(&idle));
}

int64_t Batcher::queued_sequences() {
  absl::MutexLock lock(&mu_);
  return queued_sequences_;
}

int64_t Batcher::queued_sequences(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = client_queued_.find(client);
  return it == client_queued_.end() ? 0 : it->second;
}

int Batcher::in_flight_batches() {
  absl::MutexLock lock(&mu_);
  return InFlightLocked();
}

int Batcher::in_flight_batches(int device) {
  absl::MutexLock lock(&mu_);
  return loads_[device].batches;
}

}  // namespace specverify::server
