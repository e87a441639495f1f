#include "client/stream_session.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"

namespace specverify::client::internal {
namespace {

// What Send() answers once the stream has ended with `final_status`: that
// status, so that a caller reopens the stream on the codes it retries.
absl::Status EndedStreamStatus(const absl::Status& final_status) {
  return final_status.ok() ? absl::UnavailableError("the server ended the stream")
                           : absl::Status(final_status.code(),
                                          absl::StrCat("the stream has ended: ",
                                                       final_status.message()));
}

// A VerifyStream call driven by gRPC's callback reactor: one write in flight,
// the rest queued; reads run continuously until the server ends the stream.
// `on_done`, when set, is told the call's status from OnDone, and the call
// half-closes by itself once the server has ended the stream (OnDone comes
// only after the half-close releases the call's hold).
class StreamCall final
    : public VerifyStreamSession,
      public grpc::ClientBidiReactor<v1::VerifyRequest, v1::VerifyStreamResponse> {
 public:
  StreamCall(v1::Verifier::Stub* stub, MutableStreamCallback on_response, absl::Time deadline,
             bool wait_for_ready, std::function<void(const absl::Status&)> on_done)
      : stub_(stub), on_response_(std::move(on_response)), on_done_(std::move(on_done)) {
    if (deadline != absl::InfiniteFuture()) {
      context_.set_deadline(absl::ToChronoTime(deadline));
    }
    context_.set_wait_for_ready(wait_for_ready);
  }

  // Starts the call. Apart from the constructor: gRPC may run a reaction
  // (OnReadDone, OnDone) on the starting thread, which must then hold no
  // lock a reaction takes.
  void Start() {
    stub_->async()->VerifyStream(&context_, this);
    StartRead(&incoming_);
    // Hold one extra operation so the call stays alive until Finish() has
    // half-closed it (gRPC's "AddHold" idiom for writes issued later).
    AddHold();
    StartCall();
  }

  ~StreamCall() override {
    // Finish() must have been called (or the call cancelled and finished);
    // the destructor waits for OnDone so no callback outlives the object.
    bool finished;
    {
      absl::MutexLock lock(&mu_);
      finished = finish_called_;
    }
    if (!finished) {
      Cancel();
      (void)Finish();
    } else {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&done_));
    }
  }

  absl::Status Send(v1::VerifyRequest request) override {
    const v1::VerifyRequest* to_write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_called_) {
        return absl::FailedPreconditionError("Finish() was called on this stream");
      }
      // The server ended the stream (a drain answers UNAVAILABLE).
      if (done_) {
        return EndedStreamStatus(final_status_);
      }
      if (write_failed_) {
        return absl::UnavailableError("the stream has ended");
      }
      pending_.push_back(std::move(request));
      if (!write_in_flight_) {
        write_in_flight_ = true;
        to_write = &pending_.front();
      }
    }
    if (to_write != nullptr) StartWrite(to_write);
    return absl::OkStatus();
  }

  // Half-closes once the writes queued so far are written; returns at once.
  // Idempotent.
  void HalfClose() {
    bool half_close_now = false;
    {
      absl::MutexLock lock(&mu_);
      if (finish_called_) return;
      finish_called_ = true;
      half_close_now = !write_in_flight_;
      if (half_close_now) writes_done_sent_ = true;
    }
    if (half_close_now) {
      StartWritesDone();
      RemoveHold();
    }
  }

  absl::Status Finish() override {
    HalfClose();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return final_status_;
  }

  void Cancel() override { context_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    const v1::VerifyRequest* next = nullptr;
    bool half_close_now = false;
    {
      absl::MutexLock lock(&mu_);
      pending_.pop_front();
      if (!ok) {
        write_failed_ = true;
        pending_.clear();
      }
      if (!pending_.empty()) {
        next = &pending_.front();
      } else {
        write_in_flight_ = false;
        if (finish_called_ && !writes_done_sent_) {
          writes_done_sent_ = true;
          half_close_now = true;
        }
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (half_close_now) {
      if (ok) StartWritesDone();
      RemoveHold();
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The server ended the stream; OnDone follows the half-close.
      if (on_done_) HalfClose();
      return;
    }
    on_response_(incoming_);
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    const absl::Status result = FromGrpcStatus(status);
    // Told before done_ is set: whoever waits for done_ may destroy this.
    if (on_done_) on_done_(result);
    absl::MutexLock lock(&mu_);
    final_status_ = result;
    done_ = true;
  }

 private:
  v1::Verifier::Stub* const stub_;
  grpc::ClientContext context_;
  MutableStreamCallback on_response_;
  std::function<void(const absl::Status&)> on_done_;
  v1::VerifyStreamResponse incoming_;

  absl::Mutex mu_;
  // std::deque keeps the front element's address while others are appended.
  std::deque<v1::VerifyRequest> pending_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

// OpenResendingStream's session. Every request is kept (by the order it was
// sent) until answered; a call that ends UNAVAILABLE (or CANCELLED, not by
// Cancel()) is replaced, after a
// short backoff on a gRPC alarm, by one that waits for the server, and the
// kept requests are sent on it. An answer refused UNAVAILABLE (a drain that
// began after the stream read the request: it did not run) is held back and
// the request kept, to be sent again; the refusal is delivered only if no
// new call comes.
class ResendingStreamSession final : public VerifyStreamSession {
 public:
  ResendingStreamSession(v1::Verifier::Stub* stub, MutableStreamCallback on_response, absl::Time deadline,
                         int max_reopens, StreamEndCallback on_end)
      : stub_(stub), on_response_(std::move(on_response)), on_end_(std::move(on_end)), deadline_(deadline),
        max_reopens_(max_reopens) {
    StreamCall* call;
    {
      absl::MutexLock lock(&mu_);
      call = AddCallLocked(/*wait_for_ready=*/false);
    }
    call->Start();
  }

  ~ResendingStreamSession() override {
    bool finished;
    {
      absl::MutexLock lock(&mu_);
      finished = finish_called_;
    }
    if (!finished) {
      Cancel();
      (void)Finish();
    }
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ResendingStreamSession::Quiet));
    // calls_ go after the lock: each waits for its own OnDone.
  }

  absl::Status Send(v1::VerifyRequest request) override {
    StreamCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_called_) {
        return absl::FailedPreconditionError("Finish() was called on this stream");
      }
      if (done_) {
        return EndedStreamStatus(final_status_);
      }
      if (request.request_id().empty()) {
        return absl::InvalidArgumentError(
            "a resending stream needs every request's request_id (its answers are matched by it)");
      }
      if (by_id_.contains(request.request_id())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request_id \"", request.request_id(), "\" is already in flight on this stream"));
      }
      const uint64_t order = next_order_++;
      by_id_[request.request_id()] = order;
      unanswered_.emplace(order, request);
      // While a new call is being opened, the reopen sends it with the rest.
      if (reopening_) return absl::OkStatus();
      call = calls_.back().get();
    }
    // An error means that call has ended: its OnDone resends the request.
    (void)call->Send(std::move(request));
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    StreamCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      finish_called_ = true;
      if (!reopening_) call = calls_.back().get();
    }
    // While reopening, the new call is half-closed once it is opened.
    if (call != nullptr) call->HalfClose();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return final_status_;
  }

  void Cancel() override {
    StreamCall* call;
    grpc::Alarm* alarm = nullptr;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      call = calls_.back().get();
      if (reopening_ && !alarms_.empty()) alarm = alarms_.back().get();
    }
    call->Cancel();
    if (alarm != nullptr) alarm->Cancel();  // a pending reopen runs now, with ok = false
  }

 private:
  // A new call, not started (StreamCall::Start, without mu_), as the last
  // of calls_: the one sends go to.
  StreamCall* AddCallLocked(bool wait_for_ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++callbacks_;  // the call's OnDone
    calls_.push_back(std::make_unique<StreamCall>(
        stub_, [this](v1::VerifyStreamResponse& r) { OnResponse(r); }, deadline_,
        wait_for_ready, [this](const absl::Status& s) { OnCallDone(s); }));
    return calls_.back().get();
  }

  bool Quiet() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ && callbacks_ == 0; }

  void OnResponse(v1::VerifyStreamResponse& response) {
    {
      absl::MutexLock lock(&mu_);
      const auto it = by_id_.find(response.request_id());
      if (it != by_id_.end()) {
        if (response.has_error() && response.error().code() == grpc::StatusCode::UNAVAILABLE) {
          refusals_[it->second] = response;
          return;
        }
        unanswered_.erase(it->second);
        by_id_.erase(it);
      }
      reopens_in_a_row_ = 0;
    }
    on_response_(response);
  }

  // A call's OnDone. callbacks_ drops only once the callback is through, so
  // the destructor never frees what it still uses.
  void OnCallDone(const absl::Status& status) {
    std::vector<v1::VerifyStreamResponse> refused;
    bool ended = false;
    {
      absl::MutexLock lock(&mu_);
      const absl::Duration backoff =
          std::min(absl::Milliseconds(50) * (1 << std::min(reopens_in_a_row_, 5)), absl::Seconds(1));
      // CANCELLED too when not ours: gRPC's own shutdown gives it to calls
      // that never reached a handler (the unary retry policy resends both).
      const bool resendable = absl::IsUnavailable(status) || absl::IsCancelled(status);
      if (resendable && !cancelled_ && reopens_in_a_row_ < max_reopens_ &&
          !(finish_called_ && unanswered_.empty()) && absl::Now() + backoff < deadline_) {
        ++reopens_in_a_row_;
        reopening_ = true;
        last_status_ = status;
        ++callbacks_;  // the alarm's
        // A server that refuses at once (still draining, no other replica)
        // is not asked again at once.
        alarms_.push_back(std::make_unique<grpc::Alarm>());
        alarms_.back()->Set(absl::ToChronoTime(absl::Now() + backoff),
                            [this](bool ok) { Reopen(ok); });
      } else {
        refused = EndLocked(status);
        ended = true;
      }
    }
    if (ended) DeliverAndEnd(refused, status);
    absl::MutexLock lock(&mu_);
    --callbacks_;
  }

  // The alarm's callback: a new call, and what is unanswered sent on it.
  void Reopen(bool ok) {
    ReopenOrEnd(ok);
    absl::MutexLock lock(&mu_);
    --callbacks_;
  }

  void ReopenOrEnd(bool ok) {
    {
      std::vector<v1::VerifyStreamResponse> refused;
      StreamCall* started = nullptr;
      absl::Status end_status;
      {
        absl::MutexLock lock(&mu_);
        if (!ok || cancelled_) {
          reopening_ = false;
          end_status = last_status_;
          refused = EndLocked(last_status_);
        } else {
          started = AddCallLocked(/*wait_for_ready=*/true);
          refusals_.clear();
        }
      }
      if (started == nullptr) {
        DeliverAndEnd(refused, end_status);
        return;
      }
      started->Start();
    }
    // Send what is unanswered, in order, then whatever was sent meanwhile,
    // until nothing is left; only then do new sends go to the call directly.
    StreamCall* call;
    uint64_t next = 0;
    for (;;) {
      std::vector<v1::VerifyRequest> batch;
      bool half_close = false;
      {
        absl::MutexLock lock(&mu_);
        call = calls_.back().get();
        for (auto it = unanswered_.lower_bound(next); it != unanswered_.end(); ++it) {
          batch.push_back(it->second);
          next = it->first + 1;
        }
        if (batch.empty()) {
          reopening_ = false;
          half_close = finish_called_;
        }
      }
      if (batch.empty()) {
        if (half_close) call->HalfClose();
        return;
      }
      for (v1::VerifyRequest& request : batch) (void)call->Send(std::move(request));
    }
  }

  // Marks the session done with `status`; returns the refusals held back.
  std::vector<v1::VerifyStreamResponse> EndLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<v1::VerifyStreamResponse> refused;
    for (auto& [order, response] : refusals_) refused.push_back(std::move(response));
    refusals_.clear();
    final_status_ = status;
    done_ = true;
    return refused;
  }

  // The refusals held back, then the session's end.
  void DeliverAndEnd(std::vector<v1::VerifyStreamResponse>& refused, const absl::Status& status) {
    for (v1::VerifyStreamResponse& response : refused) on_response_(response);
    if (on_end_) on_end_(status);
  }

  v1::Verifier::Stub* const stub_;
  const MutableStreamCallback on_response_;
  const StreamEndCallback on_end_;
  const absl::Time deadline_;
  const int max_reopens_;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<StreamCall>> calls_ ABSL_GUARDED_BY(mu_);
  // One per reopen, kept to the end: an alarm may not be freed by its own
  // callback.
  std::vector<std::unique_ptr<grpc::Alarm>> alarms_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, v1::VerifyRequest> unanswered_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_id_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, v1::VerifyStreamResponse> refusals_ ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  int reopens_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
  int callbacks_ ABSL_GUARDED_BY(mu_) = 0;
  bool reopening_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<VerifyStreamSession> OpenStreamCall(v1::Verifier::Stub* stub,
                                                    MutableStreamCallback on_response,
                                                    absl::Time deadline,
                                                    StreamEndCallback on_end) {
  auto call = std::make_unique<StreamCall>(stub, std::move(on_response), deadline,
                                           /*wait_for_ready=*/false, std::move(on_end));
  call->Start();
  return call;
}

std::unique_ptr<VerifyStreamSession> OpenResendingStream(v1::Verifier::Stub* stub,
                                                         MutableStreamCallback on_response,
                                                         absl::Time deadline,
                                                         int resend_unanswered,
                                                         StreamEndCallback on_end) {
  return std::make_unique<ResendingStreamSession>(stub, std::move(on_response), deadline,
                                                  resend_unanswered, std::move(on_end));
}

}  // namespace specverify::client::internal
