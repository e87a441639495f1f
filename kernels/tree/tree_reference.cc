#include "kernels/tree/tree_reference.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/reference_rows.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/tree/tree_core.h"

namespace specverify {
namespace {

using rejection::RaceCandidate;

// --- Structure ------------------------------------------------------------------

// First node of a tree whose parent lies outside [-1, j), or -1.
int32_t FirstBadParent(const int32_t* parents, int32_t n) {
  for (int32_t j = 0; j < n; ++j) {
    if (parents[j] < -1 || parents[j] >= j) return j;
  }
  return -1;
}

// --- Greedy -----------------------------------------------------------------------

// Depth of tree i's greedy path; the path goes to path[0 .. depth).
int32_t GreedyWalk(const TreeGreedyVerifyParams& p, int32_t i, int32_t* path, int32_t* next,
                   bool* has_children) {
  const GreedyBatchInput& in = p.input;
  const int32_t first = in.draft_offsets[i];
  const int32_t n = in.draft_offsets[i + 1] - first;
  const int32_t* tokens = in.draft_tokens + first;
  const int32_t* parents = p.parent_indices + first;
  const int32_t* target = in.target_tokens + first + i;  // n + 1 entries
  int32_t v = -1;
  int32_t depth = 0;
  for (;;) {
    const int32_t want = target[v + 1];
    int32_t child = -1;
    bool any = false;
    // Children of v have larger indices (topological order).
    for (int32_t j = v + 1; j < n; ++j) {
      if (parents[j] != v) continue;
      any = true;
      if (tokens[j] == want) {
        child = j;
        break;
      }
    }
    if (child < 0) {
      *next = want;
      *has_children = any;
      return depth;
    }
    path[depth++] = child;
    v = child;
  }
}

// --- Sampling -------------------------------------------------------------------

struct TreeView {
  const RejectionBatchInput& in;
  int32_t n;
  const int32_t* tokens;
  const int32_t* parents;
  int64_t target_row0;  // offsets[i] + i
  int64_t draft_row0;   // offsets[i]
  const SequenceSamplingParams& seq;

  float Target(int32_t row, int32_t x) const {
    return rejection::LoadValue(SampledRowAddress(in, false, target_row0 + row), in.dtype, x);
  }
  float Draft(int32_t node, int32_t x) const {
    return rejection::LoadValue(SampledRowAddress(in, true, draft_row0 + node), in.dtype, x);
  }
};

struct SampleOutcome {
  int32_t depth = 0;
  int32_t next = -1;
  bool has_children = false;
  int32_t code = kRejectionOk;
  int32_t position = -1;
  int32_t row_reads = 0;  // V-length rows read in full
};

// The residual state at one node: the rejected children so far (in order)
// and float(Z_s) at each rejection.
struct Residual {
  std::vector<int32_t> rejected;
  std::vector<float> mass_f;

  // R_k(x) from p(x) (k = rejected.size()). Draft values are read unchecked:
  // callers check the elements they read first.
  float At(const TreeView& t, int32_t x, float p) const {
    float r = p;
    for (size_t s = 0; s < rejected.size(); ++s) {
      const float q = t.in.has_draft_probs ? t.Draft(rejected[s], x)
                                           : (t.tokens[rejected[s]] == x ? 1.0f : 0.0f);
      r = tree::ResidualStep(r, mass_f[s], q);
    }
    return r;
  }
};

// Checks every element of the target row `row` and of the draft rows of the
// rejected children (in rejection order): what a pass over V reads. Returns
// false and sets the failure (target first, then drafts in order).
bool CheckPassRows(const TreeView& t, int32_t row, const Residual& res, SampleOutcome& out) {
  for (int32_t x = 0; x < t.in.vocab_size; ++x) {
    if (!rejection::ValueIsValid(t.in.kind, t.Target(row, x))) {
      out.code = kRejectionBadTargetValue;
      out.position = row;
      return false;
    }
  }
  if (!t.in.has_draft_probs) return true;
  for (const int32_t node : res.rejected) {
    for (int32_t x = 0; x < t.in.vocab_size; ++x) {
      if (!rejection::ValueIsValid(t.in.kind, t.Draft(node, x))) {
        out.code = kRejectionBadDraftValue;
        out.position = node;
        return false;
      }
    }
  }
  return true;
}

SampleOutcome SampleTree(const TreeView& t, int32_t* path) {
  const RejectionBatchInput& in = t.in;
  const SequenceSamplingParams& s = t.seq;
  SampleOutcome out;
  const auto fail = [&out](int32_t code, int32_t position) {
    out.code = code;
    out.position = position;
    out.depth = 0;
    return out;
  };
  if (const int32_t code = rejection::SequenceParamsCode(in.kind, in.method, s); code != kRejectionOk) {
    return fail(code, -1);
  }
  for (int32_t j = 0; j < t.n; ++j) {
    if (t.tokens[j] < 0 || t.tokens[j] >= in.vocab_size) return fail(kRejectionDraftTokenOutOfRange, j);
  }
  if (const int32_t j = FirstBadParent(t.parents, t.n); j >= 0) return fail(kTreeBadParent, j);

  const auto seq_index = static_cast<uint32_t>(s.sequence_index);
  int32_t v = -1;
  for (;;) {
    const int32_t row = static_cast<int32_t>(tree::TargetRowOf(v));
    Residual res;
    double mass = 1.0;
    bool has_children = false;
    int32_t accepted = -1;
    for (int32_t c = v + 1; c < t.n; ++c) {
      if (t.parents[c] != v) continue;
      has_children = true;
      if (!tree::UsableMass(mass)) break;  // nothing left to accept: emit
      const int32_t x = t.tokens[c];
      // The scalars this test reads, in the kernel's order: p(x), the
      // rejected siblings' q(x), then this child's q(x).
      const float p = t.Target(row, x);
      if (!rejection::ValueIsValid(in.kind, p)) return fail(kRejectionBadTargetValue, row);
      if (in.has_draft_probs) {
        for (const int32_t r : res.rejected) {
          if (!rejection::ValueIsValid(in.kind, t.Draft(r, x))) return fail(kRejectionBadDraftValue, r);
        }
      }
      const float q = in.has_draft_probs ? t.Draft(c, x) : 1.0f;
      if (!rejection::ValueIsValid(in.kind, q)) return fail(kRejectionBadDraftValue, c);
      const float r = res.At(t, x, p);
      if (tree::AcceptChild(AcceptCoin(s.seed, seq_index, static_cast<uint32_t>(c)), r, q, mass)) {
        accepted = c;
        break;
      }
      // Rejected: the next sibling (if any) is tested against R_{k+1} / Z_{k+1}.
      res.rejected.push_back(c);
      res.mass_f.push_back(static_cast<float>(mass));
      int32_t next_sibling = c + 1;
      while (next_sibling < t.n && t.parents[next_sibling] != v) ++next_sibling;
      if (next_sibling >= t.n) break;  // no more children: emit from R_{k+1}
      if (in.has_draft_probs) {
        if (!CheckPassRows(t, row, res, out)) return fail(out.code, out.position);
        out.row_reads += 1 + static_cast<int32_t>(res.rejected.size());
        double z = 0.0;
        for (int32_t begin = 0; begin < in.vocab_size; begin += rejection::kNormalizerChunk) {
          const int32_t end = std::min(in.vocab_size, begin + rejection::kNormalizerChunk);
          z = detmath::AddD(z, reference_rows::ChunkSumFixedOrder(begin, end, [&](int32_t y) {
                              return res.At(t, y, t.Target(row, y));
                            }));
        }
        mass = z;
      } else {
        mass = tree::OneHotNextMass(mass, r, tree::ResidualStep(r, res.mass_f.back(), 1.0f));
      }
      c = next_sibling - 1;  // the loop's ++c lands on it
    }
    if (accepted >= 0) {
      path[out.depth++] = accepted;
      v = accepted;
      continue;
    }
    // Emission at v: race over R_k (the bonus over p when nothing was
    // rejected), falling back to p when R_k has no positive entry.
    if (!CheckPassRows(t, row, res, out)) return fail(out.code, out.position);
    out.row_reads += 1 + (in.has_draft_probs ? static_cast<int32_t>(res.rejected.size()) : 0);
    const bool residual = !res.rejected.empty();
    RaceCandidate best_residual = rejection::NoCandidate();
    RaceCandidate best_target = rejection::NoCandidate();
    Philox4x32 bits{};
    for (int32_t x = 0; x < in.vocab_size; ++x) {
      if (x % 4 == 0) bits = RaceBits(s.seed, seq_index, static_cast<uint32_t>(row), static_cast<uint32_t>(x / 4));
      const float e = RaceExponential(bits.v[x % 4]);
      const float p = t.Target(row, x);
      if (residual) rejection::RaceOffer(best_residual, e, res.At(t, x, p), x);
      rejection::RaceOffer(best_target, e, p, x);
    }
    const RaceCandidate& winner = best_residual.token >= 0 ? best_residual : best_target;
    if (winner.token < 0) return fail(kRejectionEmptyTargetRow, row);
    out.next = winner.token;
    out.has_children = has_children;
    return out;
  }
}

}  // namespace

// --- Validation -----------------------------------------------------------------

absl::Status ValidateTreeStructure(int32_t num_trees, const int32_t* node_offsets,
                                   const int32_t* parent_indices, const TreeLimits& limits) {
  if (limits.max_tree_nodes < 1 || limits.max_tree_nodes > kMaxTreeNodes) {
    return absl::InvalidArgumentError(absl::StrCat("max_tree_nodes is ", limits.max_tree_nodes,
                                                   "; must lie in [1, ", kMaxTreeNodes, "]"));
  }
  if (num_trees < 1 || num_trees > limits.max_trees) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sequences is ", num_trees, "; must lie in [1, ", limits.max_trees, "]"));
  }
  if (node_offsets == nullptr || parent_indices == nullptr) {
    return absl::InvalidArgumentError("draft_offsets and parent_indices must be set");
  }
  if (node_offsets[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat("draft_offsets[0] is ", node_offsets[0], "; must be 0"));
  }
  for (int32_t i = 0; i < num_trees; ++i) {
    const int64_t n = int64_t{node_offsets[i + 1]} - node_offsets[i];
    if (n < 1 || n > limits.max_tree_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": tree has ", n,
                                                     " nodes; must have between 1 and ",
                                                     limits.max_tree_nodes, " (--max_tree_nodes)"));
    }
    const int32_t* parents = parent_indices + node_offsets[i];
    if (const int32_t j = FirstBadParent(parents, static_cast<int32_t>(n)); j >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ", node ", j, ": parent_indices[", j,
                                                     "] is ", parents[j], "; must lie in [-1, ", j,
                                                     ") (nodes in topological order, -1 = the root)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTreeRowDestinations(const TreeRowDestinations& d, int32_t num_trees,
                                         bool origins_readable) {
  if (d.destinations == nullptr) return absl::OkStatus();
  if (d.origins == nullptr) {
    return absl::InvalidArgumentError("row_destinations.origins must be set with row_destinations.destinations");
  }
  if (d.alignment < 1 || d.alignment > 16 || (d.alignment & (d.alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("row_destinations.alignment is ", d.alignment,
                                                   "; must be a power of two in [1, 16]"));
  }
  if (!origins_readable) return absl::OkStatus();
  for (int32_t i = 0; i < num_trees; ++i) {
    if (d.origins[i] < 0 || d.origins[i] > i) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": row_destinations.origins[", i, "] is ",
                                                     d.origins[i], "; must lie in [0, ", i, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTreeGreedyBatch(const TreeGreedyVerifyParams& params, const TreeLimits& limits) {
  const GreedyBatchInput& in = params.input;
  if (absl::Status s = ValidateTreeStructure(in.num_sequences, in.draft_offsets, params.parent_indices, limits);
      !s.ok()) {
    return s;
  }
  LayoutLimits layout;
  layout.max_sequences = limits.max_trees;
  layout.max_draft_tokens = limits.max_tree_nodes;
  GreedyVerifyParams chain{params.input, params.output};
  if (absl::Status s = ValidateGreedyBatch(chain, layout); !s.ok()) return s;
  if (params.accepted_nodes == nullptr) return absl::InvalidArgumentError("accepted_nodes must be set");
  return ValidateTreeRowDestinations(params.row_destinations, in.num_sequences, /*origins_readable=*/true);
}

absl::Status ValidateTreeSampleBatch(const TreeSampleParams& params, const TreeLimits& limits) {
  const RejectionBatchInput& in = params.input;
  if (in.kind != SampleValueKind::kProbabilities) {
    return absl::UnimplementedError("tree verification samples from probabilities only (kind LOGITS)");
  }
  if (in.method != SampleMethod::kExact) {
    return absl::UnimplementedError("tree verification supports the exact method only");
  }
  if (in.validate_full_rows) {
    return absl::UnimplementedError("validate_full_rows is not supported for trees");
  }
  if (params.output.greedy_target_tokens != nullptr) {
    return absl::InvalidArgumentError("greedy_target_tokens must be null for trees (use path_nodes)");
  }
  if (params.path_nodes == nullptr) return absl::InvalidArgumentError("path_nodes must be set");
  if (absl::Status s = ValidateTreeStructure(in.num_sequences, in.draft_offsets, params.parent_indices, limits);
      !s.ok()) {
    return s;
  }
  RejectionLimits rl;
  rl.max_sequences = limits.max_trees;
  rl.max_draft_tokens = limits.max_tree_nodes;
  rl.max_vocab_size = limits.max_vocab_size;
  return ValidateRejectionBatch(RejectionSampleParams{params.input, params.output}, rl);
}

absl::Status TreeOutcomeStatus(const int32_t* status_codes, const int32_t* error_positions, int32_t num_trees) {
  for (int32_t i = 0; i < num_trees; ++i) {
    const int32_t code = status_codes[i];
    if (code == kRejectionOk) continue;
    const int32_t pos = error_positions[i];
    std::string where;
    switch (code) {
      case kRejectionBadTargetValue:
      case kRejectionEmptyTargetRow:
        where = pos == 0 ? "target row 0 (the root)" : absl::StrCat("target row ", pos, " (node ", pos - 1, ")");
        break;
      case kRejectionBadSequenceParams:
        where = "sampling parameters";
        break;
      case kTreeBadParent:
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", i, ", node ", pos, ": parent_indices: not in [-1, ", pos, ")"));
      default:
        where = absl::StrCat("node ", pos);
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ", ", where, ": ", RejectionCodeName(code)));
  }
  return absl::OkStatus();
}

// --- Reference implementations -------------------------------------------------

void ReferenceTreeGreedyWalkRange(const TreeGreedyVerifyParams& params, int32_t begin, int32_t end,
                                  int32_t* path_nodes) {
  for (int32_t i = begin; i < end; ++i) {
    int32_t next = 0;
    bool has_children = false;
    const int32_t depth = GreedyWalk(params, i, path_nodes + params.input.draft_offsets[i], &next, &has_children);
    params.output.accepted_lengths[i] = depth;
    params.output.next_tokens[i] = next;
    params.output.mismatch[i] = has_children ? 1 : 0;
  }
}

void ReferenceTreeGreedyVerifyPack(const TreeGreedyVerifyParams& params) {
  const GreedyBatchInput& in = params.input;
  const int32_t b = in.num_sequences;
  std::vector<int32_t> path(b > 0 ? in.draft_offsets[b] : 0);
  ReferenceTreeGreedyWalkRange(params, 0, b, path.data());
  TreePackParams pack;
  pack.num_trees = b;
  pack.node_offsets = in.draft_offsets;
  pack.accepted_lengths = params.output.accepted_lengths;
  pack.path_nodes = path.data();
  pack.draft_kv = in.draft_kv;
  pack.row_bytes = in.row_bytes;
  pack.kv_sources = params.kv_sources;
  pack.kv_source_alignment = params.kv_source_alignment;
  pack.packed_row_offsets = params.output.packed_row_offsets;
  pack.accepted_nodes = params.accepted_nodes;
  pack.packed_kv = params.output.packed_kv;
  pack.row_destinations = params.row_destinations;
  ReferenceTreePack(pack);
}

void ReferenceTreeSampleRange(const TreeSampleParams& params, int32_t begin, int32_t end) {
  const RejectionBatchInput& in = params.input;
  const RejectionBatchOutput& out = params.output;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t first = in.draft_offsets[i];
    const TreeView view{in,         in.draft_offsets[i + 1] - first, in.draft_tokens + first,
                        params.parent_indices + first, static_cast<int64_t>(first) + i, first,
                        in.sequences[i]};
    const SampleOutcome o = SampleTree(view, params.path_nodes + first);
    const bool ok = o.code == kRejectionOk;
    out.accepted_lengths[i] = ok ? o.depth : 0;
    out.next_tokens[i] = ok ? o.next : -1;
    out.mismatch[i] = (!ok || o.has_children) ? 1 : 0;
    out.status_codes[i] = o.code;
    out.error_positions[i] = ok ? -1 : o.position;
    if (params.row_reads != nullptr) params.row_reads[i] = ok ? o.row_reads : 0;
  }
}

void ReferenceTreeSample(const TreeSampleParams& params) {
  ReferenceTreeSampleRange(params, 0, params.input.num_sequences);
}

void ReferenceTreePackedRowOffsets(const TreePackParams& params) {
  int32_t total = 0;
  for (int32_t i = 0; i < params.num_trees; ++i) {
    params.packed_row_offsets[i] = total;
    total += params.accepted_lengths[i];
  }
  params.packed_row_offsets[params.num_trees] = total;
}

void ReferenceTreePackRange(const TreePackParams& params, int32_t begin, int32_t end) {
  const TreeRowDestinations& to = params.row_destinations;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t first = params.node_offsets[i];
    const int32_t dest = params.packed_row_offsets[i];
    const std::byte* const rows = params.kv_sources != nullptr
                                      ? params.kv_sources[i]
                                      : params.draft_kv + int64_t{first} * params.row_bytes;
    std::byte* const out =
        to.destinations == nullptr
            ? params.packed_kv + int64_t{dest} * params.row_bytes
        : to.destinations[i] == nullptr
            ? nullptr
            : to.destinations[i] + int64_t{dest - params.packed_row_offsets[to.origins[i]]} * params.row_bytes;
    for (int32_t d = 0; d < params.accepted_lengths[i]; ++d) {
      const int32_t node = params.path_nodes[first + d];
      params.accepted_nodes[dest + d] = node;
      if (params.row_bytes > 0 && out != nullptr) {
        std::memcpy(out + int64_t{d} * params.row_bytes, rows + int64_t{node} * params.row_bytes,
                    static_cast<size_t>(params.row_bytes));
      }
    }
  }
}

void ReferenceTreePack(const TreePackParams& params) {
  ReferenceTreePackedRowOffsets(params);
  ReferenceTreePackRange(params, 0, params.num_trees);
}

}  // namespace specverify
