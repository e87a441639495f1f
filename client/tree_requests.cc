#include "client/tree_requests.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/sampled_requests.h"

namespace specverify::client {
namespace {

absl::Status Differs(int32_t tree, const char* field, int64_t expected, int64_t actual) {
  return absl::FailedPreconditionError(absl::StrCat("tree ", tree, " ", field, ": expected ",
                                                    expected, ", got ", actual));
}

}  // namespace

absl::StatusOr<v1::VerifyRequest> BuildTreeGreedyRequest(const TreeGreedyWorkload& w,
                                                         int32_t first, int32_t n,
                                                         v1::KvReturn kv_return,
                                                         const std::string& request_id) {
  if (first < 0 || n < 1 || first + n > w.num_trees()) {
    return absl::InvalidArgumentError("tree range outside the workload");
  }
  v1::VerifyRequest request;
  request.set_request_id(request_id);
  request.set_kv_return(kv_return);
  const int64_t rb = w.options.row_bytes;
  for (int32_t i = first; i < first + n; ++i) {
    const int32_t begin = w.node_offsets[i], nodes = w.node_offsets[i + 1] - begin;
    v1::SequenceDraft* seq = request.add_sequences();
    seq->mutable_draft_tokens()->Add(w.draft_tokens.begin() + begin,
                                     w.draft_tokens.begin() + begin + nodes);
    seq->mutable_parent_indices()->Add(w.parent_indices.begin() + begin,
                                       w.parent_indices.begin() + begin + nodes);
    auto* target = seq->mutable_greedy()->mutable_target_tokens();
    target->Add(w.target_tokens.begin() + begin + i, w.target_tokens.begin() + begin + i + nodes + 1);
    seq->set_vocab_size(w.options.vocab_size);
    if (rb > 0) {
      v1::Tensor* kv = seq->mutable_draft_kv();
      kv->set_dtype(v1::DATA_TYPE_UINT8);
      kv->add_shape(nodes);
      kv->add_shape(rb);
      kv->set_data(reinterpret_cast<const char*>(w.draft_kv.data() + begin * rb),
                   static_cast<size_t>(nodes * rb));
    }
  }
  return request;
}

absl::Status CheckTreeGreedyResponse(const TreeGreedyWorkload& w, int32_t first, int32_t n,
                                     v1::KvReturn kv_return, const v1::VerifyResponse& response) {
  if (response.results_size() != n) {
    return absl::FailedPreconditionError(
        absl::StrCat("results: expected ", n, ", got ", response.results_size()));
  }
  const TreeGreedyExpected& e = w.expected;
  const int64_t rb = w.options.row_bytes;
  const int32_t base = e.packed_row_offsets[first];
  for (int32_t t = 0; t < n; ++t) {
    const int32_t i = first + t;
    const v1::SequenceResult& r = response.results(t);
    if (r.accepted_length() != e.accepted_lengths[i]) {
      return Differs(t, "accepted_length", e.accepted_lengths[i], r.accepted_length());
    }
    if (r.next_token() != e.next_tokens[i]) return Differs(t, "next_token", e.next_tokens[i], r.next_token());
    if (r.mismatch() != (e.mismatch[i] != 0)) return Differs(t, "mismatch", e.mismatch[i], r.mismatch());
    if (r.kv_row_offset() != e.packed_row_offsets[i] - base) {
      return Differs(t, "kv_row_offset", e.packed_row_offsets[i] - base, r.kv_row_offset());
    }
    if (r.kv_row_count() != e.accepted_lengths[i]) {
      return Differs(t, "kv_row_count", e.accepted_lengths[i], r.kv_row_count());
    }
    if (r.accepted_nodes_size() != e.accepted_lengths[i]) {
      return Differs(t, "accepted_nodes size", e.accepted_lengths[i], r.accepted_nodes_size());
    }
    for (int32_t d = 0; d < r.accepted_nodes_size(); ++d) {
      const int32_t want = e.accepted_nodes[e.packed_row_offsets[i] + d];
      if (r.accepted_nodes(d) != want) return Differs(t, "accepted_nodes entry", want, r.accepted_nodes(d));
    }
  }
  if (kv_return == v1::KV_RETURN_INLINE && rb > 0) {
    const int64_t bytes = int64_t{e.packed_row_offsets[first + n] - base} * rb;
    if (static_cast<int64_t>(response.kv_inline().size()) != bytes ||
        std::memcmp(response.kv_inline().data(), e.packed_kv.data() + int64_t{base} * rb,
                    static_cast<size_t>(bytes)) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kv_inline differs from the accepted paths' rows (", response.kv_inline().size(),
          " bytes, expected ", bytes, ")"));
    }
  }
  return absl::OkStatus();
}

int32_t TreeSampledRequestCount(const TreeSampledWorkload& w) {
  return (w.num_trees() + w.options.sequences_per_request - 1) / w.options.sequences_per_request;
}

absl::StatusOr<v1::VerifyRequest> BuildTreeSampledRequest(const TreeSampledWorkload& w, int32_t r,
                                                          const std::string& request_id,
                                                          int64_t kv_row_bytes, v1::KvReturn kv_return) {
  const int32_t per = w.options.sequences_per_request;
  const int32_t first = r * per;
  if (r < 0 || first >= w.num_trees()) return absl::InvalidArgumentError("request outside the workload");
  const int32_t last = std::min(w.num_trees(), first + per);
  const int64_t row = int64_t{w.options.vocab_size} * SampleDtypeBytes(w.options.dtype);
  v1::VerifyRequest request;
  request.set_request_id(request_id);
  request.set_seed(w.sequences[first].seed);
  request.set_kv_return(kv_row_bytes > 0 ? kv_return : v1::KV_RETURN_NONE);
  for (int32_t i = first; i < last; ++i) {
    const int32_t begin = w.node_offsets[i], nodes = w.node_offsets[i + 1] - begin;
    v1::SequenceDraft* seq = request.add_sequences();
    seq->mutable_draft_tokens()->Add(w.draft_tokens.begin() + begin, w.draft_tokens.begin() + begin + nodes);
    seq->mutable_parent_indices()->Add(w.parent_indices.begin() + begin,
                                       w.parent_indices.begin() + begin + nodes);
    seq->set_vocab_size(w.options.vocab_size);
    v1::SampledTarget* st = seq->mutable_sampled();
    st->set_method(v1::SAMPLING_METHOD_EXACT);
    v1::Distribution* target = st->mutable_target();
    target->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
    v1::Tensor* tv = target->mutable_values();
    tv->set_dtype(ToProtoDtype(w.options.dtype));
    tv->add_shape(nodes + 1);
    tv->add_shape(w.options.vocab_size);
    tv->set_data(reinterpret_cast<const char*>(w.target_values.data() + (int64_t{begin} + i) * row),
                 static_cast<size_t>((nodes + 1) * row));
    if (w.options.has_draft_probs) {
      v1::Distribution* draft = st->mutable_draft();
      draft->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
      v1::Tensor* dv = draft->mutable_values();
      dv->set_dtype(ToProtoDtype(w.options.dtype));
      dv->add_shape(nodes);
      dv->add_shape(w.options.vocab_size);
      dv->set_data(reinterpret_cast<const char*>(w.draft_values.data() + int64_t{begin} * row),
                   static_cast<size_t>(nodes * row));
    }
    if (kv_row_bytes > 0) SetSyntheticDraftKv(i, nodes, kv_row_bytes, seq->mutable_draft_kv());
  }
  return request;
}

absl::Status TreeSampledRequestStatus(const TreeSampledExpected& expected,
                                      const TreeSampledWorkload& w, int32_t r) {
  const int32_t per = w.options.sequences_per_request;
  for (int32_t i = r * per; i < std::min(w.num_trees(), (r + 1) * per); ++i) {
    if (expected.status_codes[i] != kRejectionOk) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i - r * per));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTreeSampledResponse(const TreeSampledWorkload& w,
                                      const TreeSampledExpected& e, int32_t r,
                                      const v1::VerifyResponse& response, int64_t kv_row_bytes) {
  const int32_t per = w.options.sequences_per_request;
  const int32_t first = r * per;
  const int32_t n = std::min(w.num_trees(), first + per) - first;
  if (response.results_size() != n) {
    return absl::FailedPreconditionError(
        absl::StrCat("results: expected ", n, ", got ", response.results_size()));
  }
  for (int32_t t = 0; t < n; ++t) {
    const int32_t i = first + t;
    const v1::SequenceResult& res = response.results(t);
    if (res.accepted_length() != e.accepted_lengths[i]) {
      return Differs(t, "accepted_length", e.accepted_lengths[i], res.accepted_length());
    }
    if (res.next_token() != e.next_tokens[i]) return Differs(t, "next_token", e.next_tokens[i], res.next_token());
    if (res.mismatch() != (e.mismatch[i] != 0)) return Differs(t, "mismatch", e.mismatch[i], res.mismatch());
    if (res.accepted_nodes_size() != e.accepted_lengths[i]) {
      return Differs(t, "accepted_nodes size", e.accepted_lengths[i], res.accepted_nodes_size());
    }
    for (int32_t d = 0; d < res.accepted_nodes_size(); ++d) {
      const int32_t want = e.path_nodes[w.node_offsets[i] + d];
      if (res.accepted_nodes(d) != want) return Differs(t, "accepted_nodes entry", want, res.accepted_nodes(d));
    }
  }
  if (kv_row_bytes <= 0) return absl::OkStatus();
  int64_t row = 0;
  for (int32_t t = 0; t < n; ++t) {
    const v1::SequenceResult& res = response.results(t);
    if (res.kv_row_offset() != row) return Differs(t, "kv_row_offset", row, res.kv_row_offset());
    if (res.kv_row_count() != res.accepted_length()) {
      return Differs(t, "kv_row_count", res.accepted_length(), res.kv_row_count());
    }
    row += res.accepted_length();
  }
  if (response.kv_inline().empty()) return absl::OkStatus();  // handle or region: the caller reads them
  if (static_cast<int64_t>(response.kv_inline().size()) != row * kv_row_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("kv_inline is ", response.kv_inline().size(),
                                                      " bytes, expected ", row * kv_row_bytes));
  }
  int64_t at = 0;
  for (int32_t t = 0; t < n; ++t) {
    const int32_t i = first + t;
    for (int32_t d = 0; d < e.accepted_lengths[i]; ++d) {
      const int32_t node = e.path_nodes[w.node_offsets[i] + d];
      for (int64_t k = 0; k < kv_row_bytes; ++k, ++at) {
        if (static_cast<std::byte>(response.kv_inline()[at]) != SyntheticKvByte(i, node, k)) {
          return absl::FailedPreconditionError(absl::StrCat("tree ", t, ": kv_inline row ", d, " (node ", node,
                                                            ") byte ", k, " differs from the node's row"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace specverify::client
