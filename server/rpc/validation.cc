#include "server/rpc/validation.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace specverify::server {
namespace {

// Bounds the product of a tensor's dimensions long before int64 overflows.
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

std::string Seq(int i) { return absl::StrCat("sequences[", i, "]"); }

absl::Status CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens,
                         const std::string& field, int32_t vocab_size) {
  for (int j = 0; j < tokens.size(); ++j) {
    const int32_t t = tokens[j];
    if (t < 0 || (vocab_size > 0 && t >= vocab_size)) {
      return Invalid(absl::StrCat(
          field, "[", j, "] is ", t, "; token ids must lie in [0, ",
          vocab_size > 0 ? absl::StrCat("vocab_size=", vocab_size, ")")
                         : std::string("2^31) (vocab_size unknown)")));
    }
  }
  return absl::OkStatus();
}

struct KvShape {
  bool present = false;
  int64_t row_bytes = 0;
  int32_t dtype = 0;
};

absl::StatusOr<KvShape> CheckDraftKv(const v1::SequenceDraft& seq, int i,
                                     int32_t gamma) {
  KvShape kv;
  if (!seq.has_draft_kv()) return kv;
  const v1::Tensor& t = seq.draft_kv();
  const std::string field = absl::StrCat(Seq(i), ".draft_kv");
  const int64_t elem = DataTypeSize(t.dtype());
  if (elem == 0) {
    return Invalid(absl::StrCat(field, ".dtype is ", t.dtype(),
                                "; must be a DataType other than UNSPECIFIED"));
  }
  if (t.shape_size() < 2) {
    return Invalid(absl::StrCat(field, ".shape has rank ", t.shape_size(),
                                "; must be [gamma, d1, ...] with rank >= 2"));
  }
  if (t.shape(0) != gamma) {
    return Invalid(absl::StrCat(field, ".shape[0] is ", t.shape(0),
                                "; must equal gamma = ", gamma,
                                " (the number of draft_tokens)"));
  }
  int64_t row_elements = 1;
  for (int d = 1; d < t.shape_size(); ++d) {
    const int64_t dim = t.shape(d);
    if (dim < 1 || dim > kMaxTensorElements / row_elements) {
      return Invalid(absl::StrCat(field, ".shape[", d, "] is ", dim,
                                  "; every dimension must be >= 1 and the row at most ",
                                  kMaxTensorElements, " elements"));
    }
    row_elements *= dim;
  }
  kv.present = true;
  kv.row_bytes = row_elements * elem;
  kv.dtype = t.dtype();
  const int64_t expected = kv.row_bytes * gamma;
  if (static_cast<int64_t>(t.data().size()) != expected) {
    return Invalid(absl::StrCat(field, ".data is ", t.data().size(),
                                " bytes; shape x dtype size requires ", expected));
  }
  return kv;
}

}  // namespace

int64_t DataTypeSize(int dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FLOAT32:
      return 4;
    case v1::DATA_TYPE_FLOAT16:
    case v1::DATA_TYPE_BFLOAT16:
      return 2;
    case v1::DATA_TYPE_UINT8:
    case v1::DATA_TYPE_INT8:
    case v1::DATA_TYPE_FP8_E4M3:
      return 1;
    default:
      return 0;
  }
}

absl::StatusOr<ValidatedRequest> ValidateVerifyRequest(
    const v1::VerifyRequest& request, const RequestLimits& limits) {
  if (static_cast<int64_t>(request.request_id().size()) > kMaxRequestIdBytes) {
    return Invalid(absl::StrCat("request_id is ", request.request_id().size(),
                                " bytes; limit ", kMaxRequestIdBytes));
  }
  const int n = request.sequences_size();
  if (n == 0) {
    return Invalid(absl::StrCat(
        "sequences is empty; a request carries 1 to max_sequences_per_request=",
        limits.max_sequences_per_request, " sequences"));
  }
  if (n > limits.max_sequences_per_request) {
    return Invalid(absl::StrCat("sequences has ", n,
                                " entries; limit max_sequences_per_request=",
                                limits.max_sequences_per_request));
  }
  if (!v1::KvReturn_IsValid(request.kv_return())) {
    return Invalid(absl::StrCat("kv_return is ", request.kv_return(),
                                "; not a KvReturn value"));
  }

  ValidatedRequest out;
  out.num_sequences = n;
  const v1::SequenceDraft& first = request.sequences(0);
  const bool sampled = first.has_sampled();
  KvShape first_kv;
  for (int i = 0; i < n; ++i) {
    const v1::SequenceDraft& seq = request.sequences(i);
    if (seq.target_case() == v1::SequenceDraft::TARGET_NOT_SET) {
      return Invalid(absl::StrCat(Seq(i), ".target is not set; set greedy or sampled"));
    }
    if (seq.has_sampled() != sampled) {
      return Invalid(absl::StrCat(
          Seq(i), " is ", seq.has_sampled() ? "sampled" : "greedy",
          " but sequences[0] is ", sampled ? "sampled" : "greedy",
          "; all sequences of a request must use the same mode"));
    }
    const int32_t gamma = seq.draft_tokens_size();
    if (gamma < 1 || gamma > limits.max_draft_tokens) {
      return Invalid(absl::StrCat(Seq(i), ".draft_tokens has ", gamma,
                                  " tokens; gamma must lie in [1, max_draft_tokens=",
                                  limits.max_draft_tokens, "]"));
    }
    if (seq.vocab_size() < 0) {
      return Invalid(absl::StrCat(Seq(i), ".vocab_size is ", seq.vocab_size(),
                                  "; must be > 0, or 0 when unknown"));
    }
    if (seq.vocab_size() != first.vocab_size()) {
      return Invalid(absl::StrCat(Seq(i), ".vocab_size is ", seq.vocab_size(),
                                  " but sequences[0].vocab_size is ",
                                  first.vocab_size(),
                                  "; one vocabulary per request"));
    }
    if (absl::Status s = CheckTokens(seq.draft_tokens(),
                                     absl::StrCat(Seq(i), ".draft_tokens"),
                                     seq.vocab_size());
        !s.ok()) {
      return s;
    }
    if (!sampled) {
      const auto& target = seq.greedy().target_tokens();
      if (target.size() != gamma + 1) {
        return Invalid(absl::StrCat(Seq(i), ".greedy.target_tokens has ",
                                    target.size(), " tokens; must be gamma + 1 = ",
                                    gamma + 1));
      }
      if (absl::Status s = CheckTokens(
              target, absl::StrCat(Seq(i), ".greedy.target_tokens"), seq.vocab_size());
          !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<KvShape> kv = CheckDraftKv(seq, i, gamma);
    if (!kv.ok()) return kv.status();
    if (i == 0) {
      first_kv = *kv;
    } else if (kv->present != first_kv.present) {
      return Invalid(absl::StrCat(
          Seq(i), ".draft_kv is ", kv->present ? "present" : "absent",
          " but sequences[0].draft_kv is ", first_kv.present ? "present" : "absent",
          "; every sequence carries KV rows of one row_bytes and dtype, or none does"));
    } else if (kv->present && kv->row_bytes != first_kv.row_bytes) {
      return Invalid(absl::StrCat(Seq(i), ".draft_kv has row_bytes ", kv->row_bytes,
                                  " but sequences[0].draft_kv has ",
                                  first_kv.row_bytes, "; one row size per request"));
    } else if (kv->present && kv->dtype != first_kv.dtype) {
      return Invalid(absl::StrCat(Seq(i), ".draft_kv.dtype is ", kv->dtype,
                                  " but sequences[0].draft_kv.dtype is ",
                                  first_kv.dtype, "; one dtype per request"));
    }
    out.total_draft_rows += gamma;
    out.payload_bytes += int64_t{4} * (2 * gamma + 1) + kv->row_bytes * gamma;
  }
  if (sampled) {
    return absl::UnimplementedError(
        "sampled verification is not served yet: the rejection-sampling "
        "kernels are not wired into this server; send greedy targets");
  }

  out.kv_row_bytes = first_kv.row_bytes;
  out.kv_dtype = first_kv.dtype;
  v1::KvReturn kv_return = request.kv_return();
  if (kv_return == v1::KV_RETURN_UNSPECIFIED) {
    kv_return = first_kv.present ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_NONE;
  }
  out.kv_return = kv_return;
  out.key.mode = VerifyMode::kGreedy;
  out.key.vocab_size = first.vocab_size();
  // Rows nobody will read are neither staged nor packed.
  if (first_kv.present && kv_return != v1::KV_RETURN_NONE) {
    out.key.row_bytes = first_kv.row_bytes;
    out.key.kv_dtype = first_kv.dtype;
  } else {
    out.payload_bytes -= first_kv.row_bytes * out.total_draft_rows;
  }
  return out;
}

absl::Status ValidateFetchKvRequest(const v1::FetchKvRequest& request) {
  if (request.handle().empty()) return Invalid("handle is empty");
  if (request.first_row() < 0) {
    return Invalid(absl::StrCat("first_row is ", request.first_row(), "; must be >= 0"));
  }
  if (request.num_rows() < 0) {
    return Invalid(absl::StrCat("num_rows is ", request.num_rows(),
                                "; must be >= 0 (0 means to the end)"));
  }
  if (request.chunk_bytes() < 0) {
    return Invalid(absl::StrCat("chunk_bytes is ", request.chunk_bytes(),
                                "; must be >= 0 (0 means the server's default)"));
  }
  return absl::OkStatus();
}

}  // namespace specverify::server
