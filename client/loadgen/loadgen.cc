#include "client/loadgen/loadgen.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/loadgen/load_workload.h"
#include "client/loadgen/region_transport.h"
#include "client/loadgen/metrics_scrape.h"
#include "client/loadgen/step_runner.h"
#include "client/loadgen/target.h"

namespace specverify::loadgen {
namespace {

// Server metric names (server/metrics/prometheus_metrics.cc).
constexpr char kQueueDelayMetric[] = "specverify_queue_delay_seconds";
constexpr char kDeviceTimeMetric[] = "specverify_batch_device_seconds";
constexpr auto kScrapeTimeout = std::chrono::milliseconds(3000);

// --start_at_unix: sleeps until that wall-clock time; set-up that ended
// after it says so on stderr, as the run's window then starts late.
void WaitForStartTime(double start_at_unix_s) {
  const auto start = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(start_at_unix_s)));
  const auto now = std::chrono::system_clock::now();
  if (now < start) {
    std::this_thread::sleep_until(start);
    return;
  }
  std::cerr << "specverify-loadgen: set-up ended "
            << std::chrono::duration<double>(now - start).count()
            << " s after --start_at_unix; starting now\n";
}

absl::StatusOr<MetricSamples> Scrape(const std::string& url) {
  absl::StatusOr<std::string> body = HttpGet(url, kScrapeTimeout);
  if (!body.ok()) return body.status();
  return ParsePrometheusText(*body);
}

ServerMetricsDelta JoinMetrics(const absl::StatusOr<MetricSamples>& before,
                               const absl::StatusOr<MetricSamples>& after) {
  ServerMetricsDelta delta;
  if (!before.ok() || !after.ok()) {
    delta.error = std::string((before.ok() ? after : before).status().message());
    return delta;
  }
  delta.scraped = true;
  const HistogramDelta queue = DeltaOfHistogram(*before, *after, kQueueDelayMetric);
  delta.has_queue_delay = queue.found && queue.count > 0;
  delta.queue_delay_mean_s = queue.mean;
  const HistogramDelta device = DeltaOfHistogram(*before, *after, kDeviceTimeMetric);
  delta.has_device_time = device.found && device.count > 0;
  delta.device_time_mean_s = device.mean;
  delta.batches = device.count;
  return delta;
}

std::vector<StepSpec> StepsOf(const LoadgenConfig& config) {
  std::vector<StepSpec> steps;
  auto base = [&] {
    StepSpec s;
    s.mode = config.mode;
    s.rpc = config.rpc;
    s.channels = config.channels;
    s.arrival = config.arrival;
    return s;
  };
  if (config.mode == LoopMode::kClosed) {
    for (int32_t c : config.concurrency) {
      StepSpec s = base();
      s.concurrency = c;
      steps.push_back(s);
    }
  } else {
    for (double rate : config.rates) {
      StepSpec s = base();
      s.rate = rate;
      steps.push_back(s);
    }
  }
  return steps;
}

std::string StepName(const StepSpec& s, absl::string_view target) {
  return s.mode == LoopMode::kClosed ? absl::StrCat(target, " c=", s.concurrency)
                                     : absl::StrCat(target, " ", s.rate, "/s");
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunReport> RunLoadgen(const LoadgenConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  RunReport report;
  report.config = config;
  if (config.wait_for_serving_s > 0) {
    for (const std::string& address : {config.address, config.ceiling_address}) {
      if (address.empty()) continue;
      if (absl::Status s = Target::WaitForServing(address, config.transport, config.wait_for_serving_s);
          !s.ok()) {
        return s;
      }
    }
  }

  absl::StatusOr<std::unique_ptr<Target>> server =
      Target::Connect(config.address, config.transport, config.channels, config.connect_timeout_s);
  if (!server.ok()) return server.status();
  absl::StatusOr<ServerDescription> description = (*server)->Describe();
  if (!description.ok()) return description.status();
  report.server = *description;

  std::unique_ptr<Target> ceiling;
  if (!config.ceiling_address.empty()) {
    absl::StatusOr<std::unique_ptr<Target>> c =
        Target::Connect(config.ceiling_address, config.transport, config.channels,
                        config.connect_timeout_s);
    if (!c.ok()) return c.status();
    ceiling = std::move(*c);
    absl::StatusOr<ServerDescription> d = ceiling->Describe();
    if (!d.ok()) return d.status();
    report.has_ceiling = true;
    report.ceiling = *d;
  }

  std::vector<std::unique_ptr<Target>> compare;
  for (const auto& [label, address] : config.compare_addresses) {
    if (config.wait_for_serving_s > 0) {
      if (absl::Status s =
              Target::WaitForServing(address, config.transport, config.wait_for_serving_s);
          !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<std::unique_ptr<Target>> c =
        Target::Connect(address, config.transport, config.channels, config.connect_timeout_s);
    if (!c.ok()) return c.status();
    absl::StatusOr<ServerDescription> d = (*c)->Describe();
    if (!d.ok()) return d.status();
    report.compare.emplace_back(label, *d);
    compare.push_back(*std::move(c));
  }

  absl::StatusOr<std::unique_ptr<LoadWorkload>> workload = CreateLoadWorkload(config.workload);
  if (!workload.ok()) return workload.status();

  // --transport=shm|cuda: the loadgen plays the co-located worker. Declared
  // after the workload, destroyed before it; registered with every server.
  std::unique_ptr<RegionTransport> region;
  std::vector<Target*> targets = {server->get()};
  if (ceiling != nullptr) targets.push_back(ceiling.get());
  for (const auto& c : compare) targets.push_back(c.get());
  if (config.workload.transport != Transport::kInline) {
    const bool return_into_region = config.workload.kv_return == KvReturnMode::kRegion;
    absl::StatusOr<std::unique_ptr<RegionTransport>> made = RegionTransport::Create(
        config.workload.transport, (*workload)->RegionBytesNeeded(return_into_region),
        config.workload.region_copies, config.workload.cuda_device);
    if (!made.ok()) return made.status();
    region = *std::move(made);
    if (absl::Status s = (*workload)->UseRegion(region.get(), return_into_region); !s.ok()) {
      return s;
    }
    for (Target* t : targets) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::RegisterRegionResponse response;
      const grpc::Status s = t->stub(0)->RegisterRegion(&context, region->Registration(), &response);
      if (!s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "registering the loadgen's ", TransportName(config.workload.transport), " region with ",
            t->address(), ": ", s.error_message()));
      }
    }
  }
  for (int64_t i = 0; i < (*workload)->pool_size(); ++i) {
    report.request_wire_bytes += static_cast<int64_t>((*workload)->Request(i).ByteSizeLong());
  }
  report.request_wire_bytes /= std::max<int64_t>(1, (*workload)->pool_size());

  StepOptions options;
  options.duration_s = config.duration_s;
  options.requests = config.requests;
  options.warmup_s = config.warmup_s;
  options.max_outstanding = config.max_outstanding;
  options.deadline_ms = config.transport.deadline_ms;
  options.fetch_kv_fraction = config.workload.fetch_kv_fraction;
  options.release_kv = config.workload.release_kv;
  options.resend_unanswered = config.resend_unanswered;
  options.seed = config.workload.seed;
  options.progress = config.progress;

  if (config.start_at_unix_s > 0) WaitForStartTime(config.start_at_unix_s);
  for (const StepSpec& spec : StepsOf(config)) {
    StepPair pair;
    // The "before" scrape is taken when the warm-up ends, on its own thread so
    // that it never delays a send; "after" once every answer is in.
    absl::StatusOr<MetricSamples> before = absl::UnavailableError("not scraped");
    std::thread before_scrape;
    if (!config.metrics_url.empty()) {
      before_scrape = std::thread([&before, &config] {
        std::this_thread::sleep_for(std::chrono::duration<double>(config.warmup_s));
        before = Scrape(config.metrics_url);
      });
    }
    options.label = StepName(spec, "server");
    absl::StatusOr<StepResult> result = RunStep(**server, **workload, spec, options);
    if (before_scrape.joinable()) before_scrape.join();
    if (!result.ok()) return result.status();
    pair.server = std::move(*result);
    pair.server.target = "server";
    pair.server.backend = report.server.backend;
    if (!config.metrics_url.empty()) pair.server.metrics = JoinMetrics(before, Scrape(config.metrics_url));
    if (ceiling != nullptr) {
      options.label = StepName(spec, "noop");
      absl::StatusOr<StepResult> c = RunStep(*ceiling, **workload, spec, options);
      if (!c.ok()) return c.status();
      pair.has_ceiling = true;
      pair.ceiling = std::move(*c);
      pair.ceiling.target = "ceiling";
      pair.ceiling.backend = report.ceiling.backend;
    }
    if (config.raw_ceiling) {
      // Raw gRPC: the ceiling server (or the server under test) answers
      // VerifyCeiling on its RPC thread.
      StepOptions raw = options;
      raw.ceiling_rpc = true;
      raw.label = StepName(spec, "raw");
      Target& host = ceiling != nullptr ? *ceiling : **server;
      absl::StatusOr<StepResult> r = RunStep(host, **workload, spec, raw);
      if (!r.ok()) return r.status();
      pair.has_raw = true;
      pair.raw = std::move(*r);
      pair.raw.target = "raw";
      pair.raw.backend = "raw gRPC";
    }
    for (size_t i = 0; i < compare.size(); ++i) {
      options.label = StepName(spec, report.compare[i].first);
      absl::StatusOr<StepResult> r = RunStep(*compare[i], **workload, spec, options);
      if (!r.ok()) return r.status();
      pair.compare.push_back(std::move(*r));
      pair.compare.back().target = report.compare[i].first;
      pair.compare.back().backend = report.compare[i].second.backend;
    }
    report.steps.push_back(std::move(pair));
  }
  if (region != nullptr) {
    for (Target* t : targets) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::UnregisterRegionRequest request;
      request.set_name(RegionTransport::RegionName());
      v1::UnregisterRegionResponse response;
      (void)t->stub(0)->UnregisterRegion(&context, request, &response);  // best effort
    }
  }
  return report;
}

int64_t UnexpectedUnverified(const RunReport& report) {
  // A server that declares itself the no-op backend is expected to answer
  // verified=false (a user measuring the transport ceiling directly); any
  // other backend doing so has verified nothing while claiming to.
  if (report.server.backend == "noop") return 0;
  int64_t unverified = 0;
  for (const StepPair& pair : report.steps) unverified += pair.server.unverified;
  return unverified;
}

int ExitCodeFor(const RunReport& report) {
  if (report.total_wrong_answers() > 0 || report.total_kv_mismatches() > 0 ||
      UnexpectedUnverified(report) > 0) {
    return kExitWrongAnswers;
  }
  const int64_t sent = report.total_sent();
  if (sent > 0 && static_cast<double>(report.total_rpc_errors()) / sent >
                      report.config.max_error_fraction) {
    return kExitTooManyErrors;
  }
  return kExitOk;
}

int RunLoadgenMain(const LoadgenConfig& config, std::ostream& out, std::ostream& err) {
  absl::StatusOr<RunReport> report = RunLoadgen(config);
  if (!report.ok()) {
    err << "specverify-loadgen: " << report.status() << "\n";
    return kExitSetupError;
  }
  out << FormatTable(*report);
  for (const StepPair& pair : report->steps) {
    for (const std::string& e : pair.server.error_examples) out << "  error: " << e << "\n";
  }
  if (report->server.backend == "noop") {
    out << "the server under test is the no-op backend: its answers are unverified "
           "(a transport ceiling, not a verification result)\n";
  } else if (const int64_t unverified = UnexpectedUnverified(*report); unverified > 0) {
    out << "the server under test (backend " << report->server.backend << ") answered "
        << unverified << " requests with verified=false: nothing was verified\n";
  }
  out.flush();
  if (!config.json_path.empty()) {
    if (absl::Status s = WriteFile(config.json_path, FormatJson(*report)); !s.ok()) {
      err << "specverify-loadgen: " << s << "\n";
      return kExitSetupError;
    }
  }
  if (!config.csv_path.empty()) {
    if (absl::Status s = WriteFile(config.csv_path, FormatCsv(*report)); !s.ok()) {
      err << "specverify-loadgen: " << s << "\n";
      return kExitSetupError;
    }
  }
  return ExitCodeFor(*report);
}

}  // namespace specverify::loadgen
