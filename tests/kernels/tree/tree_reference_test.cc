// CPU reference of token-tree verification: the greedy walk against the
// workload's construction oracle, chains given as trees against the chain
// references bit for bit (greedy and sampled, every dtype, with and without
// draft rows), duplicate siblings, error codes, validation messages, and
// batch-composition independence.
#include "kernels/tree/tree_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"
#include "tests/kernels/tree/tree_test_util.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::SampledTreeBatch;
using ::specverify::testing::StatusIs;
using ::specverify::testing::TreeSampleOutputs;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr std::byte kPoison{0xA5};

struct GreedyTreeOutputs {
  explicit GreedyTreeOutputs(const GreedyBatchInput& in) : chain(in, kPoison), accepted_nodes(in.draft_offsets[in.num_sequences], -7) {}
  GreedyHostOutputs chain;
  std::vector<int32_t> accepted_nodes;
};

TreeGreedyVerifyParams GreedyParams(const TreeGreedyWorkload& w, GreedyTreeOutputs& out) {
  TreeGreedyVerifyParams p;
  p.input = w.input();
  p.parent_indices = w.parent_indices.data();
  p.output = out.chain.view();
  p.accepted_nodes = out.accepted_nodes.data();
  return p;
}

void ExpectGreedyMatchesOracle(const TreeGreedyWorkload& w) {
  GreedyTreeOutputs out(w.input());
  const TreeGreedyVerifyParams p = GreedyParams(w, out);
  TreeLimits limits;
  limits.max_tree_nodes = kMaxTreeNodes;
  ASSERT_THAT(ValidateTreeGreedyBatch(p, limits), IsOk());
  ReferenceTreeGreedyVerifyPack(p);
  const TreeGreedyExpected& e = w.expected;
  EXPECT_THAT(out.chain.accepted_lengths, ElementsAreArray(e.accepted_lengths));
  EXPECT_THAT(out.chain.next_tokens, ElementsAreArray(e.next_tokens));
  EXPECT_THAT(out.chain.mismatch, ElementsAreArray(e.mismatch));
  EXPECT_THAT(out.chain.packed_row_offsets, ElementsAreArray(e.packed_row_offsets));
  const int32_t total = e.packed_row_offsets.back();
  EXPECT_THAT(std::vector<int32_t>(out.accepted_nodes.begin(), out.accepted_nodes.begin() + total),
              ElementsAreArray(e.accepted_nodes));
  EXPECT_TRUE(std::equal(e.packed_kv.begin(), e.packed_kv.end(), out.chain.packed_kv.begin()));
}

TEST(TreeGreedyReferenceTest, MatchesTheWorkloadOracleOnRandomTrees) {
  for (const int32_t nodes : {1, 5, 64, 256}) {
    for (const double dup : {0.0, 0.3}) {
      TreeWorkloadOptions o;
      o.num_trees = 33;
      o.num_nodes = nodes;
      o.duplicate_sibling_rate = dup;
      o.level_acceptance = {0.9, 0.8, 0.7};
      o.row_bytes = 48;
      o.seed = 11 + nodes;
      absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
      ASSERT_THAT(w.status(), IsOk());
      SCOPED_TRACE(::testing::Message() << "nodes " << nodes << " dup " << dup);
      ExpectGreedyMatchesOracle(*w);
    }
  }
}

TEST(TreeGreedyReferenceTest, MatchesTheOracleOnNamedShapes) {
  for (const TreeShape& shape : {MedusaStyleShape(), EagleStyleShape(), *FullTreeShape(2, 5), ChainShape(200)}) {
    TreeWorkloadOptions o;
    o.num_trees = 17;
    o.shape = shape;
    o.level_acceptance = {1.0, 0.9, 0.5};
    o.row_bytes = 16;
    absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
    ASSERT_THAT(w.status(), IsOk());
    ExpectGreedyMatchesOracle(*w);
  }
}

// A chain given as a tree (parents -1, 0, 1, ...) gives the chain's results.
TEST(TreeGreedyReferenceTest, ChainAsTreeEqualsChainVerifyPack) {
  GreedyWorkloadOptions o;
  o.num_sequences = 57;
  o.gamma_min = 1;
  o.gamma_max = 40;
  o.alpha = 0.8;
  o.row_bytes = 24;
  absl::StatusOr<GreedyWorkload> w = GenerateGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  GreedyHostOutputs chain(w->input(), kPoison);
  ReferenceGreedyVerifyPack(GreedyVerifyParams{w->input(), chain.view()});

  std::vector<int32_t> parents;
  for (int32_t i = 0; i < w->num_sequences(); ++i) {
    for (int32_t j = 0; j < w->gamma(i); ++j) parents.push_back(j - 1);
  }
  GreedyTreeOutputs tree(w->input());
  TreeGreedyVerifyParams p;
  p.input = w->input();
  p.parent_indices = parents.data();
  p.output = tree.chain.view();
  p.accepted_nodes = tree.accepted_nodes.data();
  ASSERT_THAT(ValidateTreeGreedyBatch(p), IsOk());
  ReferenceTreeGreedyVerifyPack(p);
  EXPECT_EQ(tree.chain.accepted_lengths, chain.accepted_lengths);
  EXPECT_EQ(tree.chain.next_tokens, chain.next_tokens);
  EXPECT_EQ(tree.chain.mismatch, chain.mismatch);
  EXPECT_EQ(tree.chain.packed_row_offsets, chain.packed_row_offsets);
  EXPECT_EQ(tree.chain.packed_kv, chain.packed_kv);
  for (int32_t i = 0; i < w->num_sequences(); ++i) {
    for (int32_t d = 0; d < chain.accepted_lengths[i]; ++d) {
      EXPECT_EQ(tree.accepted_nodes[chain.packed_row_offsets[i] + d], d);
    }
  }
}

// Trees whose KV rows are where a worker's regions hold them (kv_sources: a
// buffer per tree, here in reverse order and apart from each other) pack
// exactly the rows of the same trees staged contiguously.
TEST(TreeGreedyReferenceTest, RowsReadThroughKvSourcesPackLikeStagedRows) {
  TreeWorkloadOptions o;
  o.num_trees = 23;
  o.num_nodes = 40;
  o.row_bytes = 20;
  o.level_acceptance = {0.95, 0.9, 0.8};
  o.seed = 5;
  absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  const GreedyBatchInput in = w->input();
  GreedyTreeOutputs staged(in);
  TreeGreedyVerifyParams p;
  p.input = in;
  p.parent_indices = w->parent_indices.data();
  p.output = staged.chain.view();
  p.accepted_nodes = staged.accepted_nodes.data();
  ReferenceTreeGreedyVerifyPack(p);

  std::vector<std::vector<std::byte>> regions(o.num_trees);
  std::vector<const std::byte*> sources(o.num_trees);
  for (int32_t i = o.num_trees - 1; i >= 0; --i) {
    regions[i].assign(in.draft_kv + int64_t{in.draft_offsets[i]} * in.row_bytes,
                      in.draft_kv + int64_t{in.draft_offsets[i + 1]} * in.row_bytes);
    sources[i] = regions[i].data();
  }
  GreedyTreeOutputs sourced(in);
  p.output = sourced.chain.view();
  p.accepted_nodes = sourced.accepted_nodes.data();
  p.kv_sources = sources.data();
  ReferenceTreeGreedyVerifyPack(p);
  EXPECT_EQ(sourced.chain.packed_row_offsets, staged.chain.packed_row_offsets);
  EXPECT_EQ(sourced.chain.packed_kv, staged.chain.packed_kv);
  EXPECT_GT(staged.chain.packed_row_offsets[o.num_trees], o.num_trees);  // rows were packed
}

// Three requests of 2, 3 and 2 trees: the first answered into an output of
// its own, the second at its packed place, the third nowhere (a null
// destination). The output holds what a pack and then a delivery of the
// request's rows would; the packed buffer only the second request's rows.
TEST(TreeGreedyReferenceTest, RowDestinationsPlaceRowsWhereAPackAndADeliveryWould) {
  TreeWorkloadOptions o;
  o.num_trees = 7;
  o.num_nodes = 12;
  o.row_bytes = 12;
  o.level_acceptance = {0.95, 0.9, 0.8};
  o.seed = 17;
  absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  const GreedyBatchInput in = w->input();
  const int64_t rb = in.row_bytes;
  GreedyTreeOutputs packed(in);
  TreeGreedyVerifyParams p = GreedyParams(*w, packed);
  ReferenceTreeGreedyVerifyPack(p);
  const std::vector<int32_t>& offsets = packed.chain.packed_row_offsets;
  ASSERT_GT(offsets[2], 0);  // the first request accepted rows

  GreedyTreeOutputs direct(in);
  std::vector<std::byte> output(static_cast<size_t>(in.draft_offsets[2] * rb), kPoison);
  std::byte* const arena = direct.chain.view().packed_kv;
  const std::vector<std::byte*> destinations{output.data(), output.data(), arena,  arena,
                                             arena,         nullptr,       nullptr};
  const std::vector<int32_t> origins{0, 0, 0, 0, 0, 5, 5};
  p = GreedyParams(*w, direct);
  p.row_destinations.destinations = destinations.data();
  p.row_destinations.origins = origins.data();
  ASSERT_THAT(ValidateTreeGreedyBatch(p, BackendTreeLimits()), IsOk());
  ReferenceTreeGreedyVerifyPack(p);
  EXPECT_EQ(direct.chain.packed_row_offsets, offsets);
  EXPECT_EQ(direct.accepted_nodes, packed.accepted_nodes);
  const std::vector<std::byte>& rows = packed.chain.packed_kv;
  EXPECT_TRUE(std::equal(rows.begin(), rows.begin() + offsets[2] * rb, output.begin())) << "the first request's rows";
  EXPECT_TRUE(std::all_of(output.begin() + offsets[2] * rb, output.end(), [](std::byte x) { return x == kPoison; }));
  const std::vector<std::byte>& arena_rows = direct.chain.packed_kv;
  EXPECT_TRUE(std::equal(rows.begin() + offsets[2] * rb, rows.begin() + offsets[5] * rb,
                         arena_rows.begin() + offsets[2] * rb))
      << "the second request's rows at their packed place";
  EXPECT_TRUE(std::all_of(arena_rows.begin(), arena_rows.begin() + offsets[2] * rb,
                          [](std::byte x) { return x == kPoison; }));
  EXPECT_TRUE(std::all_of(arena_rows.begin() + offsets[5] * rb, arena_rows.end(),
                          [](std::byte x) { return x == kPoison; }));
}

TEST(TreeGreedyReferenceTest, LowestIndexMatchingChildWins) {
  // Root children 0 and 1 carry token 5; the target after the root is 5.
  const std::vector<int32_t> offsets{0, 3};
  const std::vector<int32_t> tokens{5, 5, 9};
  const std::vector<int32_t> parents{-1, -1, 1};
  const std::vector<int32_t> target{5, 9, 9, 1};
  GreedyBatchInput in;
  in.num_sequences = 1;
  in.draft_offsets = offsets.data();
  in.draft_tokens = tokens.data();
  in.target_tokens = target.data();
  GreedyTreeOutputs out(in);
  TreeGreedyVerifyParams p{in, parents.data(), out.chain.view(), out.accepted_nodes.data()};
  ASSERT_THAT(ValidateTreeGreedyBatch(p), IsOk());
  ReferenceTreeGreedyVerifyPack(p);
  // Node 0 is taken (not node 1, whose child would have matched too); node 0
  // has no children, so its target (9) is a bonus token.
  EXPECT_EQ(out.chain.accepted_lengths[0], 1);
  EXPECT_EQ(out.accepted_nodes[0], 0);
  EXPECT_EQ(out.chain.next_tokens[0], 9);
  EXPECT_EQ(out.chain.mismatch[0], 0);
}

// --- Sampled: chains bit-identical to the chain sampler ----------------------

void ExpectChainParity(const SamplingWorkload& w) {
  const int32_t b = w.num_sequences();
  RejectionHostOutputs chain(b, 0xA5);
  ReferenceRejectionSample(RejectionSampleParams{w.input(), chain.view()});
  std::vector<int32_t> parents;
  for (int32_t i = 0; i < b; ++i) {
    for (int32_t j = 0; j < w.gamma(i); ++j) parents.push_back(j - 1);
  }
  TreeSampleOutputs tree(b, static_cast<int32_t>(w.total_draft_rows()), 0xA5);
  SampledTreeBatch dummy(1, SampleDtype::kFloat32, false);
  TreeSampleParams p = tree.params(dummy);
  p.input = w.input();
  p.parent_indices = parents.data();
  ASSERT_THAT(ValidateTreeSampleBatch(p), IsOk());
  ReferenceTreeSample(p);
  EXPECT_EQ(tree.accepted_lengths, chain.accepted_lengths);
  EXPECT_EQ(tree.next_tokens, chain.next_tokens);
  EXPECT_EQ(tree.mismatch, chain.mismatch);
  EXPECT_EQ(tree.status_codes, chain.status_codes);
  for (int32_t i = 0; i < b; ++i) {
    for (int32_t d = 0; d < tree.accepted_lengths[i]; ++d) EXPECT_EQ(tree.path_nodes[w.draft_offsets[i] + d], d);
  }
}

TEST(TreeSampleReferenceTest, ChainAsTreeIsBitIdenticalToTheChainSampler) {
  for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
    for (const bool draft : {true, false}) {
      for (const float noise : {0.3f, 2.0f}) {
        SamplingWorkloadOptions o;
        o.num_sequences = 64;
        o.gamma_min = 1;
        o.gamma_max = 12;
        o.vocab_size = 301;
        o.dtype = dtype;
        o.has_draft_probs = draft;
        o.draft_noise = noise;
        o.sequences_per_request = 3;
        o.seed = 5 + static_cast<int>(dtype);
        absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
        ASSERT_THAT(w.status(), IsOk());
        SCOPED_TRACE(::testing::Message() << "dtype " << static_cast<int>(dtype) << " draft " << draft
                                          << " noise " << noise);
        ExpectChainParity(*w);
      }
    }
  }
}

// Distribution rows read through row tables (each row in its own buffer, as
// in a worker's region) give the outcome of the same rows staged.
TEST(TreeSampleReferenceTest, RowTablesGiveTheStagedRowsOutcome) {
  for (const bool draft : {true, false}) {
    testing::RandomSampledTreeOptions o;
    o.num_trees = 17;
    o.vocab = 211;
    o.max_nodes = 24;
    o.has_draft = draft;
    o.seed = draft ? 71 : 72;
    const SampledTreeBatch batch = testing::RandomSampledTrees(o);
    TreeSampleOutputs staged(batch.num_trees(), batch.total_nodes(), 0xA5);
    ReferenceTreeSample(staged.params(batch));

    const int64_t row = int64_t{batch.vocab()} * SampleDtypeBytes(batch.dtype());
    const auto split = [&](const std::vector<std::byte>& values, std::vector<std::vector<std::byte>>& rows,
                           std::vector<const void*>& table) {
      for (size_t at = 0; at < values.size(); at += static_cast<size_t>(row)) {
        rows.emplace_back(values.begin() + static_cast<int64_t>(at), values.begin() + static_cast<int64_t>(at) + row);
      }
      for (const auto& r : rows) table.push_back(r.data());
    };
    std::vector<std::vector<std::byte>> target_rows, draft_rows;
    std::vector<const void*> target_table, draft_table;
    split(batch.target_, target_rows, target_table);
    if (draft) split(batch.draft_, draft_rows, draft_table);
    TreeSampleOutputs tabled(batch.num_trees(), batch.total_nodes(), 0xA5);
    TreeSampleParams p = tabled.params(batch);
    p.input.target_values = nullptr;
    p.input.draft_values = nullptr;
    p.input.target_rows = target_table.data();
    p.input.draft_rows = draft ? draft_table.data() : nullptr;
    ASSERT_THAT(ValidateTreeSampleBatch(p), IsOk());
    ReferenceTreeSample(p);
    EXPECT_EQ(tabled.accepted_lengths, staged.accepted_lengths) << "draft " << draft;
    EXPECT_EQ(tabled.next_tokens, staged.next_tokens) << "draft " << draft;
    EXPECT_EQ(tabled.status_codes, staged.status_codes) << "draft " << draft;
    EXPECT_EQ(tabled.path_nodes, staged.path_nodes) << "draft " << draft;
  }
}

TEST(TreeSampleReferenceTest, ChainParityAtALargeVocabulary) {
  SamplingWorkloadOptions o;
  o.num_sequences = 6;
  o.gamma_min = 1;
  o.gamma_max = 8;
  o.vocab_size = 9001;  // three normalizer chunks, a partial last one
  o.draft_noise = 0.5f;
  absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
  ASSERT_THAT(w.status(), IsOk());
  ExpectChainParity(*w);
}

// --- Sampled: tree-specific behaviour ----------------------------------------

SequenceSamplingParams Seed(uint64_t seed) {
  SequenceSamplingParams s;
  s.seed = seed;
  return s;
}

// Without draft rows (q one-hot), a sibling that repeats an earlier sibling's
// token has zero residual after that sibling's rejection: never accepted.
TEST(TreeSampleReferenceTest, DuplicateSiblingWithoutDraftRowsIsNeverAccepted) {
  const std::vector<float> p{0.1f, 0.6f, 0.3f, 0.0f};
  SampledTreeBatch batch(4, SampleDtype::kFloat32, false);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    batch.Add({-1, -1, -1}, {1, 1, 2}, {p, p, p, p}, {}, Seed(seed));
  }
  TreeSampleOutputs out(batch.num_trees(), batch.total_nodes(), 0xA5);
  const TreeSampleParams params = out.params(batch);
  ASSERT_THAT(ValidateTreeSampleBatch(params), IsOk());
  ReferenceTreeSample(params);
  int32_t first = 0, third = 0;
  for (int32_t i = 0; i < batch.num_trees(); ++i) {
    ASSERT_EQ(out.status_codes[i], kRejectionOk);
    if (out.accepted_lengths[i] == 0) {
      // All rejected: the emission avoids both tokens 1 and 2.
      EXPECT_NE(out.next_tokens[i], 1);
      EXPECT_NE(out.next_tokens[i], 2);
      EXPECT_NE(out.next_tokens[i], 3);  // p = 0
      continue;
    }
    ASSERT_EQ(out.accepted_lengths[i], 1);
    const int32_t node = out.path_nodes[batch.offsets_[i]];
    EXPECT_NE(node, 1) << "seed " << i;
    first += node == 0;
    third += node == 2;
  }
  // P(node 0) = 0.6, P(node 2) = 0.3: both happen.
  EXPECT_GT(first, 1000);
  EXPECT_GT(third, 400);
}

// With draft rows too: a child is rejected only where its residual is below
// Z q (an accept ratio >= 1 always accepts), which leaves a zero residual at
// its token, so a later sibling with the same token is never accepted.
TEST(TreeSampleReferenceTest, DuplicateSiblingWithDraftRowsIsNeverAccepted) {
  const std::vector<float> p{0.1f, 0.5f, 0.4f};
  const std::vector<float> q{0.1f, 0.8f, 0.1f};
  SampledTreeBatch batch(3, SampleDtype::kFloat32, true);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    batch.Add({-1, -1, -1}, {1, 1, 2}, {p, p, p, p}, {q, q, q}, Seed(seed));
  }
  TreeSampleOutputs out(batch.num_trees(), batch.total_nodes(), 0xA5);
  ReferenceTreeSample(out.params(batch));
  int32_t counts[3] = {0, 0, 0};
  for (int32_t i = 0; i < batch.num_trees(); ++i) {
    ASSERT_EQ(out.status_codes[i], kRejectionOk);
    // Node 0 (p/q = 0.625) or, after its rejection, node 2 (residual all on
    // token 2): one of them is always accepted.
    ASSERT_EQ(out.accepted_lengths[i], 1);
    ++counts[out.path_nodes[batch.offsets_[i]]];
  }
  EXPECT_EQ(counts[1], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.625, 0.04);
  EXPECT_NEAR(counts[2] / 4000.0, 0.375, 0.04);
}

TEST(TreeSampleReferenceTest, ResultsDoNotDependOnBatchComposition) {
  testing::RandomSampledTreeOptions o;
  o.num_trees = 20;
  const SampledTreeBatch batch = testing::RandomSampledTrees(o);
  TreeSampleOutputs all(batch.num_trees(), batch.total_nodes(), 0xA5);
  ReferenceTreeSample(all.params(batch));
  o.num_trees = 1;
  for (int32_t i = 0; i < 20; i += 7) {
    // Tree i alone: regenerate the batch's first i + 1 trees, keep the last.
    testing::RandomSampledTreeOptions one = o;
    one.num_trees = i + 1;
    const SampledTreeBatch prefix = testing::RandomSampledTrees(one);
    TreeSampleOutputs out(prefix.num_trees(), prefix.total_nodes(), 0xA5);
    ReferenceTreeSampleRange(out.params(prefix), i, i + 1);
    EXPECT_EQ(out.accepted_lengths[i], all.accepted_lengths[i]);
    EXPECT_EQ(out.next_tokens[i], all.next_tokens[i]);
  }
}

TEST(TreeSampleReferenceTest, RowReadsCountThePasses) {
  // Root with 3 children, all rejected (p puts no mass on their tokens):
  // with draft rows, passes for Z_2 (p, q1), Z_3 (p, q1, q2) and the
  // emission (p, q1, q2, q3): 2 + 3 + 4 rows.
  const std::vector<float> p{0.0f, 0.0f, 0.0f, 1.0f};
  const std::vector<float> q{0.4f, 0.3f, 0.3f, 0.0f};
  SampledTreeBatch with(4, SampleDtype::kFloat32, true);
  with.Add({-1, -1, -1}, {0, 1, 2}, {p, p, p, p}, {q, q, q}, Seed(3));
  TreeSampleOutputs out(1, 3, 0xA5);
  ReferenceTreeSample(out.params(with));
  EXPECT_EQ(out.accepted_lengths[0], 0);
  EXPECT_EQ(out.next_tokens[0], 3);
  EXPECT_EQ(out.mismatch[0], 1);
  EXPECT_EQ(out.row_reads[0], 9);
  // Without draft rows only the emission reads a row.
  SampledTreeBatch without(4, SampleDtype::kFloat32, false);
  without.Add({-1, -1, -1}, {0, 1, 2}, {p, p, p, p}, {}, Seed(3));
  TreeSampleOutputs out2(1, 3, 0xA5);
  ReferenceTreeSample(out2.params(without));
  EXPECT_EQ(out2.next_tokens[0], 3);
  EXPECT_EQ(out2.row_reads[0], 1);
}

TEST(TreeSampleReferenceTest, BadValuesAreReportedWithTheirRowOrNode) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> p{0.5f, 0.5f, 0.0f};
  const std::vector<float> q{0.5f, 0.5f, 0.0f};
  {  // NaN in the root's target row, at the first child's token.
    SampledTreeBatch batch(3, SampleDtype::kFloat32, true);
    batch.Add({-1, 0}, {1, 0}, {{0.5f, nan, 0.5f}, p, p}, {q, q}, Seed(1));
    TreeSampleOutputs out(1, 2, 0xA5);
    ReferenceTreeSample(out.params(batch));
    EXPECT_EQ(out.status_codes[0], kRejectionBadTargetValue);
    EXPECT_EQ(out.error_positions[0], 0);
    EXPECT_EQ(out.next_tokens[0], -1);
    EXPECT_EQ(out.accepted_lengths[0], 0);
    EXPECT_THAT(TreeOutcomeStatus(out.status_codes.data(), out.error_positions.data(), 1),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, target row 0 (the root)")));
  }
  {  // Negative draft probability of node 1 at its own token.
    SampledTreeBatch batch(3, SampleDtype::kFloat32, true);
    // Node 0 (token 2, p = 0) is rejected; the residual p - q0 keeps mass, so
    // node 1 is tested and its own draft value is read.
    batch.Add({-1, -1}, {2, 1}, {p, p, p}, {{0.2f, 0.2f, 0.6f}, {0.5f, -0.5f, 0.0f}}, Seed(1));
    TreeSampleOutputs out(1, 2, 0xA5);
    ReferenceTreeSample(out.params(batch));
    EXPECT_EQ(out.status_codes[0], kRejectionBadDraftValue);
    EXPECT_EQ(out.error_positions[0], 1);
    EXPECT_THAT(TreeOutcomeStatus(out.status_codes.data(), out.error_positions.data(), 1),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, node 1")));
  }
  {  // Token out of range.
    SampledTreeBatch batch(3, SampleDtype::kFloat32, false);
    batch.Add({-1, 0}, {1, 3}, {p, p, p}, {}, Seed(1));
    TreeSampleOutputs out(1, 2, 0xA5);
    ReferenceTreeSample(out.params(batch));
    EXPECT_EQ(out.status_codes[0], kRejectionDraftTokenOutOfRange);
    EXPECT_EQ(out.error_positions[0], 1);
  }
  {  // Bad parent (the kernels check it again).
    SampledTreeBatch batch(3, SampleDtype::kFloat32, false);
    batch.Add({-1, 1}, {1, 0}, {p, p, p}, {}, Seed(1));
    TreeSampleOutputs out(1, 2, 0xA5);
    ReferenceTreeSample(out.params(batch));
    EXPECT_EQ(out.status_codes[0], kTreeBadParent);
    EXPECT_EQ(out.error_positions[0], 1);
  }
}

// --- Validation ------------------------------------------------------------------

TEST(TreeValidationTest, NamesTheSequenceAndTheNode) {
  const std::vector<int32_t> offsets{0, 2, 5};
  const std::vector<int32_t> good{-1, 0, -1, -1, 1};
  EXPECT_THAT(ValidateTreeStructure(2, offsets.data(), good.data(), {}), IsOk());
  const std::vector<int32_t> forward{-1, 0, -1, 2, 0};
  EXPECT_THAT(ValidateTreeStructure(2, offsets.data(), forward.data(), {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 1, node 1: parent_indices[1] is 2; must lie in [-1, 1)")));
  const std::vector<int32_t> below{-1, -2, -1, -1, 1};
  EXPECT_THAT(ValidateTreeStructure(2, offsets.data(), below.data(), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0, node 1")));
  const std::vector<int32_t> empty_tree{0, 2, 2};
  EXPECT_THAT(ValidateTreeStructure(2, empty_tree.data(), good.data(), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1: tree has 0 nodes")));
  TreeLimits small;
  small.max_tree_nodes = 2;
  EXPECT_THAT(ValidateTreeStructure(2, offsets.data(), good.data(), small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_tree_nodes")));
}

TEST(TreeValidationTest, RowDestinationsNameTheFieldAndTheTree) {
  std::vector<std::byte> out(64);
  const std::vector<std::byte*> destinations{out.data(), out.data(), out.data()};
  const std::vector<int32_t> good{0, 0, 2}, ahead{0, 2, 2};
  TreeRowDestinations d;
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, true), IsOk());  // unset
  d.destinations = destinations.data();
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("row_destinations.origins must be set")));
  d.origins = good.data();
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, true), IsOk());
  d.origins = ahead.data();
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 1: row_destinations.origins[1] is 2; must lie in [0, 1]")));
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, /*origins_readable=*/false), IsOk());  // device tables
  d.alignment = 3;
  EXPECT_THAT(ValidateTreeRowDestinations(d, 3, false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("row_destinations.alignment is 3")));
}

TEST(TreeValidationTest, SampledTreesTakeProbabilitiesOnly) {
  SampledTreeBatch batch(4, SampleDtype::kFloat32, false);
  const std::vector<float> p{0.25f, 0.25f, 0.25f, 0.25f};
  batch.Add({-1}, {1}, {p, p}, {}, Seed(1));
  TreeSampleOutputs out(1, 1, 0);
  TreeSampleParams params = out.params(batch);
  EXPECT_THAT(ValidateTreeSampleBatch(params), IsOk());
  params.input.kind = SampleValueKind::kLogits;
  EXPECT_THAT(ValidateTreeSampleBatch(params), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("LOGITS")));
  params = out.params(batch);
  params.input.validate_full_rows = true;
  EXPECT_THAT(ValidateTreeSampleBatch(params),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("validate_full_rows")));
  params = out.params(batch);
  params.path_nodes = nullptr;
  EXPECT_THAT(ValidateTreeSampleBatch(params), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("path_nodes")));
}

TEST(TreeWorkloadTest, ShapesParse) {
  absl::StatusOr<TreeShape> s = ParseTreeSpec("2x3");
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->num_nodes(), 2 + 4 + 8);
  EXPECT_THAT(ParseTreeSpec("2by3").status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("WIDTHxDEPTH")));
  absl::StatusOr<TreeShape> paths = ParseTreePaths("# medusa\n0\n1\n0,0\n[0, 1]\n1 0\n");
  ASSERT_THAT(paths.status(), IsOk());
  EXPECT_THAT(paths->parents, ElementsAreArray({-1, -1, 0, 0, 1}));
  EXPECT_THAT(ParseTreePaths("0\n1,0\n").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: the path's prefix")));
  EXPECT_EQ(MedusaStyleShape().num_nodes(), 26);
  EXPECT_EQ(EagleStyleShape().num_nodes(), 64);
  SplitMix64 rng(3);
  const TreeShape r = RandomTreeShape(64, 1, 4, rng);
  EXPECT_EQ(r.num_nodes(), 64);
  const std::vector<int32_t> offsets{0, 64};
  EXPECT_THAT(ValidateTreeStructure(1, offsets.data(), r.parents.data(), {}), IsOk());
}

TEST(TreeWorkloadTest, SampledWorkloadFollowsTheRequestedAcceptance) {
  TreeSampledWorkloadOptions o;
  o.num_trees = 5;
  o.shape = ChainShape(12);
  o.vocab_size = 64;
  o.level_acceptance = {1.0};
  absl::StatusOr<TreeSampledWorkload> all = GenerateTreeSampledWorkload(o);
  ASSERT_THAT(all.status(), IsOk());
  TreeSampledExpected e = ReferenceTreeOutcome(*all);
  // Acceptance 1 with draft rows: p(x) = q(x) on every chain node.
  EXPECT_THAT(e.accepted_lengths, ElementsAreArray({12, 12, 12, 12, 12}));
  o.level_acceptance = {0.0};
  absl::StatusOr<TreeSampledWorkload> none = GenerateTreeSampledWorkload(o);
  ASSERT_THAT(none.status(), IsOk());
  e = ReferenceTreeOutcome(*none);
  EXPECT_THAT(e.accepted_lengths, ElementsAreArray({0, 0, 0, 0, 0}));

  // Random trees, acceptance 0.6 per level, no draft rows, grouped requests.
  TreeSampledWorkloadOptions r;
  r.num_trees = 400;
  r.num_nodes = 40;
  r.vocab_size = 64;
  r.has_draft_probs = false;
  r.level_acceptance = {0.6};
  r.sequences_per_request = 4;
  absl::StatusOr<TreeSampledWorkload> w = GenerateTreeSampledWorkload(r);
  ASSERT_THAT(w.status(), IsOk());
  TreeSampleOutputs out(w->num_trees(), static_cast<int32_t>(w->total_nodes()), 0);
  TreeSampleParams params;
  params.input = w->input();
  params.parent_indices = w->parent_indices.data();
  params.output.accepted_lengths = out.accepted_lengths.data();
  params.output.next_tokens = out.next_tokens.data();
  params.output.mismatch = out.mismatch.data();
  params.output.status_codes = out.status_codes.data();
  params.output.error_positions = out.error_positions.data();
  params.path_nodes = out.path_nodes.data();
  ASSERT_THAT(ValidateTreeSampleBatch(params), IsOk());
  e = ReferenceTreeOutcome(*w);
  double depth = 0.0;
  for (int32_t i = 0; i < w->num_trees(); ++i) {
    ASSERT_EQ(e.status_codes[i], kRejectionOk);
    depth += e.accepted_lengths[i];
  }
  // First child accepted w.p. ~0.54 per level (0.9 * 0.6), later siblings
  // sometimes: a geometric-like depth with mean near 1.2-2.
  depth /= w->num_trees();
  EXPECT_GT(depth, 0.9);
  EXPECT_LT(depth, 2.5);
  EXPECT_EQ(w->sequences[5].sequence_index, 1);
  EXPECT_EQ(w->sequences[4].seed, w->sequences[7].seed);
}

}  // namespace
}  // namespace specverify
