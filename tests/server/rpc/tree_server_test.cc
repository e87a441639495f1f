// Token trees served (issue #14): the real server on loopback (CPU backend,
// and the CUDA executor when a GPU is visible) answers greedy and sampled
// tree drafts through Verify and VerifyStream, chains and trees in flight
// together, every answer checked against the workload's oracle / the CPU
// reference; a chain sent as a tree answers as the chain; bad trees are
// refused naming the sequence and the node; a GPU that cannot run sampled
// trees refuses them and stays in service.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "client/greedy_requests.h"
#include "client/tree_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/tree_workload.h"
#include "server/app/verifier_server.h"
#include "tests/server/testing/device_server_test.h"
#include "tests/testing/status_matchers.h"

#if SPECVERIFY_TEST_CUDA
#include <cuda_runtime_api.h>

#include "kernels/tree/tree_cuda.h"
#endif

namespace specverify::server {
namespace {

using ::specverify::client::VerifierClient;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// Whether `device` is a GPU this build cannot run sampled trees on
// (TreeSamplingSupported: no thread-block clusters, e.g. an A100, or a newer
// GPU running the build's portable PTX).
bool RefusesSampledTrees(const std::string& device) {
#if SPECVERIFY_TEST_CUDA
  bool supported = true;
  return device.rfind("cuda", 0) == 0 && cudaSetDevice(0) == cudaSuccess &&
         TreeSamplingSupported(&supported) == cudaSuccess && !supported;
#else
  (void)device;
  return false;
#endif
}

class TreeServerTest : public testing::DeviceServerTest {
 protected:
  void SetUp() override {
    DeviceServerTest::SetUp();
    options_.kv_arena_bytes = 32 << 20;
  }
  static TreeGreedyWorkload GreedyTrees(int32_t trees, int32_t nodes, uint64_t seed) {
    TreeWorkloadOptions o;
    o.num_trees = trees;
    o.num_nodes = nodes;
    o.row_bytes = 128;
    o.vocab_size = 5000;
    o.level_acceptance = {0.9, 0.8, 0.6};
    o.duplicate_sibling_rate = 0.1;
    o.seed = seed;
    return *GenerateTreeGreedyWorkload(o);
  }
};

TEST_P(TreeServerTest, GreedyTreesMatchTheOracleWithRowsInlineAndByHandle) {
  Start();
  if (server_ == nullptr) return;
  const TreeGreedyWorkload w = GreedyTrees(24, 40, 3);
  for (v1::KvReturn kv : {v1::KV_RETURN_INLINE, v1::KV_RETURN_HANDLE}) {
    for (int32_t first = 0; first < w.num_trees(); first += 4) {
      absl::StatusOr<v1::VerifyResponse> r =
          client_->Verify(*client::BuildTreeGreedyRequest(w, first, 4, kv));
      ASSERT_THAT(r, IsOk());
      EXPECT_THAT(client::CheckTreeGreedyResponse(w, first, 4, kv, *r), IsOk())
          << "trees " << first << " kv " << kv;
      if (kv == v1::KV_RETURN_HANDLE && r->has_kv()) {
        absl::StatusOr<std::string> rows = client_->FetchKv(r->kv().id());
        ASSERT_THAT(rows, IsOk());
        v1::VerifyResponse as_inline = *r;
        as_inline.set_kv_inline(*rows);
        EXPECT_THAT(client::CheckTreeGreedyResponse(w, first, 4, v1::KV_RETURN_INLINE, as_inline),
                    IsOk());
      }
    }
  }
}

// Chains and trees on one stream, many requests in flight: every answer
// matches its own oracle, whichever batch it shared.
TEST_P(TreeServerTest, ChainsAndTreesInFlightTogetherOverAStream) {
  options_.preferred_batch_sequences = 16;  // let them share batches
  options_.max_queue_delay_us = 2000;
  Start();
  if (server_ == nullptr) return;
  const TreeGreedyWorkload trees = GreedyTrees(16, 24, 9);
  GreedyWorkloadOptions go;
  go.num_sequences = 16;
  go.gamma_min = 1;
  go.gamma_max = 8;
  go.row_bytes = 128;
  go.vocab_size = 5000;
  go.seed = 10;
  const GreedyWorkload chains = *GenerateGreedyWorkload(go);
  absl::Mutex mu;
  std::map<std::string, v1::VerifyStreamResponse> answers;
  absl::BlockingCounter pending(8);
  auto stream = client_->OpenStream([&](const v1::VerifyStreamResponse& response) {
    {
      absl::MutexLock lock(&mu);
      answers[response.request_id()] = response;
    }
    pending.DecrementCount();
  });
  ASSERT_THAT(stream, IsOk());
  for (int32_t r = 0; r < 4; ++r) {
    ASSERT_THAT((*stream)->Send(*client::BuildTreeGreedyRequest(trees, r * 4, 4, v1::KV_RETURN_INLINE,
                                                                absl::StrCat("tree-", r))),
                IsOk());
    client::GreedyRequestOptions o;
    o.first_sequence = r * 4;
    o.num_sequences = 4;
    o.kv_return = v1::KV_RETURN_INLINE;
    o.request_id = absl::StrCat("chain-", r);
    ASSERT_THAT((*stream)->Send(*client::BuildGreedyRequest(chains, o)), IsOk());
  }
  pending.Wait();
  EXPECT_THAT((*stream)->Finish(), IsOk());
  for (int32_t r = 0; r < 4; ++r) {
    const v1::VerifyStreamResponse& t = answers[absl::StrCat("tree-", r)];
    ASSERT_TRUE(t.has_response()) << t.error().message();
    EXPECT_THAT(client::CheckTreeGreedyResponse(trees, r * 4, 4, v1::KV_RETURN_INLINE, t.response()),
                IsOk());
    const v1::VerifyStreamResponse& c = answers[absl::StrCat("chain-", r)];
    ASSERT_TRUE(c.has_response()) << c.error().message();
    client::GreedyCheckOptions check;
    check.first_sequence = r * 4;
    check.num_sequences = 4;
    check.kv_return = v1::KV_RETURN_INLINE;
    EXPECT_THAT(client::CheckGreedyResponse(chains, check, c.response()), IsOk());
    // A chain's accepted path is 0 .. k-1.
    for (const v1::SequenceResult& s : c.response().results()) {
      ASSERT_EQ(s.accepted_nodes_size(), s.accepted_length());
      for (int32_t d = 0; d < s.accepted_length(); ++d) EXPECT_EQ(s.accepted_nodes(d), d);
    }
  }
}

TEST_P(TreeServerTest, AChainSentAsATreeAnswersAsTheChain) {
  Start();
  if (server_ == nullptr) return;
  GreedyWorkloadOptions go;
  go.num_sequences = 6;
  go.gamma_min = 1;
  go.gamma_max = 12;
  go.row_bytes = 64;
  go.vocab_size = 5000;
  go.seed = 4;
  const GreedyWorkload chains = *GenerateGreedyWorkload(go);
  client::GreedyRequestOptions o;
  o.num_sequences = 6;
  o.kv_return = v1::KV_RETURN_INLINE;
  const v1::VerifyRequest chain = *client::BuildGreedyRequest(chains, o);
  v1::VerifyRequest as_tree = chain;
  for (v1::SequenceDraft& seq : *as_tree.mutable_sequences()) {
    for (int32_t j = 0; j < seq.draft_tokens_size(); ++j) seq.add_parent_indices(j - 1);
  }
  absl::StatusOr<v1::VerifyResponse> a = client_->Verify(chain);
  absl::StatusOr<v1::VerifyResponse> b = client_->Verify(as_tree);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ(a->results_size(), b->results_size());
  for (int i = 0; i < a->results_size(); ++i) {
    EXPECT_EQ(a->results(i).accepted_length(), b->results(i).accepted_length()) << i;
    EXPECT_EQ(a->results(i).next_token(), b->results(i).next_token()) << i;
    EXPECT_EQ(a->results(i).mismatch(), b->results(i).mismatch()) << i;
  }
  EXPECT_EQ(a->kv_inline(), b->kv_inline());
}

TEST_P(TreeServerTest, SampledTreesMatchTheCpuReference) {
  Start();
  if (server_ == nullptr) return;
  for (bool draft : {true, false}) {
    TreeSampledWorkloadOptions o;
    o.num_trees = 8;
    o.num_nodes = 24;
    o.vocab_size = 2048;
    o.has_draft_probs = draft;
    o.sequences_per_request = 4;
    o.seed = draft ? 31 : 32;
    const TreeSampledWorkload w = *GenerateTreeSampledWorkload(o);
    const TreeSampledExpected expected = ReferenceTreeOutcome(w);
    for (int32_t r = 0; r < client::TreeSampledRequestCount(w); ++r) {
      absl::StatusOr<v1::VerifyResponse> response =
          client_->Verify(*client::BuildTreeSampledRequest(w, r));
      if (RefusesSampledTrees(GetParam()) && client::TreeSampledRequestStatus(expected, w, r).ok()) {
        EXPECT_THAT(response, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("thread-block clusters")));
        continue;
      }
      if (!client::TreeSampledRequestStatus(expected, w, r).ok()) {
        EXPECT_THAT(response, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence")));
        continue;
      }
      ASSERT_THAT(response, IsOk());
      EXPECT_THAT(client::CheckTreeSampledResponse(w, expected, r, *response), IsOk())
          << "request " << r << " draft " << draft;
    }
  }
  // Refused or not, the device serves on: a greedy tree is answered.
  const TreeGreedyWorkload greedy = GreedyTrees(4, 16, 33);
  absl::StatusOr<v1::VerifyResponse> after =
      client_->Verify(*client::BuildTreeGreedyRequest(greedy, 0, 4, v1::KV_RETURN_INLINE));
  ASSERT_THAT(after, IsOk());
  EXPECT_THAT(client::CheckTreeGreedyResponse(greedy, 0, 4, v1::KV_RETURN_INLINE, *after), IsOk());
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  for (const v1::DeviceInfo& d : info->devices()) EXPECT_TRUE(d.in_service()) << d.name();
}

TEST_P(TreeServerTest, BadTreesAreRefusedNamingTheSequenceAndTheNode) {
  options_.max_tree_nodes = 32;
  Start();
  if (server_ == nullptr) return;
  const TreeGreedyWorkload w = GreedyTrees(2, 16, 5);
  const v1::VerifyRequest base = *client::BuildTreeGreedyRequest(w, 0, 2, v1::KV_RETURN_INLINE);
  v1::VerifyRequest r = base;
  r.mutable_sequences(1)->set_parent_indices(3, 3);
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("sequences[1].parent_indices[3] is 3")));
  r = base;
  r.mutable_sequences(0)->mutable_parent_indices()->RemoveLast();
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("sequences[0].parent_indices has")));
  r = base;
  r.mutable_sequences(0)->mutable_greedy()->mutable_target_tokens()->RemoveLast();
  EXPECT_THAT(client_->Verify(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("sequences[0].greedy.target_tokens")));
  const TreeGreedyWorkload big = GreedyTrees(1, 40, 6);
  EXPECT_THAT(client_->Verify(*client::BuildTreeGreedyRequest(big, 0, 1, v1::KV_RETURN_NONE)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_tree_nodes=32")));
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->limits().max_tree_nodes(), 32);
}

INSTANTIATE_TEST_SUITE_P(Devices, TreeServerTest, ::testing::ValuesIn(testing::ServedDevices()),
                         testing::DeviceName);

}  // namespace
}  // namespace specverify::server
