#include "client/loadgen/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace specverify::loadgen {
namespace {

constexpr double kQuantiles[] = {0.5, 0.9, 0.99, 0.999};
constexpr const char* kQuantileNames[] = {"p50", "p90", "p99", "p99.9"};

std::string Us(int64_t ns) { return absl::StrFormat("%.1f", ns / 1e3); }

std::string StepLabel(const StepSpec& s) {
  if (s.mode == LoopMode::kClosed) return absl::StrCat("closed c=", s.concurrency);
  return absl::StrFormat("open %s %.0f/s", ArrivalProcessName(s.arrival), s.rate);
}

std::string ErrorsText(const StepResult& r) {
  if (r.errors_by_code.empty()) return "0";
  std::vector<std::string> parts;
  for (const auto& [code, n] : r.errors_by_code) parts.push_back(absl::StrCat(code, ":", n));
  return absl::StrJoin(parts, " ");
}

// A fixed-width text table; the first column left-aligned, the rest right.
class TextTable {
 public:
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()), 0);
      for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
    std::string out;
    for (size_t r = 0; r < rows_.size(); ++r) {
      for (size_t i = 0; i < rows_[r].size(); ++i) {
        const std::string& cell = rows_[r][i];
        const std::string pad(widths[i] - cell.size(), ' ');
        absl::StrAppend(&out, i == 0 ? "" : "  ", i == 0 ? cell + pad : pad + cell);
      }
      absl::StrAppend(&out, "\n");
      if (r == 0) {
        size_t total = 0;
        for (size_t w : widths) total += w + 2;
        absl::StrAppend(&out, std::string(total - 2, '-'), "\n");
      }
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

void AddStepRow(TextTable& table, const StepResult& r) {
  std::vector<std::string> row = {
      absl::StrCat(StepLabel(r.spec), r.target == "server"    ? ""
                                      : r.target == "ceiling" ? " [noop]"
                                                              : absl::StrCat(" [", r.target, "]")),
      absl::StrCat(r.sent),
      absl::StrFormat("%.0f", r.requests_per_s()),
      absl::StrFormat("%.0f", r.sequences_per_s()),
      absl::StrFormat("%.0f", r.tokens_per_s()),
  };
  for (double q : kQuantiles) row.push_back(Us(r.latency.ValueAtQuantile(q)));
  row.push_back(Us(r.latency.max()));
  row.push_back(r.unverified == r.ok && r.ok > 0 ? "n/a" : absl::StrFormat("%.3f", r.acceptance()));
  row.push_back(absl::StrCat(r.wrong_answers + r.kv_mismatches));
  row.push_back(ErrorsText(r));
  table.AddRow(std::move(row));
}

std::string ServerLine(const char* what, const ServerDescription& s) {
  return absl::StrCat(what, " ", s.address, ": backend=", s.backend,
                      s.device_name.empty() ? "" : absl::StrCat(" device=\"", s.device_name, "\""),
                      s.version.empty() ? "" : absl::StrCat(" version=", s.version), "\n");
}

void AppendHistogramJson(std::string& out, const char* name, const LatencyHistogram& h) {
  absl::StrAppend(&out, "\"", name, "\":{\"count\":", h.count(), ",\"min\":", h.min(),
                  ",\"mean\":", absl::StrFormat("%.1f", h.mean()));
  for (size_t i = 0; i < std::size(kQuantiles); ++i) {
    absl::StrAppend(&out, ",\"", kQuantileNames[i], "\":", h.ValueAtQuantile(kQuantiles[i]));
  }
  absl::StrAppend(&out, ",\"max\":", h.max(), "}");
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

void AppendStepJson(std::string& out, const StepResult& r) {
  absl::StrAppend(&out, "{\"target\":\"", r.target, "\",\"backend\":\"", JsonEscape(r.backend),
                  "\",\"mode\":\"", LoopModeName(r.spec.mode), "\",\"rpc\":\"",
                  RpcKindName(r.spec.rpc), "\",\"channels\":", r.spec.channels);
  if (r.spec.mode == LoopMode::kClosed) {
    absl::StrAppend(&out, ",\"concurrency\":", r.spec.concurrency);
  } else {
    absl::StrAppend(&out, ",\"rate\":", Num(r.spec.rate), ",\"arrival\":\"",
                    ArrivalProcessName(r.spec.arrival), "\",\"offered_rate\":", Num(r.offered_rate));
  }
  absl::StrAppend(&out, ",\"sent\":", r.sent, ",\"ok\":", r.ok, ",\"rpc_errors\":", r.rpc_errors,
                  ",\"errors_by_code\":{");
  bool first = true;
  for (const auto& [code, n] : r.errors_by_code) {
    absl::StrAppend(&out, first ? "" : ",", "\"", JsonEscape(code), "\":", n);
    first = false;
  }
  absl::StrAppend(&out, "},\"answers_by_device\":{");
  first = true;
  for (const auto& [device, n] : r.answers_by_device) {
    absl::StrAppend(&out, first ? "" : ",", "\"", device, "\":", n);
    first = false;
  }
  absl::StrAppend(&out, "},\"wrong_answers\":", r.wrong_answers, ",\"unverified\":", r.unverified,
                  ",\"wrong_answer_examples\":[");
  for (size_t i = 0; i < r.wrong_answer_examples.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", "\"", JsonEscape(r.wrong_answer_examples[i]), "\"");
  }
  absl::StrAppend(&out, "],\"sequences\":", r.sequences, ",\"draft_tokens\":", r.draft_tokens,
                  ",\"accepted_tokens\":", r.accepted_tokens, ",\"emitted_tokens\":", r.emitted_tokens,
                  ",\"acceptance\":", Num(r.acceptance()), ",\"kv_fetches\":", r.kv_fetches,
                  ",\"kv_fetch_errors\":", r.kv_fetch_errors, ",\"kv_mismatches\":", r.kv_mismatches,
                  ",\"kv_released\":", r.kv_released, ",\"window_s\":", Num(r.window_s),
                  ",\"window_start_unix_s\":", absl::StrFormat("%.3f", r.window_start_unix_s),
                  ",\"client_cpu_cores\":", Num(r.client_cpu_cores),
                  ",\"requests_per_s\":", Num(r.requests_per_s()),
                  ",\"sequences_per_s\":", Num(r.sequences_per_s()),
                  ",\"tokens_per_s\":", Num(r.tokens_per_s()), ",\"latency_ns\":");
  out += "{";
  {
    std::string inner;
    AppendHistogramJson(inner, "intended", r.latency);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "service", r.service_time);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "send_lag", r.send_lag);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "kv_fetch", r.kv_fetch_latency);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "server_queue", r.server_queue);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "server_total", r.server_time);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "server_submit", r.server_submit);
    absl::StrAppend(&inner, ",");
    AppendHistogramJson(inner, "server_complete", r.server_complete);
    out += inner;
  }
  absl::StrAppend(&out, "},\"server_metrics\":{\"scraped\":", r.metrics.scraped ? "true" : "false");
  if (!r.metrics.error.empty()) absl::StrAppend(&out, ",\"error\":\"", JsonEscape(r.metrics.error), "\"");
  if (r.metrics.has_queue_delay) {
    absl::StrAppend(&out, ",\"queue_delay_mean_s\":", Num(r.metrics.queue_delay_mean_s));
  }
  if (r.metrics.has_device_time) {
    absl::StrAppend(&out, ",\"device_time_mean_s\":", Num(r.metrics.device_time_mean_s),
                    ",\"batches\":", Num(r.metrics.batches));
  }
  absl::StrAppend(&out, "}}");
}

void AppendServerJson(std::string& out, const ServerDescription& s) {
  absl::StrAppend(&out, "{\"address\":\"", JsonEscape(s.address), "\",\"backend\":\"",
                  JsonEscape(s.backend), "\",\"device_name\":\"", JsonEscape(s.device_name),
                  "\",\"version\":\"", JsonEscape(s.version),
                  "\",\"max_queue_delay_us\":", s.max_queue_delay_us, "}");
}

}  // namespace

int64_t RunReport::total_wrong_answers() const {
  int64_t n = 0;
  for (const auto& p : steps) {
    n += p.server.wrong_answers + (p.has_ceiling ? p.ceiling.wrong_answers : 0) +
         (p.has_raw ? p.raw.wrong_answers : 0);
    for (const StepResult& c : p.compare) n += c.wrong_answers;
  }
  return n;
}
int64_t RunReport::total_kv_mismatches() const {
  int64_t n = 0;
  for (const auto& p : steps) {
    n += p.server.kv_mismatches + (p.has_ceiling ? p.ceiling.kv_mismatches : 0);
    for (const StepResult& c : p.compare) n += c.kv_mismatches;
  }
  return n;
}
int64_t RunReport::total_sent() const {
  int64_t n = 0;
  for (const auto& p : steps) n += p.server.sent;
  return n;
}
int64_t RunReport::total_rpc_errors() const {
  int64_t n = 0;
  for (const auto& p : steps) n += p.server.rpc_errors;
  return n;
}

CeilingRatio ComputeCeilingRatio(const StepPair& pair) {
  CeilingRatio ratio;
  if (!pair.has_ceiling) return ratio;
  const double ceiling_rps = pair.ceiling.requests_per_s();
  if (ceiling_rps > 0) ratio.throughput_ratio = pair.server.requests_per_s() / ceiling_rps;
  const int64_t server_p99 = pair.server.latency.ValueAtQuantile(0.99);
  const int64_t ceiling_p99 = pair.ceiling.latency.ValueAtQuantile(0.99);
  if (ceiling_p99 > 0) ratio.p99_ratio = static_cast<double>(server_p99) / ceiling_p99;
  ratio.p99_added_ns = server_p99 - ceiling_p99;
  return ratio;
}

int64_t AddedOverRawP50Ns(const StepPair& pair) {
  if (!pair.has_raw) return 0;
  return pair.server.latency.ValueAtQuantile(0.5) - pair.raw.latency.ValueAtQuantile(0.5);
}

int64_t AddedOverRawTargetNs(const WorkloadConfig& workload) {
  const bool rows_back = workload.row_bytes > 0 && workload.kv_return != KvReturnMode::kNone;
  return rows_back ? kTargetAddedP50WithKvNs : kTargetAddedP50NoKvNs;
}

bool MeetsServiceTarget(const CeilingRatio& ratio, int64_t max_queue_delay_us) {
  return ratio.throughput_ratio >= kTargetThroughputRatio &&
         ratio.p99_added_ns <= max_queue_delay_us * 1000 + kTargetP99SlackNs;
}

std::string JsonEscape(absl::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", static_cast<unsigned char>(ch)));
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string FormatTable(const RunReport& report) {
  const LoadgenConfig& c = report.config;
  const WorkloadConfig& w = c.workload;
  std::string out = ServerLine("server ", report.server);
  if (report.has_ceiling) out += ServerLine("ceiling", report.ceiling);
  for (const auto& [label, description] : report.compare) {
    out += ServerLine(absl::StrCat("[", label, "]").c_str(), description);
  }
  if (c.raw_ceiling) {
    absl::StrAppend(&out, "raw     VerifyCeiling on the ", report.has_ceiling ? "ceiling" : "server",
                    " server: the raw-gRPC round trip (unary, nothing verified)\n");
  }
  const std::string sampled =
      w.mode == WorkloadMode::kSampled
          ? absl::StrCat(" dtype=", SampleDtypeName(w.dtype), " kind=", SampleKindName(w.kind),
                         " method=", SampleMethodName(w.method),
                         " draft_probs=", w.draft_probs ? "on" : "off")
          : std::string();
  absl::StrAppend(&out, "workload: ", WorkloadModeName(w.mode), sampled, " gamma=", w.gamma_min,
                  w.gamma_max != w.gamma_min ? absl::StrCat(":", w.gamma_max) : "",
                  " alpha=", w.alpha, " seqs/request=", w.sequences_per_request,
                  " row_bytes=", w.row_bytes, " vocab=", w.vocab_size, " seed=", w.seed,
                  " kv_return=", KvReturnModeName(w.kv_return),
                  " transport=", TransportName(w.transport),
                  w.tree.empty() ? "" : absl::StrCat(" tree=", w.tree),
                  w.fetch_kv_fraction > 0 ? absl::StrCat(" fetch_kv=", w.fetch_kv_fraction) : "",
                  " request_wire_bytes=", report.request_wire_bytes, "\n");
  absl::StrAppend(&out, "load: ", LoopModeName(c.mode), " loop, rpc=", RpcKindName(c.rpc),
                  ", channels=", c.channels, ", per step ",
                  c.requests > 0 ? absl::StrCat(c.requests, " requests") : absl::StrCat(c.duration_s, " s"),
                  " after ", c.warmup_s, " s warm-up; latency from intended send time\n\n");

  TextTable table;
  table.AddRow({"step", "sent", "req/s", "seq/s", "tok/s", "p50 us", "p90 us", "p99 us",
                "p99.9 us", "max us", "accept", "wrong", "errors"});
  for (const StepPair& pair : report.steps) {
    AddStepRow(table, pair.server);
    for (const StepResult& c : pair.compare) AddStepRow(table, c);
    if (pair.has_ceiling) AddStepRow(table, pair.ceiling);
    if (pair.has_raw) AddStepRow(table, pair.raw);
  }
  out += table.Render();

  // Server-side and client-side detail, one line per step.
  absl::StrAppend(&out, "\n");
  for (const StepPair& pair : report.steps) {
    const StepResult& r = pair.server;
    absl::StrAppend(&out, StepLabel(r.spec), ": ok=", r.ok, " rpc_errors=", r.rpc_errors,
                    " wrong=", r.wrong_answers, " unverified=", r.unverified);
    absl::StrAppend(&out, absl::StrFormat(" | client CPU %.2f cores", r.client_cpu_cores));
    if (r.answers_by_device.size() > 1) {
      std::vector<std::string> parts;
      for (const auto& [device, n] : r.answers_by_device) {
        parts.push_back(absl::StrCat(device, ":", n));
      }
      absl::StrAppend(&out, " | answers by device ", absl::StrJoin(parts, " "));
    }
    if (r.server_queue.count() > 0) {
      absl::StrAppend(&out, " | server queue p50/p99 ", Us(r.server_queue.ValueAtQuantile(0.5)), "/",
                      Us(r.server_queue.ValueAtQuantile(0.99)), " us, server total p50/p99 ",
                      Us(r.server_time.ValueAtQuantile(0.5)), "/",
                      Us(r.server_time.ValueAtQuantile(0.99)), " us");
    }
    if (r.spec.mode == LoopMode::kOpen) {
      absl::StrAppend(&out, absl::StrFormat(" | offered %.0f/s, send lag p99 %s us max %s us",
                                            r.offered_rate, Us(r.send_lag.ValueAtQuantile(0.99)),
                                            Us(r.send_lag.max())));
    }
    if (r.kv_fetches + r.kv_fetch_errors + r.kv_released > 0) {
      absl::StrAppend(&out, " | kv fetched=", r.kv_fetches, " (p99 ",
                      Us(r.kv_fetch_latency.ValueAtQuantile(0.99)), " us) released=", r.kv_released,
                      " mismatched=", r.kv_mismatches, " kv_errors=", r.kv_fetch_errors);
    }
    if (r.metrics.scraped) {
      absl::StrAppend(&out, " | /metrics:");
      if (r.metrics.has_queue_delay) {
        absl::StrAppend(&out, absl::StrFormat(" queue delay mean %.1f us", r.metrics.queue_delay_mean_s * 1e6));
      }
      if (r.metrics.has_device_time) {
        absl::StrAppend(&out, absl::StrFormat(" device time mean %.1f us/batch over %.0f batches",
                                              r.metrics.device_time_mean_s * 1e6, r.metrics.batches));
      }
      if (!r.metrics.has_queue_delay && !r.metrics.has_device_time) absl::StrAppend(&out, " (no known series)");
    } else if (!r.metrics.error.empty()) {
      absl::StrAppend(&out, " | /metrics unavailable: ", r.metrics.error);
    }
    absl::StrAppend(&out, "\n");
  }

  if (report.has_ceiling) {
    absl::StrAppend(&out, "\ntransport ceiling (server vs no-op server, same workload and load):\n");
    TextTable ratios;
    const int64_t queue_delay_us = report.server.max_queue_delay_us;
    ratios.AddRow({"step", "req/s", "noop req/s", "throughput ratio", "p99 us", "noop p99 us",
                   "p99 ratio", "p99 added us", "target"});
    for (const StepPair& pair : report.steps) {
      if (!pair.has_ceiling) continue;
      const CeilingRatio ratio = ComputeCeilingRatio(pair);
      ratios.AddRow({StepLabel(pair.server.spec), absl::StrFormat("%.0f", pair.server.requests_per_s()),
                     absl::StrFormat("%.0f", pair.ceiling.requests_per_s()),
                     absl::StrFormat("%.3f", ratio.throughput_ratio),
                     Us(pair.server.latency.ValueAtQuantile(0.99)),
                     Us(pair.ceiling.latency.ValueAtQuantile(0.99)),
                     absl::StrFormat("%.2f", ratio.p99_ratio), Us(ratio.p99_added_ns),
                     queue_delay_us < 0 ? "?"
                     : MeetsServiceTarget(ratio, queue_delay_us) ? "met" : "missed"});
    }
    out += ratios.Render();
    if (queue_delay_us >= 0) {
      absl::StrAppend(&out, "target: throughput ratio >= ", kTargetThroughputRatio,
                      " and p99 added <= max_queue_delay (", queue_delay_us, " us) + ",
                      kTargetP99SlackNs / 1000, " us\n");
    }
  }

  if (!report.steps.empty() && report.steps.front().has_raw) {
    const int64_t added_target = AddedOverRawTargetNs(w);
    absl::StrAppend(&out, "\nservice overhead vs raw gRPC (same workload and load):\n");
    TextTable overhead;
    overhead.AddRow({"step", "p50 us", "raw p50 us", "p50 added us", "server queue p50 us",
                     "req/s", "noop req/s", "p99 us", "noop p99 us", "target"});
    for (const StepPair& pair : report.steps) {
      const StepResult& r = pair.server;
      const CeilingRatio ratio = ComputeCeilingRatio(pair);
      const int64_t added = AddedOverRawP50Ns(pair);
      // Concurrency 1 is judged on latency added, 64 and more on throughput
      // and p99 against the no-op; others are reported, not judged.
      std::string verdict = "-";
      if (r.spec.mode == LoopMode::kClosed && r.spec.concurrency == 1) {
        verdict = added <= added_target ? "met" : "missed";
      } else if (r.spec.mode == LoopMode::kClosed && r.spec.concurrency >= 64 &&
                 pair.has_ceiling && report.server.max_queue_delay_us >= 0) {
        verdict = MeetsServiceTarget(ratio, report.server.max_queue_delay_us) ? "met" : "missed";
      }
      overhead.AddRow({StepLabel(r.spec), Us(r.latency.ValueAtQuantile(0.5)),
                       Us(pair.raw.latency.ValueAtQuantile(0.5)), Us(added),
                       Us(r.server_queue.ValueAtQuantile(0.5)),
                       absl::StrFormat("%.0f", r.requests_per_s()),
                       pair.has_ceiling ? absl::StrFormat("%.0f", pair.ceiling.requests_per_s()) : "",
                       Us(r.latency.ValueAtQuantile(0.99)),
                       pair.has_ceiling ? Us(pair.ceiling.latency.ValueAtQuantile(0.99)) : "",
                       verdict});
    }
    out += overhead.Render();
    absl::StrAppend(&out, "targets: c=1 p50 added <= ", added_target / 1000,
                    " us (40 without KV returned, 60 with); c>=64 throughput >= ",
                    kTargetThroughputRatio, " x noop and p99 <= noop p99 + max_queue_delay + ",
                    kTargetP99SlackNs / 1000, " us\n");
  }

  const int64_t wrong = report.total_wrong_answers() + report.total_kv_mismatches();
  absl::StrAppend(&out, "\nverdict: ", wrong == 0 ? "every checked answer matched the oracle"
                                                   : absl::StrCat(wrong, " WRONG ANSWERS"),
                  " (", report.total_sent(), " requests sent to the server, ",
                  report.total_rpc_errors(), " RPC errors)\n");
  for (const StepPair& pair : report.steps) {
    for (const std::string& example : pair.server.wrong_answer_examples) {
      absl::StrAppend(&out, "  wrong: ", example, "\n");
    }
  }
  return out;
}

std::string FormatJson(const RunReport& report) {
  const LoadgenConfig& c = report.config;
  const WorkloadConfig& w = c.workload;
  std::string out = "{\"server\":";
  AppendServerJson(out, report.server);
  if (report.has_ceiling) {
    absl::StrAppend(&out, ",\"ceiling\":");
    AppendServerJson(out, report.ceiling);
  }
  absl::StrAppend(&out, ",\"workload\":{\"mode\":\"", WorkloadModeName(w.mode), "\"");
  if (w.mode == WorkloadMode::kSampled) {
    absl::StrAppend(&out, ",\"dtype\":\"", SampleDtypeName(w.dtype), "\",\"kind\":\"",
                    SampleKindName(w.kind), "\",\"method\":\"", SampleMethodName(w.method),
                    "\",\"draft_probs\":", w.draft_probs ? "true" : "false");
  }
  absl::StrAppend(&out, ",\"gamma_min\":", w.gamma_min,
                  ",\"gamma_max\":", w.gamma_max, ",\"alpha\":", Num(w.alpha),
                  ",\"sequences_per_request\":", w.sequences_per_request, ",\"row_bytes\":", w.row_bytes,
                  ",\"vocab_size\":", w.vocab_size, ",\"seed\":", w.seed,
                  ",\"kv_return\":\"", KvReturnModeName(w.kv_return),
                  "\",\"transport\":\"", TransportName(w.transport), "\",\"tree\":\"", w.tree,
                  "\",\"request_wire_bytes\":", report.request_wire_bytes,
                  ",\"fetch_kv_fraction\":", Num(w.fetch_kv_fraction), "}");
  absl::StrAppend(&out, ",\"load\":{\"mode\":\"", LoopModeName(c.mode), "\",\"rpc\":\"",
                  RpcKindName(c.rpc), "\",\"channels\":", c.channels, ",\"duration_s\":",
                  Num(c.duration_s), ",\"requests\":", c.requests, ",\"warmup_s\":", Num(c.warmup_s), "}");
  absl::StrAppend(&out, ",\"steps\":[");
  for (size_t i = 0; i < report.steps.size(); ++i) {
    const StepPair& pair = report.steps[i];
    absl::StrAppend(&out, i ? "," : "", "{\"result\":");
    AppendStepJson(out, pair.server);
    if (pair.has_ceiling) {
      const CeilingRatio ratio = ComputeCeilingRatio(pair);
      absl::StrAppend(&out, ",\"ceiling\":");
      AppendStepJson(out, pair.ceiling);
      absl::StrAppend(&out, ",\"ceiling_ratio\":{\"throughput\":", Num(ratio.throughput_ratio),
                      ",\"p99\":", Num(ratio.p99_ratio), ",\"p99_added_ns\":", ratio.p99_added_ns);
      if (report.server.max_queue_delay_us >= 0) {
        absl::StrAppend(&out, ",\"meets_target\":",
                        MeetsServiceTarget(ratio, report.server.max_queue_delay_us) ? "true" : "false");
      }
      absl::StrAppend(&out, "}");
    }
    if (pair.has_raw) {
      absl::StrAppend(&out, ",\"raw\":");
      AppendStepJson(out, pair.raw);
      absl::StrAppend(&out, ",\"added_over_raw_p50_ns\":", AddedOverRawP50Ns(pair));
    }
    if (!pair.compare.empty()) {
      absl::StrAppend(&out, ",\"compare\":[");
      for (size_t k = 0; k < pair.compare.size(); ++k) {
        if (k) absl::StrAppend(&out, ",");
        AppendStepJson(out, pair.compare[k]);
      }
      absl::StrAppend(&out, "]");
    }
    absl::StrAppend(&out, "}");
  }
  absl::StrAppend(&out, "],\"wrong_answers\":", report.total_wrong_answers(),
                  ",\"kv_mismatches\":", report.total_kv_mismatches(), "}\n");
  return out;
}

std::string FormatCsv(const RunReport& report) {
  std::string out =
      "target,backend,mode,rpc,channels,concurrency,rate,arrival,sent,ok,rpc_errors,wrong_answers,"
      "unverified,kv_mismatches,window_s,requests_per_s,sequences_per_s,tokens_per_s,acceptance,"
      "p50_us,p90_us,p99_us,p999_us,max_us,send_lag_p99_us,server_queue_p99_us,"
      "ceiling_throughput_ratio,ceiling_p99_ratio\n";
  auto row = [&](const StepResult& r, const CeilingRatio* ratio) {
    absl::StrAppend(&out, r.target, ",", r.backend, ",", LoopModeName(r.spec.mode), ",",
                    RpcKindName(r.spec.rpc), ",", r.spec.channels, ",",
                    r.spec.mode == LoopMode::kClosed ? absl::StrCat(r.spec.concurrency) : "", ",",
                    r.spec.mode == LoopMode::kOpen ? Num(r.spec.rate) : "", ",",
                    r.spec.mode == LoopMode::kOpen ? ArrivalProcessName(r.spec.arrival) : "", ",",
                    r.sent, ",", r.ok, ",", r.rpc_errors, ",", r.wrong_answers, ",", r.unverified,
                    ",", r.kv_mismatches, ",", Num(r.window_s), ",", Num(r.requests_per_s()), ",",
                    Num(r.sequences_per_s()), ",", Num(r.tokens_per_s()), ",", Num(r.acceptance()));
    for (double q : kQuantiles) absl::StrAppend(&out, ",", Us(r.latency.ValueAtQuantile(q)));
    absl::StrAppend(&out, ",", Us(r.latency.max()), ",", Us(r.send_lag.ValueAtQuantile(0.99)), ",",
                    Us(r.server_queue.ValueAtQuantile(0.99)), ",",
                    ratio ? Num(ratio->throughput_ratio) : "", ",", ratio ? Num(ratio->p99_ratio) : "",
                    "\n");
  };
  for (const StepPair& pair : report.steps) {
    if (pair.has_ceiling) {
      const CeilingRatio ratio = ComputeCeilingRatio(pair);
      row(pair.server, &ratio);
      row(pair.ceiling, nullptr);
    } else {
      row(pair.server, nullptr);
    }
    if (pair.has_raw) row(pair.raw, nullptr);
    for (const StepResult& c : pair.compare) row(c, nullptr);
  }
  return out;
}

}  // namespace specverify::loadgen
