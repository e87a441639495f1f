#include "client/loadgen/step_runner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/loadgen/schedule.h"
#include "client/stream_session.h"
#include "grpcpp/grpcpp.h"
#include "kernels/workload/random.h"

namespace specverify::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

int64_t Ns(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

void SetDeadline(grpc::ClientContext& context, int64_t deadline_ms) {
  if (deadline_ms > 0) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  }
}

class StepRun;

// One request in flight, from its send until its answer (and the answer's KV
// fetch or release) is done.
struct Call {
  // Keeps the step's state alive until the last callback that touches it has
  // returned, even after Run() has seen the last request finish.
  std::shared_ptr<StepRun> run;
  int64_t index = 0;     // request number within the step
  int32_t channel = 0;
  int32_t slot = -1;     // closed-loop slot; -1 in an open loop
  bool measured = false;
  bool stop_slot = false;  // the slot must not send again (its stream ended)
  TimePoint intended;
  TimePoint sent;
  grpc::ClientContext context;  // unary Verify
  v1::VerifyResponse response;
};

// Every request of one channel over the client library's VerifyStream
// session: one call, or with `resend_unanswered` = N > 0 one that rides
// through a drain or restart of its server (client/stream_session.h: a new
// call that waits for the server, everything unanswered sent again, at most
// N in a row without an answer). Answers are matched to their calls by
// request_id and taken out of the session's message, not copied. When the
// session ends, whatever it left unanswered fails and stops its slot.
class StreamConnection {
 public:
  StreamConnection(StepRun* run, v1::Verifier::Stub* stub, int resend_unanswered);

  // Takes `call` and sends `request` for it. False when the stream has ended
  // (the call was not taken).
  bool Send(Call* call, v1::VerifyRequest request);
  // Half-closes and waits for the server to end the stream.
  void Close() { (void)session_->Finish(); }
  void Cancel() { session_->Cancel(); }

 private:
  void OnResponse(v1::VerifyStreamResponse& incoming);
  void OnEnd(const absl::Status& status);

  StepRun* const run_;
  std::mutex mu_;
  std::unordered_map<std::string, Call*> pending_;  // guarded by mu_
  bool ended_ = false;                              // guarded by mu_
  std::unique_ptr<client::VerifyStreamSession> session_;
};

// Reads back the rows behind a KV handle (and releases it).
class KvFetch final : public grpc::ClientReadReactor<v1::FetchKvChunk> {
 public:
  KvFetch(StepRun* run, Call* call, v1::Verifier::Stub* stub, const std::string& handle,
          int64_t deadline_ms)
      : run_(run), call_(call), started_(Clock::now()) {
    request_.set_handle(handle);
    request_.set_release_after(true);
    SetDeadline(context_, deadline_ms);
    stub->async()->FetchKv(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t total = chunk_.total_bytes();
    const int64_t offset = chunk_.offset();
    const int64_t size = static_cast<int64_t>(chunk_.data().size());
    if (total < 0 || offset < 0 || offset + size > total) {
      malformed_ = absl::StrCat("chunk at offset ", offset, " of ", size,
                                " bytes lies outside total_bytes ", total);
    } else {
      if (static_cast<int64_t>(data_.size()) != total) data_.resize(static_cast<size_t>(total));
      std::memcpy(data_.data() + offset, chunk_.data().data(), static_cast<size_t>(size));
      received_ += size;
    }
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override;

 private:
  StepRun* run_;
  Call* call_;
  TimePoint started_;
  grpc::ClientContext context_;
  v1::FetchKvRequest request_;
  v1::FetchKvChunk chunk_;
  std::string data_;
  int64_t received_ = 0;
  std::string malformed_;
};

// Accumulates one channel's results; merged at the end of the step.
struct Shard {
  std::mutex mu;
  StepResult result;        // guarded by mu
  TimePoint last_completion;  // guarded by mu
  TimePoint last_send;        // guarded by mu
};

class StepRun : public std::enable_shared_from_this<StepRun> {
 public:
  StepRun(Target& target, const LoadWorkload& workload, const StepSpec& spec,
          const StepOptions& options)
      : target_(target), workload_(workload), spec_(spec), options_(options),
        shards_(static_cast<size_t>(target.num_channels())) {}

  absl::StatusOr<StepResult> Run();

  // The verify answer (or error) of `call`; the response is in call->response.
  void OnVerifyDone(Call* call, grpc::StatusCode code, const std::string& message);
  void OnFetchDone(Call* call, const grpc::Status& status, const std::string& data,
                   const std::string& malformed, TimePoint started);
  void OnReleaseDone(Call* call, const grpc::Status& status);
  void OnUnmatchedStreamAnswer(const std::string& request_id);

 private:
  absl::Status RunClosedLoop();
  absl::Status RunOpenLoop();
  void IssueNextInSlot(int32_t slot);
  void Issue(Call* call);
  void Finish(Call* call);
  bool SampleFetch(int64_t index) const;
  void RecordError(Call* call, const std::string& code, const std::string& message);
  void WaitForOutstandingBelow(int64_t limit);
  void MaybePrintProgress(bool final_line);
  // Cancels the streams when nothing has completed for longer than any
  // request may take (a hung server must not hang the load generator).
  void CancelStreamsIfStalled();
  StepResult Merge() const;

  Target& target_;
  const LoadWorkload& workload_;
  const StepSpec spec_;
  const StepOptions options_;
  std::vector<Shard> shards_;
  std::vector<std::unique_ptr<StreamConnection>> streams_;  // one per channel (stream RPCs)

  TimePoint start_;
  TimePoint measure_start_;
  TimePoint measure_end_;  // duration mode only

  std::atomic<int64_t> next_index_{0};
  std::atomic<int64_t> measured_issued_{0};
  std::atomic<bool> stop_issuing_{false};
  std::atomic<int64_t> outstanding_{0};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;

  // For the progress line only (all requests, warm-up included).
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> wrong_{0};
  TimePoint last_progress_;
  int64_t last_progress_completed_ = 0;
  bool printed_progress_ = false;
  int64_t stall_seen_completed_ = -1;
  TimePoint stall_since_;
  bool streams_cancelled_ = false;
};

StreamConnection::StreamConnection(StepRun* run, v1::Verifier::Stub* stub, int resend_unanswered)
    : run_(run) {
  auto on_response = [this](v1::VerifyStreamResponse& r) { OnResponse(r); };
  auto on_end = [this](const absl::Status& status) { OnEnd(status); };
  session_ = resend_unanswered > 0
                 ? client::internal::OpenResendingStream(stub, std::move(on_response), absl::InfiniteFuture(),
                                                         resend_unanswered, std::move(on_end))
                 : client::internal::OpenStreamCall(stub, std::move(on_response), absl::InfiniteFuture(),
                                                    std::move(on_end));
}

bool StreamConnection::Send(Call* call, v1::VerifyRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return false;
    pending_[request.request_id()] = call;
  }
  // An error means the session has ended (or is ending): OnEnd fails the call
  // unless an answer came first.
  (void)session_->Send(std::move(request));
  return true;
}

void StreamConnection::OnResponse(v1::VerifyStreamResponse& incoming) {
  const std::string& id = incoming.request_id();
  Call* call = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it != pending_.end()) {
      call = it->second;
      pending_.erase(it);
    }
  }
  if (call == nullptr) {
    run_->OnUnmatchedStreamAnswer(id);
  } else if (incoming.has_error()) {
    run_->OnVerifyDone(call, static_cast<grpc::StatusCode>(incoming.error().code()), incoming.error().message());
  } else {
    call->response.Swap(incoming.mutable_response());
    run_->OnVerifyDone(call, grpc::StatusCode::OK, "");
  }
}

void StreamConnection::OnEnd(const absl::Status& status) {
  std::unordered_map<std::string, Call*> unanswered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    unanswered.swap(pending_);
  }
  const grpc::StatusCode code =
      status.ok() ? grpc::StatusCode::UNAVAILABLE : static_cast<grpc::StatusCode>(status.code());
  const std::string message =
      status.ok() ? std::string("VerifyStream ended before this request was answered")
                  : absl::StrCat("VerifyStream failed: ", status.message());
  for (auto& [id, call] : unanswered) {
    call->stop_slot = true;
    run_->OnVerifyDone(call, code, message);
  }
}

void KvFetch::OnDone(const grpc::Status& status) {
  run_->OnFetchDone(call_, status, data_, malformed_, started_);
  delete this;
}

bool StepRun::SampleFetch(int64_t index) const {
  if (options_.fetch_kv_fraction <= 0) return false;
  if (options_.fetch_kv_fraction >= 1) return true;
  const double u = (MixBits(DeriveSeed(options_.seed, static_cast<uint64_t>(index))) >> 11) * 0x1.0p-53;
  return u < options_.fetch_kv_fraction;
}

void StepRun::Issue(Call* call) {
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  if (call->measured) {
    Shard& shard = shards_[call->channel];
    std::lock_guard<std::mutex> lock(shard.mu);
    ++shard.result.sent;
    shard.result.send_lag.Record(Ns(call->sent - call->intended));
    shard.last_send = std::max(shard.last_send, call->sent);
  }
  const v1::VerifyRequest& request = workload_.Request(call->index);
  if (options_.ceiling_rpc) {
    SetDeadline(call->context, options_.deadline_ms);
    target_.stub(call->channel)->async()->VerifyCeiling(
        &call->context, &request, &call->response,
        [call](grpc::Status status) {
          call->run->OnVerifyDone(call, status.error_code(), status.error_message());
        });
    return;
  }
  if (spec_.rpc == RpcKind::kUnary) {
    SetDeadline(call->context, options_.deadline_ms);
    target_.stub(call->channel)->async()->Verify(
        &call->context, &request, &call->response,
        [call](grpc::Status status) {
          call->run->OnVerifyDone(call, status.error_code(), status.error_message());
        });
    return;
  }
  v1::VerifyRequest copy = request;
  copy.set_request_id(absl::StrCat(call->index));
  if (!streams_[call->channel]->Send(call, std::move(copy))) {
    call->stop_slot = true;
    OnVerifyDone(call, grpc::StatusCode::UNAVAILABLE, "VerifyStream has ended");
  }
}

void StepRun::RecordError(Call* call, const std::string& code, const std::string& message) {
  Shard& shard = shards_[call->channel];
  std::lock_guard<std::mutex> lock(shard.mu);
  ++shard.result.rpc_errors;
  ++shard.result.errors_by_code[code];
  if (static_cast<int32_t>(shard.result.error_examples.size()) < options_.max_wrong_examples) {
    shard.result.error_examples.push_back(absl::StrCat("request ", call->index, ": ", code, ": ", message));
  }
}

void StepRun::OnVerifyDone(Call* call, grpc::StatusCode code, const std::string& message) {
  const TimePoint now = Clock::now();
  completed_.fetch_add(1, std::memory_order_relaxed);
  if (code != grpc::StatusCode::OK) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    if (call->measured) {
      RecordError(call, CodeName(code), message);
      Shard& shard = shards_[call->channel];
      std::lock_guard<std::mutex> lock(shard.mu);
      shard.last_completion = std::max(shard.last_completion, now);
    }
    Finish(call);
    return;
  }
  const AnswerCheck check = workload_.Check(call->index, call->response, std::nullopt);
  if (check.verified && !check.status.ok()) wrong_.fetch_add(1, std::memory_order_relaxed);
  if (call->measured) {
    Shard& shard = shards_[call->channel];
    std::lock_guard<std::mutex> lock(shard.mu);
    StepResult& r = shard.result;
    ++r.ok;
    r.latency.Record(Ns(now - call->intended));
    r.service_time.Record(Ns(now - call->sent));
    if (!check.verified) {
      ++r.unverified;
    } else if (!check.status.ok()) {
      ++r.wrong_answers;
      if (static_cast<int32_t>(r.wrong_answer_examples.size()) < options_.max_wrong_examples) {
        r.wrong_answer_examples.emplace_back(check.status.message());
      }
    }
    r.sequences += check.sequences;
    r.draft_tokens += check.draft_tokens;
    r.accepted_tokens += check.accepted_tokens;
    r.emitted_tokens += check.accepted_tokens + check.sequences;
    if (call->response.has_timing()) {
      r.server_queue.Record(call->response.timing().queue_ns());
      r.server_time.Record(call->response.timing().server_ns());
      r.server_submit.Record(call->response.timing().submit_ns());
      r.server_complete.Record(call->response.timing().complete_ns());
      ++r.answers_by_device[call->response.timing().device()];
    }
    shard.last_completion = std::max(shard.last_completion, now);
  }

  // KV rows kept by the server: fetch a sample and check it, release the rest
  // so that the arena does not fill up with handles nobody reads. The no-op
  // ceiling keeps rows too (every draft row): its handles are fetched and
  // released alike, so the ceiling pays the same RPCs (its bytes are not
  // checked: they are not verification output).
  const bool has_handle = !options_.ceiling_rpc && workload_.ReturnsKvHandle() &&
                          call->response.has_kv() && !call->response.kv().id().empty();
  if (!has_handle) {
    Finish(call);
    return;
  }
  v1::Verifier::Stub* stub = target_.stub(call->channel);
  if (check.status.ok() && call->response.kv().num_rows() > 0 && SampleFetch(call->index)) {
    new KvFetch(this, call, stub, call->response.kv().id(), options_.deadline_ms);
    return;
  }
  if (!options_.release_kv) {  // leaked on purpose: the server's TTL reclaims it
    Finish(call);
    return;
  }
  struct ReleaseOp {
    grpc::ClientContext context;
    v1::ReleaseKvRequest request;
    v1::ReleaseKvResponse response;
  };
  auto* op = new ReleaseOp;
  op->request.set_handle(call->response.kv().id());
  SetDeadline(op->context, options_.deadline_ms);
  stub->async()->ReleaseKv(&op->context, &op->request, &op->response,
                           [this, call, op](grpc::Status status) {
                             OnReleaseDone(call, status);
                             delete op;
                           });
}

void StepRun::OnFetchDone(Call* call, const grpc::Status& status, const std::string& data,
                          const std::string& malformed, TimePoint started) {
  const TimePoint now = Clock::now();
  if (call->measured) {
    std::string mismatch;
    if (status.ok()) {
      if (!malformed.empty()) {
        mismatch = absl::StrCat("request ", call->index, ": FetchKv: ", malformed);
      } else {
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data.data()),
                                               data.size());
        const AnswerCheck check = workload_.Check(call->index, call->response, bytes);
        if (!check.status.ok()) mismatch = std::string(check.status.message());
      }
    }
    if (!mismatch.empty()) wrong_.fetch_add(1, std::memory_order_relaxed);
    Shard& shard = shards_[call->channel];
    std::lock_guard<std::mutex> lock(shard.mu);
    StepResult& r = shard.result;
    if (!status.ok()) {
      ++r.kv_fetch_errors;
      if (static_cast<int32_t>(r.error_examples.size()) < options_.max_wrong_examples) {
        r.error_examples.push_back(absl::StrCat("request ", call->index, ": FetchKv: ",
                                                CodeName(status.error_code()), ": ",
                                                status.error_message()));
      }
    } else {
      ++r.kv_fetches;
      r.kv_fetch_latency.Record(Ns(now - started));
      if (!mismatch.empty()) {
        ++r.kv_mismatches;
        if (static_cast<int32_t>(r.wrong_answer_examples.size()) < options_.max_wrong_examples) {
          r.wrong_answer_examples.push_back(std::move(mismatch));
        }
      }
    }
  }
  Finish(call);
}

void StepRun::OnReleaseDone(Call* call, const grpc::Status& status) {
  if (call->measured) {
    Shard& shard = shards_[call->channel];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (status.ok()) {
      ++shard.result.kv_released;
    } else {
      ++shard.result.kv_fetch_errors;
      if (static_cast<int32_t>(shard.result.error_examples.size()) < options_.max_wrong_examples) {
        shard.result.error_examples.push_back(absl::StrCat(
            "request ", call->index, ": ReleaseKv: ", CodeName(status.error_code()), ": ",
            status.error_message()));
      }
    }
  }
  Finish(call);
}

void StepRun::OnUnmatchedStreamAnswer(const std::string& request_id) {
  // An answer to a request this stream never sent (or answered twice): the
  // server is wrong, and the run must say so.
  wrong_.fetch_add(1, std::memory_order_relaxed);
  Shard& shard = shards_[0];
  std::lock_guard<std::mutex> lock(shard.mu);
  ++shard.result.wrong_answers;
  if (static_cast<int32_t>(shard.result.wrong_answer_examples.size()) < options_.max_wrong_examples) {
    shard.result.wrong_answer_examples.push_back(
        absl::StrCat("VerifyStream answered unknown request_id \"", request_id, "\""));
  }
}

void StepRun::Finish(Call* call) {
  const std::shared_ptr<StepRun> keep_alive = std::move(call->run);
  const int32_t slot = call->slot;
  const bool continue_slot = slot >= 0 && !call->stop_slot;
  delete call;
  // The slot's next request is issued before this one stops counting, so
  // that outstanding_ reaches zero only when every slot has stopped.
  if (continue_slot) IssueNextInSlot(slot);
  const int64_t before = outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  if (before == 1 || (spec_.mode == LoopMode::kOpen && before == options_.max_outstanding)) {
    { std::lock_guard<std::mutex> lock(wait_mu_); }
    wait_cv_.notify_all();
  }
}

void StepRun::IssueNextInSlot(int32_t slot) {
  if (stop_issuing_.load(std::memory_order_acquire)) return;
  const TimePoint now = Clock::now();
  const bool measured = now >= measure_start_;
  if (measured) {
    if (options_.requests > 0) {
      if (measured_issued_.fetch_add(1) >= options_.requests) {
        stop_issuing_.store(true, std::memory_order_release);
        return;
      }
    } else if (now >= measure_end_) {
      stop_issuing_.store(true, std::memory_order_release);
      return;
    }
  }
  auto* call = new Call;
  call->run = shared_from_this();
  call->index = next_index_.fetch_add(1, std::memory_order_relaxed);
  call->slot = slot;
  call->channel = slot % target_.num_channels();
  call->measured = measured;
  call->intended = call->sent = now;
  Issue(call);
}

void StepRun::WaitForOutstandingBelow(int64_t limit) {
  std::unique_lock<std::mutex> lock(wait_mu_);
  while (outstanding_.load(std::memory_order_acquire) >= limit) {
    wait_cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    MaybePrintProgress(false);
    CancelStreamsIfStalled();
    lock.lock();
  }
}

void StepRun::MaybePrintProgress(bool final_line) {
  if (!options_.progress) return;
  const TimePoint now = Clock::now();
  if (!final_line && now - last_progress_ < std::chrono::milliseconds(500)) return;
  const int64_t completed = completed_.load(std::memory_order_relaxed);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // The live line shows the rate since the previous line; the final one the
  // step's average.
  const double interval =
      final_line ? elapsed : std::chrono::duration<double>(now - last_progress_).count();
  const int64_t base = final_line ? 0 : last_progress_completed_;
  const double rate = interval > 0 ? (completed - base) / interval : 0;
  const char* phase = now < measure_start_ ? "warm-up" : "measuring";
  std::fprintf(stderr, "\r  %-24s %6.1fs %-9s done %9lld  %9.0f req/s  in flight %6lld  errors %lld  wrong %lld   %s",
               options_.label.c_str(), elapsed, phase, static_cast<long long>(completed), rate,
               static_cast<long long>(outstanding_.load()), static_cast<long long>(failed_.load()),
               static_cast<long long>(wrong_.load()), final_line ? "\n" : "");
  std::fflush(stderr);
  printed_progress_ = true;
  last_progress_ = now;
  last_progress_completed_ = completed;
}

void StepRun::CancelStreamsIfStalled() {
  if (streams_.empty() || streams_cancelled_) return;
  const TimePoint now = Clock::now();
  const int64_t completed = completed_.load(std::memory_order_relaxed);
  if (completed != stall_seen_completed_) {
    stall_seen_completed_ = completed;
    stall_since_ = now;
    return;
  }
  const int64_t limit_ms = (options_.deadline_ms > 0 ? options_.deadline_ms : 60000) + 5000;
  if (now - stall_since_ < std::chrono::milliseconds(limit_ms)) return;
  std::fprintf(stderr, "loadgen: no answer for %lld ms; cancelling the VerifyStream calls\n",
               static_cast<long long>(limit_ms));
  for (const auto& stream : streams_) stream->Cancel();
  streams_cancelled_ = true;
}

absl::Status StepRun::RunClosedLoop() {
  for (int32_t slot = 0; slot < spec_.concurrency; ++slot) {
    // Every slot holds one extra count until all are started, so a slot that
    // stops at once cannot make the step look finished.
    outstanding_.fetch_add(1);
    IssueNextInSlot(slot);
  }
  outstanding_.fetch_sub(spec_.concurrency);
  std::unique_lock<std::mutex> lock(wait_mu_);
  while (outstanding_.load(std::memory_order_acquire) > 0) {
    wait_cv_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    MaybePrintProgress(false);
    CancelStreamsIfStalled();
    lock.lock();
  }
  return absl::OkStatus();
}

absl::Status StepRun::RunOpenLoop() {
  absl::StatusOr<ArrivalSchedule> schedule =
      ArrivalSchedule::Create(spec_.arrival, spec_.rate, options_.seed);
  if (!schedule.ok()) return schedule.status();
  int64_t measured_scheduled = 0;
  for (int64_t index = 0;; ++index) {
    const TimePoint intended = start_ + schedule->Next();
    const bool measured = intended >= measure_start_;
    if (measured) {
      if (options_.requests > 0) {
        if (measured_scheduled == options_.requests) break;
      } else if (intended >= measure_end_) {
        break;
      }
      ++measured_scheduled;
    }
    // Sleep in short pieces so the progress line stays live at low rates.
    for (TimePoint now = Clock::now(); now < intended; now = Clock::now()) {
      std::this_thread::sleep_until(std::min(intended, now + std::chrono::milliseconds(200)));
      MaybePrintProgress(false);
    }
    if (outstanding_.load(std::memory_order_acquire) >= options_.max_outstanding) {
      WaitForOutstandingBelow(options_.max_outstanding);
    }
    auto* call = new Call;
    call->run = shared_from_this();
    call->index = index;
    call->channel = static_cast<int32_t>(index % target_.num_channels());
    call->measured = measured;
    call->intended = intended;
    call->sent = Clock::now();
    Issue(call);
    MaybePrintProgress(false);
  }
  stop_issuing_.store(true);
  WaitForOutstandingBelow(1);
  return absl::OkStatus();
}

StepResult StepRun::Merge() const {
  StepResult result;
  result.spec = spec_;
  TimePoint last_completion = measure_start_;
  TimePoint last_send = measure_start_;
  for (const Shard& shard : shards_) {
    const StepResult& r = shard.result;
    result.sent += r.sent;
    result.ok += r.ok;
    result.rpc_errors += r.rpc_errors;
    for (const auto& [code, n] : r.errors_by_code) result.errors_by_code[code] += n;
    for (const auto& [device, n] : r.answers_by_device) result.answers_by_device[device] += n;
    result.wrong_answers += r.wrong_answers;
    result.unverified += r.unverified;
    for (const std::string& e : r.wrong_answer_examples) {
      if (static_cast<int32_t>(result.wrong_answer_examples.size()) < options_.max_wrong_examples) {
        result.wrong_answer_examples.push_back(e);
      }
    }
    for (const std::string& e : r.error_examples) {
      if (static_cast<int32_t>(result.error_examples.size()) < options_.max_wrong_examples) {
        result.error_examples.push_back(e);
      }
    }
    result.sequences += r.sequences;
    result.draft_tokens += r.draft_tokens;
    result.accepted_tokens += r.accepted_tokens;
    result.emitted_tokens += r.emitted_tokens;
    result.kv_fetches += r.kv_fetches;
    result.kv_fetch_errors += r.kv_fetch_errors;
    result.kv_mismatches += r.kv_mismatches;
    result.kv_released += r.kv_released;
    result.latency.Merge(r.latency);
    result.service_time.Merge(r.service_time);
    result.send_lag.Merge(r.send_lag);
    result.kv_fetch_latency.Merge(r.kv_fetch_latency);
    result.server_queue.Merge(r.server_queue);
    result.server_time.Merge(r.server_time);
    result.server_submit.Merge(r.server_submit);
    result.server_complete.Merge(r.server_complete);
    if (r.sent > 0) {
      last_completion = std::max(last_completion, shard.last_completion);
      last_send = std::max(last_send, shard.last_send);
    }
  }
  result.window_s = std::chrono::duration<double>(last_completion - measure_start_).count();
  result.window_start_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
      std::chrono::duration<double>(Clock::now() - measure_start_).count();
  const double send_window = std::chrono::duration<double>(last_send - measure_start_).count();
  result.offered_rate = send_window > 0 ? result.sent / send_window : 0;
  return result;
}

absl::StatusOr<StepResult> StepRun::Run() {
  if (spec_.mode == LoopMode::kClosed && spec_.concurrency < 1) {
    return absl::InvalidArgumentError("closed loop needs concurrency >= 1");
  }
  if (spec_.rpc == RpcKind::kStream && !options_.ceiling_rpc) {
    for (int32_t c = 0; c < target_.num_channels(); ++c) {
      streams_.push_back(std::make_unique<StreamConnection>(this, target_.stub(c), options_.resend_unanswered));
    }
  }
  const double cpu_before = ProcessCpuSeconds();
  start_ = Clock::now();
  last_progress_ = start_;
  measure_start_ = start_ + std::chrono::nanoseconds(static_cast<int64_t>(options_.warmup_s * 1e9));
  measure_end_ = measure_start_ + std::chrono::nanoseconds(static_cast<int64_t>(options_.duration_s * 1e9));
  absl::Status status = spec_.mode == LoopMode::kClosed ? RunClosedLoop() : RunOpenLoop();
  stop_issuing_.store(true);
  for (const auto& stream : streams_) stream->Close();
  MaybePrintProgress(true);
  if (!status.ok()) return status;
  StepResult result = Merge();
  const double wall = std::chrono::duration<double>(Clock::now() - start_).count();
  if (wall > 0) result.client_cpu_cores = (ProcessCpuSeconds() - cpu_before) / wall;
  return result;
}

}  // namespace

absl::StatusOr<StepResult> RunStep(Target& target, const LoadWorkload& workload,
                                   const StepSpec& spec, const StepOptions& options) {
  auto run = std::make_shared<StepRun>(target, workload, spec, options);
  return run->Run();
}

}  // namespace specverify::loadgen
