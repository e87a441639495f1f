#include "client/loadgen/config.h"

#include <algorithm>

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace specverify::loadgen {
namespace {

absl::Status FlagError(absl::string_view flag, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", problem));
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParsePositiveIntList(absl::string_view text,
                                                          absl::string_view flag) {
  std::vector<int32_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int32_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0) {
      return FlagError(flag, absl::StrCat("'", part, "' is not an integer > 0 (in '", text, "')"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::vector<double>> ParsePositiveDoubleList(absl::string_view text,
                                                            absl::string_view flag) {
  std::vector<double> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    double value = 0;
    if (!absl::SimpleAtod(part, &value) || !(value > 0) || !std::isfinite(value)) {
      return FlagError(flag, absl::StrCat("'", part, "' is not a number > 0 (in '", text, "')"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::pair<int32_t, int32_t>> ParseGammaRange(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2) return FlagError("gamma", absl::StrCat("expected N or LO:HI, got '", text, "'"));
  int32_t lo = 0, hi = 0;
  if (!absl::SimpleAtoi(parts[0], &lo) || (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &hi))) {
    return FlagError("gamma", absl::StrCat("expected N or LO:HI integers, got '", text, "'"));
  }
  if (parts.size() == 1) hi = lo;
  if (lo < 1 || hi < lo) {
    return FlagError("gamma", absl::StrCat("need 1 <= LO <= HI, got '", text, "'"));
  }
  return std::pair{lo, hi};
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseLabeledAddresses(
    absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    const absl::string_view label = eq == absl::string_view::npos ? "" : item.substr(0, eq);
    const absl::string_view address = eq == absl::string_view::npos ? "" : item.substr(eq + 1);
    if (label.empty() || address.empty()) {
      return FlagError("compare_address",
                       absl::StrCat("'", item, "' is not LABEL=host:port (e.g. cpu=127.0.0.1:50053)"));
    }
    for (char ch : label) {
      if (!absl::ascii_isalnum(ch) && ch != '-' && ch != '_') {
        return FlagError("compare_address",
                         absl::StrCat("label '", label, "' may hold letters, digits, '-' and '_' only"));
      }
    }
    if (label == "server" || label == "noop" || label == "raw") {
      return FlagError("compare_address", absl::StrCat("label '", label, "' is reserved"));
    }
    for (const auto& [seen, unused] : out) {
      if (seen == label) return FlagError("compare_address", absl::StrCat("label '", label, "' repeats"));
    }
    out.emplace_back(std::string(label), std::string(address));
  }
  return out;
}

absl::StatusOr<RpcKind> ParseRpcKind(absl::string_view text) {
  if (text == "unary") return RpcKind::kUnary;
  if (text == "stream") return RpcKind::kStream;
  return FlagError("rpc", absl::StrCat("expected unary or stream, got '", text, "'"));
}

absl::StatusOr<ArrivalProcess> ParseArrivalProcess(absl::string_view text) {
  if (text == "constant") return ArrivalProcess::kConstant;
  if (text == "poisson") return ArrivalProcess::kPoisson;
  return FlagError("arrival", absl::StrCat("expected constant or poisson, got '", text, "'"));
}

absl::StatusOr<KvReturnMode> ParseKvReturnMode(absl::string_view text) {
  if (text == "handle") return KvReturnMode::kHandle;
  if (text == "inline") return KvReturnMode::kInline;
  if (text == "none") return KvReturnMode::kNone;
  if (text == "region") return KvReturnMode::kRegion;
  return FlagError("kv_return",
                   absl::StrCat("expected inline, handle, none or region, got '", text, "'"));
}

absl::StatusOr<WorkloadMode> ParseWorkloadMode(absl::string_view text) {
  if (text == "greedy") return WorkloadMode::kGreedy;
  if (text == "sampled") return WorkloadMode::kSampled;
  return FlagError("mode", absl::StrCat("expected greedy or sampled, got '", text, "'"));
}
absl::StatusOr<SampleDtype> ParseSampleDtype(absl::string_view text) {
  if (text == "fp32") return SampleDtype::kFloat32;
  if (text == "fp16") return SampleDtype::kFloat16;
  if (text == "bf16") return SampleDtype::kBFloat16;
  return FlagError("dtype", absl::StrCat("expected fp32, fp16 or bf16, got '", text, "'"));
}
absl::StatusOr<SampleValueKind> ParseSampleKind(absl::string_view text) {
  if (text == "probs") return SampleValueKind::kProbabilities;
  if (text == "logits") return SampleValueKind::kLogits;
  if (text == "logprobs") return SampleValueKind::kLogProbabilities;
  return FlagError("kind", absl::StrCat("expected probs, logits or logprobs, got '", text, "'"));
}
absl::StatusOr<SampleMethod> ParseSampleMethod(absl::string_view text) {
  if (text == "exact") return SampleMethod::kExact;
  if (text == "sigmoid") return SampleMethod::kSigmoid;
  return FlagError("method", absl::StrCat("expected exact or sigmoid, got '", text, "'"));
}
absl::string_view WorkloadModeName(WorkloadMode mode) {
  return mode == WorkloadMode::kGreedy ? "greedy" : "sampled";
}
absl::string_view SampleDtypeName(SampleDtype dtype) {
  switch (dtype) {
    case SampleDtype::kFloat32: return "fp32";
    case SampleDtype::kFloat16: return "fp16";
    case SampleDtype::kBFloat16: return "bf16";
  }
  return "?";
}
absl::string_view SampleKindName(SampleValueKind kind) {
  switch (kind) {
    case SampleValueKind::kProbabilities: return "probs";
    case SampleValueKind::kLogits: return "logits";
    case SampleValueKind::kLogProbabilities: return "logprobs";
  }
  return "?";
}
absl::string_view SampleMethodName(SampleMethod method) {
  return method == SampleMethod::kExact ? "exact" : "sigmoid";
}

absl::string_view LoopModeName(LoopMode mode) {
  return mode == LoopMode::kClosed ? "closed" : "open";
}
absl::string_view RpcKindName(RpcKind kind) { return kind == RpcKind::kUnary ? "unary" : "stream"; }
absl::string_view ArrivalProcessName(ArrivalProcess process) {
  return process == ArrivalProcess::kConstant ? "constant" : "poisson";
}
absl::string_view KvReturnModeName(KvReturnMode mode) {
  switch (mode) {
    case KvReturnMode::kHandle: return "handle";
    case KvReturnMode::kInline: return "inline";
    case KvReturnMode::kNone: return "none";
    case KvReturnMode::kRegion: return "region";
  }
  return "?";
}

absl::StatusOr<Transport> ParseTransport(absl::string_view text) {
  if (text == "inline") return Transport::kInline;
  if (text == "shm") return Transport::kShm;
  if (text == "cuda") return Transport::kCuda;
  return FlagError("transport", absl::StrCat("expected inline, shm or cuda, got '", text, "'"));
}

absl::string_view TransportName(Transport transport) {
  switch (transport) {
    case Transport::kInline: return "inline";
    case Transport::kShm: return "shm";
    case Transport::kCuda: return "cuda";
  }
  return "?";
}

absl::Status ValidateConfig(const LoadgenConfig& c) {
  if (c.address.empty()) return FlagError("address", "the server address host:port is required");
  if (c.mode == LoopMode::kClosed && c.concurrency.empty()) {
    return FlagError("concurrency", "at least one concurrency level is required");
  }
  if (c.mode == LoopMode::kOpen && c.rates.empty()) {
    return FlagError("rate", "at least one rate is required for an open loop");
  }
  if (c.channels < 1 || c.channels > 1024) {
    return FlagError("channels", absl::StrCat("must be in [1, 1024], got ", c.channels));
  }
  if (c.requests < 0) return FlagError("requests", "must be >= 0");
  if (c.resend_unanswered < 0 || c.resend_unanswered > 1000) {
    return FlagError("resend_unanswered", absl::StrCat("must be in [0, 1000], got ", c.resend_unanswered));
  }
  if (c.resend_unanswered > 0 && c.rpc != RpcKind::kStream) {
    return FlagError("resend_unanswered", "needs --rpc=stream (unary calls are not resent)");
  }
  if (!(c.connect_timeout_s > 0)) return FlagError("connect_timeout", "must be > 0");
  if (!(c.wait_for_serving_s >= 0)) return FlagError("wait_for_serving", "must be >= 0");
  if (c.requests == 0 && !(c.duration_s > 0)) {
    return FlagError("duration", "must be > 0 seconds when --requests is 0");
  }
  if (!(c.warmup_s >= 0)) return FlagError("warmup", "must be >= 0 seconds");
  if (!(c.start_at_unix_s >= 0) || !std::isfinite(c.start_at_unix_s)) {
    return FlagError("start_at_unix", "must be a time in seconds since the Unix epoch, or 0");
  }
  if (c.max_outstanding < 1) return FlagError("max_outstanding", "must be >= 1");
  if (c.transport.deadline_ms < 0) return FlagError("deadline_ms", "must be >= 0");
  if (c.transport.max_message_bytes < 1024) {
    return FlagError("max_message_bytes", "must be >= 1024");
  }
  const WorkloadConfig& w = c.workload;
  if (!(w.alpha >= 0 && w.alpha <= 1)) return FlagError("alpha", "must be in [0, 1]");
  if (w.sequences_per_request < 1) return FlagError("sequences_per_request", "must be >= 1");
  if (w.row_bytes < 0) return FlagError("row_bytes", "must be >= 0");
  if (w.vocab_size < 2) return FlagError("vocab", "must be >= 2");
  if (w.pool_requests < 1) return FlagError("pool_requests", "must be >= 1");
  if (w.region_copies < 1 || w.region_copies > 4096) {
    return FlagError("region_copies", absl::StrCat("is ", w.region_copies, "; must lie in [1, 4096]"));
  }
  if (w.region_copies > 1 && w.transport == Transport::kInline) {
    return FlagError("region_copies", "needs --transport=shm or --transport=cuda");
  }
  if (!(w.fetch_kv_fraction >= 0 && w.fetch_kv_fraction <= 1)) {
    return FlagError("fetch_kv_fraction", "must be in [0, 1]");
  }
  if (w.fetch_kv_fraction > 0 && w.kv_return != KvReturnMode::kHandle) {
    return FlagError("fetch_kv", "needs --kv_return=handle");
  }
  if (w.kv_return == KvReturnMode::kRegion) {
    if (w.transport == Transport::kInline) {
      return FlagError("kv_return", "region needs --transport=shm or --transport=cuda");
    }
    if (w.row_bytes == 0) return FlagError("kv_return", "region needs --row_bytes > 0");
    // Each pool entry (in each copy of the region) owns its output rows: no
    // two requests in flight may share one.
    const int64_t in_flight = c.mode == LoopMode::kClosed
                                  ? *std::max_element(c.concurrency.begin(), c.concurrency.end())
                                  : c.max_outstanding;
    if (int64_t{w.pool_requests} * w.region_copies < in_flight) {
      return FlagError("pool_requests",
                       absl::StrCat("is ", w.pool_requests, " x --region_copies=", w.region_copies,
                                    "; --kv_return=region needs at least the requests in flight (",
                                    in_flight, ": the largest --concurrency, or --max_outstanding)"));
    }
  }
  if (w.fetch_kv_fraction > 0 && w.row_bytes == 0) {
    return FlagError("fetch_kv", "needs --row_bytes > 0 (no KV rows to fetch)");
  }
  if (w.mode == WorkloadMode::kSampled && w.method == SampleMethod::kSigmoid &&
      w.kind != SampleValueKind::kLogits) {
    return FlagError("method", "sigmoid needs --kind=logits");
  }
  if (!(c.max_error_fraction >= 0 && c.max_error_fraction <= 1)) {
    return FlagError("max_error_fraction", "must be in [0, 1]");
  }
  if (!c.metrics_url.empty() && !absl::StartsWith(c.metrics_url, "http://")) {
    return FlagError("metrics_url", "only plain http://host:port/path is supported");
  }
  return absl::OkStatus();
}

}  // namespace specverify::loadgen
