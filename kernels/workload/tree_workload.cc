#include "kernels/workload/tree_workload.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/tree/tree_reference.h"
#include "kernels/workload/sampling_workload.h"

namespace specverify {

TreeShape ChainShape(int32_t n) {
  TreeShape s;
  for (int32_t j = 0; j < n; ++j) s.parents.push_back(j - 1);
  return s;
}

absl::StatusOr<TreeShape> FullTreeShape(int32_t width, int32_t depth) {
  if (width < 1 || depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tree width and depth must be >= 1, got ", width, "x", depth));
  }
  TreeShape s;
  std::vector<int32_t> level{-1};
  for (int32_t d = 0; d < depth; ++d) {
    std::vector<int32_t> next;
    for (const int32_t parent : level) {
      for (int32_t w = 0; w < width; ++w) {
        if (s.num_nodes() >= kMaxTreeNodes) {
          return absl::InvalidArgumentError(absl::StrCat("a ", width, "x", depth, " tree has more than ",
                                                         kMaxTreeNodes, " nodes"));
        }
        next.push_back(s.num_nodes());
        s.parents.push_back(parent);
      }
    }
    level = std::move(next);
  }
  return s;
}

absl::StatusOr<TreeShape> ParseTreeSpec(std::string_view spec_in) {
  // Debian's abseil has its own string_view type.
  const absl::string_view spec(spec_in.data(), spec_in.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, 'x');
  int32_t width = 0, depth = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &width) || !absl::SimpleAtoi(parts[1], &depth)) {
    return absl::InvalidArgumentError(absl::StrCat("tree spec '", spec, "' is not WIDTHxDEPTH (e.g. 2x3)"));
  }
  return FullTreeShape(width, depth);
}

TreeShape RandomTreeShape(int32_t n, int32_t min_children, int32_t max_children, SplitMix64& rng) {
  TreeShape s;
  std::vector<int32_t> frontier{-1};
  size_t head = 0;
  while (s.num_nodes() < n) {
    // A frontier that ran dry (cannot happen with min_children >= 1) would
    // restart from the last node.
    const int32_t parent = head < frontier.size() ? frontier[head++] : s.num_nodes() - 1;
    const int32_t children =
        min_children + static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(max_children - min_children + 1)));
    for (int32_t c = 0; c < children && s.num_nodes() < n; ++c) {
      frontier.push_back(s.num_nodes());
      s.parents.push_back(parent);
    }
  }
  return s;
}

absl::StatusOr<TreeShape> ParseTreePaths(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  TreeShape s;
  // Node of each parsed path, keyed by the path's text in canonical form.
  std::vector<std::vector<int32_t>> paths;
  int32_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<int32_t> path;
    for (absl::string_view field : absl::StrSplit(line, absl::ByAnyChar(", []\t"), absl::SkipEmpty())) {
      int32_t rank = 0;
      if (!absl::SimpleAtoi(field, &rank) || rank < 0) {
        return absl::InvalidArgumentError(absl::StrCat("tree paths, line ", line_number, ": '", field,
                                                       "' is not a child rank >= 0"));
      }
      path.push_back(rank);
    }
    if (path.empty()) continue;
    int32_t parent = -1;
    if (path.size() > 1) {
      const std::vector<int32_t> prefix(path.begin(), path.end() - 1);
      const auto it = std::find(paths.begin(), paths.end(), prefix);
      if (it == paths.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tree paths, line ", line_number, ": the path's prefix is not an earlier line"));
      }
      parent = static_cast<int32_t>(it - paths.begin());
    }
    if (std::find(paths.begin(), paths.end(), path) != paths.end()) {
      return absl::InvalidArgumentError(absl::StrCat("tree paths, line ", line_number, ": duplicate path"));
    }
    if (s.num_nodes() >= kMaxTreeNodes) {
      return absl::InvalidArgumentError(absl::StrCat("tree paths: more than ", kMaxTreeNodes, " nodes"));
    }
    paths.push_back(path);
    s.parents.push_back(parent);
  }
  if (s.parents.empty()) return absl::InvalidArgumentError("tree paths: no node");
  return s;
}

TreeShape MedusaStyleShape() {
  // Wide at the top (the first heads' top candidates), thinning with depth.
  constexpr std::string_view kPaths =
      "0\n1\n2\n3\n"
      "0,0\n0,1\n0,2\n1,0\n1,1\n2,0\n2,1\n3,0\n"
      "0,0,0\n0,0,1\n0,1,0\n1,0,0\n0,2,0\n2,0,0\n1,1,0\n"
      "0,0,0,0\n0,0,0,1\n0,0,1,0\n0,1,0,0\n1,0,0,0\n0,0,2\n0,3\n";
  return *ParseTreePaths(kPaths);
}

TreeShape EagleStyleShape() {
  // Depth 5: the root expands to 4 children; each further level expands the
  // 4 best nodes of the previous one (here the first four) by 4 children.
  TreeShape s;
  std::vector<int32_t> level;
  for (int32_t c = 0; c < 4; ++c) {
    level.push_back(s.num_nodes());
    s.parents.push_back(-1);
  }
  for (int32_t d = 1; d < 5 && s.num_nodes() < 64; ++d) {
    std::vector<int32_t> next;
    for (int32_t e = 0; e < 4 && e < static_cast<int32_t>(level.size()); ++e) {
      for (int32_t c = 0; c < 4 && s.num_nodes() < 64; ++c) {
        next.push_back(s.num_nodes());
        s.parents.push_back(level[e]);
      }
    }
    level = std::move(next);
  }
  return s;
}

GreedyBatchInput TreeGreedyWorkload::input() const {
  GreedyBatchInput in;
  in.num_sequences = num_trees();
  in.draft_offsets = node_offsets.data();
  in.draft_tokens = draft_tokens.data();
  in.target_tokens = target_tokens.data();
  in.draft_kv = options.row_bytes > 0 ? draft_kv.data() : nullptr;
  in.row_bytes = options.row_bytes;
  return in;
}

absl::StatusOr<TreeGreedyWorkload> GenerateTreeGreedyWorkload(const TreeWorkloadOptions& options) {
  if (options.num_trees < 1 || options.num_trees > kMaxBatchSequences) {
    return absl::InvalidArgumentError(absl::StrCat("num_trees is ", options.num_trees, "; must lie in [1, ",
                                                   kMaxBatchSequences, "]"));
  }
  if (options.shape.parents.empty() &&
      (options.num_nodes < 1 || options.num_nodes > kMaxTreeNodes || options.min_children < 1 ||
       options.max_children < options.min_children)) {
    return absl::InvalidArgumentError(absl::StrCat("random trees need num_nodes in [1, ", kMaxTreeNodes,
                                                   "] and 1 <= min_children <= max_children"));
  }
  if (options.vocab_size < 8 || options.row_bytes < 0 || options.duplicate_sibling_rate < 0.0 ||
      options.duplicate_sibling_rate > 1.0) {
    return absl::InvalidArgumentError("vocab_size must be >= 8, row_bytes >= 0, duplicate_sibling_rate in [0, 1]");
  }
  for (const double a : options.level_acceptance) {
    if (!(a >= 0.0 && a <= 1.0)) return absl::InvalidArgumentError("level_acceptance entries must lie in [0, 1]");
  }
  TreeGreedyWorkload w;
  w.options = options;
  w.node_offsets.push_back(0);
  TreeGreedyExpected& e = w.expected;
  e.packed_row_offsets.push_back(0);
  const int32_t v = options.vocab_size;
  for (int32_t i = 0; i < options.num_trees; ++i) {
    SplitMix64 rng(DeriveSeed(options.seed, static_cast<uint64_t>(i)));
    const TreeShape shape = options.shape.parents.empty()
                                ? RandomTreeShape(options.num_nodes, options.min_children, options.max_children, rng)
                                : options.shape;
    const int32_t n = shape.num_nodes();
    std::vector<std::vector<int32_t>> children(n + 1);  // index parent + 1
    for (int32_t j = 0; j < n; ++j) children[shape.parents[j] + 1].push_back(j);
    // Tokens: distinct among siblings, unless copied on purpose.
    std::vector<int32_t> tokens(n);
    for (const auto& kids : children) {
      std::vector<int32_t> used;
      for (const int32_t j : kids) {
        if (!used.empty() && rng.NextDouble() < options.duplicate_sibling_rate) {
          tokens[j] = used[rng.NextBelow(used.size())];
        } else {
          int32_t t;
          do {
            t = static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(v)));
          } while (std::find(used.begin(), used.end(), t) != used.end());
          tokens[j] = t;
        }
        used.push_back(tokens[j]);
      }
    }
    // Targets: random first, then the walk overwrites the nodes it visits.
    std::vector<int32_t> target(n + 1);
    for (int32_t r = 0; r <= n; ++r) target[r] = static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(v)));
    std::vector<int32_t> path;
    int32_t node = -1;
    for (int32_t depth = 0;; ++depth) {
      const std::vector<int32_t>& kids = children[node + 1];
      // A child can be the greedy choice only if no lower-index sibling
      // carries its token (the walk takes the lowest-index match).
      std::vector<int32_t> eligible;
      for (size_t a = 0; a < kids.size(); ++a) {
        bool first = true;
        for (size_t b = 0; b < a; ++b) first = first && tokens[kids[b]] != tokens[kids[a]];
        if (first) eligible.push_back(kids[a]);
      }
      const double alpha = options.level_acceptance.empty()
                               ? 0.6
                               : options.level_acceptance[std::min<size_t>(depth, options.level_acceptance.size() - 1)];
      if (!eligible.empty() && rng.NextDouble() < alpha) {
        const int32_t next = eligible[rng.NextBelow(eligible.size())];
        target[node + 1] = tokens[next];
        path.push_back(next);
        node = next;
        continue;
      }
      // Stop here: a target token that no child carries.
      int32_t t = target[node + 1];
      while (std::any_of(kids.begin(), kids.end(), [&](int32_t k) { return tokens[k] == t; })) t = (t + 1) % v;
      target[node + 1] = t;
      e.next_tokens.push_back(t);
      e.mismatch.push_back(kids.empty() ? 0 : 1);
      break;
    }
    const int32_t first = w.node_offsets.back();
    w.node_offsets.push_back(first + n);
    w.draft_tokens.insert(w.draft_tokens.end(), tokens.begin(), tokens.end());
    w.parent_indices.insert(w.parent_indices.end(), shape.parents.begin(), shape.parents.end());
    w.target_tokens.insert(w.target_tokens.end(), target.begin(), target.end());
    const size_t kv_begin = w.draft_kv.size();
    w.draft_kv.resize(kv_begin + static_cast<size_t>(n) * options.row_bytes);
    for (size_t k = kv_begin; k < w.draft_kv.size(); k += 8) {
      const uint64_t bits = rng.Next();
      std::memcpy(w.draft_kv.data() + k, &bits, std::min<size_t>(8, w.draft_kv.size() - k));
    }
    e.accepted_lengths.push_back(static_cast<int32_t>(path.size()));
    e.packed_row_offsets.push_back(e.packed_row_offsets.back() + static_cast<int32_t>(path.size()));
    for (const int32_t j : path) {
      e.accepted_nodes.push_back(j);
      const std::byte* row = w.draft_kv.data() + (static_cast<size_t>(first) + j) * options.row_bytes;
      e.packed_kv.insert(e.packed_kv.end(), row, row + options.row_bytes);
    }
  }
  return w;
}

RejectionBatchInput TreeSampledWorkload::input() const {
  RejectionBatchInput in;
  in.num_sequences = num_trees();
  in.vocab_size = options.vocab_size;
  in.total_draft_tokens = node_offsets.back();
  in.dtype = options.dtype;
  in.kind = SampleValueKind::kProbabilities;
  in.method = SampleMethod::kExact;
  in.has_draft_probs = options.has_draft_probs;
  in.draft_offsets = node_offsets.data();
  in.draft_tokens = draft_tokens.data();
  in.target_values = target_values.data();
  in.draft_values = options.has_draft_probs ? draft_values.data() : nullptr;
  in.sequences = sequences.data();
  return in;
}

absl::StatusOr<TreeSampledWorkload> GenerateTreeSampledWorkload(const TreeSampledWorkloadOptions& options) {
  if (options.num_trees < 1 || options.num_trees > kMaxBatchSequences) {
    return absl::InvalidArgumentError(absl::StrCat("num_trees is ", options.num_trees, "; must lie in [1, ",
                                                   kMaxBatchSequences, "]"));
  }
  if (options.shape.parents.empty() &&
      (options.num_nodes < 1 || options.num_nodes > kMaxTreeNodes || options.min_children < 1 ||
       options.max_children < options.min_children)) {
    return absl::InvalidArgumentError(absl::StrCat("random trees need num_nodes in [1, ", kMaxTreeNodes,
                                                   "] and 1 <= min_children <= max_children"));
  }
  if (options.vocab_size < 8 || options.sequences_per_request < 1) {
    return absl::InvalidArgumentError("vocab_size must be >= 8 and sequences_per_request >= 1");
  }
  for (const double a : options.level_acceptance) {
    if (!(a >= 0.0 && a <= 1.0)) return absl::InvalidArgumentError("level_acceptance entries must lie in [0, 1]");
  }
  TreeSampledWorkload w;
  w.options = options;
  w.node_offsets.push_back(0);
  const int32_t v = options.vocab_size;
  std::vector<float> row(v);
  // Random weights u^3 scaled to `rest`, then the planted entries.
  const auto make_row = [&](SplitMix64& rng, double rest, const std::vector<std::pair<int32_t, double>>& plants,
                            std::vector<std::byte>& out) {
    double sum = 0.0;
    for (int32_t x = 0; x < v; ++x) {
      const double u = rng.NextDouble();
      row[x] = static_cast<float>(u * u * u);
      sum += row[x];
    }
    for (int32_t x = 0; x < v; ++x) row[x] = static_cast<float>(row[x] * rest / sum);
    for (const auto& [token, mass] : plants) row[token] = static_cast<float>(mass);
    AppendAsDtype(row.data(), v, options.dtype, out);
  };
  for (int32_t i = 0; i < options.num_trees; ++i) {
    SplitMix64 rng(DeriveSeed(options.seed, static_cast<uint64_t>(i)));
    const TreeShape shape = options.shape.parents.empty()
                                ? RandomTreeShape(options.num_nodes, options.min_children, options.max_children, rng)
                                : options.shape;
    const int32_t n = shape.num_nodes();
    std::vector<std::vector<int32_t>> children(n + 1);
    std::vector<int32_t> depth(n + 1, 0);  // index node + 1
    for (int32_t j = 0; j < n; ++j) {
      children[shape.parents[j] + 1].push_back(j);
      depth[j + 1] = depth[shape.parents[j] + 1] + 1;
    }
    std::vector<int32_t> tokens(n);
    for (const auto& kids : children) {
      std::vector<int32_t> used;
      for (const int32_t j : kids) {
        int32_t t;
        do {
          t = static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(v)));
        } while (std::find(used.begin(), used.end(), t) != used.end());
        used.push_back(t);
        tokens[j] = t;
      }
    }
    for (int32_t r = 0; r <= n; ++r) {
      const auto& kids = children[r];
      const double a = options.level_acceptance.empty()
                           ? 0.7
                           : options.level_acceptance[std::min<size_t>(depth[r], options.level_acceptance.size() - 1)];
      std::vector<std::pair<int32_t, double>> plants;
      double planted = 0.0;
      for (size_t k = 0; k < kids.size(); ++k) {
        const double mass = k == 0 ? 0.9 * a : (1.0 - a) * 0.5 / static_cast<double>(kids.size() - 1);
        plants.emplace_back(tokens[kids[k]], mass);
        planted += mass;
      }
      make_row(rng, 1.0 - planted, plants, w.target_values);
    }
    if (options.has_draft_probs) {
      for (int32_t j = 0; j < n; ++j) make_row(rng, 0.1, {{tokens[j], 0.9}}, w.draft_values);
    }
    w.draft_tokens.insert(w.draft_tokens.end(), tokens.begin(), tokens.end());
    w.parent_indices.insert(w.parent_indices.end(), shape.parents.begin(), shape.parents.end());
    w.node_offsets.push_back(w.node_offsets.back() + n);
    SequenceSamplingParams s;
    s.seed = DeriveSeed(options.seed ^ 0x7265716eULL, static_cast<uint64_t>(i / options.sequences_per_request));
    s.sequence_index = i % options.sequences_per_request;
    w.sequences.push_back(s);
  }
  return w;
}

TreeSampledExpected ReferenceTreeOutcome(const TreeSampledWorkload& w) {
  const int32_t b = w.num_trees();
  TreeSampledExpected e;
  e.accepted_lengths.resize(b);
  e.next_tokens.resize(b);
  e.status_codes.resize(b);
  e.error_positions.resize(b);
  e.mismatch.resize(b);
  e.path_nodes.assign(w.total_nodes(), -1);
  TreeSampleParams p;
  p.input = w.input();
  p.parent_indices = w.parent_indices.data();
  p.output.accepted_lengths = e.accepted_lengths.data();
  p.output.next_tokens = e.next_tokens.data();
  p.output.mismatch = e.mismatch.data();
  p.output.status_codes = e.status_codes.data();
  p.output.error_positions = e.error_positions.data();
  p.path_nodes = e.path_nodes.data();
  ReferenceTreeSample(p);
  return e;
}

}  // namespace specverify
