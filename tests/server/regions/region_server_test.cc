// The co-located data plane end to end (docs/DATA_PLANE.md): a real server on
// loopback and a real client that registers POSIX shared memory, sends
// requests whose tensors are TensorRefs into it, and takes packed rows back
// into it (KV_RETURN_REGION). Parameterized by --device: the CPU backend
// always; the CUDA executor (shared memory mapped for the device) when a GPU
// is visible, skipped visibly otherwise. CUDA IPC regions are tested by
// tests/server/cuda/cuda_region_test.cc.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/region.h"
#include "client/sampled_requests.h"
#include "client/tree_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"
#include "server/app/verifier_server.h"
#include "tests/server/testing/device_server_test.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::client::BuildGreedyRequest;
using ::specverify::client::CheckGreedyResponse;
using ::specverify::client::GreedyCheckOptions;
using ::specverify::client::GreedyRequestOptions;
using ::specverify::client::RegionWriter;
using ::specverify::client::SharedMemoryRegion;
using ::specverify::client::VerifierClient;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// A shm name unique to this process and test, so parallel CTest runs never
// collide in /dev/shm.
std::string UniqueShmName(const std::string& tag) {
  static int counter = 0;
  return absl::StrCat("specverify-test-", getpid(), "-", tag, "-", counter++);
}

class RegionServerTest : public testing::DeviceServerTest {
 protected:
  void SetUp() override {
    DeviceServerTest::SetUp();
    options_.kv_arena_bytes = 16 << 20;
    options_.max_regions = 4;
    options_.max_region_bytes = 64 << 20;
  }
  // A registered shm region of `bytes` named `name`.
  std::unique_ptr<SharedMemoryRegion> Register(const std::string& name, int64_t bytes) {
    absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> shm =
        SharedMemoryRegion::Create(UniqueShmName(name), bytes);
    EXPECT_THAT(shm, IsOk());
    EXPECT_THAT(client_->RegisterRegion((*shm)->Registration(name)), IsOk());
    return *std::move(shm);
  }

  // Rows sent inline, answered into the region: a kv_output for every draft
  // row of the request, allocated in `writer`'s region by hand.
  static absl::Status AnswerIntoRegion(RegionWriter& writer, const std::string& region,
                                       int64_t row_bytes, v1::VerifyRequest* request) {
    int64_t rows = 0;
    for (const v1::SequenceDraft& seq : request->sequences()) rows += seq.draft_tokens_size();
    const absl::StatusOr<int64_t> at = writer.Allocate(rows * row_bytes);
    if (!at.ok()) return at.status();
    v1::TensorRef* out = request->mutable_kv_output();
    out->set_region(region);
    out->set_offset_bytes(*at);
    out->set_dtype(request->sequences(0).draft_kv().dtype());
    *out->mutable_shape() = request->sequences(0).draft_kv().shape();
    out->set_shape(0, rows);
    request->set_kv_return(v1::KV_RETURN_REGION);
    return absl::OkStatus();
  }

  // A request of a one-batch-of-every-return test: its inputs moved into
  // `writer`'s region (its output there too when `into_region`), or, with
  // inputs inline, only an output allocated there when `into_region`; the
  // output's bytes poisoned with 0xA5, which WithRowsInline checks past the
  // rows.
  static absl::Status PlaceInRegion(RegionWriter& writer, const std::string& region, SharedMemoryRegion& shm,
                                    int64_t row_bytes, bool inputs_in_region, bool into_region,
                                    v1::VerifyRequest* request) {
    if (inputs_in_region) {
      if (absl::Status s = writer.MoveInputsToRegion(request, into_region); !s.ok()) return s;
    } else if (into_region) {
      if (absl::Status s = AnswerIntoRegion(writer, region, row_bytes, request); !s.ok()) return s;
    }
    if (into_region) {
      const v1::TensorRef& out = request->kv_output();
      std::memset(shm.data() + out.offset_bytes(), 0xA5, out.shape(0) * row_bytes);
    }
    return absl::OkStatus();
  }

  // Sends the requests at once from threads of their own (a batch forms
  // when all are in, given preferred_batch_sequences and a long delay).
  std::vector<absl::StatusOr<v1::VerifyResponse>> VerifyTogether(const std::vector<v1::VerifyRequest>& requests) {
    std::vector<absl::StatusOr<v1::VerifyResponse>> responses(requests.size());
    std::vector<std::thread> senders;
    for (size_t r = 0; r < requests.size(); ++r) {
      senders.emplace_back([&, r] { responses[r] = client_->Verify(requests[r]); });
    }
    for (std::thread& t : senders) t.join();
    return responses;
  }

  // The answer with its rows inline, wherever they went: a handle's fetched
  // (and released), a KV_RETURN_REGION request's read from its kv_output in
  // `shm` (whose bytes past the rows must still hold the 0xA5 the test
  // wrote), an inline answer's as they are.
  absl::StatusOr<v1::VerifyResponse> WithRowsInline(const v1::VerifyRequest& request,
                                                    const v1::VerifyResponse& response,
                                                    const SharedMemoryRegion& shm, int64_t row_bytes) {
    v1::VerifyResponse as_inline = response;
    if (request.kv_return() == v1::KV_RETURN_HANDLE) {
      absl::StatusOr<std::string> fetched = client_->FetchKv(response.kv().id());
      if (!fetched.ok()) return fetched.status();
      as_inline.set_kv_inline(*std::move(fetched));
      if (auto released = client_->ReleaseKv(response.kv().id()); !released.ok()) return released.status();
    } else if (request.kv_return() == v1::KV_RETURN_REGION) {
      if (!response.kv_inline().empty()) return absl::InternalError("rows inline in a region answer");
      int64_t rows = 0;
      for (const v1::SequenceResult& result : response.results()) rows += result.kv_row_count();
      const v1::TensorRef& out = request.kv_output();
      const std::byte* at = shm.data() + out.offset_bytes();
      as_inline.set_kv_inline(
          std::string(reinterpret_cast<const char*>(at), static_cast<size_t>(rows * row_bytes)));
      for (int64_t i = rows * row_bytes; i < out.shape(0) * row_bytes; ++i) {
        if (static_cast<unsigned char>(at[i]) != 0xA5) {
          return absl::InternalError(absl::StrCat("byte ", i, " past the rows was written"));
        }
      }
    }
    return as_inline;
  }

  GreedyWorkload Greedy(int32_t sequences, int64_t row_bytes, uint64_t seed) {
    GreedyWorkloadOptions w;
    w.num_sequences = sequences;
    w.gamma_min = 1;
    w.gamma_max = 9;
    w.alpha = 0.7;
    w.row_bytes = row_bytes;
    w.vocab_size = 5000;
    w.seed = seed;
    return *GenerateGreedyWorkload(w);
  }
};

TEST_P(RegionServerTest, RegisterListUnregisterLifecycle) {
  Start();
  if (server_ == nullptr) return;
  auto shm = Register("kv", 1 << 20);
  absl::StatusOr<v1::ListRegionsResponse> list = client_->ListRegions();
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->regions_size(), 1);
  EXPECT_EQ(list->regions(0).name(), "kv");
  EXPECT_EQ(list->regions(0).kind(), v1::REGION_KIND_SYSTEM);
  EXPECT_EQ(list->regions(0).byte_size(), 1 << 20);
  EXPECT_EQ(list->regions(0).requests_in_flight(), 0);
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->regions_size(), 1);
  EXPECT_EQ(info->limits().max_regions(), 4);
  EXPECT_THAT(info->region_kinds(), ::testing::Contains("system"));

  EXPECT_THAT(client_->RegisterRegion(shm->Registration("kv")),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("kv")));
  EXPECT_THAT(client_->UnregisterRegion("kv"), IsOk());
  EXPECT_THAT(client_->UnregisterRegion("kv"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("kv")));
  list = client_->ListRegions();
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->regions_size(), 0);
}

TEST_P(RegionServerTest, RegistrationErrorsNameTheFieldAndLimit) {
  Start();
  if (server_ == nullptr) return;
  auto shm = *SharedMemoryRegion::Create(UniqueShmName("small"), 4096);
  v1::RegisterRegionRequest r = shm->Registration("bad/name");
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("region name")));
  r = shm->Registration("missing");
  r.mutable_system()->set_shm_name(UniqueShmName("never-created"));
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("system.shm_name")));
  r = shm->Registration("too-big");
  r.set_byte_size(8192);
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("4096-byte")));
  r = shm->Registration("over-limit");
  r.set_byte_size(int64_t{65} << 20);
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_region_bytes")));
  v1::RegisterRegionRequest none;
  none.set_name("none");
  none.set_byte_size(16);
  EXPECT_THAT(client_->RegisterRegion(none),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("memory is not set")));
  if (IsCpu()) {
    v1::RegisterRegionRequest cuda;
    cuda.set_name("gpu");
    cuda.set_byte_size(16);
    cuda.mutable_cuda()->set_ipc_handle(std::string(64, 'x'));
    EXPECT_THAT(client_->RegisterRegion(cuda),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("CUDA backend")));
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(client_->RegisterRegion(shm->Registration(absl::StrCat("r", i))), IsOk());
  }
  EXPECT_THAT(client_->RegisterRegion(shm->Registration("r4")),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_regions=4")));
}

// Greedy requests with KV rows in a region and the packed rows returned into
// it: the same answers and bytes as the workload's oracle, and no payload
// byte copied on the host but the tokens.
TEST_P(RegionServerTest, GreedyRowsInAndOutOfARegionMatchTheOracle) {
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 96;
  const GreedyWorkload w = Greedy(24, kRowBytes, 7);
  auto shm = Register("worker", 8 << 20);
  RegionWriter writer("worker", shm->data(), shm->size());
  constexpr int32_t kPerRequest = 4;
  for (int32_t first = 0; first < w.num_sequences(); first += kPerRequest) {
    GreedyRequestOptions o;
    o.first_sequence = first;
    o.num_sequences = kPerRequest;
    o.kv_return = v1::KV_RETURN_INLINE;
    v1::VerifyRequest request = *BuildGreedyRequest(w, o);
    writer.Reset();
    ASSERT_THAT(writer.MoveInputsToRegion(&request, /*return_into_region=*/true), IsOk());
    ASSERT_TRUE(request.sequences(0).has_draft_kv_ref());
    // Poison the output so rows that were not written show.
    const int64_t out = request.kv_output().offset_bytes();
    std::memset(shm->data() + out, 0xA5, request.kv_output().shape(0) * kRowBytes);
    absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
    ASSERT_THAT(response, IsOk());
    EXPECT_TRUE(response->kv_inline().empty());
    EXPECT_FALSE(response->has_kv());
    int64_t rows = 0;
    int64_t token_bytes = 0;
    for (int32_t i = 0; i < kPerRequest; ++i) {
      rows += response->results(i).kv_row_count();
      token_bytes += 4 * (2 * w.gamma(first + i) + 1);
    }
    // The answer as if inline: the region's rows in kv_inline, then the oracle.
    v1::VerifyResponse as_inline = *response;
    as_inline.set_kv_inline(std::string(reinterpret_cast<const char*>(shm->data() + out),
                                        static_cast<size_t>(rows * kRowBytes)));
    GreedyCheckOptions check;
    check.first_sequence = first;
    check.num_sequences = kPerRequest;
    check.kv_return = v1::KV_RETURN_INLINE;
    EXPECT_THAT(CheckGreedyResponse(w, check, as_inline), IsOk()) << "sequences " << first;
    // Rows past the packed count are untouched.
    if (rows < request.kv_output().shape(0)) {
      EXPECT_EQ(static_cast<unsigned char>(shm->data()[out + rows * kRowBytes]), 0xA5);
    }
    EXPECT_EQ(response->timing().host_copy_in_bytes(), token_bytes);
    EXPECT_EQ(response->timing().host_copy_out_bytes(), 0);
  }
  // A request lets go of its region just after its answer is handed to
  // gRPC, so the client may read the list a moment before that.
  absl::StatusOr<v1::ListRegionsResponse> list;
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  do {
    list = client_->ListRegions();
    ASSERT_THAT(list, IsOk());
  } while (list->regions(0).requests_in_flight() != 0 && absl::Now() < limit);
  EXPECT_EQ(list->regions(0).requests_total(), w.num_sequences() / kPerRequest);
  EXPECT_EQ(list->regions(0).requests_in_flight(), 0);
}

// One batch whose requests take their rows back three ways (into a region,
// inline, as a handle), with the KV rows read from a region or sent inline:
// every request gets exactly its own rows. (A host-decided CUDA batch copies
// the region requests' rows straight into their outputs and the others into
// the arena, in one gather; the CPU backend does the same on the host.)
TEST_P(RegionServerTest, OneBatchOfEveryReturnGivesEachRequestItsOwnRows) {
  constexpr int32_t kRequests = 4;
  constexpr int32_t kPerRequest = 2;
  options_.preferred_batch_sequences = kRequests * kPerRequest;
  options_.max_queue_delay_us = 10'000'000;  // the batch forms when all four are in
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 96;
  const v1::KvReturn returns[kRequests] = {v1::KV_RETURN_REGION, v1::KV_RETURN_INLINE,
                                           v1::KV_RETURN_REGION, v1::KV_RETURN_HANDLE};
  for (const bool kv_in_region : {true, false}) {
    SCOPED_TRACE(kv_in_region ? "KV rows in the region" : "KV rows inline");
    const GreedyWorkload w = Greedy(kRequests * kPerRequest, kRowBytes, kv_in_region ? 21 : 22);
    const std::string name = kv_in_region ? "mixed-ref" : "mixed-inline";
    auto shm = Register(name, 8 << 20);
    RegionWriter writer(name, shm->data(), shm->size());
    std::vector<v1::VerifyRequest> requests;
    for (int32_t r = 0; r < kRequests; ++r) {
      GreedyRequestOptions o;
      o.first_sequence = r * kPerRequest;
      o.num_sequences = kPerRequest;
      o.kv_return = returns[r] == v1::KV_RETURN_REGION ? v1::KV_RETURN_INLINE : returns[r];
      v1::VerifyRequest request = *BuildGreedyRequest(w, o);
      const bool into_region = returns[r] == v1::KV_RETURN_REGION;
      ASSERT_THAT(PlaceInRegion(writer, name, *shm, kRowBytes, kv_in_region, into_region, &request), IsOk());
      requests.push_back(std::move(request));
    }
    const std::vector<absl::StatusOr<v1::VerifyResponse>> responses = VerifyTogether(requests);
    for (int32_t r = 0; r < kRequests; ++r) {
      SCOPED_TRACE(absl::StrCat("request ", r));
      ASSERT_THAT(responses[r], IsOk());
      const v1::VerifyResponse& response = *responses[r];
      EXPECT_EQ(response.timing().batch_requests(), kRequests);
      GreedyCheckOptions check;
      check.first_sequence = r * kPerRequest;
      check.num_sequences = kPerRequest;
      check.kv_return = returns[r];
      if (returns[r] == v1::KV_RETURN_HANDLE) {  // the handle's fields too, then its fetched rows
        const absl::StatusOr<std::string> fetched = client_->FetchKv(response.kv().id());
        ASSERT_THAT(fetched, IsOk());
        EXPECT_THAT(CheckGreedyResponse(w, check, response, client::AsBytes(*fetched)), IsOk());
        EXPECT_THAT(client_->ReleaseKv(response.kv().id()), IsOk());
        continue;
      }
      if (returns[r] == v1::KV_RETURN_REGION) {
        EXPECT_EQ(response.timing().host_copy_out_bytes(), 0);
      }
      // Inline, or into the region: the rows there as if inline (its bytes
      // past them still the poison), then the oracle.
      const absl::StatusOr<v1::VerifyResponse> as_inline = WithRowsInline(requests[r], response, *shm, kRowBytes);
      ASSERT_THAT(as_inline, IsOk());
      check.kv_return = v1::KV_RETURN_INLINE;
      EXPECT_THAT(CheckGreedyResponse(w, check, *as_inline), IsOk());
    }
  }
}

// Sampled requests whose distribution rows are read in place: bit-identical
// answers to the CPU reference (the same oracle as inline requests).
TEST_P(RegionServerTest, SampledRowsReadInPlaceMatchTheReference) {
  Start();
  if (server_ == nullptr) return;
  for (bool draft_probs : {false, true}) {
    SamplingWorkloadOptions o;
    o.num_sequences = 12;
    o.gamma_min = 1;
    o.gamma_max = 6;
    o.vocab_size = 1000;
    o.dtype = SampleDtype::kFloat32;
    o.kind = SampleValueKind::kProbabilities;
    o.shape = DistributionShape::kMixed;
    o.has_draft_probs = draft_probs;
    o.sequences_per_request = 3;
    o.seed = draft_probs ? 11 : 12;
    const SamplingWorkload w = *GenerateSamplingWorkload(o);
    client::SampledRequestSettings settings;
    settings.kv_row_bytes = 64;
    settings.kv_return = v1::KV_RETURN_INLINE;
    const RejectionHostOutputs expected = client::SampledReference(w, settings);
    auto shm = Register(draft_probs ? "dist-q" : "dist", 16 << 20);
    RegionWriter writer(draft_probs ? "dist-q" : "dist", shm->data(), shm->size());
    for (int32_t r = 0; r < client::SampledRequestCount(w); ++r) {
      v1::VerifyRequest request = *client::BuildSampledRequest(w, r, settings);
      writer.Reset();
      ASSERT_THAT(writer.MoveInputsToRegion(&request, /*return_into_region=*/false), IsOk());
      ASSERT_TRUE(request.sequences(0).sampled().target().has_values_ref());
      absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
      if (!client::ExpectedRequestStatus(w, r, expected).ok()) {
        EXPECT_THAT(response, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence")));
        continue;
      }
      ASSERT_THAT(response, IsOk());
      EXPECT_THAT(client::CheckSampledResponse(w, r, settings, expected, *response), IsOk())
          << "request " << r << " draft_probs " << draft_probs;
      // Distribution and KV rows stayed in the region: only tokens and the
      // per-sequence parameters crossed the host.
      EXPECT_LT(response->timing().host_copy_in_bytes(), 1024);
    }
  }
}

// The sampled counterpart of the test above: one batch of sampled requests
// taking their rows back into a region, inline and as a handle, with the KV
// rows (and distributions) in the region or sent inline. The sampler decides
// the accepted lengths on the device, so a CUDA batch copies each sequence's
// accepted rows once after it, from where they are to where they are
// answered (kernels/layout/row_copy.h, AcceptedRowCopyParams); every request
// must still get exactly its own rows, and nothing past them.
TEST_P(RegionServerTest, SampledBatchOfEveryReturnGivesEachRequestItsOwnRows) {
  constexpr int32_t kRequests = 4;
  constexpr int32_t kPerRequest = 2;
  options_.preferred_batch_sequences = kRequests * kPerRequest;
  options_.max_queue_delay_us = 10'000'000;  // the batch forms when all four are in
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 72;  // not a multiple of 16: the copy's narrower path
  const v1::KvReturn returns[kRequests] = {v1::KV_RETURN_REGION, v1::KV_RETURN_HANDLE,
                                           v1::KV_RETURN_REGION, v1::KV_RETURN_INLINE};
  for (const bool in_region : {true, false}) {
    SCOPED_TRACE(in_region ? "KV rows and distributions in the region" : "everything inline");
    SamplingWorkloadOptions o;
    o.num_sequences = kRequests * kPerRequest;
    o.gamma_min = 1;
    o.gamma_max = 7;
    o.vocab_size = 1000;
    o.dtype = SampleDtype::kFloat32;
    o.kind = SampleValueKind::kProbabilities;
    o.shape = DistributionShape::kPeaked;
    o.has_draft_probs = true;
    o.sequences_per_request = kPerRequest;
    o.seed = in_region ? 31 : 32;
    const SamplingWorkload w = *GenerateSamplingWorkload(o);
    client::SampledRequestSettings settings;
    settings.kv_row_bytes = kRowBytes;
    settings.kv_return = v1::KV_RETURN_INLINE;
    const RejectionHostOutputs expected = client::SampledReference(w, settings);
    const std::string name = in_region ? "sampled-ref" : "sampled-inline";
    auto shm = Register(name, 16 << 20);
    RegionWriter writer(name, shm->data(), shm->size());
    std::vector<v1::VerifyRequest> requests;
    for (int32_t r = 0; r < kRequests; ++r) {
      ASSERT_THAT(client::ExpectedRequestStatus(w, r, expected), IsOk());
      v1::VerifyRequest request = *client::BuildSampledRequest(w, r, settings);
      const bool into_region = returns[r] == v1::KV_RETURN_REGION;
      ASSERT_THAT(PlaceInRegion(writer, name, *shm, kRowBytes, in_region, into_region, &request), IsOk());
      if (in_region) {
        ASSERT_TRUE(request.sequences(0).has_draft_kv_ref());
      }
      request.set_kv_return(into_region ? v1::KV_RETURN_REGION : returns[r]);
      requests.push_back(std::move(request));
    }
    const std::vector<absl::StatusOr<v1::VerifyResponse>> responses = VerifyTogether(requests);
    int64_t accepted_rows = 0;
    for (int32_t r = 0; r < kRequests; ++r) {
      SCOPED_TRACE(absl::StrCat("request ", r));
      ASSERT_THAT(responses[r], IsOk());
      EXPECT_EQ(responses[r]->timing().batch_requests(), kRequests);
      for (const v1::SequenceResult& result : responses[r]->results()) accepted_rows += result.kv_row_count();
      // Every return checked as if inline: the rows wherever they went.
      const absl::StatusOr<v1::VerifyResponse> as_inline = WithRowsInline(requests[r], *responses[r], *shm, kRowBytes);
      ASSERT_THAT(as_inline, IsOk());
      EXPECT_THAT(client::CheckSampledResponse(w, r, settings, expected, *as_inline), IsOk());
    }
    // The workload accepts rows in more than one request, so the groups'
    // placement is exercised, not only empty copies.
    EXPECT_GT(accepted_rows, 2 * kPerRequest);
  }
}

// Greedy token trees whose KV rows are in the worker's region: the CUDA pack
// reads each tree's accepted rows where they are (kv_sources; nothing
// gathers the other nodes first), the CPU backend gathers them on the host.
// Rows returned into the region and inline, every answer against the
// workload's oracle.
TEST_P(RegionServerTest, GreedyTreesWithRowsInARegionMatchTheOracle) {
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 100;  // not a multiple of 8: the pack's narrower loads
  TreeWorkloadOptions o;
  o.num_trees = 16;
  o.num_nodes = 30;
  o.row_bytes = kRowBytes;
  o.vocab_size = 5000;
  o.level_acceptance = {0.9, 0.8, 0.6};
  o.seed = 41;
  const TreeGreedyWorkload w = *GenerateTreeGreedyWorkload(o);
  auto shm = Register("trees", 8 << 20);
  RegionWriter writer("trees", shm->data(), shm->size());
  constexpr int32_t kPerRequest = 4;
  int64_t accepted_rows = 0;
  for (const bool into_region : {true, false}) {
    for (int32_t first = 0; first < w.num_trees(); first += kPerRequest) {
      SCOPED_TRACE(absl::StrCat("trees ", first, into_region ? " into the region" : " inline"));
      v1::VerifyRequest request =
          *client::BuildTreeGreedyRequest(w, first, kPerRequest, v1::KV_RETURN_INLINE);
      writer.Reset();
      ASSERT_THAT(writer.MoveInputsToRegion(&request, into_region), IsOk());
      ASSERT_TRUE(request.sequences(0).has_draft_kv_ref());
      if (into_region) {
        std::memset(shm->data() + request.kv_output().offset_bytes(), 0xA5,
                    request.kv_output().shape(0) * kRowBytes);
      }
      absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
      ASSERT_THAT(response, IsOk());
      int64_t rows = 0;
      for (const v1::SequenceResult& result : response->results()) rows += result.kv_row_count();
      accepted_rows += rows;
      v1::VerifyResponse as_inline = *response;
      if (into_region) {
        EXPECT_TRUE(response->kv_inline().empty());
        const std::byte* at = shm->data() + request.kv_output().offset_bytes();
        as_inline.set_kv_inline(
            std::string(reinterpret_cast<const char*>(at), static_cast<size_t>(rows * kRowBytes)));
        if (rows < request.kv_output().shape(0)) {
          EXPECT_EQ(static_cast<unsigned char>(at[rows * kRowBytes]), 0xA5) << "written past the rows";
        }
      }
      EXPECT_THAT(client::CheckTreeGreedyResponse(w, first, kPerRequest, v1::KV_RETURN_INLINE, as_inline),
                  IsOk());
      EXPECT_LT(response->timing().host_copy_in_bytes(), 4096);  // tokens and parents only
    }
  }
  EXPECT_GT(accepted_rows, w.num_trees());  // paths of more than one node were packed
}

// Sampled token trees with KV rows: inline, as handles, and with the
// distributions and KV rows in the worker's region, the rows answered into
// it. The CUDA tree sampler reads the distribution rows in place (row
// tables) and the tree pack the KV rows (kv_sources). Every answer against
// the CPU reference's outcome, the rows node by node along the accepted
// path; in the region, only the tokens and tree structure cross the host.
TEST_P(RegionServerTest, SampledTreesWithKvRowsMatchTheReference) {
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 36;
  TreeSampledWorkloadOptions o;
  o.num_trees = 12;
  o.num_nodes = 20;
  o.vocab_size = 1024;
  o.has_draft_probs = true;
  o.sequences_per_request = 3;
  o.seed = 61;
  const TreeSampledWorkload w = *GenerateTreeSampledWorkload(o);
  const TreeSampledExpected expected = ReferenceTreeOutcome(w);
  auto shm = Register("sampled-trees", 16 << 20);
  RegionWriter writer("sampled-trees", shm->data(), shm->size());
  enum class Rows { kInline, kHandle, kRegion };
  for (const Rows mode : {Rows::kInline, Rows::kHandle, Rows::kRegion}) {
    int64_t accepted_rows = 0;
    for (int32_t r = 0; r < client::TreeSampledRequestCount(w); ++r) {
      SCOPED_TRACE(absl::StrCat("request ", r, " mode ", static_cast<int>(mode)));
      if (!client::TreeSampledRequestStatus(expected, w, r).ok()) continue;  // refusals: tree_server_test
      v1::VerifyRequest request = *client::BuildTreeSampledRequest(
          w, r, "", kRowBytes, mode == Rows::kHandle ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_INLINE);
      if (mode == Rows::kRegion) {
        writer.Reset();
        ASSERT_THAT(writer.MoveInputsToRegion(&request, /*return_into_region=*/true), IsOk());
        ASSERT_TRUE(request.sequences(0).has_draft_kv_ref());
        ASSERT_TRUE(request.sequences(0).sampled().target().has_values_ref());
        ASSERT_TRUE(request.sequences(0).sampled().draft().has_values_ref());
        std::memset(shm->data() + request.kv_output().offset_bytes(), 0xA5,
                    request.kv_output().shape(0) * kRowBytes);
      }
      absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
      ASSERT_THAT(response, IsOk());
      int64_t rows = 0;
      for (const v1::SequenceResult& result : response->results()) rows += result.kv_row_count();
      accepted_rows += rows;
      v1::VerifyResponse as_inline = *response;
      if (mode == Rows::kHandle) {
        ASSERT_TRUE(response->has_kv());
        const absl::StatusOr<std::string> fetched = client_->FetchKv(response->kv().id());
        ASSERT_THAT(fetched, IsOk());
        as_inline.set_kv_inline(*fetched);
        EXPECT_THAT(client_->ReleaseKv(response->kv().id()), IsOk());
      } else if (mode == Rows::kRegion) {
        EXPECT_TRUE(response->kv_inline().empty());
        const std::byte* at = shm->data() + request.kv_output().offset_bytes();
        as_inline.set_kv_inline(
            std::string(reinterpret_cast<const char*>(at), static_cast<size_t>(rows * kRowBytes)));
        if (rows < request.kv_output().shape(0)) {
          EXPECT_EQ(static_cast<unsigned char>(at[rows * kRowBytes]), 0xA5) << "written past the rows";
        }
      }
      if (rows > 0) {
        ASSERT_FALSE(as_inline.kv_inline().empty());
      }
      EXPECT_THAT(client::CheckTreeSampledResponse(w, expected, r, as_inline, kRowBytes), IsOk());
      if (mode == Rows::kRegion) {
        EXPECT_LT(response->timing().host_copy_in_bytes(), 4096);
      }
    }
    EXPECT_GT(accepted_rows, 0);
  }
}

// Token trees in one batch of every return, greedy and sampled, with the KV
// rows (and distributions) in the region or inline: each request gets exactly
// its own rows. The pack writes the region requests' rows into their outputs,
// each tree after its request's earlier trees (tree_params.h,
// TreeRowDestinations), and the others' into the arena; the third request's
// first tree is not the batch's first, so its rows are placed relative to it.
TEST_P(RegionServerTest, TreeBatchOfEveryReturnGivesEachRequestItsOwnRows) {
  constexpr int32_t kRequests = 4;
  constexpr int32_t kPerRequest = 3;
  options_.preferred_batch_sequences = kRequests * kPerRequest;
  options_.max_queue_delay_us = 10'000'000;  // the batch forms when all four are in
  Start();
  if (server_ == nullptr) return;
  constexpr int64_t kRowBytes = 40;
  const v1::KvReturn returns[kRequests] = {v1::KV_RETURN_REGION, v1::KV_RETURN_INLINE,
                                           v1::KV_RETURN_REGION, v1::KV_RETURN_HANDLE};
  TreeWorkloadOptions go;
  go.num_trees = kRequests * kPerRequest;
  go.num_nodes = 24;
  go.row_bytes = kRowBytes;
  go.vocab_size = 5000;
  go.level_acceptance = {0.95, 0.85, 0.7};
  go.seed = 71;
  const TreeGreedyWorkload greedy = *GenerateTreeGreedyWorkload(go);
  TreeSampledWorkloadOptions so;
  so.num_trees = kRequests * kPerRequest;
  so.num_nodes = 16;
  so.vocab_size = 512;
  so.has_draft_probs = true;
  so.sequences_per_request = kPerRequest;
  so.seed = 72;
  const TreeSampledWorkload sampled = *GenerateTreeSampledWorkload(so);
  const TreeSampledExpected expected = ReferenceTreeOutcome(sampled);
  for (const bool is_sampled : {false, true}) {
    for (const bool in_region : {true, false}) {
      SCOPED_TRACE(absl::StrCat(is_sampled ? "sampled" : "greedy",
                                in_region ? ", inputs in the region" : ", inputs inline"));
      const std::string name = absl::StrCat("trees-", is_sampled, in_region);
      auto shm = Register(name, 16 << 20);
      RegionWriter writer(name, shm->data(), shm->size());
      std::vector<v1::VerifyRequest> requests;
      for (int32_t r = 0; r < kRequests; ++r) {
        const bool into_region = returns[r] == v1::KV_RETURN_REGION;
        const v1::KvReturn sent = into_region ? v1::KV_RETURN_INLINE : returns[r];
        v1::VerifyRequest request;
        if (is_sampled) {
          ASSERT_THAT(client::TreeSampledRequestStatus(expected, sampled, r), IsOk());
          request = *client::BuildTreeSampledRequest(sampled, r, "", kRowBytes, sent);
        } else {
          request = *client::BuildTreeGreedyRequest(greedy, r * kPerRequest, kPerRequest, sent);
        }
        ASSERT_THAT(PlaceInRegion(writer, name, *shm, kRowBytes, in_region, into_region, &request), IsOk());
        if (in_region) {
        ASSERT_TRUE(request.sequences(0).has_draft_kv_ref());
      }
        requests.push_back(std::move(request));
      }
      const std::vector<absl::StatusOr<v1::VerifyResponse>> responses = VerifyTogether(requests);
      int64_t region_rows = 0;
      for (int32_t r = 0; r < kRequests; ++r) {
        SCOPED_TRACE(absl::StrCat("request ", r));
        ASSERT_THAT(responses[r], IsOk());
        const v1::VerifyResponse& response = *responses[r];
        EXPECT_EQ(response.timing().batch_requests(), kRequests);
        if (returns[r] == v1::KV_RETURN_REGION) {
          for (const v1::SequenceResult& result : response.results()) region_rows += result.kv_row_count();
          EXPECT_EQ(response.timing().host_copy_out_bytes(), 0);
        }
        // Every return checked as if inline: the rows wherever they went.
        const absl::StatusOr<v1::VerifyResponse> as_inline = WithRowsInline(requests[r], response, *shm, kRowBytes);
        ASSERT_THAT(as_inline, IsOk());
        if (is_sampled) {
          EXPECT_THAT(client::CheckTreeSampledResponse(sampled, expected, r, *as_inline, kRowBytes), IsOk());
        } else {
          EXPECT_THAT(client::CheckTreeGreedyResponse(greedy, r * kPerRequest, kPerRequest,
                                                      v1::KV_RETURN_INLINE, *as_inline),
                      IsOk());
        }
      }
      // Both region requests' trees accepted rows beyond one each, so the
      // placement after a request's earlier trees is exercised.
      EXPECT_GT(region_rows, 2 * kPerRequest);
    }
  }
}

TEST_P(RegionServerTest, BadReferencesAreRefusedNamingTheField) {
  Start();
  if (server_ == nullptr) return;
  const GreedyWorkload w = Greedy(2, 64, 3);
  auto shm = Register("worker", 1 << 16);
  RegionWriter writer("worker", shm->data(), shm->size());
  GreedyRequestOptions o;
  o.num_sequences = 2;
  o.kv_return = v1::KV_RETURN_INLINE;
  v1::VerifyRequest base = *BuildGreedyRequest(w, o);
  ASSERT_THAT(writer.MoveInputsToRegion(&base, /*return_into_region=*/true), IsOk());
  ASSERT_THAT(client_->Verify(base), IsOk());

  v1::VerifyRequest r = base;
  r.mutable_sequences(1)->mutable_draft_kv_ref()->set_region("nobody");
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kNotFound,
                                           HasSubstr("sequences[1].draft_kv_ref.region")));
  r = base;
  r.mutable_sequences(0)->mutable_draft_kv_ref()->set_offset_bytes((1 << 16) - 64);
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kOutOfRange,
                                           HasSubstr("sequences[0].draft_kv_ref")));
  r = base;
  r.mutable_kv_output()->set_offset_bytes(r.sequences(0).draft_kv_ref().offset_bytes());
  EXPECT_THAT(client_->Verify(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlaps")));
  r = base;
  r.mutable_kv_output()->set_shape(0, 1);
  EXPECT_THAT(client_->Verify(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_output.shape[0]")));
  r = base;
  r.clear_kv_output();
  EXPECT_THAT(client_->Verify(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_output is not set")));
  r = base;
  r.set_kv_return(v1::KV_RETURN_INLINE);
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("kv_return is not REGION")));
}

TEST_P(RegionServerTest, MisalignedDistributionRowsAreRefused) {
  Start();
  if (server_ == nullptr) return;
  SamplingWorkloadOptions o;
  o.num_sequences = 1;
  o.vocab_size = 64;
  o.sequences_per_request = 1;
  const SamplingWorkload w = *GenerateSamplingWorkload(o);
  auto shm = Register("dist", 1 << 16);
  RegionWriter writer("dist", shm->data(), shm->size());
  v1::VerifyRequest r = *client::BuildSampledRequest(w, 0, client::SampledRequestSettings{});
  ASSERT_THAT(writer.MoveInputsToRegion(&r, false), IsOk());
  r.mutable_sequences(0)->mutable_sampled()->mutable_target()->mutable_values_ref()->set_offset_bytes(4);
  EXPECT_THAT(client_->Verify(r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequences[0].sampled.target.values_ref.offset_bytes is 4")));
}

// Unregistering a region that a queued request uses: the name goes at once,
// the memory stays mapped until that request has been answered, correctly.
TEST_P(RegionServerTest, UnregisterWhileQueuedFinishesTheRequestFirst) {
  options_.preferred_batch_sequences = 60;     // the request waits for company...
  options_.max_queue_delay_us = 400'000;       // ...for up to 400 ms
  Start();
  if (server_ == nullptr) return;
  const GreedyWorkload w = Greedy(3, 128, 5);
  auto shm = Register("worker", 1 << 20);
  RegionWriter writer("worker", shm->data(), shm->size());
  GreedyRequestOptions o;
  o.num_sequences = 3;
  o.kv_return = v1::KV_RETURN_INLINE;
  v1::VerifyRequest request = *BuildGreedyRequest(w, o);
  ASSERT_THAT(writer.MoveInputsToRegion(&request, true), IsOk());
  absl::Notification answered;
  absl::StatusOr<v1::VerifyResponse> response = absl::UnknownError("none");
  client_->VerifyAsync(request, [&](absl::StatusOr<v1::VerifyResponse> r) {
    response = std::move(r);
    answered.Notify();
  });
  // Wait until the server holds the request (its use is counted).
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<v1::ListRegionsResponse> list = client_->ListRegions();
    if (list.ok() && list->regions_size() == 1 && list->regions(0).requests_in_flight() == 1) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::StatusOr<int32_t> in_flight = client_->UnregisterRegion("worker");
  ASSERT_THAT(in_flight, IsOk());
  EXPECT_EQ(*in_flight, 1);
  EXPECT_EQ(client_->ListRegions()->regions_size(), 0);
  // A new request cannot use it any more.
  EXPECT_THAT(client_->Verify(request), StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker")));
  answered.WaitForNotification();
  ASSERT_THAT(response, IsOk());
  const int64_t out = request.kv_output().offset_bytes();
  int64_t rows = 0;
  for (const auto& result : response->results()) rows += result.kv_row_count();
  v1::VerifyResponse as_inline = *response;
  as_inline.set_kv_inline(std::string(reinterpret_cast<const char*>(shm->data() + out),
                                      static_cast<size_t>(rows * 128)));
  GreedyCheckOptions check;
  check.num_sequences = 3;
  check.kv_return = v1::KV_RETURN_INLINE;
  EXPECT_THAT(CheckGreedyResponse(w, check, as_inline), IsOk());
}

INSTANTIATE_TEST_SUITE_P(Devices, RegionServerTest, ::testing::ValuesIn(testing::ServedDevices()),
                         testing::DeviceName);

}  // namespace
}  // namespace specverify::server
