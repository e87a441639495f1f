// The foundation grid of greedy verify-and-pack cases (issue "Foundation"):
// every kernel (CPU reference, CUDA paths, dispatcher) is tested over it.
#ifndef SPECVERIFY_TESTS_TESTING_GREEDY_GRID_H_
#define SPECVERIFY_TESTS_TESTING_GREEDY_GRID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "kernels/workload/greedy_workload.h"

namespace specverify::testing {

// Cases whose draft KV would exceed this many bytes are left out of the full
// cross product: the code paths they run are covered by the smaller rows of
// the same (b, gamma), and the largest grid points would need gigabytes.
inline constexpr int64_t kMaxGridDraftKvBytes = int64_t{48} << 20;

inline std::vector<GreedyWorkloadOptions> GreedyFoundationGrid() {
  std::vector<GreedyWorkloadOptions> grid;
  uint64_t seed = 1000;
  for (int32_t b : {1, 7, 32, 1000, 4096}) {
    for (int32_t gamma : {1, 3, 8, 64, 256}) {
      for (double alpha : {0.0, 0.3, 0.9, 1.0}) {
        for (int64_t row_bytes : {0, 2, 256, 4096, 4098}) {
          if (int64_t{b} * gamma * row_bytes > kMaxGridDraftKvBytes) continue;
          GreedyWorkloadOptions o;
          o.num_sequences = b;
          o.gamma_min = o.gamma_max = gamma;
          o.alpha = alpha;
          o.row_bytes = row_bytes;
          o.seed = ++seed;
          grid.push_back(o);
        }
      }
    }
  }
  return grid;
}

// Ragged mixes: gamma drawn per sequence, odd row sizes included.
inline std::vector<GreedyWorkloadOptions> GreedyRaggedCases() {
  std::vector<GreedyWorkloadOptions> cases;
  uint64_t seed = 5000;
  for (int32_t b : {1, 7, 33, 333, 4096}) {
    for (auto [lo, hi] : {std::pair{1, 8}, std::pair{1, 256}, std::pair{30, 40}}) {
      for (int64_t row_bytes : {0, 3, 16, 4096, 4098}) {
        if (int64_t{b} * hi * row_bytes > kMaxGridDraftKvBytes) continue;
        GreedyWorkloadOptions o;
        o.num_sequences = b;
        o.gamma_min = lo;
        o.gamma_max = hi;
        o.alpha = 0.7;
        o.row_bytes = row_bytes;
        o.seed = ++seed;
        cases.push_back(o);
      }
    }
  }
  return cases;
}

inline std::string GreedyCaseName(const GreedyWorkloadOptions& o) {
  std::string name = absl::StrCat("b", o.num_sequences, "_g", o.gamma_min);
  if (o.gamma_max != o.gamma_min) absl::StrAppend(&name, "to", o.gamma_max);
  absl::StrAppend(&name, "_a", static_cast<int>(o.alpha * 100), "_row",
                  o.row_bytes, "_seed", o.seed);
  return name;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_TESTING_GREEDY_GRID_H_
