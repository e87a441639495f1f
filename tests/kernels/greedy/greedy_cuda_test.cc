// Parity of every CUDA greedy path (fused, two-step, naive two-step, the
// verify-only kernels, the dispatcher, CUDA-graph replays, and the
// host-decided pack of greedy_planned_pack.h) with the CPU
// reference ReferenceGreedyVerifyPack, bit for bit, over the foundation grid,
// the ragged mixes and random ragged batches. Device outputs are poisoned
// before every run so an unwritten element, or a byte written past the
// accepted rows, is caught. Without a CUDA device every test skips visibly.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/greedy/greedy_dispatch.h"
#include "kernels/greedy/greedy_planned_pack.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/random.h"
#include "tests/kernels/greedy/greedy_cuda_test_util.h"
#include "tests/testing/byte_compare.h"
#include "tests/testing/greedy_grid.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::IsOk;
using ::testing::ElementsAreArray;

#define SKIP_WITHOUT_CUDA()                                          \
  do {                                                               \
    if (!CudaDeviceAvailable()) {                                    \
      GTEST_SKIP() << "no CUDA device: GPU parity test not run here"; \
    }                                                                \
  } while (0)

// One way of running a whole batch on the device.
struct Runner {
  std::string name;
  std::function<cudaError_t(const GreedyDeviceBatch&, const GreedyScratch&,
                            cudaStream_t)>
      run;
};

std::vector<Runner> AllRunners() {
  std::vector<Runner> runners;
  for (GreedyPath path : {GreedyPath::kFused, GreedyPath::kTwoStep,
                          GreedyPath::kNaiveTwoStep}) {
    runners.push_back({GreedyPathName(path),
                       [path](const GreedyDeviceBatch& b,
                              const GreedyScratch& s, cudaStream_t stream) {
                         return LaunchGreedyVerifyPack(b, path, s, stream);
                       }});
  }
  // The fused path again on the same scratch: the look-back state the first
  // launch left behind must be clean.
  runners.push_back({"fused_again", [](const GreedyDeviceBatch& b,
                                       const GreedyScratch& s,
                                       cudaStream_t stream) {
                       return LaunchGreedyVerifyPack(b, GreedyPath::kFused, s,
                                                     stream);
                     }});
  // The dispatcher at both extremes of tau, checking what it chose.
  for (auto [tau, want] :
       {std::pair{int64_t{0}, GreedyPath::kTwoStep},
        std::pair{kFusedAlwaysThreshold, GreedyPath::kFused}}) {
    runners.push_back(
        {std::string("dispatch_") + GreedyPathName(want),
         [tau, want](const GreedyDeviceBatch& b, const GreedyScratch& s,
                     cudaStream_t stream) {
           GreedyDispatchInfo info;
           info.dispatch_threshold_bytes = tau;
           info.dispatch_threshold_source = "config";
           const GreedyDispatcher dispatcher(info, 1.0);
           GreedyPath chosen = GreedyPath::kNaiveTwoStep;
           const cudaError_t e = dispatcher.Launch(b, s, stream, &chosen);
           EXPECT_EQ(chosen, want);
           return e;
         }});
  }
  return runners;
}

void ExpectParity(const GreedyWorkload& w) {
  ASSERT_NO_FATAL_FAILURE();
  absl::StatusOr<DeviceGreedyBatch> device = DeviceGreedyBatch::Upload(w);
  ASSERT_THAT(device.status(), IsOk());
  absl::StatusOr<GreedyScratchBuffer> scratch =
      AllocateGreedyScratch(GreedyScratchLimits{}, nullptr);
  ASSERT_THAT(scratch.status(), IsOk());
  ASSERT_THAT(ValidateGreedyDeviceBatch(device->view(), scratch->view), IsOk());

  GreedyHostOutputs expected(w.input(), kDevicePoison);
  ReferenceGreedyVerifyPack(GreedyVerifyParams{w.input(), expected.view()});
  const size_t packed_bytes =
      static_cast<size_t>(expected.packed_row_offsets.back() * w.row_bytes());

  for (const Runner& runner : AllRunners()) {
    SCOPED_TRACE("path " + runner.name);
    ASSERT_THAT(device->Poison(), IsOk());
    ASSERT_EQ(runner.run(device->view(), scratch->view, nullptr), cudaSuccess);
    absl::StatusOr<GreedyHostOutputs> got = device->Download();
    ASSERT_THAT(got.status(), IsOk());
    EXPECT_THAT(got->accepted_lengths, ElementsAreArray(expected.accepted_lengths));
    EXPECT_THAT(got->next_tokens, ElementsAreArray(expected.next_tokens));
    EXPECT_THAT(got->mismatch, ElementsAreArray(expected.mismatch));
    EXPECT_THAT(got->packed_row_offsets,
                ElementsAreArray(expected.packed_row_offsets));
    const std::span<const std::byte> packed(got->packed_kv);
    const std::span<const std::byte> want(expected.packed_kv);
    EXPECT_TRUE(testing::BytesEqual(packed.first(packed_bytes),
                                    want.first(packed_bytes)));
    EXPECT_TRUE(testing::AllBytesAre(packed.subspan(packed_bytes), kDevicePoison));
  }
  // The host-decided pack: the host's decision is the reference's phases 1
  // and 2 (`expected`), the device copies. It writes the packed rows only.
  if (w.row_bytes() > 0) {
    SCOPED_TRACE("path planned_pack");
    ASSERT_THAT(device->Poison(), IsOk());
    const GreedyVerifyParams& v = device->view().params;
    const int32_t b = w.num_sequences();
    ASSERT_EQ(cudaMemcpy(v.output.packed_row_offsets, expected.packed_row_offsets.data(),
                         sizeof(int32_t) * (b + 1), cudaMemcpyHostToDevice),
              cudaSuccess);
    GreedyPlannedPack pack;
    pack.num_sequences = b;
    pack.draft_offsets = v.input.draft_offsets;
    pack.packed_row_offsets = v.output.packed_row_offsets;
    pack.draft_kv = v.input.draft_kv;
    pack.row_bytes = v.input.row_bytes;
    pack.packed_kv = v.output.packed_kv;
    for (int32_t k : expected.accepted_lengths) pack.max_accepted = std::max(pack.max_accepted, k);
    ASSERT_THAT(ValidateGreedyPlannedPack(pack), IsOk());
    ASSERT_EQ(LaunchGreedyPlannedPack(pack, nullptr), cudaSuccess);
    absl::StatusOr<GreedyHostOutputs> got = device->Download();
    ASSERT_THAT(got.status(), IsOk());
    const std::span<const std::byte> packed(got->packed_kv);
    const std::span<const std::byte> want(expected.packed_kv);
    EXPECT_TRUE(testing::BytesEqual(packed.first(packed_bytes), want.first(packed_bytes)));
    EXPECT_TRUE(testing::AllBytesAre(packed.subspan(packed_bytes), kDevicePoison));
    EXPECT_THAT(got->packed_row_offsets, ElementsAreArray(expected.packed_row_offsets));
    EXPECT_TRUE(testing::AllBytesAre(std::as_bytes(std::span(got->accepted_lengths)),
                                     kDevicePoison));
  }
  // The construction oracle agrees with the reference (guards the oracle
  // path of this test itself).
  EXPECT_THAT(expected.accepted_lengths,
              ElementsAreArray(w.expected.accepted_lengths));
}

class GreedyCudaGridTest
    : public ::testing::TestWithParam<GreedyWorkloadOptions> {};

TEST_P(GreedyCudaGridTest, EveryPathMatchesReference) {
  SKIP_WITHOUT_CUDA();
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(GetParam());
  ASSERT_THAT(w.status(), IsOk());
  ExpectParity(*w);
}

INSTANTIATE_TEST_SUITE_P(
    FoundationGrid, GreedyCudaGridTest,
    ::testing::ValuesIn(testing::GreedyFoundationGrid()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

INSTANTIATE_TEST_SUITE_P(
    Ragged, GreedyCudaGridTest,
    ::testing::ValuesIn(testing::GreedyRaggedCases()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

// Random ragged batches: shapes, row sizes (odd ones included) and acceptance
// drawn from a fixed seed; the case seed is in the test name.
std::vector<GreedyWorkloadOptions> RandomRaggedCases() {
  constexpr int kCases = 40;
  constexpr int64_t kRowChoices[] = {0, 1, 2, 3, 5, 8, 12, 16, 48, 100,
                                     256, 1000, 4096, 4098, 8192, 20000};
  SplitMix64 rng(0x5eed0004);
  std::vector<GreedyWorkloadOptions> cases;
  while (static_cast<int>(cases.size()) < kCases) {
    GreedyWorkloadOptions o;
    o.num_sequences = 1 + static_cast<int32_t>(rng.NextBelow(kMaxBatchSequences));
    o.gamma_min = 1 + static_cast<int32_t>(rng.NextBelow(kMaxDraftTokens));
    o.gamma_max = o.gamma_min + static_cast<int32_t>(
                                    rng.NextBelow(kMaxDraftTokens - o.gamma_min + 1));
    o.alpha = rng.NextDouble();
    o.row_bytes = kRowChoices[rng.NextBelow(std::size(kRowChoices))];
    o.seed = rng.Next() >> 20;
    if (int64_t{o.num_sequences} * o.gamma_max * o.row_bytes >
        testing::kMaxGridDraftKvBytes) {
      continue;
    }
    cases.push_back(o);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Random, GreedyCudaGridTest, ::testing::ValuesIn(RandomRaggedCases()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

// Batches the fused path serves prefix-first on sm_90 (fused tiles of
// 32-64 KiB in one wave; pack tiles of a quarter of that): the stress shape
// of issue #4 (b = 32, gamma = 128, 4 KiB rows: 4 rows per pack tile),
// one 16 KiB row per pack tile (every vector of every thread used), and
// 4112-byte rows (2 rows per pack tile, threads with partial vector sets).
std::vector<GreedyWorkloadOptions> StagedTileCases() {
  struct Shape {
    int32_t b, gamma_min, gamma_max;
    double alpha;
    int64_t row_bytes;
  };
  std::vector<GreedyWorkloadOptions> cases;
  uint64_t seed = 7000;
  for (const Shape& s : {Shape{32, 128, 128, 0.9, 4096},
                         Shape{5, 200, 256, 0.5, 16384},
                         Shape{40, 60, 60, 0.6, 4112}}) {
    GreedyWorkloadOptions o;
    o.num_sequences = s.b;
    o.gamma_min = s.gamma_min;
    o.gamma_max = s.gamma_max;
    o.alpha = s.alpha;
    o.row_bytes = s.row_bytes;
    o.seed = ++seed;
    cases.push_back(o);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    StagedTiles, GreedyCudaGridTest, ::testing::ValuesIn(StagedTileCases()),
    [](const auto& info) { return testing::GreedyCaseName(info.param); });

// The verify-only kernels write exactly the three per-sequence outputs.
TEST(GreedyCudaVerifyOnlyTest, ScanKernelsMatchReferenceAndWriteNothingElse) {
  SKIP_WITHOUT_CUDA();
  for (auto [b, lo, hi] : {std::tuple{1, 1, 1}, std::tuple{33, 1, 256},
                           std::tuple{4096, 30, 40}}) {
    GreedyWorkloadOptions o;
    o.num_sequences = b;
    o.gamma_min = lo;
    o.gamma_max = hi;
    o.alpha = 0.8;
    o.row_bytes = 16;
    absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
    ASSERT_THAT(w.status(), IsOk());
    absl::StatusOr<DeviceGreedyBatch> device = DeviceGreedyBatch::Upload(*w);
    ASSERT_THAT(device.status(), IsOk());
    for (GreedyScanKernel kernel :
         {GreedyScanKernel::kNaive, GreedyScanKernel::kBallot}) {
      SCOPED_TRACE(::testing::Message() << "b=" << b << " kernel "
                                        << static_cast<int>(kernel));
      ASSERT_THAT(device->Poison(), IsOk());
      ASSERT_EQ(LaunchGreedyVerifyOnly(device->view(), kernel, nullptr),
                cudaSuccess);
      absl::StatusOr<GreedyHostOutputs> got = device->Download();
      ASSERT_THAT(got.status(), IsOk());
      EXPECT_THAT(got->accepted_lengths,
                  ElementsAreArray(w->expected.accepted_lengths));
      EXPECT_THAT(got->next_tokens, ElementsAreArray(w->expected.next_tokens));
      EXPECT_THAT(got->mismatch, ElementsAreArray(w->expected.mismatch));
      EXPECT_TRUE(testing::AllBytesAre(
          std::as_bytes(std::span(got->packed_row_offsets)), kDevicePoison));
      EXPECT_TRUE(testing::AllBytesAre(got->packed_kv, kDevicePoison));
    }
  }
}

// Each path captured once into a CUDA graph and replayed: no allocation, no
// sync, no host read inside, and replays keep producing the right answer
// (the fused look-back state resets itself between replays).
// Shapes: look-back tiles (b = 300), and the prefix-first path (b = 32,
// gamma = 128: two launches, the second a programmatic dependent).
class GreedyCudaGraphTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(GreedyCudaGraphTest, EveryPathCapturesAndReplays) {
  SKIP_WITHOUT_CUDA();
  GreedyWorkloadOptions o;
  o.num_sequences = GetParam();
  o.gamma_min = o.num_sequences == 32 ? 128 : 1;
  o.gamma_max = o.num_sequences == 32 ? 128 : 130;
  o.alpha = 0.9;
  o.row_bytes = 4096;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  absl::StatusOr<DeviceGreedyBatch> device = DeviceGreedyBatch::Upload(*w);
  ASSERT_THAT(device.status(), IsOk());
  absl::StatusOr<GreedyScratchBuffer> scratch =
      AllocateGreedyScratch(GreedyScratchLimits{}, nullptr);
  ASSERT_THAT(scratch.status(), IsOk());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (GreedyPath path : {GreedyPath::kFused, GreedyPath::kTwoStep,
                          GreedyPath::kNaiveTwoStep}) {
    SCOPED_TRACE(GreedyPathName(path));
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal),
              cudaSuccess);
    const cudaError_t launched =
        LaunchGreedyVerifyPack(device->view(), path, scratch->view, stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(launched, cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_THAT(device->Poison(), IsOk());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      absl::StatusOr<GreedyHostOutputs> got = device->Download();
      ASSERT_THAT(got.status(), IsOk());
      EXPECT_THAT(got->packed_row_offsets,
                  ElementsAreArray(w->expected.packed_row_offsets));
      const size_t n = w->expected.packed_kv.size();
      EXPECT_TRUE(testing::BytesEqual(std::span(got->packed_kv).first(n),
                                      w->expected.packed_kv));
      EXPECT_TRUE(testing::AllBytesAre(std::span(got->packed_kv).subspan(n),
                                       kDevicePoison));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GreedyCudaGraphTest, ::testing::Values(300, 32),
                         [](const auto& info) {
                           return absl::StrCat("b", info.param);
                         });

TEST(GreedyCudaScratchTest, LaunchRefusesBatchLargerThanScratchLimits) {
  SKIP_WITHOUT_CUDA();
  GreedyWorkloadOptions o;
  o.num_sequences = 64;
  o.row_bytes = 32;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  absl::StatusOr<DeviceGreedyBatch> device = DeviceGreedyBatch::Upload(*w);
  ASSERT_THAT(device.status(), IsOk());
  GreedyScratchLimits small;
  small.max_sequences = 16;
  small.max_total_draft_rows = 16 * 8;
  absl::StatusOr<GreedyScratchBuffer> scratch = AllocateGreedyScratch(small, nullptr);
  ASSERT_THAT(scratch.status(), IsOk());
  EXPECT_THAT(ValidateGreedyDeviceBatch(device->view(), scratch->view),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("num_sequences")));
  for (GreedyPath path : {GreedyPath::kFused, GreedyPath::kTwoStep}) {
    EXPECT_EQ(LaunchGreedyVerifyPack(device->view(), path, scratch->view, nullptr),
              cudaErrorInvalidValue);
  }
}

// The host-decided pack's host-side checks name the field and its limit,
// and the launcher refuses what they refuse (no device needed: nothing is
// launched).
TEST(GreedyPlannedPackTest, ValidationNamesTheFieldAndLaunchRefuses) {
  std::vector<int32_t> offsets = {0, 2};
  std::byte rows[64] = {};
  std::byte packed[64] = {};
  GreedyPlannedPack ok;
  ok.num_sequences = 1;
  ok.draft_offsets = offsets.data();
  ok.packed_row_offsets = offsets.data();
  ok.draft_kv = rows;
  ok.row_bytes = 32;
  ok.packed_kv = packed;
  ok.max_accepted = 2;
  EXPECT_THAT(ValidateGreedyPlannedPack(ok), IsOk());
  struct Case {
    const char* field;
    std::function<void(GreedyPlannedPack&)> spoil;
  };
  const Case cases[] = {
      {"num_sequences 0 outside [1, 4096]", [](GreedyPlannedPack& p) { p.num_sequences = 0; }},
      {"num_sequences 4097", [](GreedyPlannedPack& p) { p.num_sequences = kMaxBatchSequences + 1; }},
      {"row_bytes 0 outside [1, ", [](GreedyPlannedPack& p) { p.row_bytes = 0; }},
      {"row_bytes 268435457", [](GreedyPlannedPack& p) { p.row_bytes = kMaxGreedyRowBytes + 1; }},
      {"max_accepted -1", [](GreedyPlannedPack& p) { p.max_accepted = -1; }},
      {"max_accepted 257 outside [0, 256]", [](GreedyPlannedPack& p) { p.max_accepted = kMaxDraftTokens + 1; }},
      {"must all be set", [](GreedyPlannedPack& p) { p.packed_row_offsets = nullptr; }},
      {"must all be set", [](GreedyPlannedPack& p) { p.draft_kv = nullptr; }},
  };
  for (const Case& c : cases) {
    GreedyPlannedPack bad = ok;
    c.spoil(bad);
    EXPECT_THAT(ValidateGreedyPlannedPack(bad),
                testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                  ::testing::HasSubstr(c.field)));
    EXPECT_EQ(LaunchGreedyPlannedPack(bad, nullptr), cudaErrorInvalidValue) << c.field;
  }
}

// Nothing accepted anywhere: no launch, not a byte of the packed buffer
// written.
TEST(GreedyPlannedPackTest, NothingAcceptedWritesNothing) {
  SKIP_WITHOUT_CUDA();
  GreedyWorkloadOptions o;
  o.num_sequences = 40;
  o.gamma_min = o.gamma_max = 8;
  o.alpha = 0.0;
  o.row_bytes = 4096;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  ASSERT_EQ(w->expected.packed_row_offsets.back(), 0);
  absl::StatusOr<DeviceGreedyBatch> device = DeviceGreedyBatch::Upload(*w);
  ASSERT_THAT(device.status(), IsOk());
  ASSERT_THAT(device->Poison(), IsOk());
  const GreedyVerifyParams& v = device->view().params;
  ASSERT_EQ(cudaMemcpy(v.output.packed_row_offsets, w->expected.packed_row_offsets.data(),
                       sizeof(int32_t) * (o.num_sequences + 1), cudaMemcpyHostToDevice),
            cudaSuccess);
  GreedyPlannedPack pack;
  pack.num_sequences = o.num_sequences;
  pack.draft_offsets = v.input.draft_offsets;
  pack.packed_row_offsets = v.output.packed_row_offsets;
  pack.draft_kv = v.input.draft_kv;
  pack.row_bytes = v.input.row_bytes;
  pack.packed_kv = v.output.packed_kv;
  pack.max_accepted = 0;
  ASSERT_EQ(LaunchGreedyPlannedPack(pack, nullptr), cudaSuccess);
  absl::StatusOr<GreedyHostOutputs> got = device->Download();
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_TRUE(testing::AllBytesAre(got->packed_kv, kDevicePoison));
}

}  // namespace
}  // namespace specverify
