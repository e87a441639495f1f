#include "server/rpc/verifier_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/runtime/client_id.h"
#include "server/common/echo.h"
#include "server/common/tsan.h"
#include "server/rpc/wire.h"

namespace specverify::server {
namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// Parses a unary request. A call cancelled by its client (or its deadline)
// before the message arrived reaches a raw handler without one: that is
// CANCELLED, not an undecodable request (a soak with 2 ms deadlines counted
// hundreds of such calls as INVALID_ARGUMENT).
absl::Status ParseUnaryRequest(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                               google::protobuf::MessageLite* message) {
  // No message at all (not even an empty one): the call ended first. gRPC
  // may not have flagged the cancellation yet when the handler runs.
  if (!raw.Valid() || (context != nullptr && context->IsCancelled())) {
    message->Clear();
    return absl::CancelledError(
        "the call ended (cancelled, or past its deadline) before its request arrived");
  }
  return ParseMessage(raw, "the request", message);
}

// Unary Verify: owns the parsed request and the response message; finished
// by the batcher's completion, which serializes the response into gRPC's
// raw response buffer. A cancellation wakes the batcher so the queued
// request is answered CANCELLED at once instead of at its next timer.
class VerifyReactor final : public grpc::ServerUnaryReactor {
 public:
  VerifyReactor(Batcher* batcher, grpc::ByteBuffer* raw_response)
      : batcher_(batcher), raw_response_(raw_response) {}
  void OnCancel() override { batcher_->Poke(); }
  void OnDone() override {
    AcquireFromGrpc(this);
    delete this;
  }

  v1::VerifyRequest* request() { return &request_; }
  v1::VerifyResponse* response() { return &response_; }
  // The response serialized when `status` is OK; the status to finish with.
  absl::Status Serialize(absl::Status status) {
    if (status.ok()) status = SerializeMessage(response_, raw_response_);
    return status;
  }

 private:
  Batcher* const batcher_;
  grpc::ByteBuffer* const raw_response_;
  v1::VerifyRequest request_;
  v1::VerifyResponse response_;
};

// VerifyStream: many requests on one stream. Each request is parsed and
// admitted as it is read; its answer (response or RequestError) is
// serialized and queued for writing when the batcher completes it. One write
// in flight at a time. The stream finishes once the client half-closed,
// every admitted request has been answered and every answer written (or
// writing failed). A message that does not parse ends reading: the requests
// read before it are answered, then the stream finishes INVALID_ARGUMENT
// naming the message (its request_id cannot be known, so it cannot be
// answered on its own).
//
// Back-pressure (issue #15): the answers a stream owes (requests admitted
// and not yet answered, plus answers not yet written) are bounded by
// max_stream_buffered_answers. At the bound the reactor stops reading (no
// StartRead), so HTTP/2 flow control stops the client's writes; it reads
// again once an answer has been written and the count is below the bound.
// A client that never reads its answers thus holds at most that many on the
// server instead of every answer it provoked.
//
// Drain (graceful shutdown): reading stops and the stream finishes
// UNAVAILABLE once every request it read has been answered and written. A
// read still pending then may deliver one more message; it is not read
// (never admitted, so not executed), and the client learns of it from the
// stream's status. Finish must never precede a StartRead or StartWrite, so
// the stream does not finish while a read callback runs or a read is being
// started (busy_).
class VerifyStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public DrainableStream {
 public:
  VerifyStreamReactor(VerifierService* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        owner_(service->CallerIdentity(context)),
        client_(service->ClientKey(context, owner_)) {
    // busy_ starts at 1: a drain between OpenStream and the first StartRead
    // must not finish the stream before that read is started.
    if (service_->OpenStream(this)) {
      {
        absl::MutexLock lock(&mu_);
        --busy_;  // no read is started
      }
      Drain();
      return;
    }
    StartReadThenSettle();
  }

  void Drain() override {
    {
      absl::MutexLock lock(&mu_);
      // A stream its client half-closed already ends OK when it owes nothing.
      if (!reads_done_) {
        reads_done_ = true;
        end_status_ = DrainStatus();
      }
    }
    Settle();
  }

  void OnReadDone(bool ok) override {
    AcquireFromGrpc(this);
    if (!ok) {
      // Half-close or cancellation: no more requests.
      EndReads(absl::OkStatus());
      return;
    }
    bool drained;
    {
      absl::MutexLock lock(&mu_);
      // Drained while this read was pending: its message is not read.
      // (Finish may have been called already: ShouldFinishLocked knows.)
      drained = reads_done_;
      if (!drained) ++busy_;
    }
    if (drained) {
      Settle();
      return;
    }
    ++messages_read_;
    auto request = std::make_unique<v1::VerifyRequest>();
    absl::Status parsed = ParseMessage(
        incoming_, absl::StrCat("VerifyStream message ", messages_read_), request.get());
    incoming_.Clear();
    if (!parsed.ok()) {
      service_->options().metrics->OnRequestRejected(RejectReason::kInvalid);
      service_->options().metrics->OnRequestFinished(RpcMethod::kVerifyStream, parsed.code(),
                                                     absl::ZeroDuration());
      {
        absl::MutexLock lock(&mu_);
        --busy_;
      }
      EndReads(absl::InvalidArgumentError(absl::StrCat(
          parsed.message(), "; the stream ends: the ", messages_read_ - 1,
          " messages before it were read and are answered, no request after it was read")));
      return;
    }
    Handle(std::move(request));
    bool read_now;
    {
      absl::MutexLock lock(&mu_);
      read_now = !reads_done_ && OwedLocked() < service_->options().max_stream_buffered_answers;
      read_paused_ = !read_now && !reads_done_;
      // Reading on, this callback's hold passes to StartReadThenSettle.
      if (!read_now) --busy_;
    }
    if (read_now) {
      StartReadThenSettle();
    } else {
      Settle();
    }
  }

  void OnWriteDone(bool ok) override {
    AcquireFromGrpc(this);
    const grpc::ByteBuffer* next = nullptr;
    bool finish = false;
    bool resume_reading;
    {
      absl::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!ok) {
        write_failed_ = true;  // the client went away; answers are dropped
        writes_.clear();
      }
      if (!writes_.empty()) {
        next = &writes_.front();
      } else {
        writing_ = false;
        finish = ShouldFinishLocked();
      }
      resume_reading = ResumeReadingLocked();
    }
    if (next != nullptr) {
      ReleaseToGrpc(this);
      StartWrite(next);
    } else if (finish) {
      FinishStream();
    }
    if (resume_reading) StartReadThenSettle();
  }

  void OnCancel() override { service_->options().batcher->Poke(); }

  void OnDone() override {
    AcquireFromGrpc(this);
    service_->CloseStream(this);
    delete this;
  }

 private:
  struct Outstanding {
    std::unique_ptr<v1::VerifyRequest> request;
    std::unique_ptr<v1::VerifyStreamResponse> answer;
    absl::Time arrival;
  };

  // No more reads: half-close, cancellation (OK) or a message that did not
  // parse (the status the stream finishes with). A half-close after a drain
  // keeps the drain's status: messages the drain left unread were not
  // answered, and an OK would hide them.
  void EndReads(absl::Status end_status) {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      if (!reads_done_ || !end_status.ok()) end_status_ = std::move(end_status);
      reads_done_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) FinishStream();
  }

  void Handle(std::unique_ptr<v1::VerifyRequest> request) {
    const absl::Time arrival = service_->clock()->Now();
    const std::string id = request->request_id();
    // Checked before the id is used or echoed anywhere (issue #15).
    if (absl::Status s = ValidateRequestId(id); !s.ok()) {
      Answer(id, std::move(s), arrival);
      return;
    }
    // A malformed client id fails each request, as a malformed request does.
    if (!client_.ok()) {
      Answer(id, client_.status(), arrival);
      return;
    }
    if (id.empty()) {
      Answer(id, absl::InvalidArgumentError(
                     "request_id is empty; VerifyStream requires a request_id "
                     "unique among the stream's requests in flight"),
             arrival);
      return;
    }
    bool duplicate;
    {
      absl::MutexLock lock(&mu_);
      duplicate = !ids_.insert(id).second;
      if (!duplicate) ++outstanding_;
    }
    if (duplicate) {
      Answer(id, absl::InvalidArgumentError(absl::StrCat(
                     "request_id ", EchoForMessage(id), " is already in flight on this stream; "
                     "ids must be unique among the stream's requests in flight")),
             arrival);
      return;
    }
    auto* entry = new Outstanding;
    entry->request = std::move(request);
    entry->answer = std::make_unique<v1::VerifyStreamResponse>();
    entry->arrival = arrival;
    auto pending = std::make_unique<PendingRequest>();
    pending->request = entry->request.get();
    pending->owner = owner_;
    pending->client = *client_;
    pending->response = entry->answer->mutable_response();
    pending->arrival = arrival;
    pending->deadline = DeadlineOf(context_);
    grpc::CallbackServerContext* context = context_;
    pending->is_cancelled = [context] { return context->IsCancelled(); };
    pending->done = [this, entry](absl::Status status) { Complete(entry, std::move(status)); };
    absl::Status admitted = service_->Admit(std::move(pending));
    if (!admitted.ok()) Complete(entry, std::move(admitted));
  }

  // Runs once per registered request, on a backend, batcher or gRPC thread.
  void Complete(Outstanding* raw, absl::Status status) {
    std::unique_ptr<Outstanding> entry(raw);
    const std::string id = entry->request->request_id();
    std::unique_ptr<v1::VerifyStreamResponse> answer = std::move(entry->answer);
    const absl::Duration latency = service_->clock()->Now() - entry->arrival;
    answer->set_request_id(id);
    if (status.ok()) {
      answer->mutable_response()->mutable_timing()->set_server_ns(
          absl::ToInt64Nanoseconds(latency));
    } else {
      answer->clear_response();
      answer->mutable_error()->set_code(static_cast<int32_t>(status.code()));
      answer->mutable_error()->set_message(std::string(status.message()));
    }
    service_->options().metrics->OnRequestFinished(RpcMethod::kVerifyStream,
                                                   status.code(), latency);
    entry.reset();
    const grpc::ByteBuffer* start = nullptr;
    bool finish = false;
    bool resume_reading;
    {
      absl::MutexLock lock(&mu_);
      ids_.erase(id);
      --outstanding_;
      start = QueueWriteLocked(std::move(answer));
      finish = start == nullptr && ShouldFinishLocked();
      // Only lowers the count when writing failed (the answer is dropped).
      resume_reading = ResumeReadingLocked();
    }
    if (start != nullptr) {
      ReleaseToGrpc(this);
      StartWrite(start);
    } else if (finish) {
      FinishStream();
    }
    if (resume_reading) StartReadThenSettle();
  }

  // An answer for a request that was never registered (empty or duplicate id).
  void Answer(const std::string& id, absl::Status status, absl::Time arrival) {
    auto answer = std::make_unique<v1::VerifyStreamResponse>();
    answer->set_request_id(id);
    answer->mutable_error()->set_code(static_cast<int32_t>(status.code()));
    answer->mutable_error()->set_message(std::string(status.message()));
    service_->options().metrics->OnRequestRejected(RejectReason::kInvalid);
    service_->options().metrics->OnRequestFinished(
        RpcMethod::kVerifyStream, status.code(), service_->clock()->Now() - arrival);
    const grpc::ByteBuffer* start = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      start = QueueWriteLocked(std::move(answer));
      finish = start == nullptr && ShouldFinishLocked();
    }
    if (start != nullptr) {
      ReleaseToGrpc(this);
      StartWrite(start);
    } else if (finish) {
      FinishStream();
    }
  }

  // Serializes `answer` into the write queue; returns the buffer to start
  // writing now, if no write is in flight.
  const grpc::ByteBuffer* QueueWriteLocked(std::unique_ptr<v1::VerifyStreamResponse> answer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (write_failed_) return nullptr;
    grpc::ByteBuffer bytes;
    if (absl::Status s = SerializeMessage(*answer, &bytes); !s.ok()) {
      // Not expected (an answer over 2 GiB): say so under the request's id.
      v1::VerifyStreamResponse error;
      error.set_request_id(answer->request_id());
      error.mutable_error()->set_code(static_cast<int32_t>(s.code()));
      error.mutable_error()->set_message(std::string(s.message()));
      (void)SerializeMessage(error, &bytes);
    }
    writes_.push_back(std::move(bytes));
    if (writing_) return nullptr;
    writing_ = true;
    return &writes_.front();
  }

  // Answers this stream owes: admitted and unanswered, or not yet written.
  int64_t OwedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return outstanding_ + static_cast<int64_t>(writes_.size());
  }

  // True when reading was paused at the bound and may go on now; the caller
  // then calls StartReadThenSettle (outside the lock). At most one read is
  // pending.
  bool ResumeReadingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!read_paused_ || reads_done_ ||
        OwedLocked() >= service_->options().max_stream_buffered_answers) {
      return false;
    }
    read_paused_ = false;
    ++busy_;
    return true;
  }

  // Starts the read that busy_ was raised for, then finishes the stream if a
  // drain came meanwhile and nothing is owed.
  void StartReadThenSettle() {
    ReleaseToGrpc(this);
    StartRead(&incoming_);
    {
      absl::MutexLock lock(&mu_);
      --busy_;
    }
    Settle();
  }

  // Finishes the stream if it is due (after a drain, or a step that kept it
  // busy).
  void Settle() {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      finish = ShouldFinishLocked();
    }
    if (finish) FinishStream();
  }

  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || outstanding_ > 0 || writing_ || busy_ > 0) return false;
    finished_ = true;
    return true;
  }

  static absl::Status DrainStatus() {
    return absl::UnavailableError(
        "the server is draining for shutdown: this stream ends, every request it read was "
        "answered; send the rest on a new stream");
  }

  void FinishStream() {
    absl::Status end_status;
    {
      absl::MutexLock lock(&mu_);
      end_status = end_status_;
    }
    if (!end_status.ok()) {
      ReleaseToGrpc(this);
      Finish(ToGrpcStatus(end_status));
    } else if (context_->IsCancelled()) {
      ReleaseToGrpc(this);
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled"));
    } else {
      ReleaseToGrpc(this);
      Finish(grpc::Status::OK);
    }
  }

  VerifierService* const service_;
  grpc::CallbackServerContext* const context_;
  // The peer's identities, the same for every request of the stream.
  const std::string owner_;
  const absl::StatusOr<std::string> client_;
  // Only the read path touches these.
  grpc::ByteBuffer incoming_;
  int64_t messages_read_ = 0;

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> ids_ ABSL_GUARDED_BY(mu_);
  // Serialized answers; the front one is being written while writing_.
  // (std::deque keeps references to the other elements valid on push_back.)
  std::deque<grpc::ByteBuffer> writes_ ABSL_GUARDED_BY(mu_);
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);  // set when reads end
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // Reading stopped at max_stream_buffered_answers; no read is pending.
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Read callbacks running and reads being started; Finish waits for 0.
  int busy_ ABSL_GUARDED_BY(mu_) = 1;  // the constructor's first read
};

// FetchKv: streams a handle's row range in chunks; the region stays
// allocated (reference held) until the last chunk is written even if the
// handle is released or expires meanwhile.
class FetchKvReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  FetchKvReactor(const VerifierService& service, grpc::CallbackServerContext* context,
                 const grpc::ByteBuffer& raw_request)
      : service_(service), arrival_(service.clock()->Now()), caller_(service.CallerIdentity(context)) {
    v1::FetchKvRequest request;
    absl::Status status = ParseUnaryRequest(context, raw_request, &request);
    if (status.ok()) {
      handle_ = request.handle();
      release_after_ = request.release_after();
      status = Start(request);
    }
    if (!status.ok()) {
      Done(status);
      return;
    }
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    AcquireFromGrpc(this);
    if (!ok) {
      Done(absl::CancelledError("the client stopped reading"));
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    AcquireFromGrpc(this);
    delete this;
  }

 private:
  absl::Status Start(const v1::FetchKvRequest& request) {
    if (absl::Status s = ValidateFetchKvRequest(request); !s.ok()) return s;
    absl::StatusOr<KvArena*> arena = service_.options().devices->ArenaForHandle(request.handle());
    if (!arena.ok()) return arena.status();
    arena_ = *arena;
    absl::StatusOr<std::shared_ptr<const KvRegion>> region =
        arena_->Lookup(request.handle(), caller_);
    if (!region.ok()) return region.status();
    region_ = *std::move(region);
    const int64_t rows = region_->num_rows();
    const int64_t first = request.first_row();  // >= 0 (validated)
    if (first > rows) {
      return absl::OutOfRangeError(absl::StrCat(
          "first_row is ", first, "; the handle has ", rows, " rows"));
    }
    // Compared against what is left from first_row, never as first + count:
    // num_rows is client-chosen and first_row + num_rows can overflow int64.
    const int64_t available = rows - first;
    const int64_t count = request.num_rows() == 0 ? available : request.num_rows();
    if (count > available) {
      return absl::OutOfRangeError(absl::StrCat(
          "num_rows is ", count, " from first_row ", first, "; rows past the handle's ",
          rows, " rows were asked for (at most ", available, " from first_row)"));
    }
    begin_ = first * region_->row_bytes();
    total_ = count * region_->row_bytes();
    const int64_t wanted = request.chunk_bytes() > 0
                               ? request.chunk_bytes()
                               : service_.options().default_chunk_bytes;
    // Raised to kMinFetchChunkBytes (issue #15: chunk_bytes=1 was one message
    // per byte), lowered to what fits in a message.
    chunk_bytes_ = std::max<int64_t>(
        1, std::min(std::max(wanted, kMinFetchChunkBytes), service_.options().max_chunk_bytes));
    return absl::OkStatus();
  }

  void WriteNext() {
    if (sent_ >= total_) {
      Done(absl::OkStatus());
      return;
    }
    const int64_t n = std::min(chunk_bytes_, total_ - sent_);
    chunk_.Clear();
    chunk_.set_offset(sent_);
    chunk_.set_total_bytes(total_);
    std::string* data = chunk_.mutable_data();
    data->resize(static_cast<size_t>(n));
    absl::Status copied = region_->CopyToHost(
        begin_ + sent_, n, reinterpret_cast<std::byte*>(data->data()));
    if (!copied.ok()) {
      Done(copied);
      return;
    }
    service_.options().metrics->OnPayloadHostCopy(HostCopyDirection::kOut, n);
    sent_ += n;
    if (absl::Status s = SerializeMessage(chunk_, &chunk_bytes_buffer_); !s.ok()) {
      Done(s);
      return;
    }
    ReleaseToGrpc(this);
    StartWrite(&chunk_bytes_buffer_);
  }

  void Done(const absl::Status& status) {
    region_.reset();
    absl::Status final_status = status;
    if (status.ok() && release_after_) {
      absl::StatusOr<int64_t> released = arena_->Release(handle_, caller_);
      // Expired between the last chunk and now: the rows were delivered.
      if (!released.ok() && released.status().code() != absl::StatusCode::kNotFound) {
        final_status = released.status();
      }
    }
    service_.options().metrics->OnRequestFinished(
        RpcMethod::kFetchKv, final_status.code(), service_.clock()->Now() - arrival_);
    ReleaseToGrpc(this);
    Finish(ToGrpcStatus(final_status));
  }

  const VerifierService& service_;
  const absl::Time arrival_;
  const std::string caller_;  // the peer identity (mTLS), empty otherwise
  std::string handle_;
  bool release_after_ = false;
  KvArena* arena_ = nullptr;  // the arena of the handle's device
  std::shared_ptr<const KvRegion> region_;
  int64_t begin_ = 0;
  int64_t total_ = 0;
  int64_t sent_ = 0;
  int64_t chunk_bytes_ = 1;
  v1::FetchKvChunk chunk_;
  grpc::ByteBuffer chunk_bytes_buffer_;  // chunk_ serialized, being written
};


absl::StatusOr<RegionSpec> RegionSpecFrom(const v1::RegisterRegionRequest& request) {
  RegionSpec spec;
  spec.name = request.name();
  spec.byte_size = request.byte_size();
  switch (request.memory_case()) {
    case v1::RegisterRegionRequest::kSystem:
      spec.kind = RegionKind::kSystem;
      spec.shm_name = request.system().shm_name();
      spec.offset_bytes = request.system().offset_bytes();
      break;
    case v1::RegisterRegionRequest::kCuda:
      spec.kind = RegionKind::kCuda;
      spec.ipc_handle = request.cuda().ipc_handle();
      spec.device_ordinal = request.cuda().device_ordinal();
      spec.offset_bytes = request.cuda().offset_bytes();
      break;
    default:
      return absl::InvalidArgumentError("memory is not set; set system or cuda");
  }
  return spec;
}

v1::RegionKind WireKind(RegionKind kind) {
  return kind == RegionKind::kSystem ? v1::REGION_KIND_SYSTEM : v1::REGION_KIND_CUDA;
}

void FillRegionStatuses(const std::vector<RegionStatusRow>& rows,
                        google::protobuf::RepeatedPtrField<v1::RegionStatus>* out) {
  for (const RegionStatusRow& row : rows) {
    v1::RegionStatus* status = out->Add();
    status->set_name(row.name);
    status->set_kind(WireKind(row.kind));
    status->set_byte_size(row.byte_size);
    status->set_device_ordinal(row.device_ordinal);
    status->set_requests_in_flight(row.requests_in_flight);
    status->set_requests_total(row.requests_total);
  }
}

// The GPU a request's CUDA regions pin it to (-1: none, any device may run
// it). INVALID_ARGUMENT when they live on two GPUs: one batch runs on one.
absl::StatusOr<int32_t> CudaOrdinalOf(const ResolvedRegions& regions) {
  int32_t ordinal = -1;
  const Region* first = nullptr;
  for (const RegionUse& use : regions.uses) {
    const int32_t device = use->device_ordinal();
    if (device < 0) continue;
    if (first != nullptr && device != ordinal) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the request's CUDA regions live on two GPUs: ", EchoForMessage(first->spec().name),
          " on cuda:", ordinal, " and ", EchoForMessage(use->spec().name), " on cuda:", device,
          "; a request's CUDA regions must share one GPU"));
    }
    first = use.get();
    ordinal = device;
  }
  return ordinal;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

VerifierService::VerifierService(const VerifierServiceOptions& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()) {}

void VerifierService::StartDraining() {
  absl::MutexLock lock(&streams_mu_);
  draining_.store(true, std::memory_order_release);
  // A stream that owes nothing calls Finish here; gRPC runs its OnDone later
  // on one of its own threads (OnDone runs inline only for reactors marked
  // InternalInlineable, which ours are not), where CloseStream waits for
  // this lock.
  for (DrainableStream* stream : open_streams_) stream->Drain();
}

bool VerifierService::OpenStream(DrainableStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  if (draining()) return true;
  open_streams_.insert(stream);
  return false;
}

void VerifierService::CloseStream(DrainableStream* stream) {
  absl::MutexLock lock(&streams_mu_);
  open_streams_.erase(stream);
}

absl::Status VerifierService::Admit(std::unique_ptr<PendingRequest> pending) {
  absl::Status status;
  RejectReason reason = RejectReason::kInvalid;
  if (draining()) {
    status = absl::UnavailableError(
        "the server is draining for shutdown and accepts no new requests");
    reason = RejectReason::kShutdown;
  } else {
    absl::StatusOr<ValidatedRequest> shape =
        ValidateVerifyRequest(*pending->request, options_.limits);
    if (!shape.ok()) {
      status = shape.status();
    } else {
      pending->shape = *shape;
      if (UsesRegions(*pending->request)) {
        absl::StatusOr<ResolvedRegions> regions =
            options_.regions == nullptr
                ? absl::FailedPreconditionError("this server has no region registry")
                : ResolveRegionRefs(*pending->request, *options_.regions, pending->owner);
        if (regions.ok()) {
          pending->regions = *std::move(regions);
          if (options_.devices->size() > 1) {
            absl::StatusOr<int32_t> ordinal = CudaOrdinalOf(pending->regions);
            if (ordinal.ok()) {
              pending->shape.key.cuda_ordinal = *ordinal;
            } else {
              status = ordinal.status();
            }
          }
        } else {
          status = regions.status();
        }
      }
      if (status.ok()) status = options_.batcher->Enqueue(std::move(pending), &reason);
    }
  }
  if (!status.ok()) options_.metrics->OnRequestRejected(reason);
  return status;
}

absl::StatusOr<std::string> VerifierService::ClientKey(grpc::CallbackServerContext* context,
                                                       const std::string& caller_identity) const {
  if (!caller_identity.empty()) return caller_identity;
  if (context == nullptr) return std::string();
  // "ipv4:127.0.0.1:54321": the port included, so the key is one connection
  // (docs/SERVER.md "Per-client limits and fairness").
  std::string peer = context->peer();
  // Every client of a unix socket is "unix:" (unix-abstract: too): the
  // client's own name tells them apart.
  if (!absl::StartsWith(peer, "unix")) return peer;
  const auto& metadata = context->client_metadata();
  const auto found = metadata.find(grpc_runtime::kClientIdMetadataKey);
  if (found == metadata.end()) return peer;
  const absl::string_view id(found->second.data(), found->second.size());
  if (absl::Status valid = grpc_runtime::ValidateClientId(id); !valid.ok()) return valid;
  return absl::StrCat(peer, "client-id=", id);
}

std::string VerifierService::CallerIdentity(grpc::CallbackServerContext* context) const {
  // Without mutual TLS no peer is authenticated: skip the auth-context
  // lookup on every request.
  if (!options_.mutual_tls || context == nullptr) return "";
  const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  const std::vector<grpc::string_ref> identity = auth->GetPeerIdentity();
  if (identity.empty()) return "";
  return std::string(identity.front().data(), identity.front().size());
}

grpc::ServerUnaryReactor* VerifierService::Verify(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* raw_request,
                                                  grpc::ByteBuffer* raw_response) {
  auto* reactor = new VerifyReactor(options_.batcher, raw_response);
  const absl::Time arrival = clock_->Now();
  if (absl::Status parsed = ParseUnaryRequest(context, *raw_request, reactor->request());
      !parsed.ok()) {
    options_.metrics->OnRequestRejected(parsed.code() == absl::StatusCode::kCancelled
                                            ? RejectReason::kCancelled
                                            : RejectReason::kInvalid);
    options_.metrics->OnRequestFinished(RpcMethod::kVerify, parsed.code(),
                                        clock_->Now() - arrival);
    ReleaseToGrpc(reactor);
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  v1::VerifyResponse* response = reactor->response();
  auto pending = std::make_unique<PendingRequest>();
  pending->request = reactor->request();
  pending->owner = CallerIdentity(context);
  absl::StatusOr<std::string> client = ClientKey(context, pending->owner);
  if (!client.ok()) {
    options_.metrics->OnRequestRejected(RejectReason::kInvalid);
    options_.metrics->OnRequestFinished(RpcMethod::kVerify, client.status().code(),
                                        clock_->Now() - arrival);
    ReleaseToGrpc(reactor);
    reactor->Finish(ToGrpcStatus(client.status()));
    return reactor;
  }
  pending->client = *std::move(client);
  pending->response = response;
  // Parsed: from here on it is the batcher's (queue_ns counts from here;
  // server_ns from the handler's start, parsing included).
  pending->arrival = clock_->Now();
  pending->deadline = DeadlineOf(context);
  pending->is_cancelled = [context] { return context->IsCancelled(); };
  pending->done = [this, reactor, response, arrival](absl::Status status) {
    const absl::Duration latency = clock_->Now() - arrival;
    if (status.ok()) {
      response->mutable_timing()->set_server_ns(absl::ToInt64Nanoseconds(latency));
    }
    status = reactor->Serialize(std::move(status));
    options_.metrics->OnRequestFinished(RpcMethod::kVerify, status.code(), latency);
    ReleaseToGrpc(reactor);
    reactor->Finish(ToGrpcStatus(status));
  };
  absl::Status admitted = Admit(std::move(pending));
  if (!admitted.ok()) {
    options_.metrics->OnRequestFinished(RpcMethod::kVerify, admitted.code(),
                                        clock_->Now() - arrival);
    ReleaseToGrpc(reactor);
    reactor->Finish(ToGrpcStatus(admitted));
  }
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* VerifierService::VerifyStream(
    grpc::CallbackServerContext* context) {
  return new VerifyStreamReactor(this, context);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* VerifierService::FetchKv(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  return new FetchKvReactor(*this, context, *raw_request);
}

grpc::ServerUnaryReactor* VerifierService::ReleaseKv(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* raw_request,
                                                     grpc::ByteBuffer* raw_response) {
  const absl::Time arrival = clock_->Now();
  v1::ReleaseKvRequest request;
  absl::Status status = ParseUnaryRequest(context, *raw_request, &request);
  if (status.ok()) status = ValidateHandleField(request.handle());
  absl::StatusOr<KvArena*> arena = absl::InternalError("unset");
  if (status.ok()) {
    arena = options_.devices->ArenaForHandle(request.handle());
    status = arena.status();
  }
  if (status.ok()) {
    absl::StatusOr<int64_t> released = (*arena)->Release(request.handle(), CallerIdentity(context));
    if (released.ok()) {
      v1::ReleaseKvResponse response;
      response.set_released_bytes(*released);
      status = SerializeMessage(response, raw_response);
    } else {
      status = released.status();
    }
  }
  options_.metrics->OnRequestFinished(RpcMethod::kReleaseKv, status.code(),
                                      clock_->Now() - arrival);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* VerifierService::GetServerInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  const absl::Time arrival = clock_->Now();
  v1::GetServerInfoRequest request;
  absl::Status status = ParseUnaryRequest(context, *raw_request, &request);
  if (status.ok()) {
    v1::ServerInfo info = options_.info;
    if (options_.regions != nullptr) {
      FillRegionStatuses(options_.regions->List(CallerIdentity(context)), info.mutable_regions());
    }
    const DeviceSet& devices = *options_.devices;
    for (v1::DeviceInfo& device : *info.mutable_devices()) {
      if (device.index() < 0 || device.index() >= devices.size()) continue;
      device.set_in_service(devices.in_service(device.index()));
      if (!device.in_service()) {
        device.set_out_of_service_reason(std::string(devices.status(device.index()).message()));
      }
    }
    status = SerializeMessage(info, raw_response);
  }
  options_.metrics->OnRequestFinished(RpcMethod::kGetServerInfo, status.code(),
                                      clock_->Now() - arrival);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}


// The three region RPCs share one shape: parse, act on the registry under the
// caller's identity, serialize, count, finish.
template <typename Request, typename Act>
grpc::ServerUnaryReactor* VerifierService::UnaryRegionCall(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* raw_request,
                                                           grpc::ByteBuffer* raw_response,
                                                           RpcMethod method, Act act) {
  const absl::Time arrival = clock_->Now();
  Request request;
  absl::Status status = ParseUnaryRequest(context, *raw_request, &request);
  if (status.ok() && options_.regions == nullptr) {
    status = absl::FailedPreconditionError("this server has no region registry");
  }
  if (status.ok()) status = act(request, CallerIdentity(context), raw_response);
  options_.metrics->OnRequestFinished(method, status.code(), clock_->Now() - arrival);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* VerifierService::RegisterRegion(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* raw_request,
                                                          grpc::ByteBuffer* raw_response) {
  return UnaryRegionCall<v1::RegisterRegionRequest>(
      context, raw_request, raw_response, RpcMethod::kRegisterRegion,
      [this](const v1::RegisterRegionRequest& request, const std::string& owner,
             grpc::ByteBuffer* out) {
        absl::StatusOr<RegionSpec> spec = RegionSpecFrom(request);
        if (!spec.ok()) return spec.status();
        if (absl::Status s = options_.regions->Register(owner, *std::move(spec)); !s.ok()) {
          return s;
        }
        return SerializeMessage(v1::RegisterRegionResponse(), out);
      });
}

grpc::ServerUnaryReactor* VerifierService::UnregisterRegion(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* raw_request,
                                                            grpc::ByteBuffer* raw_response) {
  return UnaryRegionCall<v1::UnregisterRegionRequest>(
      context, raw_request, raw_response, RpcMethod::kUnregisterRegion,
      [this](const v1::UnregisterRegionRequest& request, const std::string& owner,
             grpc::ByteBuffer* out) {
        absl::StatusOr<int32_t> in_flight = options_.regions->Unregister(owner, request.name());
        if (!in_flight.ok()) return in_flight.status();
        v1::UnregisterRegionResponse response;
        response.set_requests_in_flight(*in_flight);
        return SerializeMessage(response, out);
      });
}

grpc::ServerUnaryReactor* VerifierService::ListRegions(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* raw_request,
                                                       grpc::ByteBuffer* raw_response) {
  return UnaryRegionCall<v1::ListRegionsRequest>(
      context, raw_request, raw_response, RpcMethod::kListRegions,
      [this](const v1::ListRegionsRequest&, const std::string& owner, grpc::ByteBuffer* out) {
        v1::ListRegionsResponse response;
        FillRegionStatuses(options_.regions->List(owner), response.mutable_regions());
        return SerializeMessage(response, out);
      });
}

grpc::ServerUnaryReactor* VerifierService::VerifyCeiling(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* raw_request,
                                                         grpc::ByteBuffer* raw_response) {
  const absl::Time arrival = clock_->Now();
  // Parsed and serialized exactly as Verify's messages are, so the ceiling
  // pays the same protobuf cost.
  v1::VerifyRequest request;
  absl::Status status = ParseUnaryRequest(context, *raw_request, &request);
  if (status.ok()) {
    v1::VerifyResponse response;
    FillCeilingResponse(request, &response);
    response.mutable_timing()->set_server_ns(
        absl::ToInt64Nanoseconds(clock_->Now() - arrival));
    status = SerializeMessage(response, raw_response);
  }
  options_.metrics->OnRequestFinished(RpcMethod::kVerifyCeiling, status.code(),
                                      clock_->Now() - arrival);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

void FillCeilingResponse(const v1::VerifyRequest& request, v1::VerifyResponse* response) {
  response->set_request_id(request.request_id());
  bool any_rows = false;
  int64_t row_bytes = 0;
  v1::DataType dtype = v1::DATA_TYPE_UNSPECIFIED;
  for (const v1::SequenceDraft& seq : request.sequences()) {
    if (seq.has_draft_kv() && seq.draft_tokens_size() > 0 && !seq.draft_kv().data().empty()) {
      any_rows = true;
      row_bytes = static_cast<int64_t>(seq.draft_kv().data().size()) / seq.draft_tokens_size();
      dtype = seq.draft_kv().dtype();
      break;
    }
  }
  v1::KvReturn kv_return = request.kv_return();
  if (kv_return == v1::KV_RETURN_UNSPECIFIED) {
    kv_return = any_rows ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_NONE;
  }
  std::string* inline_rows =
      kv_return == v1::KV_RETURN_INLINE && any_rows ? response->mutable_kv_inline() : nullptr;
  int64_t row = 0;
  for (const v1::SequenceDraft& seq : request.sequences()) {
    const int32_t gamma = seq.draft_tokens_size();
    v1::SequenceResult* out = response->add_results();
    out->set_accepted_length(gamma);
    const auto& target = seq.greedy().target_tokens();
    out->set_next_token(target.size() > gamma   ? target[gamma]
                        : gamma > 0             ? seq.draft_tokens(gamma - 1)
                                                : 0);
    out->set_kv_row_offset(row);
    out->set_kv_row_count(gamma);
    row += gamma;
    if (inline_rows != nullptr) inline_rows->append(seq.draft_kv().data());
  }
  if (kv_return == v1::KV_RETURN_HANDLE && any_rows) {
    // Same size as a real handle (32 hex digits); it names no rows.
    v1::KvHandle* kv = response->mutable_kv();
    kv->set_id(std::string(32, '0'));
    kv->set_row_bytes(row_bytes);
    kv->set_num_rows(row);
    kv->set_dtype(dtype);
  }
  v1::ServerTiming* timing = response->mutable_timing();
  timing->set_path(v1::EXECUTION_PATH_CEILING);
  timing->set_batch_sequences(request.sequences_size());
  timing->set_batch_requests(1);
  response->set_verified(false);
  response->set_exact(true);
}

}  // namespace specverify::server
