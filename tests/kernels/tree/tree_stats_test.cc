// Statistical exactness of sampled tree verification (CPU reference): over
// 10^5 trees per case, the first emitted token (the first accepted node's
// token, or the emission at the root) must follow the target's root row p,
// and the token after an accepted first node must follow that node's target
// row. Cases: random trees with 1-4 children per node whose children are
// drawn i.i.d. from the draft row (duplicates arise naturally), drawn
// without replacement (each child's row is the draft row minus the earlier
// siblings' tokens), top-k expansion without draft rows (EAGLE-style,
// distinct tokens), top-k with duplicate siblings, and degenerate chains.
// The GPU suite re-runs these cases on the device (tree_cuda_test).
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/tree/tree_reference.h"
#include "tests/kernels/sampling/sampling_test_util.h"
#include "tests/kernels/tree/tree_stat_cases.h"

namespace specverify {
namespace {

using testing::TreeStatCase;

class TreeStatsTest : public ::testing::TestWithParam<TreeStatCase> {};

TEST_P(TreeStatsTest, EmittedTokensFollowTheTarget) {
  const TreeStatCase& c = GetParam();
  const testing::TreeStatBatch batch = testing::BuildTreeStatBatch(c);
  testing::TreeSampleOutputs out(batch.batch.num_trees(), batch.batch.total_nodes(), 0xA5);
  const TreeSampleParams params = out.params(batch.batch);
  TreeLimits limits;
  limits.max_trees = testing::kTreeStatTrials;  // one batch of 10^5 trees
  const absl::Status valid = ValidateTreeSampleBatch(params, limits);
  ASSERT_TRUE(valid.ok()) << valid;
  ReferenceTreeSample(params);
  testing::CheckTreeStatOutcome(c, batch, out);
}

INSTANTIATE_TEST_SUITE_P(Cases, TreeStatsTest, ::testing::ValuesIn(testing::TreeStatCases()),
                         [](const ::testing::TestParamInfo<TreeStatCase>& info) { return info.param.name; });

}  // namespace
}  // namespace specverify
