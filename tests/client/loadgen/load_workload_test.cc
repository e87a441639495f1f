// The loadgen's request pools (client/loadgen/load_workload.h): a pool may
// hold more sequences than one batch (region returns need an entry per
// request in flight), and a pool too large for the loadgen is refused with
// the flags to change, before anything is generated.
#include "client/loadgen/load_workload.h"

#include <set>
#include <string>

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "client/loadgen/region_transport.h"
#include "kernels/layout/ragged_batch.h"
#include "tests/testing/status_matchers.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

WorkloadConfig GreedyPool(int32_t pool_requests, int32_t sequences_per_request,
                          int64_t row_bytes) {
  WorkloadConfig c;
  c.mode = WorkloadMode::kGreedy;
  c.pool_requests = pool_requests;
  c.sequences_per_request = sequences_per_request;
  c.row_bytes = row_bytes;
  return c;
}

// 32 requests in flight x 256 sequences with region returns: 8192 pooled
// sequences, twice what one batch holds. It was refused with "num_sequences
// is 8192; must lie in [1, 4096]", a limit of one batch, not of a pool.
TEST(LoadWorkloadTest, AGreedyPoolMayHoldMoreSequencesThanOneBatch) {
  absl::StatusOr<std::unique_ptr<LoadWorkload>> load =
      CreateLoadWorkload(GreedyPool(32, 256, 64));
  ASSERT_TRUE(load.ok()) << load.status();
  ASSERT_EQ((*load)->pool_size(), 32);
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ((*load)->Request(i).sequences_size(), 256) << "request " << i;
  }
  // The last request carries the pool's last sequences, not the first
  // request's again.
  const auto drafts = [&](int64_t i) {
    std::vector<int32_t> tokens;
    for (const v1::SequenceDraft& s : (*load)->Request(i).sequences()) {
      tokens.insert(tokens.end(), s.draft_tokens().begin(), s.draft_tokens().end());
    }
    return tokens;
  };
  EXPECT_NE(drafts(31), drafts(0));
}

// A region of three copies: each pool slot gets a message per copy whose
// references point into that copy, the copies hold the same bytes, and
// every message has its own output rows.
TEST(LoadWorkloadTest, RegionCopiesShiftEveryReferenceIntoTheirCopy) {
  WorkloadConfig config = GreedyPool(2, 3, 256);
  config.kv_return = KvReturnMode::kRegion;
  config.transport = Transport::kShm;
  absl::StatusOr<std::unique_ptr<LoadWorkload>> load = CreateLoadWorkload(config);
  ASSERT_TRUE(load.ok()) << load.status();
  absl::StatusOr<std::unique_ptr<RegionTransport>> region = RegionTransport::Create(
      Transport::kShm, (*load)->RegionBytesNeeded(/*return_into_region=*/true), 3, 0);
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE((*load)->UseRegion(region->get(), /*return_into_region=*/true).ok());

  ASSERT_EQ((*load)->pool_slots(), 2);
  ASSERT_EQ((*load)->pool_size(), 6);
  const int64_t stretch = (*region)->stretch_bytes();
  std::set<int64_t> outputs;
  for (int64_t i = 0; i < 6; ++i) {
    const v1::VerifyRequest& base = (*load)->Request(i % 2);
    const v1::VerifyRequest& copy = (*load)->Request(i);
    const int64_t shift = (i / 2) * stretch;
    ASSERT_EQ(copy.sequences_size(), base.sequences_size());
    for (int s = 0; s < copy.sequences_size(); ++s) {
      const v1::TensorRef& ref = copy.sequences(s).draft_kv_ref();
      EXPECT_EQ(ref.offset_bytes(), base.sequences(s).draft_kv_ref().offset_bytes() + shift);
      EXPECT_EQ(copy.sequences(s).draft_tokens(0), base.sequences(s).draft_tokens(0));
      std::string in_copy, in_base;
      const int64_t bytes = copy.sequences(s).draft_tokens_size() * 256;
      ASSERT_TRUE((*region)->Read(ref.offset_bytes(), bytes, &in_copy).ok());
      ASSERT_TRUE((*region)->Read(base.sequences(s).draft_kv_ref().offset_bytes(), bytes,
                                  &in_base).ok());
      EXPECT_EQ(in_copy, in_base) << "message " << i << ", sequence " << s;
    }
    EXPECT_EQ(copy.kv_output().offset_bytes(), base.kv_output().offset_bytes() + shift);
    outputs.insert(copy.kv_output().offset_bytes());
  }
  EXPECT_EQ(outputs.size(), 6u);
}

TEST(LoadWorkloadTest, AGreedyPoolTooLargeForTheLoadgenNamesTheFlags) {
  // 1024 x 256 sequences x 8 rows x 4 KiB, held three times: 24 GiB.
  EXPECT_THAT(CreateLoadWorkload(GreedyPool(1024, 256, 4096)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--pool_requests=1024"),
                             HasSubstr("--sequences_per_request=256"),
                             HasSubstr("--row_bytes=4096"), HasSubstr("lower --pool_requests"))));
}

TEST(LoadWorkloadTest, ATreePoolLargerThanOneBatchNamesTheFlags) {
  WorkloadConfig c = GreedyPool(2, kMaxBatchSequences, 0);
  c.tree = "2x2";
  EXPECT_THAT(CreateLoadWorkload(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--pool_requests=2"),
                             HasSubstr("--sequences_per_request=4096"), HasSubstr("8192 trees"),
                             HasSubstr("the limit is 4096"))));
}

}  // namespace
}  // namespace specverify::loadgen
