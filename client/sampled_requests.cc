#include "client/sampled_requests.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/sampling/rejection_validate.h"

namespace specverify::client {
namespace {

int32_t PerRequest(const SamplingWorkload& w) {
  return std::max(1, w.options.sequences_per_request);
}

absl::Status Mismatch(int32_t request, int32_t s, const char* field, int64_t expected,
                      int64_t actual) {
  return absl::FailedPreconditionError(absl::StrCat("request ", request, " sequence ", s, ": ",
                                                    field, " is ", actual, ", expected ",
                                                    expected));
}

}  // namespace

v1::DataType ToProtoDtype(SampleDtype dtype) {
  switch (dtype) {
    case SampleDtype::kFloat32: return v1::DATA_TYPE_FLOAT32;
    case SampleDtype::kFloat16: return v1::DATA_TYPE_FLOAT16;
    case SampleDtype::kBFloat16: return v1::DATA_TYPE_BFLOAT16;
  }
  return v1::DATA_TYPE_UNSPECIFIED;
}

std::byte SyntheticKvByte(int32_t sequence, int32_t position, int64_t k) {
  const uint64_t x = (uint64_t(uint32_t(sequence)) * 0x9E3779B97F4A7C15ull) ^
                     (uint64_t(uint32_t(position)) * 0xC2B2AE3D27D4EB4Full) ^
                     (uint64_t(k) * 0x165667B19E3779F9ull);
  return static_cast<std::byte>((x >> 29) ^ (x >> 47));
}

void SetSyntheticDraftKv(int32_t sequence, int32_t rows, int64_t row_bytes, v1::Tensor* kv) {
  kv->set_dtype(v1::DATA_TYPE_UINT8);
  kv->add_shape(rows);
  kv->add_shape(row_bytes);
  std::string* data = kv->mutable_data();
  data->resize(static_cast<size_t>(rows * row_bytes));
  for (int32_t j = 0; j < rows; ++j) {
    for (int64_t k = 0; k < row_bytes; ++k) {
      (*data)[j * row_bytes + k] = static_cast<char>(SyntheticKvByte(sequence, j, k));
    }
  }
}

RejectionHostOutputs SampledReference(const SamplingWorkload& workload,
                                      const SampledRequestSettings& settings) {
  if (settings.method == SampleMethod::kExact && !settings.validate_full_rows) {
    return ReferenceOutcome(workload);
  }
  RejectionHostOutputs out(workload.num_sequences(), 0);
  RejectionSampleParams params{workload.input(), out.view()};
  params.input.method = settings.method;
  params.input.validate_full_rows = settings.validate_full_rows;
  if (settings.method == SampleMethod::kSigmoid) {
    params.input.sigmoid_alpha = settings.sigmoid_alpha;
    params.input.sigmoid_beta = settings.sigmoid_beta;
  }
  ReferenceRejectionSample(params);
  return out;
}

int32_t SampledRequestCount(const SamplingWorkload& workload) {
  return (workload.num_sequences() + PerRequest(workload) - 1) / PerRequest(workload);
}

v1::DistributionKind ToProtoKind(SampleValueKind kind) {
  switch (kind) {
    case SampleValueKind::kProbabilities: return v1::DISTRIBUTION_KIND_PROBABILITIES;
    case SampleValueKind::kLogits: return v1::DISTRIBUTION_KIND_LOGITS;
    case SampleValueKind::kLogProbabilities: return v1::DISTRIBUTION_KIND_LOG_PROBABILITIES;
  }
  return v1::DISTRIBUTION_KIND_UNSPECIFIED;
}

absl::StatusOr<v1::VerifyRequest> BuildSampledRequest(const SamplingWorkload& w, int32_t request,
                                                      const SampledRequestSettings& settings,
                                                      const std::string& request_id) {
  if (request < 0 || request >= SampledRequestCount(w)) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request, " lies outside the ",
                                                   SampledRequestCount(w), " of the workload"));
  }
  const int32_t first = request * PerRequest(w);
  const int32_t last = std::min(first + PerRequest(w), w.num_sequences());
  const int64_t v = w.options.vocab_size;
  const int64_t elem = SampleDtypeBytes(w.options.dtype);
  const bool logits = w.options.kind == SampleValueKind::kLogits;
  v1::VerifyRequest out;
  out.set_request_id(request_id);
  out.set_kv_return(settings.kv_return);
  out.set_seed(w.sequences[first].seed);
  for (int32_t i = first; i < last; ++i) {
    const int32_t gamma = w.gamma(i);
    const int64_t off = w.draft_offsets[i];
    v1::SequenceDraft* seq = out.add_sequences();
    seq->mutable_draft_tokens()->Add(w.draft_tokens.begin() + off,
                                     w.draft_tokens.begin() + off + gamma);
    if (settings.send_vocab_size) seq->set_vocab_size(static_cast<int32_t>(v));
    v1::SampledTarget* st = seq->mutable_sampled();
    const auto fill = [&](v1::Distribution* d, int64_t row, int64_t rows,
                          const std::vector<std::byte>& values) {
      d->set_kind(ToProtoKind(w.options.kind));
      v1::Tensor* t = d->mutable_values();
      t->set_dtype(ToProtoDtype(w.options.dtype));
      t->add_shape(rows);
      t->add_shape(v);
      t->set_data(reinterpret_cast<const char*>(values.data()) + row * v * elem,
                  static_cast<size_t>(rows * v * elem));
    };
    fill(st->mutable_target(), off + i, gamma + 1, w.target_values);
    if (w.options.has_draft_probs) fill(st->mutable_draft(), off, gamma, w.draft_values);
    const SequenceSamplingParams& p = w.sequences[i];
    if (logits) {
      st->set_temperature(p.temperature);
      st->set_top_k(p.top_k);
      st->set_top_p(p.top_p);
    }
    st->set_method(settings.method == SampleMethod::kSigmoid
                       ? v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION
                       : v1::SAMPLING_METHOD_EXACT);
    if (settings.method == SampleMethod::kSigmoid) {
      st->set_sigmoid_alpha(settings.sigmoid_alpha);
      st->set_sigmoid_beta(settings.sigmoid_beta);
    }
    st->set_validate_full_rows(settings.validate_full_rows);
    if (settings.kv_row_bytes > 0) SetSyntheticDraftKv(i, gamma, settings.kv_row_bytes, seq->mutable_draft_kv());
  }
  return out;
}

absl::Status ExpectedRequestStatus(const SamplingWorkload& w, int32_t request,
                                   const RejectionHostOutputs& expected) {
  const int32_t first = request * PerRequest(w);
  const int32_t n = std::min(first + PerRequest(w), w.num_sequences()) - first;
  return RejectionOutcomeStatus(expected.status_codes.data() + first,
                                expected.error_positions.data() + first, n);
}

absl::Status CheckSampledResponse(const SamplingWorkload& w, int32_t request,
                                  const SampledRequestSettings& settings,
                                  const RejectionHostOutputs& expected,
                                  const v1::VerifyResponse& response) {
  const int32_t first = request * PerRequest(w);
  const int32_t n = std::min(first + PerRequest(w), w.num_sequences()) - first;
  if (response.results_size() != n) {
    return Mismatch(request, -1, "results count", n, response.results_size());
  }
  if (!response.verified()) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", request, ": verified is false (a no-op server?)"));
  }
  const bool exact = settings.method == SampleMethod::kExact;
  if (response.exact() != exact) {
    return Mismatch(request, -1, "exact", exact, response.exact());
  }
  int64_t row = 0;
  for (int32_t s = 0; s < n; ++s) {
    const int32_t i = first + s;
    const v1::SequenceResult& r = response.results(s);
    if (expected.status_codes[i] != kRejectionOk) {
      return absl::FailedPreconditionError(absl::StrCat(
          "request ", request, " sequence ", s, ": answered, but the reference refuses it (",
          RejectionCodeName(expected.status_codes[i]), ")"));
    }
    if (r.accepted_length() != expected.accepted_lengths[i]) {
      return Mismatch(request, s, "accepted_length", expected.accepted_lengths[i],
                      r.accepted_length());
    }
    if (r.next_token() != expected.next_tokens[i]) {
      return Mismatch(request, s, "next_token", expected.next_tokens[i], r.next_token());
    }
    if (r.mismatch() != (expected.mismatch[i] != 0)) {
      return Mismatch(request, s, "mismatch", expected.mismatch[i], r.mismatch());
    }
    if (r.kv_row_offset() != row) return Mismatch(request, s, "kv_row_offset", row, r.kv_row_offset());
    if (r.kv_row_count() != r.accepted_length()) {
      return Mismatch(request, s, "kv_row_count", r.accepted_length(), r.kv_row_count());
    }
    row += r.accepted_length();
  }
  const int64_t rb = settings.kv_row_bytes;
  if (rb > 0 && settings.kv_return == v1::KV_RETURN_INLINE) {
    const std::string& got = response.kv_inline();
    if (static_cast<int64_t>(got.size()) != row * rb) {
      return Mismatch(request, -1, "kv_inline bytes", row * rb, got.size());
    }
    int64_t at = 0;
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t j = 0; j < expected.accepted_lengths[first + s]; ++j) {
        for (int64_t k = 0; k < rb; ++k, ++at) {
          if (static_cast<std::byte>(got[at]) != SyntheticKvByte(first + s, j, k)) {
            return absl::FailedPreconditionError(absl::StrCat(
                "request ", request, " sequence ", s, ": kv_inline row ", j, " byte ", k,
                " differs from the draft's row"));
          }
        }
      }
    }
  } else if (!response.kv_inline().empty()) {
    return Mismatch(request, -1, "kv_inline bytes", 0, response.kv_inline().size());
  }
  if (rb > 0 && settings.kv_return == v1::KV_RETURN_HANDLE) {
    if (response.kv().num_rows() != row || response.kv().row_bytes() != rb) {
      return Mismatch(request, -1, "kv.num_rows", row, response.kv().num_rows());
    }
  }
  return absl::OkStatus();
}

}  // namespace specverify::client
