#include "client/greedy_requests.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace specverify::client {
namespace {

absl::Status Mismatch(absl::string_view what) {
  return absl::FailedPreconditionError(what);
}

absl::Status CheckRange(const GreedyWorkload& workload, int32_t first,
                        int32_t count) {
  if (first < 0 || count < 1 || first + count > workload.num_sequences()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence range [", first, ", ", first + count,
        ") lies outside the workload's ", workload.num_sequences(),
        " sequences"));
  }
  return absl::OkStatus();
}

absl::Status CheckBytes(std::span<const std::byte> actual,
                        std::span<const std::byte> expected,
                        absl::string_view what) {
  if (actual.size() != expected.size()) {
    return Mismatch(absl::StrCat(what, ": ", actual.size(),
                                 " bytes, expected ", expected.size()));
  }
  if (!actual.empty() &&
      std::memcmp(actual.data(), expected.data(), actual.size()) != 0) {
    size_t i = 0;
    while (actual[i] == expected[i]) ++i;
    return Mismatch(absl::StrCat(what, ": first difference at byte ", i, ": ",
                                 static_cast<int>(actual[i]), " vs expected ",
                                 static_cast<int>(expected[i])));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::VerifyRequest> BuildGreedyRequest(
    const GreedyWorkload& workload, const GreedyRequestOptions& options) {
  if (absl::Status s = CheckRange(workload, options.first_sequence,
                                  options.num_sequences);
      !s.ok()) {
    return s;
  }
  v1::VerifyRequest request;
  request.set_request_id(options.request_id);
  request.set_kv_return(options.kv_return);
  const int64_t row_bytes = workload.row_bytes();
  for (int32_t i = options.first_sequence;
       i < options.first_sequence + options.num_sequences; ++i) {
    v1::SequenceDraft* seq = request.add_sequences();
    const auto draft = workload.draft_tokens_of(i);
    seq->mutable_draft_tokens()->Add(draft.begin(), draft.end());
    const auto target = workload.target_tokens_of(i);
    seq->mutable_greedy()->mutable_target_tokens()->Add(target.begin(),
                                                        target.end());
    if (options.send_vocab_size) seq->set_vocab_size(workload.options.vocab_size);
    if (row_bytes > 0) {
      v1::Tensor* kv = seq->mutable_draft_kv();
      kv->set_dtype(options.kv_dtype);
      kv->add_shape(workload.gamma(i));
      kv->add_shape(row_bytes);
      const auto rows = workload.draft_kv_of(i);
      kv->set_data(reinterpret_cast<const char*>(rows.data()), rows.size());
    }
  }
  return request;
}

std::span<const std::byte> ExpectedPackedKv(const GreedyWorkload& workload,
                                            int32_t first_sequence,
                                            int32_t num_sequences) {
  const auto& offsets = workload.expected.packed_row_offsets;
  const int64_t rb = workload.row_bytes();
  const int64_t begin = int64_t{offsets[first_sequence]} * rb;
  const int64_t end = int64_t{offsets[first_sequence + num_sequences]} * rb;
  return std::span<const std::byte>(workload.expected.packed_kv)
      .subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
}

v1::KvReturn EffectiveKvReturn(const GreedyWorkload& workload,
                               v1::KvReturn requested) {
  if (requested != v1::KV_RETURN_UNSPECIFIED) return requested;
  return workload.row_bytes() > 0 ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_NONE;
}

absl::Status CheckGreedyResponse(
    const GreedyWorkload& workload, const GreedyCheckOptions& options,
    const v1::VerifyResponse& response,
    std::optional<std::span<const std::byte>> fetched_kv) {
  const int32_t first = options.first_sequence;
  const int32_t count = options.num_sequences;
  if (absl::Status s = CheckRange(workload, first, count); !s.ok()) return s;
  if (!options.request_id.empty() &&
      response.request_id() != options.request_id) {
    return Mismatch(absl::StrCat("request_id is \"", response.request_id(),
                                 "\", expected \"", options.request_id, "\""));
  }
  if (response.verified() != options.expect_verified) {
    return Mismatch(absl::StrCat("verified is ", response.verified(),
                                 ", expected ", options.expect_verified));
  }
  if (response.results_size() != count) {
    return Mismatch(absl::StrCat("results has ", response.results_size(),
                                 " entries, expected ", count));
  }
  const auto& e = workload.expected;
  const int64_t rb = workload.row_bytes();
  int64_t expected_offset = 0;
  for (int32_t r = 0; r < count; ++r) {
    const int32_t i = first + r;
    const v1::SequenceResult& got = response.results(r);
    const int32_t gamma = workload.gamma(i);
    const int32_t k = options.expect_verified ? e.accepted_lengths[i] : gamma;
    const int32_t next = options.expect_verified
                             ? e.next_tokens[i]
                             : workload.target_tokens_of(i)[gamma];
    const bool mismatch = options.expect_verified ? e.mismatch[i] != 0 : false;
    const auto field = [&](absl::string_view name, int64_t actual,
                           int64_t expected) -> absl::Status {
      if (actual == expected) return absl::OkStatus();
      return Mismatch(absl::StrCat("results[", r, "].", name, " (workload sequence ",
                                   i, ") is ", actual, ", expected ", expected));
    };
    for (absl::Status s :
         {field("accepted_length", got.accepted_length(), k),
          field("next_token", got.next_token(), next),
          field("mismatch", got.mismatch(), mismatch),
          field("kv_row_offset", got.kv_row_offset(), expected_offset),
          field("kv_row_count", got.kv_row_count(), k)}) {
      if (!s.ok()) return s;
    }
    expected_offset += k;
  }

  // A verifying server packs the accepted rows; the no-op backend packs every
  // draft row of the range as it lies (k = gamma).
  const std::span<const std::byte> expected_rows =
      options.expect_verified
          ? ExpectedPackedKv(workload, first, count)
          : std::span<const std::byte>(workload.draft_kv)
                .subspan(static_cast<size_t>(workload.draft_offsets[first] * rb),
                         static_cast<size_t>(expected_offset * rb));
  const v1::KvReturn mode = EffectiveKvReturn(workload, options.kv_return);
  const bool has_rows = rb > 0;
  if (mode == v1::KV_RETURN_HANDLE && has_rows) {
    if (!response.has_kv() || response.kv().id().empty()) {
      return Mismatch("kv handle is missing");
    }
    if (response.kv().row_bytes() != rb) {
      return Mismatch(absl::StrCat("kv.row_bytes is ", response.kv().row_bytes(),
                                   ", expected ", rb));
    }
    if (response.kv().num_rows() != expected_offset) {
      return Mismatch(absl::StrCat("kv.num_rows is ", response.kv().num_rows(),
                                   ", expected ", expected_offset));
    }
  } else if (response.has_kv()) {
    return Mismatch("kv handle is set but the request kept no rows");
  }
  if (mode == v1::KV_RETURN_INLINE && has_rows) {
    if (absl::Status s = CheckBytes(AsBytes(response.kv_inline()), expected_rows,
                                    "kv_inline");
        !s.ok()) {
      return s;
    }
  } else if (!response.kv_inline().empty()) {
    return Mismatch("kv_inline is set but inline return was not requested");
  }
  if (fetched_kv.has_value()) {
    if (absl::Status s = CheckBytes(*fetched_kv, expected_rows, "fetched kv");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace specverify::client
