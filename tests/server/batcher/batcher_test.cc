// Batcher unit tests. The batcher runs without its thread; each test drives
// RunOnce() under a FakeClock, so timing is exact and nothing sleeps. Batches
// execute on the (real, CPU) backend's thread; tests wait for completions.
//
// The fixture's batcher waits (preferred size = the batch limit, delay
// kDelay) and does not dispatch on enqueue, so tests decide when RunOnce
// forms batches; the latency-first tests at the end use the defaults.
#include "server/batcher/batcher.h"
#include "server/rpc/validation.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/testing/controllable_backend.h"
#include "tests/testing/byte_compare.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::server::testing::ControllableBackend;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kDelay = absl::Microseconds(200);
constexpr int64_t kRowBytes = 32;

// A request as the RPC layer would hand it over, with its answer.
struct Call {
  v1::VerifyRequest request;
  v1::VerifyResponse response;
  absl::Notification answered;
  absl::Status status;
  int first_sequence = 0;
  int num_sequences = 0;
};

class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions w;
    w.num_sequences = 64;
    w.gamma_min = 2;
    w.gamma_max = 8;
    w.row_bytes = kRowBytes;
    w.vocab_size = 1000;
    w.seed = 42;
    workload_ = *GenerateGreedyWorkload(w);
  }
  void TearDown() override {
    if (batcher_ != nullptr) {
      backend_.Resume();
      batcher_->Stop();
    }
  }

  // The server's defaults: a free slot takes whatever is queued, at once,
  // on the enqueuing thread; `preferred` > 0 adds the optional wait.
  void MakeLatencyFirst(int32_t preferred = 0, int32_t max_batch_sequences = 16) {
    Make(max_batch_sequences, 1 << 20, 64, 1 << 20, /*latency_first=*/true, preferred);
  }

  void Make(int32_t max_batch_sequences = 16, int64_t max_batch_bytes = 1 << 20,
            int32_t max_queue_sequences = 64, int64_t arena_bytes = 1 << 20,
            bool latency_first = false, int32_t preferred = 0) {
    KvArenaOptions a;
    a.metrics = &metrics_;
    a.clock = &clock_;
    a.reap_interval = absl::ZeroDuration();
    a.max_bytes_per_client = arena_bytes_per_client_;
    arena_ = *KvArena::Create(*backend_.AllocateArenaMemory(arena_bytes), a);
    BatcherOptions o;
    o.max_queued_sequences_per_client = queued_sequences_per_client_;
    o.max_batch_sequences = max_batch_sequences;
    o.max_batch_bytes = max_batch_bytes;
    o.preferred_batch_sequences = latency_first ? preferred : max_batch_sequences;
    o.max_queue_delay = latency_first && preferred == 0 ? absl::ZeroDuration() : kDelay;
    o.max_queue_sequences = max_queue_sequences;
    o.backend = &backend_;
    o.arena = arena_.get();
    o.metrics = &metrics_;
    o.clock = &clock_;
    o.start_thread = false;
    o.dispatch_on_enqueue = latency_first;
    o.on_backend_failure = [this](const absl::Status& s) { failure_ = s; };
    batcher_ = *Batcher::Create(o);
  }

  // Enqueues sequences [first, first + n) as one request.
  absl::Status Enqueue(Call& call, int first, int n,
                       v1::KvReturn kv_return = v1::KV_RETURN_HANDLE,
                       absl::Time deadline = absl::InfiniteFuture(),
                       std::function<bool()> cancelled = nullptr, int vocab = 0) {
    client::GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    r.kv_return = kv_return;
    call.request = *client::BuildGreedyRequest(workload_, r);
    if (vocab > 0) {
      for (auto& s : *call.request.mutable_sequences()) s.set_vocab_size(vocab);
    }
    call.first_sequence = first;
    call.num_sequences = n;
    auto pending = std::make_unique<PendingRequest>();
    pending->request = &call.request;
    pending->response = &call.response;
    RequestLimits limits;
    pending->shape = *ValidateVerifyRequest(call.request, limits);
    pending->client = client_;
    pending->arrival = clock_.Now();
    pending->deadline = deadline;
    pending->is_cancelled = std::move(cancelled);
    pending->done = [&call](absl::Status s) {
      call.status = std::move(s);
      call.answered.Notify();
    };
    last_reason_.reset();
    RejectReason reason;
    absl::Status status = batcher_->Enqueue(std::move(pending), &reason);
    if (!status.ok()) last_reason_ = reason;
    return status;
  }

  // Enqueue as `client` (PendingRequest::client).
  absl::Status EnqueueAs(const std::string& client, Call& call, int first, int n,
                         v1::KvReturn kv_return = v1::KV_RETURN_HANDLE,
                         absl::Time deadline = absl::InfiniteFuture(),
                         std::function<bool()> cancelled = nullptr) {
    client_ = client;
    absl::Status status = Enqueue(call, first, n, kv_return, deadline, std::move(cancelled));
    client_.clear();
    return status;
  }

  // Runs the loop (timers due at once) until every call has its answer.
  template <size_t N>
  void DispatchUntilAnswered(Call (&calls)[N]) {
    const absl::Time limit = absl::Now() + absl::Seconds(10);
    for (;;) {
      bool all = true;
      for (Call& c : calls) all = all && c.answered.HasBeenNotified();
      if (all) return;
      ASSERT_LT(absl::Now(), limit) << "requests still unanswered";
      clock_.Advance(kDelay);
      batcher_->RunOnce();
      absl::SleepFor(absl::Milliseconds(1));  // completions free the slots
    }
  }

  // The arena bytes a request for sequences [first, first + n) is charged
  // while queued or running: its rows' upper bound, sum(gamma) * row_bytes.
  int64_t RowBound(int first, int n) {
    client::GreedyRequestOptions r;
    r.first_sequence = first;
    r.num_sequences = n;
    return ValidateVerifyRequest(*client::BuildGreedyRequest(workload_, r), RequestLimits{})
               ->total_draft_rows *
           kRowBytes;
  }

  absl::Status Check(const Call& call, v1::KvReturn kv_return) {
    std::optional<std::string> fetched;
    if (kv_return == v1::KV_RETURN_HANDLE) {
      auto region = arena_->Lookup(call.response.kv().id());
      if (!region.ok()) return region.status();
      fetched.emplace((*region)->bytes(), '\0');
      if (absl::Status s = (*region)->CopyToHost(
              0, (*region)->bytes(), reinterpret_cast<std::byte*>(fetched->data()));
          !s.ok()) {
        return s;
      }
    }
    client::GreedyCheckOptions c;
    c.first_sequence = call.first_sequence;
    c.num_sequences = call.num_sequences;
    c.kv_return = kv_return;
    return client::CheckGreedyResponse(
        workload_, c, call.response,
        fetched ? std::optional(client::AsBytes(*fetched)) : std::nullopt);
  }

  // Set before Make(): the per-client limits (0 = none).
  int32_t queued_sequences_per_client_ = 0;
  int64_t arena_bytes_per_client_ = 0;
  std::string client_;                       // of the next Enqueue
  std::optional<RejectReason> last_reason_;  // of the last refused Enqueue
  FakeClock clock_;
  NoopServerMetrics metrics_;
  ControllableBackend backend_;
  std::unique_ptr<KvArena> arena_;
  std::unique_ptr<Batcher> batcher_;
  GreedyWorkload workload_;
  absl::Status failure_;
};

TEST_F(BatcherTest, FlushesWhenOldestRequestReachesDelayBudget) {
  Make();
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());
  clock_.Advance(absl::Microseconds(50));
  ASSERT_THAT(Enqueue(b, 1, 2), IsOk());
  ASSERT_THAT(Enqueue(c, 3, 1), IsOk());
  // The timer is the oldest request's budget, not the newest's.
  EXPECT_EQ(batcher_->RunOnce(), clock_.Now() + kDelay - absl::Microseconds(50));
  clock_.Advance(kDelay - absl::Microseconds(51));
  batcher_->RunOnce();
  EXPECT_TRUE(backend_.batch_sequences().empty());
  clock_.Advance(absl::Microseconds(1));
  EXPECT_EQ(batcher_->RunOnce(), absl::InfiniteFuture());
  for (Call* call : {&a, &b, &c}) {
    call->answered.WaitForNotification();
    ASSERT_THAT(call->status, IsOk());
    EXPECT_THAT(Check(*call, v1::KV_RETURN_HANDLE), IsOk());
    EXPECT_EQ(call->response.timing().batch_requests(), 3);
    EXPECT_EQ(call->response.timing().batch_sequences(), 4);
    EXPECT_EQ(call->response.timing().path(), v1::EXECUTION_PATH_CPU);
  }
  EXPECT_EQ(a.response.timing().queue_ns(), 200'000);
  EXPECT_EQ(b.response.timing().queue_ns(), 150'000);
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(4));
}

TEST_F(BatcherTest, FlushesAtSequenceLimitWithoutWaiting) {
  Make(/*max_batch_sequences=*/4);
  Call a, b;
  ASSERT_THAT(Enqueue(a, 0, 2), IsOk());
  batcher_->RunOnce();
  EXPECT_TRUE(backend_.batch_sequences().empty());
  ASSERT_THAT(Enqueue(b, 2, 2), IsOk());
  batcher_->RunOnce();  // same instant: full, so no delay
  a.answered.WaitForNotification();
  b.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(4));
}

TEST_F(BatcherTest, FlushesAtByteLimit) {
  Call a, b;
  Make(/*max_batch_sequences=*/64, /*max_batch_bytes=*/1);
  // Every request alone exceeds 1 byte: each forms a batch by itself, at once.
  ASSERT_THAT(Enqueue(a, 0, 3), IsOk());
  ASSERT_THAT(Enqueue(b, 3, 2), IsOk());
  batcher_->RunOnce();
  a.answered.WaitForNotification();
  b.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(3, 2));
  EXPECT_THAT(Check(a, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_THAT(Check(b, v1::KV_RETURN_HANDLE), IsOk());
}

TEST_F(BatcherTest, NeverSplitsARequest) {
  Make(/*max_batch_sequences=*/4);
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 3), IsOk());
  ASSERT_THAT(Enqueue(b, 3, 3), IsOk());
  // 6 queued >= 4: ready, but b does not fit beside a; a goes alone. Then
  // b + c make 4, a full batch again.
  ASSERT_THAT(Enqueue(c, 6, 1), IsOk());
  batcher_->RunOnce();
  for (Call* call : {&a, &b, &c}) call->answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(3, 4));
  EXPECT_EQ(b.response.timing().batch_requests(), 2);
  for (Call* call : {&a, &b, &c}) EXPECT_THAT(Check(*call, v1::KV_RETURN_HANDLE), IsOk());
}

TEST_F(BatcherTest, DifferentBatchKeysNeverMerge) {
  Make();
  Call a, b;
  ASSERT_THAT(Enqueue(a, 0, 2, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(), nullptr, 1000), IsOk());
  ASSERT_THAT(Enqueue(b, 2, 2, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(), nullptr, 2000), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  a.answered.WaitForNotification();
  b.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(2, 2));
}

TEST_F(BatcherTest, InlineAndNoneReturnTheirRowsToTheArena) {
  Make();
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 3, v1::KV_RETURN_INLINE), IsOk());
  ASSERT_THAT(Enqueue(b, 3, 3, v1::KV_RETURN_HANDLE), IsOk());
  clock_.Advance(absl::Microseconds(1));  // so the dispatch order is defined
  ASSERT_THAT(Enqueue(c, 6, 3, v1::KV_RETURN_NONE), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  for (Call* call : {&a, &b, &c}) call->answered.WaitForNotification();
  EXPECT_THAT(Check(a, v1::KV_RETURN_INLINE), IsOk());
  EXPECT_THAT(Check(b, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_THAT(Check(c, v1::KV_RETURN_NONE), IsOk());
  // NONE is its own batch key (no rows staged): two batches.
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(6, 3));
  // Only b's handle still holds bytes.
  EXPECT_EQ(arena_->used_bytes(), b.response.kv().num_rows() * kRowBytes);
  EXPECT_EQ(arena_->live_handles(), 1);
}

// Inline answers are cut from one read of the batch's packed rows; a handle
// request between two inline ones must neither shift their bytes nor lose
// its own rows.
TEST_F(BatcherTest, InlineAnswersAroundAHandleRequestCarryTheirOwnRows) {
  Make();
  // Handle first, so the inline span starts mid-batch.
  Call a, b, c, d;
  ASSERT_THAT(Enqueue(a, 0, 2, v1::KV_RETURN_HANDLE), IsOk());
  ASSERT_THAT(Enqueue(b, 2, 3, v1::KV_RETURN_INLINE), IsOk());
  ASSERT_THAT(Enqueue(c, 5, 2, v1::KV_RETURN_HANDLE), IsOk());
  ASSERT_THAT(Enqueue(d, 7, 4, v1::KV_RETURN_INLINE), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  for (Call* call : {&a, &b, &c, &d}) call->answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(11));
  ASSERT_GT(a.response.kv().num_rows(), 0) << "the span must not start at row 0";
  EXPECT_THAT(Check(a, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_THAT(Check(b, v1::KV_RETURN_INLINE), IsOk());
  EXPECT_THAT(Check(c, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_THAT(Check(d, v1::KV_RETURN_INLINE), IsOk());
  EXPECT_EQ(arena_->used_bytes(),
            (a.response.kv().num_rows() + c.response.kv().num_rows()) * kRowBytes);
}

TEST_F(BatcherTest, ExpiredRequestIsAnsweredAndNeverExecuted) {
  Make();
  Call a, b;
  ASSERT_THAT(Enqueue(a, 0, 1, v1::KV_RETURN_HANDLE, clock_.Now() + absl::Microseconds(50)), IsOk());
  ASSERT_THAT(Enqueue(b, 1, 1), IsOk());
  // The earliest deadline is the next timer.
  EXPECT_EQ(batcher_->RunOnce(), clock_.Now() + absl::Microseconds(50));
  clock_.Advance(absl::Microseconds(50));
  batcher_->RunOnce();
  ASSERT_TRUE(a.answered.HasBeenNotified());
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                 HasSubstr("in the queue; the request was not executed")));
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  b.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(1));  // b alone
  EXPECT_EQ(a.response.results_size(), 0);
}

TEST_F(BatcherTest, CancelledRequestIsAnsweredAndNeverExecuted) {
  Make();
  Call a;
  bool cancelled = false;
  ASSERT_THAT(Enqueue(a, 0, 2, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(),
                      [&cancelled] { return cancelled; }),
              IsOk());
  batcher_->RunOnce();
  cancelled = true;
  batcher_->RunOnce();
  ASSERT_TRUE(a.answered.HasBeenNotified());
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_TRUE(backend_.batch_sequences().empty());
  EXPECT_EQ(batcher_->queued_sequences(), 0);
}

TEST_F(BatcherTest, FullQueueIsResourceExhaustedImmediately) {
  Make(/*max_batch_sequences=*/4, 1 << 20, /*max_queue_sequences=*/5);
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 3), IsOk());
  EXPECT_THAT(Enqueue(b, 3, 3), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("queue full: 3 sequences queued + 3 would "
                                                   "exceed max_queue_sequences=5")));
  ASSERT_THAT(Enqueue(c, 6, 2), IsOk());
  EXPECT_FALSE(b.answered.HasBeenNotified());  // the caller answers
  EXPECT_EQ(batcher_->queued_sequences(), 5);
  batcher_->Stop();  // answers a and c before they go out of scope
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_THAT(c.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
}

TEST_F(BatcherTest, FullArenaFailsTheBatchAndKeepsLiveHandles) {
  // Room for one small batch's upper bound, not for a large one.
  Make(16, 1 << 20, 64, /*arena_bytes=*/16 * kRowBytes);
  Call small;
  ASSERT_THAT(Enqueue(small, 0, 1), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  small.answered.WaitForNotification();
  ASSERT_THAT(small.status, IsOk());
  Call big;
  ASSERT_THAT(Enqueue(big, 1, 8), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  big.answered.WaitForNotification();
  EXPECT_THAT(big.status, StatusIs(absl::StatusCode::kResourceExhausted,
                                   HasSubstr("KV arena full")));
  EXPECT_THAT(Check(small, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_EQ(batcher_->in_flight_batches(), 0);
}

TEST_F(BatcherTest, KeepsAtMostTheBackendsInFlightLimit) {
  Make(/*max_batch_sequences=*/2);
  backend_.Pause();
  Call calls[3];
  for (int i = 0; i < 3; ++i) ASSERT_THAT(Enqueue(calls[i], 2 * i, 2), IsOk());
  // The third batch is ready but blocked: no timer (a completion wakes the
  // loop), so the thread would not spin on a past delay budget.
  EXPECT_EQ(batcher_->RunOnce(), absl::InfiniteFuture());
  EXPECT_EQ(backend_.held_batches(), 2);  // the CPU backend allows 2
  EXPECT_EQ(batcher_->in_flight_batches(), 2);
  EXPECT_EQ(batcher_->queued_sequences(), 2);
  backend_.Resume();
  calls[0].answered.WaitForNotification();
  calls[1].answered.WaitForNotification();
  // Completions release their in-flight slot before answering.
  EXPECT_EQ(batcher_->in_flight_batches(), 0);
  batcher_->RunOnce();
  calls[2].answered.WaitForNotification();
  for (Call& c : calls) EXPECT_THAT(Check(c, v1::KV_RETURN_HANDLE), IsOk());
}

TEST_F(BatcherTest, DrainFlushesAtOnceAndRefusesNewRequests) {
  Make();
  Call a, b;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());
  batcher_->StartDrain();
  EXPECT_THAT(Enqueue(b, 1, 1), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("draining")));
  batcher_->RunOnce();  // no delay while draining
  a.answered.WaitForNotification();
  EXPECT_THAT(a.status, IsOk());
  EXPECT_TRUE(batcher_->WaitIdle(absl::Now() + absl::Seconds(5)));
}

TEST_F(BatcherTest, StopAnswersQueuedRequestsUnavailable) {
  Make();
  Call a;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());
  batcher_->Stop();
  ASSERT_TRUE(a.answered.HasBeenNotified());
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
}

TEST_F(BatcherTest, BackendFailureFailsRequestsInternalAndIsReported) {
  Make();
  backend_.Fail(absl::InternalError("illegal memory access (injected)"));
  Call a, b;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  a.answered.WaitForNotification();
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kInternal,
                                 HasSubstr("illegal memory access (injected)")));
  EXPECT_THAT(failure_, StatusIs(absl::StatusCode::kInternal, HasSubstr("illegal memory")));
  EXPECT_THAT(Enqueue(b, 1, 1), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("backend failed")));
  EXPECT_EQ(arena_->used_bytes(), 0);
}

TEST_F(BatcherTest, ThreadedModeFlushesOnRealTime) {
  // With its thread, the batcher needs no RunOnce calls (real clock here).
  KvArenaOptions a;
  a.metrics = &metrics_;
  a.reap_interval = absl::ZeroDuration();
  arena_ = *KvArena::Create(*backend_.AllocateArenaMemory(1 << 20), a);
  BatcherOptions o;
  o.preferred_batch_sequences = o.max_batch_sequences;  // the timer path
  o.max_queue_delay = absl::Microseconds(100);
  o.backend = &backend_;
  o.arena = arena_.get();
  o.metrics = &metrics_;
  batcher_ = *Batcher::Create(o);
  Call calls[8];
  for (int i = 0; i < 8; ++i) {
    client::GreedyRequestOptions r;
    r.first_sequence = i;
    calls[i].request = *client::BuildGreedyRequest(workload_, r);
    calls[i].first_sequence = i;
    calls[i].num_sequences = 1;
    auto pending = std::make_unique<PendingRequest>();
    pending->request = &calls[i].request;
    pending->response = &calls[i].response;
    pending->shape = *ValidateVerifyRequest(calls[i].request, RequestLimits{});
    pending->arrival = absl::Now();
    Call* call = &calls[i];
    pending->done = [call](absl::Status s) {
      call->status = s;
      call->answered.Notify();
    };
    ASSERT_THAT(batcher_->Enqueue(std::move(pending)), IsOk());
  }
  for (Call& c : calls) {
    c.answered.WaitForNotification();
    ASSERT_THAT(c.status, IsOk());
    EXPECT_THAT(Check(c, v1::KV_RETURN_HANDLE), IsOk());
  }
}

// ---- latency first (issue #12) -------------------------------------------

TEST_F(BatcherTest, IdleBatcherDispatchesOnTheEnqueuingThreadWithoutWaiting) {
  MakeLatencyFirst();
  Call a;
  ASSERT_THAT(Enqueue(a, 0, 3), IsOk());
  // No RunOnce, no clock movement: Enqueue itself formed and submitted it.
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(3));
  a.answered.WaitForNotification();
  ASSERT_THAT(a.status, IsOk());
  EXPECT_THAT(Check(a, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_EQ(a.response.timing().queue_ns(), 0);
  EXPECT_EQ(a.response.timing().batch_requests(), 1);
  EXPECT_EQ(batcher_->queued_sequences(), 0);
}

TEST_F(BatcherTest, BusySlotsAccumulateOneBatchForTheNextFreeSlot) {
  MakeLatencyFirst();
  backend_.Pause();
  Call a, b, c, d, e;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());  // slot 1
  ASSERT_THAT(Enqueue(b, 1, 2), IsOk());  // slot 2: the CPU backend allows 2
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(1, 2));
  ASSERT_THAT(Enqueue(c, 3, 2), IsOk());  // every slot busy: these wait
  clock_.Advance(absl::Microseconds(7));
  ASSERT_THAT(Enqueue(d, 5, 1), IsOk());
  ASSERT_THAT(Enqueue(e, 6, 3), IsOk());
  EXPECT_EQ(batcher_->queued_sequences(), 6);
  // No timer while they wait for a slot: a completion wakes the loop.
  EXPECT_EQ(batcher_->RunOnce(), absl::InfiniteFuture());
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(1, 2));
  backend_.Resume();
  a.answered.WaitForNotification();
  b.answered.WaitForNotification();
  clock_.Advance(absl::Microseconds(3));
  batcher_->RunOnce();  // what the loop does when a completion wakes it
  for (Call* call : {&c, &d, &e}) {
    call->answered.WaitForNotification();
    ASSERT_THAT(call->status, IsOk());
    EXPECT_THAT(Check(*call, v1::KV_RETURN_HANDLE), IsOk());
    EXPECT_EQ(call->response.timing().batch_requests(), 3);
  }
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(1, 2, 6));
  EXPECT_EQ(c.response.timing().queue_ns(), 10'000);
  EXPECT_EQ(d.response.timing().queue_ns(), 3'000);
}

TEST_F(BatcherTest, BelowThePreferredSizeABatchWaitsAtMostTheDelay) {
  MakeLatencyFirst(/*preferred=*/4);
  Call a, b, c;
  ASSERT_THAT(Enqueue(a, 0, 1), IsOk());
  EXPECT_TRUE(backend_.batch_sequences().empty());  // 1 < 4: waits
  EXPECT_EQ(batcher_->RunOnce(), clock_.Now() + kDelay);
  ASSERT_THAT(Enqueue(b, 1, 3), IsOk());  // 4 reached: goes on this thread
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(4));
  a.answered.WaitForNotification();
  b.answered.WaitForNotification();
  EXPECT_EQ(a.response.timing().batch_requests(), 2);
  // A lone small request goes when its delay is up.
  ASSERT_THAT(Enqueue(c, 4, 2), IsOk());
  clock_.Advance(kDelay - absl::Microseconds(1));
  batcher_->RunOnce();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(4));
  clock_.Advance(absl::Microseconds(1));
  batcher_->RunOnce();
  c.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(4, 2));
  EXPECT_EQ(c.response.timing().queue_ns(), absl::ToInt64Nanoseconds(kDelay));
  EXPECT_THAT(Check(c, v1::KV_RETURN_HANDLE), IsOk());
}

TEST_F(BatcherTest, AcrossKeysTheOldestHeadGoesFirstSoNoKeyStarves) {
  MakeLatencyFirst(/*preferred=*/0, /*max_batch_sequences=*/2);
  backend_.Pause();
  Call a1, a2, b1, a3, a4, a5;
  const auto enqueue = [&](Call& call, int first, int vocab) {
    ASSERT_THAT(Enqueue(call, first, 2, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(), nullptr,
                        vocab),
                IsOk());
    clock_.Advance(absl::Microseconds(1));
  };
  enqueue(a1, 0, 1000);  // both slots taken by key A
  enqueue(a2, 2, 1000);
  enqueue(b1, 4, 2000);  // key B, older than what key A queues next
  enqueue(a3, 6, 1000);
  enqueue(a4, 8, 1000);
  enqueue(a5, 10, 1000);
  EXPECT_EQ(batcher_->queued_sequences(), 8);
  backend_.Resume();
  a1.answered.WaitForNotification();
  a2.answered.WaitForNotification();
  // Two slots free: B's head is the oldest, so B goes before key A's backlog.
  batcher_->RunOnce();
  b1.answered.WaitForNotification();
  a3.answered.WaitForNotification();
  batcher_->RunOnce();
  a4.answered.WaitForNotification();
  a5.answered.WaitForNotification();
  EXPECT_THAT(backend_.batch_sequences(), ElementsAre(2, 2, 2, 2, 2, 2));
  EXPECT_THAT(backend_.batch_vocab_sizes(), ElementsAre(1000, 1000, 2000, 1000, 1000, 1000));
  EXPECT_EQ(b1.response.timing().queue_ns(), 4'000);
  for (Call* call : {&a1, &a2, &b1, &a3, &a4, &a5}) {
    ASSERT_THAT(call->status, IsOk());
    EXPECT_THAT(Check(*call, v1::KV_RETURN_HANDLE), IsOk());
  }
}

// ---- per-client limits and fairness (issue #15, item 12) -----------------

TEST_F(BatcherTest, PerClientQueueLimitRefusesOnlyThatClient) {
  queued_sequences_per_client_ = 4;
  Make(/*max_batch_sequences=*/16, 1 << 20, /*max_queue_sequences=*/64);
  Call a1, a2, a3, b1, b2;
  ASSERT_THAT(EnqueueAs("flood", a1, 0, 3), IsOk());
  EXPECT_THAT(EnqueueAs("flood", a2, 3, 2),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("client \"flood\" has 3 sequences queued + 2 would exceed "
                                 "max_queued_sequences_per_client=4")));
  EXPECT_EQ(last_reason_, RejectReason::kClientQueueLimit);
  EXPECT_FALSE(a2.answered.HasBeenNotified());  // the caller answers
  // Another client has its own allowance; the flooder still has room for 1.
  ASSERT_THAT(EnqueueAs("calm", b1, 5, 4), IsOk());
  ASSERT_THAT(EnqueueAs("flood", a3, 9, 1), IsOk());
  EXPECT_EQ(batcher_->queued_sequences("flood"), 4);
  EXPECT_EQ(batcher_->queued_sequences("calm"), 4);
  EXPECT_EQ(batcher_->queued_sequences(), 8);
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  for (Call* call : {&a1, &a3, &b1}) {
    call->answered.WaitForNotification();
    ASSERT_THAT(call->status, IsOk());
    EXPECT_THAT(Check(*call, v1::KV_RETURN_HANDLE), IsOk());
  }
  // Dispatched sequences no longer count: the flooder may queue again.
  EXPECT_EQ(batcher_->queued_sequences("flood"), 0);
  ASSERT_THAT(EnqueueAs("flood", b2, 10, 4), IsOk());
  batcher_->Stop();  // answers b2 before it goes out of scope
}

TEST_F(BatcherTest, ExpiredCancelledAndStoppedRequestsLeaveTheClientsCount) {
  queued_sequences_per_client_ = 4;
  Make();
  Call a, b, c;
  bool cancelled = false;
  ASSERT_THAT(EnqueueAs("x", a, 0, 1, v1::KV_RETURN_HANDLE, clock_.Now() + absl::Microseconds(10)),
              IsOk());
  ASSERT_THAT(EnqueueAs("x", b, 1, 2, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(),
                        [&cancelled] { return cancelled; }),
              IsOk());
  ASSERT_THAT(EnqueueAs("x", c, 3, 1), IsOk());
  EXPECT_EQ(batcher_->queued_sequences("x"), 4);
  clock_.Advance(absl::Microseconds(10));
  cancelled = true;
  batcher_->RunOnce();
  ASSERT_TRUE(a.answered.HasBeenNotified());
  ASSERT_TRUE(b.answered.HasBeenNotified());
  EXPECT_EQ(batcher_->queued_sequences("x"), 1);
  batcher_->Stop();
  EXPECT_THAT(c.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_EQ(batcher_->queued_sequences("x"), 0);
}

// The flooder's backlog does not delay another client's request: the next
// batch takes one request per client per turn.
TEST_F(BatcherTest, ABatchTakesClientsRoundRobinSoALateClientGoesInTheNextBatch) {
  Make(/*max_batch_sequences=*/4);
  backend_.Pause();
  // Hold one of the backend's two slots throughout: one batch forms at a time.
  Call other;
  ASSERT_THAT(Enqueue(other, 60, 4), IsOk());
  batcher_->RunOnce();
  ASSERT_EQ(backend_.held_batches(), 1);
  Call flood[8];
  for (int i = 0; i < 8; ++i) {
    ASSERT_THAT(EnqueueAs("flood", flood[i], i, 1), IsOk());
    clock_.Advance(absl::Microseconds(1));
  }
  Call calm;
  ASSERT_THAT(EnqueueAs("calm", calm, 8, 1), IsOk());  // the last to arrive
  batcher_->RunOnce();
  // Oldest-first alone would send flood[0..3]; round-robin sends flood[0],
  // calm, flood[1], flood[2].
  ASSERT_EQ(backend_.held_batches(), 2);
  EXPECT_EQ(batcher_->queued_sequences("calm"), 0);
  EXPECT_EQ(batcher_->queued_sequences("flood"), 5);
  backend_.ReleaseNewest();
  calm.answered.WaitForNotification();
  ASSERT_THAT(calm.status, IsOk());
  EXPECT_THAT(Check(calm, v1::KV_RETURN_HANDLE), IsOk());
  EXPECT_EQ(calm.response.timing().batch_requests(), 4);
  for (int i : {0, 1, 2}) flood[i].answered.WaitForNotification();
  EXPECT_FALSE(flood[3].answered.HasBeenNotified());
  backend_.Resume();
  DispatchUntilAnswered(flood);
  for (Call& c : flood) {
    ASSERT_THAT(c.status, IsOk());
    EXPECT_THAT(Check(c, v1::KV_RETURN_HANDLE), IsOk());
  }
  other.answered.WaitForNotification();
}

// The turn order carries over between batches, and a request that does not
// fit opens the next batch (its client keeps its turn).
TEST_F(BatcherTest, TheTurnOrderCarriesOverBetweenBatches) {
  Make(/*max_batch_sequences=*/3);
  backend_.Pause();
  Call other;  // holds one slot throughout: one batch forms at a time
  ASSERT_THAT(Enqueue(other, 60, 3), IsOk());
  batcher_->RunOnce();
  ASSERT_EQ(backend_.held_batches(), 1);
  Call a[3], b[3], c[2];
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(EnqueueAs("a", a[i], i, 1), IsOk());
    ASSERT_THAT(EnqueueAs("b", b[i], 3 + i, 1), IsOk());
  }
  ASSERT_THAT(EnqueueAs("c", c[0], 6, 2), IsOk());
  ASSERT_THAT(EnqueueAs("c", c[1], 8, 1), IsOk());
  // Each step: one batch forms and runs; exactly `expected` are answered.
  std::vector<Call*> answered;
  const auto step = [&](std::vector<Call*> expected) {
    batcher_->RunOnce();
    backend_.ReleaseNewest();
    for (Call* call : expected) {
      call->answered.WaitForNotification();
      ASSERT_THAT(call->status, IsOk());
      answered.push_back(call);
    }
    for (Call* call : {&a[0], &a[1], &a[2], &b[0], &b[1], &b[2], &c[0], &c[1]}) {
      EXPECT_EQ(call->answered.HasBeenNotified(),
                std::find(answered.begin(), answered.end(), call) != answered.end());
    }
  };
  // a0, b0; c0 (2 sequences) does not fit beside them and keeps its turn.
  step({&a[0], &b[0]});
  EXPECT_EQ(a[0].response.timing().batch_requests(), 2);
  step({&c[0], &a[1]});  // c0 opens the batch; b1 does not fit
  step({&b[1], &c[1], &a[2]});
  clock_.Advance(kDelay);  // b2 alone is below the preferred size: waits
  step({&b[2]});
  backend_.Resume();
  other.answered.WaitForNotification();
}

TEST_F(BatcherTest, ArenaQuotaChargesQueuedRowsAndLiveHandles) {
  arena_bytes_per_client_ = RowBound(0, 2);
  Make();
  Call a1, a2, b1, a3;
  ASSERT_THAT(EnqueueAs("a", a1, 0, 2), IsOk());
  EXPECT_EQ(arena_->quota().client_bytes("a"), RowBound(0, 2));  // queued: its upper bound
  EXPECT_THAT(EnqueueAs("a", a2, 2, 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("client \"a\" holds ", RowBound(0, 2),
                                              " KV arena bytes"))));
  EXPECT_THAT(a2.status, IsOk());  // not answered: the caller does
  EXPECT_EQ(last_reason_, RejectReason::kClientArenaQuota);
  EXPECT_THAT(EnqueueAs("a", a2, 2, 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat("would exceed max_arena_bytes_per_client=",
                                              RowBound(0, 2)))));
  ASSERT_THAT(EnqueueAs("b", b1, 3, 1), IsOk());  // b has its own quota
  EXPECT_EQ(batcher_->queued_sequences("a"), 2);  // the refused request left nothing
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  a1.answered.WaitForNotification();
  b1.answered.WaitForNotification();
  ASSERT_THAT(a1.status, IsOk());
  EXPECT_THAT(Check(a1, v1::KV_RETURN_HANDLE), IsOk());
  // Done: the client holds what its handle holds, the accepted rows.
  const int64_t handle_bytes = a1.response.kv().num_rows() * kRowBytes;
  EXPECT_EQ(arena_->quota().client_bytes("a"), handle_bytes);
  EXPECT_EQ(arena_->quota().client_bytes("b"), b1.response.kv().num_rows() * kRowBytes);
  // Released (and no reader left): the quota is free again.
  ASSERT_THAT(arena_->Release(a1.response.kv().id()), IsOk());
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  ASSERT_THAT(EnqueueAs("a", a3, 0, 2), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  a3.answered.WaitForNotification();
}

TEST_F(BatcherTest, ArenaChargeReturnsOnEveryEndingWithoutAHandle) {
  arena_bytes_per_client_ = int64_t{1} << 20;
  Make(16, 1 << 20, 64, /*arena_bytes=*/16 * kRowBytes);
  Call in, none, expired, cancelled, too_big, stopped;
  bool cancel = false;
  ASSERT_THAT(EnqueueAs("a", in, 0, 2, v1::KV_RETURN_INLINE), IsOk());
  ASSERT_THAT(EnqueueAs("a", none, 2, 2, v1::KV_RETURN_NONE), IsOk());
  ASSERT_THAT(EnqueueAs("a", expired, 4, 1, v1::KV_RETURN_HANDLE,
                        clock_.Now() + absl::Microseconds(1)),
              IsOk());
  ASSERT_THAT(EnqueueAs("a", cancelled, 5, 1, v1::KV_RETURN_HANDLE, absl::InfiniteFuture(),
                        [&cancel] { return cancel; }),
              IsOk());
  // NONE keeps no rows: charged nothing.
  EXPECT_EQ(arena_->quota().client_bytes("a"), RowBound(0, 2) + RowBound(4, 2));
  cancel = true;
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  in.answered.WaitForNotification();
  none.answered.WaitForNotification();
  ASSERT_THAT(in.status, IsOk());
  ASSERT_THAT(none.status, IsOk());
  EXPECT_THAT(expired.status,
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("not executed")));
  EXPECT_THAT(cancelled.status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  // The batch's reservation fails (arena of 16 rows): its charge returns too.
  ASSERT_THAT(EnqueueAs("a", too_big, 6, 8), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  too_big.answered.WaitForNotification();
  EXPECT_THAT(too_big.status, StatusIs(absl::StatusCode::kResourceExhausted,
                                       HasSubstr("KV arena full")));
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  ASSERT_THAT(EnqueueAs("a", stopped, 14, 1), IsOk());
  EXPECT_GT(arena_->quota().client_bytes("a"), 0);
  batcher_->Stop();
  EXPECT_THAT(stopped.status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
  EXPECT_EQ(arena_->quota().charged_clients(), 0);
}

TEST_F(BatcherTest, BackendFailureReturnsTheArenaCharge) {
  arena_bytes_per_client_ = int64_t{1} << 20;
  Make();
  backend_.Fail(absl::InternalError("injected"));
  Call a;
  ASSERT_THAT(EnqueueAs("a", a, 0, 3), IsOk());
  clock_.Advance(kDelay);
  batcher_->RunOnce();
  a.answered.WaitForNotification();
  EXPECT_THAT(a.status, StatusIs(absl::StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(arena_->quota().client_bytes("a"), 0);
}

TEST(BatcherCreateTest, RejectsInconsistentOptions) {
  ControllableBackend backend;
  NoopServerMetrics metrics;
  KvArenaOptions a;
  a.metrics = &metrics;
  a.reap_interval = absl::ZeroDuration();
  auto arena = *KvArena::Create(*backend.AllocateArenaMemory(64), a);
  BatcherOptions o;
  o.backend = &backend;
  o.arena = arena.get();
  o.metrics = &metrics;
  o.start_thread = false;
  o.max_batch_sequences = 0;
  EXPECT_THAT(Batcher::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("max_batch_sequences is 0")));
  o.max_batch_sequences = 64;
  o.max_queue_sequences = 32;
  EXPECT_THAT(Batcher::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("max_queue_sequences is 32")));
  o.max_queue_sequences = 64;
  o.preferred_batch_sequences = 65;
  EXPECT_THAT(Batcher::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("preferred_batch_sequences is 65")));
  o.preferred_batch_sequences = 0;
  o.backend = nullptr;
  EXPECT_THAT(Batcher::Create(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("backend")));
}

}  // namespace
}  // namespace specverify::server
