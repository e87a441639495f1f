// The statistical cases of sampled tree verification, shared by the CPU
// suite (tree_stats_test) and the GPU suite (tree_cuda_test). See
// tree_stats_test.cc for what is tested and why.
#ifndef SPECVERIFY_TESTS_KERNELS_TREE_TREE_STAT_CASES_H_
#define SPECVERIFY_TESTS_KERNELS_TREE_TREE_STAT_CASES_H_

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/workload/random.h"
#include "kernels/workload/tree_workload.h"
#include "tests/kernels/sampling/sampling_test_util.h"
#include "tests/kernels/tree/tree_test_util.h"

namespace specverify::testing {

// 10^5 trees per case: the chi-square test then detects a total variation of
// about 0.01 between the emitted and the target law (sampling_test_util.h).
inline constexpr int32_t kTreeStatTrials = 100000;
// A small vocabulary keeps a case near a second on the 2-core CI machine.
inline constexpr int32_t kTreeStatVocab = 8;

enum class Drafting {
  kIid,                 // children drawn i.i.d. from the parent's draft row (duplicates happen)
  kWithoutReplacement,  // child k's row = draft row without siblings 1..k-1's tokens
  kTopK,                // no draft rows: the k most likely draft tokens, distinct
  kTopKDuplicates,      // no draft rows: top-k, but a child repeats an earlier sibling's token w.p. 0.3
};

struct TreeStatCase {
  std::string name;
  Drafting drafting = Drafting::kIid;
  bool chain = false;     // every node one child (depth 6) instead of random 1-4 children (12 nodes)
  SampleDtype dtype = SampleDtype::kFloat32;
};

// gtest prints the case by name (not as bytes) in test listings.
inline void PrintTo(const TreeStatCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<TreeStatCase> TreeStatCases() {
  return {
      {"iid_draft_rows", Drafting::kIid, false},
      {"without_replacement_draft_rows", Drafting::kWithoutReplacement, false},
      {"topk_no_draft_rows", Drafting::kTopK, false},
      {"topk_duplicate_siblings_no_draft_rows", Drafting::kTopKDuplicates, false},
      {"chain_draft_rows", Drafting::kIid, true},
      {"chain_no_draft_rows", Drafting::kTopK, true},
      {"iid_draft_rows_bf16", Drafting::kIid, false, SampleDtype::kBFloat16},
  };
}

// Fixed laws: the target after the root (with a zero entry, never to be
// emitted), the target after a node carrying token t, and the draft laws.
// Rows are rounded to the dtype first so the expected law is what the
// verifier reads.
struct TreeStatLaws {
  std::vector<float> p_root;
  std::vector<std::vector<float>> p_after;  // [token]
  std::vector<float> q_root;
  std::vector<std::vector<float>> q_after;  // [token]
};

inline std::vector<float> NormalizedRow(const std::vector<double>& w) {
  double sum = 0.0;
  for (double x : w) sum += x;
  std::vector<float> row(w.size());
  for (size_t i = 0; i < w.size(); ++i) row[i] = static_cast<float>(w[i] / sum);
  return row;
}

inline TreeStatLaws MakeTreeStatLaws() {
  TreeStatLaws laws;
  laws.p_root = NormalizedRow({0.30, 0.05, 0.20, 0.0, 0.15, 0.10, 0.12, 0.08});
  // Draft laws mix the target with noise (as a real drafter approximates
  // its target), so paths are often two or more levels deep.
  const std::vector<double> other{0.10, 0.35, 0.25, 0.05, 0.05, 0.10, 0.05, 0.05};
  std::vector<double> q_root(kTreeStatVocab);
  for (int32_t x = 0; x < kTreeStatVocab; ++x) q_root[x] = 0.6 * laws.p_root[x] + 0.4 * other[x];
  laws.q_root = NormalizedRow(q_root);
  SplitMix64 rng(77);
  for (int32_t t = 0; t < kTreeStatVocab; ++t) {
    std::vector<double> p(kTreeStatVocab), q(kTreeStatVocab);
    for (int32_t x = 0; x < kTreeStatVocab; ++x) p[x] = 0.05 + rng.NextDouble();
    const std::vector<float> pn = NormalizedRow(p);
    for (int32_t x = 0; x < kTreeStatVocab; ++x) q[x] = 0.6 * pn[x] + 0.4 * (0.05 + rng.NextDouble()) / 4.2;
    laws.p_after.push_back(pn);
    laws.q_after.push_back(NormalizedRow(q));
  }
  return laws;
}

struct TreeStatBatch {
  SampledTreeBatch batch;
  std::vector<float> p_root;                // as stored (dtype-rounded)
  std::vector<std::vector<float>> p_after;  // as stored
};

inline std::vector<float> RoundTo(const std::vector<float>& row, SampleDtype dtype) {
  std::vector<std::byte> bytes;
  AppendAsDtype(row.data(), static_cast<int64_t>(row.size()), dtype, bytes);
  std::vector<float> out(row.size());
  for (size_t x = 0; x < row.size(); ++x) {
    out[x] = rejection::LoadValue(bytes.data(), dtype, static_cast<int64_t>(x));
  }
  return out;
}

inline int32_t DrawFrom(const std::vector<float>& row, SplitMix64& rng) {
  std::vector<double> w(row.begin(), row.end());
  return SampleIndex(Normalized(w), rng);
}

inline TreeStatBatch BuildTreeStatBatch(const TreeStatCase& c) {
  const TreeStatLaws laws = MakeTreeStatLaws();
  const bool draft = c.drafting == Drafting::kIid || c.drafting == Drafting::kWithoutReplacement;
  TreeStatBatch out{SampledTreeBatch(kTreeStatVocab, c.dtype, draft), RoundTo(laws.p_root, c.dtype), {}};
  for (const auto& row : laws.p_after) out.p_after.push_back(RoundTo(row, c.dtype));
  SplitMix64 rng(2024 + static_cast<uint64_t>(c.drafting) * 7 + (c.chain ? 1 : 0));
  for (int32_t i = 0; i < kTreeStatTrials; ++i) {
    const TreeShape shape = c.chain ? ChainShape(6) : RandomTreeShape(12, 1, 4, rng);
    const int32_t n = shape.num_nodes();
    std::vector<int32_t> tokens(n, 0);
    std::vector<std::vector<float>> target{laws.p_root}, rows(n);
    // Children of each parent in index order, drafted from the parent's law.
    for (int32_t parent = -1; parent < n; ++parent) {
      const std::vector<float>& q = parent < 0 ? laws.q_root : laws.q_after[tokens[parent]];
      std::vector<float> remaining = q;
      std::vector<int32_t> order(kTreeStatVocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
      int32_t rank = 0;
      std::vector<int32_t> earlier;
      for (int32_t j = parent + 1; j < n; ++j) {
        if (shape.parents[j] != parent) continue;
        switch (c.drafting) {
          case Drafting::kIid:
            rows[j] = q;
            tokens[j] = DrawFrom(q, rng);
            break;
          case Drafting::kWithoutReplacement: {
            rows[j] = NormalizedRow(std::vector<double>(remaining.begin(), remaining.end()));
            tokens[j] = DrawFrom(rows[j], rng);
            remaining[tokens[j]] = 0.0f;
            break;
          }
          case Drafting::kTopK:
            tokens[j] = order[rank++ % kTreeStatVocab];
            break;
          case Drafting::kTopKDuplicates:
            tokens[j] = (!earlier.empty() && rng.NextDouble() < 0.3) ? earlier[rng.NextBelow(earlier.size())]
                                                                    : order[rank++ % kTreeStatVocab];
            break;
        }
        earlier.push_back(tokens[j]);
      }
    }
    for (int32_t j = 0; j < n; ++j) target.push_back(laws.p_after[tokens[j]]);
    SequenceSamplingParams params;
    params.seed = DeriveSeed(99, static_cast<uint64_t>(i));
    params.sequence_index = static_cast<int32_t>(i % 3);
    out.batch.Add(shape.parents, tokens, target, rows, params);
  }
  return out;
}

// First emitted token ~ p_root; second token after an accepted first node
// carrying the most frequent first token t ~ p_after[t]; no token of zero
// probability ever emitted.
inline void CheckTreeStatOutcome(const TreeStatCase& c, const TreeStatBatch& b, const TreeSampleOutputs& out) {
  const int32_t v = kTreeStatVocab;
  std::vector<int64_t> first(v, 0);
  std::vector<std::vector<int64_t>> second(v, std::vector<int64_t>(v, 0));
  int64_t depth_sum = 0;
  for (int32_t i = 0; i < b.batch.num_trees(); ++i) {
    ASSERT_EQ(out.status_codes[i], kRejectionOk) << c.name << " tree " << i;
    const int32_t base = b.batch.offsets_[i];
    const int32_t depth = out.accepted_lengths[i];
    depth_sum += depth;
    if (depth == 0) {
      ++first[out.next_tokens[i]];
      continue;
    }
    const int32_t t1 = b.batch.tokens_[base + out.path_nodes[base]];
    ++first[t1];
    const int32_t t2 = depth >= 2 ? b.batch.tokens_[base + out.path_nodes[base + 1]] : out.next_tokens[i];
    ++second[t1][t2];
  }
  std::vector<double> expected(b.p_root.begin(), b.p_root.end());
  expected = Normalized(expected);
  const ChiSquareResult r = ChiSquare(first, expected);
  EXPECT_EQ(r.zero_probability_hits, 0) << c.name;
  EXPECT_LT(r.statistic, ChiSquareCritical(r.df, kFalseFailureZ)) << c.name << ": first-token chi-square, df " << r.df;
  int32_t t = 0;
  for (int32_t x = 1; x < v; ++x) {
    if (std::accumulate(second[x].begin(), second[x].end(), int64_t{0}) >
        std::accumulate(second[t].begin(), second[t].end(), int64_t{0})) {
      t = x;
    }
  }
  std::vector<double> expected2(b.p_after[t].begin(), b.p_after[t].end());
  const ChiSquareResult r2 = ChiSquare(second[t], Normalized(expected2));
  EXPECT_GT(std::accumulate(second[t].begin(), second[t].end(), int64_t{0}), 2000) << c.name << ": too few second tokens for the check";
  EXPECT_LT(r2.statistic, ChiSquareCritical(r2.df, kFalseFailureZ))
      << c.name << ": second-token chi-square after token " << t << ", df " << r2.df;
  // Paths are deep enough that the second-token check has data.
  EXPECT_GT(static_cast<double>(depth_sum) / b.batch.num_trees(), 0.25) << c.name;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_KERNELS_TREE_TREE_STAT_CASES_H_
