#include "server/rpc/validation.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/arena/kv_arena.h"
#include "server/common/echo.h"
#include "server/common/field_path.h"

namespace specverify::server {
namespace {

// Bounds the product of a tensor's dimensions long before int64 overflows.
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

std::string Seq(int i) { return absl::StrCat("sequences[", i, "]"); }

absl::Status CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens,
                         const FieldPath& field, int32_t vocab_size) {
  for (int j = 0; j < tokens.size(); ++j) {
    const int32_t t = tokens[j];
    if (t < 0 || (vocab_size > 0 && t >= vocab_size)) {
      return Invalid(absl::StrCat(
          field.str(), "[", j, "] is ", t, "; token ids must lie in [0, ",
          vocab_size > 0 ? absl::StrCat("vocab_size=", vocab_size, ")")
                         : std::string("2^31) (vocab_size unknown)")));
    }
  }
  return absl::OkStatus();
}

struct KvShape {
  bool present = false;
  bool in_region = false;
  int64_t row_bytes = 0;
  int32_t dtype = 0;
};

// An input tensor, inline (Tensor) or in a registered region (TensorRef):
// the same dtype and shape rules; inline bytes must match the shape, a
// reference must name a region and an aligned offset (the range itself is
// checked against the region when the request is resolved,
// server/regions/region_refs.h).
struct TensorFields {
  int32_t dtype = 0;
  const google::protobuf::RepeatedField<int64_t>* shape = nullptr;
  const v1::TensorRef* ref = nullptr;  // null: inline
  size_t inline_bytes = 0;
};

TensorFields FieldsOf(const v1::Tensor& t) {
  return TensorFields{t.dtype(), &t.shape(), nullptr, t.data().size()};
}
TensorFields FieldsOf(const v1::TensorRef& r) {
  return TensorFields{r.dtype(), &r.shape(), &r, 0};
}

// The bytes of a tensor with `expected` bytes: inline length, or the
// reference's region name and offset alignment.
absl::Status CheckTensorBytes(const TensorFields& t, const FieldPath& field, int64_t expected,
                              int64_t align) {
  if (t.ref == nullptr) {
    if (static_cast<int64_t>(t.inline_bytes) != expected) {
      return Invalid(absl::StrCat(field.str(), ".data is ", t.inline_bytes,
                                  " bytes; shape x dtype size requires ", expected));
    }
    return absl::OkStatus();
  }
  if (t.ref->region().empty()) {
    return Invalid(absl::StrCat(field.str(), ".region is empty; name a registered region"));
  }
  if (t.ref->offset_bytes() < 0 || t.ref->offset_bytes() % align != 0) {
    return Invalid(absl::StrCat(field.str(), ".offset_bytes is ", t.ref->offset_bytes(),
                                "; must be >= 0 and a multiple of ", align));
  }
  return absl::OkStatus();
}

absl::StatusOr<KvShape> CheckDraftKv(const v1::SequenceDraft& seq, int i,
                                     int32_t gamma) {
  KvShape kv;
  if (seq.kv_case() == v1::SequenceDraft::KV_NOT_SET) return kv;
  kv.in_region = seq.has_draft_kv_ref();
  const TensorFields t = kv.in_region ? FieldsOf(seq.draft_kv_ref()) : FieldsOf(seq.draft_kv());
  const FieldPath field = FieldPath::Sequence(i) + (kv.in_region ? ".draft_kv_ref" : ".draft_kv");
  const int64_t elem = DataTypeSize(t.dtype);
  if (elem == 0) {
    return Invalid(absl::StrCat(field.str(), ".dtype is ", t.dtype,
                                "; must be a DataType other than UNSPECIFIED"));
  }
  if (t.shape->size() < 2) {
    return Invalid(absl::StrCat(field.str(), ".shape has rank ", t.shape->size(),
                                "; must be [gamma, d1, ...] with rank >= 2"));
  }
  if ((*t.shape)[0] != gamma) {
    return Invalid(absl::StrCat(field.str(), ".shape[0] is ", (*t.shape)[0],
                                "; must equal gamma = ", gamma,
                                " (the number of draft_tokens)"));
  }
  int64_t row_elements = 1;
  for (int d = 1; d < t.shape->size(); ++d) {
    const int64_t dim = (*t.shape)[d];
    if (dim < 1 || dim > kMaxTensorElements / row_elements) {
      return Invalid(absl::StrCat(field.str(), ".shape[", d, "] is ", dim,
                                  "; every dimension must be >= 1 and the row at most ",
                                  kMaxTensorElements, " elements"));
    }
    row_elements *= dim;
  }
  kv.present = true;
  kv.row_bytes = row_elements * elem;
  kv.dtype = t.dtype;
  if (absl::Status s = CheckTensorBytes(t, field, kv.row_bytes * gamma, elem); !s.ok()) return s;
  return kv;
}

// What a request's sampled sequences must share (one batch key), and the
// bytes of distribution rows they carry.
struct SampledShape {
  int32_t vocab = 0;
  int32_t dtype = 0;
  int32_t kind = 0;
  int32_t method = v1::SAMPLING_METHOD_EXACT;
  bool has_draft = false;
  bool validate_full_rows = false;
  float alpha = 0;
  float beta = 0;
  bool in_region = false;   // rows in a registered region, not inline
  int64_t value_bytes = 0;  // inline rows only: what is staged
  int64_t read_bytes = 0;   // the rows the device reads, inline or in a region
};

bool IsValueDtype(int dtype) {
  return dtype == v1::DATA_TYPE_FLOAT32 || dtype == v1::DATA_TYPE_FLOAT16 ||
         dtype == v1::DATA_TYPE_BFLOAT16;
}

// One distribution tensor: dtype, kind, shape [rows, V] and byte length.
// `vocab` is 0 for the target (which defines V) and V for the draft.
absl::Status CheckDistribution(const v1::Distribution& d, const FieldPath& field,
                               int64_t rows, int32_t* vocab) {
  const bool in_region = d.has_values_ref();
  const TensorFields t = in_region ? FieldsOf(d.values_ref()) : FieldsOf(d.values());
  const char* const values = in_region ? ".values_ref" : ".values";
  if (!IsValueDtype(t.dtype)) {
    return Invalid(absl::StrCat(field.str(), values, ".dtype is ", t.dtype,
                                "; must be FLOAT32, FLOAT16 or BFLOAT16"));
  }
  if (d.kind() != v1::DISTRIBUTION_KIND_PROBABILITIES &&
      d.kind() != v1::DISTRIBUTION_KIND_LOGITS &&
      d.kind() != v1::DISTRIBUTION_KIND_LOG_PROBABILITIES) {
    return Invalid(absl::StrCat(field.str(), ".kind is ", d.kind(),
                                "; must be PROBABILITIES, LOGITS or LOG_PROBABILITIES"));
  }
  if (t.shape->size() != 2) {
    return Invalid(absl::StrCat(field.str(), values, ".shape has rank ", t.shape->size(),
                                "; must be [", rows, ", vocab]"));
  }
  if ((*t.shape)[0] != rows) {
    return Invalid(absl::StrCat(field.str(), values, ".shape[0] is ", (*t.shape)[0], "; must be ",
                                rows,
                                field.EndsWith(".target") ? " (gamma + 1)" : " (gamma)"));
  }
  const int64_t v = (*t.shape)[1];
  if (*vocab == 0) {
    if (v < 2 || v > kMaxSampledVocabSize) {
      return Invalid(absl::StrCat(field.str(), values, ".shape[1] (vocab) is ", v,
                                  "; must lie in [2, ", kMaxSampledVocabSize, "]"));
    }
    *vocab = static_cast<int32_t>(v);
  } else if (v != *vocab) {
    return Invalid(absl::StrCat(field.str(), values, ".shape[1] is ", v,
                                "; must equal the target's vocab ", *vocab));
  }
  // Rows in a region are read in place with 16-byte loads.
  return CheckTensorBytes(t, field + values, rows * v * DataTypeSize(t.dtype), kRegionRowAlign);
}

// Everything of one sampled sequence that can be checked without reading the
// values (those are checked where they are read: per-sequence status codes).
absl::StatusOr<SampledShape> CheckSampled(const v1::SequenceDraft& seq, int i, int32_t gamma) {
  const v1::SampledTarget& st = seq.sampled();
  const FieldPath field = FieldPath::Sequence(i) + ".sampled";
  SampledShape sh;
  if (!st.has_target()) {
    return Invalid(
        absl::StrCat(field.str(), ".target is not set; [gamma + 1, vocab] rows required"));
  }
  if (absl::Status s = CheckDistribution(st.target(), field + ".target", gamma + 1, &sh.vocab);
      !s.ok()) {
    return s;
  }
  sh.in_region = st.target().has_values_ref();
  sh.dtype = sh.in_region ? st.target().values_ref().dtype() : st.target().values().dtype();
  sh.kind = st.target().kind();
  const int64_t elem = DataTypeSize(sh.dtype);
  sh.value_bytes = int64_t{gamma + 1} * sh.vocab * elem;
  if (st.has_draft()) {
    if (absl::Status s = CheckDistribution(st.draft(), field + ".draft", gamma, &sh.vocab);
        !s.ok()) {
      return s;
    }
    if (st.draft().has_values_ref() != sh.in_region) {
      return Invalid(absl::StrCat(field.str(), ".draft is ",
                                  sh.in_region ? "inline" : "in a region",
                                  " but the target is ", sh.in_region ? "in a region" : "inline",
                                  "; target and draft rows travel the same way"));
    }
    const int32_t draft_dtype = sh.in_region ? st.draft().values_ref().dtype()
                                             : st.draft().values().dtype();
    if (draft_dtype != sh.dtype) {
      return Invalid(absl::StrCat(field.str(), sh.in_region ? ".draft.values_ref" : ".draft.values",
                                  ".dtype is ", draft_dtype,
                                  " but the target's is ", sh.dtype, "; one dtype per request"));
    }
    if (st.draft().kind() != sh.kind) {
      return Invalid(absl::StrCat(field.str(), ".draft.kind is ", st.draft().kind(),
                                  " but the target's is ", sh.kind, "; one kind per request"));
    }
    sh.has_draft = true;
    sh.value_bytes += int64_t{gamma} * sh.vocab * elem;
  }
  sh.read_bytes = sh.value_bytes;
  if (sh.in_region) sh.value_bytes = 0;
  if (seq.vocab_size() != 0 && seq.vocab_size() != sh.vocab) {
    return Invalid(absl::StrCat(Seq(i), ".vocab_size is ", seq.vocab_size(),
                                "; must equal the distributions' width ", sh.vocab));
  }
  if (absl::Status s = CheckTokens(seq.draft_tokens(), FieldPath::Sequence(i) + ".draft_tokens",
                                   sh.vocab);
      !s.ok()) {
    return s;
  }
  if (!v1::SamplingMethod_IsValid(st.method())) {
    return Invalid(
        absl::StrCat(field.str(), ".method is ", st.method(), "; not a SamplingMethod value"));
  }
  sh.method = st.method() == v1::SAMPLING_METHOD_UNSPECIFIED ? v1::SAMPLING_METHOD_EXACT
                                                              : st.method();
  const bool logits = sh.kind == v1::DISTRIBUTION_KIND_LOGITS;
  const bool sigmoid = sh.method == v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION;
  const float t = st.temperature();
  if (!std::isfinite(t) || t < 0) {
    return Invalid(absl::StrCat(field.str(), ".temperature is ", t, "; must be finite and >= 0"));
  }
  if (st.top_k() < 0 || st.top_k() > sh.vocab) {
    return Invalid(absl::StrCat(field.str(), ".top_k is ", st.top_k(), "; must lie in [0, vocab=",
                                sh.vocab, "] (0 = all)"));
  }
  if (!(st.top_p() >= 0.0f && st.top_p() <= 1.0f)) {
    return Invalid(absl::StrCat(field.str(), ".top_p is ", st.top_p(),
                                "; must lie in [0, 1] (0 or 1 = all)"));
  }
  const bool filters = st.top_k() != 0 || (st.top_p() != 0.0f && st.top_p() != 1.0f);
  if (!logits && filters) {
    return Invalid(absl::StrCat(field.str(), ".top_k/top_p are ", st.top_k(), "/", st.top_p(),
                                "; they apply to LOGITS only (send probabilities or "
                                "log-probabilities already filtered, with top_k 0 and top_p 0 or 1)"));
  }
  if (sigmoid) {
    if (!logits) {
      return Invalid(absl::StrCat(field.str(), ".method is SIGMOID_APPROXIMATION; it requires "
                                  "LOGITS, the target is ",
                                  sh.kind == v1::DISTRIBUTION_KIND_LOG_PROBABILITIES
                                      ? "LOG_PROBABILITIES"
                                      : "PROBABILITIES"));
    }
    if (!(std::isfinite(st.sigmoid_alpha()) && std::isfinite(st.sigmoid_beta()) &&
          st.sigmoid_alpha() < 0 && st.sigmoid_beta() > 0)) {
      return Invalid(absl::StrCat(field.str(), ".sigmoid_alpha/sigmoid_beta are ",
                                  st.sigmoid_alpha(),
                                  "/", st.sigmoid_beta(), "; must be finite with alpha < 0 < beta"));
    }
    if (!(t > 0)) {
      return Invalid(absl::StrCat(field.str(), ".temperature is ", t,
                                  "; SIGMOID_APPROXIMATION needs temperature > 0"));
    }
    if (filters) {
      return Invalid(absl::StrCat(field.str(), ".top_k/top_p are ", st.top_k(), "/", st.top_p(),
                                  "; SIGMOID_APPROXIMATION takes no top-k/top-p"));
    }
    sh.alpha = st.sigmoid_alpha();
    sh.beta = st.sigmoid_beta();
  }
  sh.validate_full_rows = st.validate_full_rows();
  return sh;
}

// The fields every sampled sequence of a request shares with sequence 0.
absl::Status CheckSameSampledKey(const SampledShape& a, const SampledShape& first, int i) {
  const auto differ = [i](const char* what, auto value, auto first_value) {
    return Invalid(absl::StrCat(Seq(i), ".sampled ", what, " is ", value,
                                " but sequences[0]'s is ", first_value, "; one ", what,
                                " per request"));
  };
  if (a.vocab != first.vocab) return differ("vocab", a.vocab, first.vocab);
  if (a.dtype != first.dtype) return differ("dtype", a.dtype, first.dtype);
  if (a.kind != first.kind) return differ("kind", a.kind, first.kind);
  if (a.method != first.method) return differ("method", a.method, first.method);
  if (a.has_draft != first.has_draft) {
    return differ("draft", a.has_draft ? "present" : "absent",
                  first.has_draft ? "present" : "absent");
  }
  if (a.in_region != first.in_region) {
    return differ("transport", a.in_region ? "region" : "inline",
                  first.in_region ? "region" : "inline");
  }
  if (a.validate_full_rows != first.validate_full_rows) {
    return differ("validate_full_rows", a.validate_full_rows ? "true" : "false",
                  first.validate_full_rows ? "true" : "false");
  }
  if (a.alpha != first.alpha) return differ("sigmoid_alpha", a.alpha, first.alpha);
  if (a.beta != first.beta) return differ("sigmoid_beta", a.beta, first.beta);
  return absl::OkStatus();
}

// A token tree's structure (docs/TREES.md): n nodes within the limit, one
// parent per node, each in [-1, j) (topological order).
absl::Status CheckTree(const v1::SequenceDraft& seq, int i, const RequestLimits& limits) {
  const int32_t n = seq.draft_tokens_size();
  if (n < 1 || n > limits.max_tree_nodes) {
    return Invalid(absl::StrCat(Seq(i), ".draft_tokens has ", n,
                                " nodes; a tree has 1 to max_tree_nodes=", limits.max_tree_nodes));
  }
  if (seq.parent_indices_size() != n) {
    return Invalid(absl::StrCat(Seq(i), ".parent_indices has ", seq.parent_indices_size(),
                                " entries; must be one per node (", n, ")"));
  }
  for (int32_t j = 0; j < n; ++j) {
    const int32_t parent = seq.parent_indices(j);
    if (parent < -1 || parent >= j) {
      return Invalid(absl::StrCat(Seq(i), ".parent_indices[", j, "] is ", parent,
                                  "; node ", j, "'s parent must lie in [-1, ", j,
                                  ") (-1: the root; nodes in topological order)"));
    }
  }
  if (seq.has_sampled()) {
    const v1::SampledTarget& st = seq.sampled();
    const FieldPath field = FieldPath::Sequence(i) + ".sampled";
    if (st.target().kind() != v1::DISTRIBUTION_KIND_PROBABILITIES) {
      return Invalid(absl::StrCat(field.str(), ".target.kind: sampled trees take PROBABILITIES ",
                                  "(the tree kernels have no logits normalizer)"));
    }
    if (st.method() == v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION) {
      return Invalid(absl::StrCat(field.str(), ".method: sampled trees verify EXACT only"));
    }
    if (st.validate_full_rows()) {
      return Invalid(absl::StrCat(field.str(), ".validate_full_rows: not offered for trees (the ",
                                  "kernels check every value they read)"));
    }
  }
  return absl::OkStatus();
}

// KV_RETURN_REGION's output tensor: the KV dtype, a row of the KV's size, and
// room for every row that could be accepted.
absl::Status CheckKvOutput(const v1::VerifyRequest& request, int64_t row_bytes, int32_t dtype,
                           int64_t total_draft_rows) {
  if (!request.has_kv_output()) {
    return Invalid("kv_return is REGION but kv_output is not set; name the output tensor");
  }
  const TensorFields t = FieldsOf(request.kv_output());
  if (t.dtype != dtype) {
    return Invalid(absl::StrCat("kv_output.dtype is ", t.dtype, "; must equal the draft KV's ",
                                dtype));
  }
  if (t.shape->size() < 2) {
    return Invalid(absl::StrCat("kv_output.shape has rank ", t.shape->size(),
                                "; must be [rows, d1, ...] with rank >= 2"));
  }
  int64_t row_elements = 1;
  for (int d = 1; d < t.shape->size(); ++d) {
    const int64_t dim = (*t.shape)[d];
    if (dim < 1 || dim > kMaxTensorElements / row_elements) {
      return Invalid(absl::StrCat("kv_output.shape[", d, "] is ", dim,
                                  "; every dimension must be >= 1"));
    }
    row_elements *= dim;
  }
  if (row_elements * DataTypeSize(dtype) != row_bytes) {
    return Invalid(absl::StrCat("kv_output rows are ", row_elements * DataTypeSize(dtype),
                                " bytes; must equal the draft KV's row_bytes ", row_bytes));
  }
  const int64_t rows = (*t.shape)[0];
  if (rows < total_draft_rows || rows > kMaxTensorElements / row_elements) {
    return Invalid(absl::StrCat("kv_output.shape[0] is ", rows, "; must be >= ",
                                total_draft_rows,
                                " (the request's draft tokens: the most rows it can keep)"));
  }
  return CheckTensorBytes(t, FieldPath::Root("kv_output"), rows * row_bytes, DataTypeSize(dtype));
}

}  // namespace

absl::StatusOr<ValidatedRequest> ValidateVerifyRequest(
    const v1::VerifyRequest& request, const RequestLimits& limits) {
  if (absl::Status s = ValidateRequestId(request.request_id()); !s.ok()) return s;
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
  SampledShape first_sampled;
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
    const bool tree = seq.parent_indices_size() > 0;
    if (tree) {
      if (absl::Status s = CheckTree(seq, i, limits); !s.ok()) return s;
      out.key.tree = true;
    } else if (gamma < 1 || gamma > limits.max_draft_tokens) {
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
    if (absl::Status s = CheckTokens(seq.draft_tokens(), FieldPath::Sequence(i) + ".draft_tokens",
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
      if (absl::Status s =
              CheckTokens(target, FieldPath::Sequence(i) + ".greedy.target_tokens",
                          seq.vocab_size());
          !s.ok()) {
        return s;
      }
    } else {
      absl::StatusOr<SampledShape> sh = CheckSampled(seq, i, gamma);
      if (!sh.ok()) return sh.status();
      if (i == 0) {
        first_sampled = *sh;
      } else if (absl::Status s = CheckSameSampledKey(*sh, first_sampled, i); !s.ok()) {
        return s;
      }
      // Rows, one SequenceSamplingParams and the outcome's greedy target tokens.
      out.payload_bytes += sh->value_bytes + int64_t{sizeof(SequenceSamplingParams)};
      out.device_bytes += sh->read_bytes;
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
    } else if (kv->present && kv->in_region != first_kv.in_region) {
      return Invalid(absl::StrCat(
          Seq(i), " has ", kv->in_region ? "draft_kv_ref" : "draft_kv", " but sequences[0] has ",
          first_kv.in_region ? "draft_kv_ref" : "draft_kv",
          "; a request's KV rows are all inline or all in regions"));
    }
    out.total_draft_rows += gamma;
    out.payload_bytes += int64_t{4} * (2 * gamma + 1) + (kv->in_region ? 0 : kv->row_bytes * gamma);
    if (tree) out.payload_bytes += int64_t{4} * gamma;  // parent_indices
    out.device_bytes += int64_t{4} * (2 * gamma + 1) + kv->row_bytes * gamma;
  }
  out.kv_row_bytes = first_kv.row_bytes;
  out.kv_dtype = first_kv.dtype;
  v1::KvReturn kv_return = request.kv_return();
  if (kv_return == v1::KV_RETURN_UNSPECIFIED) {
    kv_return = first_kv.present ? v1::KV_RETURN_HANDLE : v1::KV_RETURN_NONE;
  }
  out.kv_return = kv_return;
  if (kv_return == v1::KV_RETURN_REGION) {
    if (!first_kv.present) {
      return Invalid("kv_return is REGION but the sequences carry no draft KV rows");
    }
    if (absl::Status s = CheckKvOutput(request, first_kv.row_bytes, first_kv.dtype,
                                       out.total_draft_rows);
        !s.ok()) {
      return s;
    }
  } else if (request.has_kv_output()) {
    return Invalid("kv_output is set but kv_return is not REGION");
  }
  const bool kv_in_region = first_kv.present && first_kv.in_region;
  out.key.mode = VerifyMode::kGreedy;
  out.key.vocab_size = first.vocab_size();
  if (sampled && limits.max_sampled_request_bytes > 0 &&
      out.payload_bytes > limits.max_sampled_request_bytes) {
    return Invalid(absl::StrCat("sampled request payload is ", out.payload_bytes,
                                " bytes (distribution rows, tokens, parameters, KV); limit ",
                                "max_sampled_request_bytes=", limits.max_sampled_request_bytes,
                                " (what one batch can stage)"));
  }
  if (sampled) {
    out.key.mode = VerifyMode::kSampled;
    out.key.vocab_size = first_sampled.vocab;
    out.key.value_dtype = first_sampled.dtype == v1::DATA_TYPE_FLOAT32   ? SampleDtype::kFloat32
                          : first_sampled.dtype == v1::DATA_TYPE_FLOAT16 ? SampleDtype::kFloat16
                                                                         : SampleDtype::kBFloat16;
    out.key.value_kind = first_sampled.kind == v1::DISTRIBUTION_KIND_LOGITS ? SampleValueKind::kLogits
                         : first_sampled.kind == v1::DISTRIBUTION_KIND_LOG_PROBABILITIES
                             ? SampleValueKind::kLogProbabilities
                             : SampleValueKind::kProbabilities;
    out.key.method = first_sampled.method == v1::SAMPLING_METHOD_SIGMOID_APPROXIMATION
                         ? SampleMethod::kSigmoid
                         : SampleMethod::kExact;
    out.key.has_draft_probs = first_sampled.has_draft;
    out.key.validate_full_rows = first_sampled.validate_full_rows;
    out.key.sigmoid_alpha = first_sampled.alpha;
    out.key.sigmoid_beta = first_sampled.beta;
  }
  // Rows nobody will read are neither staged nor packed.
  if (first_kv.present && kv_return != v1::KV_RETURN_NONE) {
    out.key.row_bytes = first_kv.row_bytes;
    out.key.kv_dtype = first_kv.dtype;
    out.key.kv_in_regions = kv_in_region;
  } else if (!kv_in_region) {
    out.payload_bytes -= first_kv.row_bytes * out.total_draft_rows;
  }
  out.key.values_in_regions = sampled && first_sampled.in_region;
  return out;
}

absl::Status ValidateRequestId(absl::string_view request_id) {
  if (static_cast<int64_t>(request_id.size()) > kMaxRequestIdBytes) {
    return Invalid(absl::StrCat("request_id is ", request_id.size(), " bytes; limit ",
                                kMaxRequestIdBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateHandleField(absl::string_view handle) {
  if (handle.empty()) return Invalid("handle is empty");
  constexpr absl::string_view kFormat =
      "a KV handle is 32 lowercase hex digits (KvHandle.id of a VerifyResponse)";
  static_assert(kHandleIdChars == 32);
  if (handle.size() != kHandleIdChars) {
    return Invalid(absl::StrCat("handle is ", handle.size(), " bytes; ", kFormat));
  }
  if (!IsWellFormedHandleId(handle)) {
    return Invalid(absl::StrCat("handle ", EchoForMessage(handle),
                                " has characters other than 0-9 a-f; ", kFormat));
  }
  return absl::OkStatus();
}

absl::Status ValidateFetchKvRequest(const v1::FetchKvRequest& request) {
  if (absl::Status s = ValidateHandleField(request.handle()); !s.ok()) return s;
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
