// specverify-latency-breakdown: where a verify round trip goes at
// concurrency 1, against the raw-gRPC ceiling measured in the same run.
//
// Sends Verify and VerifyCeiling alternately on one channel, the same
// request each time (so both see the same machine state, message sizes and
// connection), checks every Verify answer against the workload's oracle, and
// prints p50/p90/p99 of:
//   client round trip of VerifyCeiling (raw gRPC) and of Verify,
//   the server's own stages from ServerTiming: queue, submit (queue + staging
//   + launch), complete (+ device work, copies back, completion hand-off),
//   server total (+ answering), device time of the batch,
// and "added" = Verify p50 - VerifyCeiling p50, the service's overhead beyond
// a plain gRPC round trip (issue #12's c=1 target: <= 40 us with KV none,
// <= 60 us with rows inline).
//
//   specverify-latency-breakdown --address=127.0.0.1:50051 --gamma=8
//       --row-bytes=4096 --sequences-per-request=4 --kv-return=inline
//       --requests=5000 --json=out.json
// (one command line; a backslash ending a // line would continue the comment)
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "kernels/workload/greedy_workload.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051", "server host:port");
ABSL_FLAG(int32_t, gamma, 8, "draft tokens per sequence");
ABSL_FLAG(double, alpha, 0.6, "per-position acceptance probability");
ABSL_FLAG(int64_t, row_bytes, 4096, "KV bytes per draft position (0: none)");
ABSL_FLAG(int32_t, sequences_per_request, 4, "sequences per request");
ABSL_FLAG(std::string, kv_return, "inline", "none | inline | handle");
ABSL_FLAG(int32_t, requests, 3000, "measured Verify (and as many VerifyCeiling) calls");
ABSL_FLAG(int32_t, warmup, 300, "unmeasured calls of each kind first");
ABSL_FLAG(std::string, label, "", "name printed with the results (e.g. the backend)");
ABSL_FLAG(std::string, json, "", "also write the percentiles here");

namespace specverify {
namespace {

struct Series {
  std::string name;
  std::vector<int64_t> ns{};
  int64_t Quantile(double q) const {
    if (ns.empty()) return 0;
    std::vector<int64_t> sorted = ns;
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()));
    std::nth_element(sorted.begin(), sorted.begin() + i, sorted.end());
    return sorted[i];
  }
};

v1::KvReturn ParseKvReturn(const std::string& s) {
  if (s == "none") return v1::KV_RETURN_NONE;
  if (s == "handle") return v1::KV_RETURN_HANDLE;
  return v1::KV_RETURN_INLINE;
}

int Main() {
  const int32_t spr = absl::GetFlag(FLAGS_sequences_per_request);
  const int32_t requests = absl::GetFlag(FLAGS_requests);
  const int32_t warmup = absl::GetFlag(FLAGS_warmup);
  const v1::KvReturn kv_return = ParseKvReturn(absl::GetFlag(FLAGS_kv_return));

  GreedyWorkloadOptions w;
  w.num_sequences = spr * 64;  // 64 distinct requests, cycled
  w.gamma_min = w.gamma_max = absl::GetFlag(FLAGS_gamma);
  w.alpha = absl::GetFlag(FLAGS_alpha);
  w.row_bytes = absl::GetFlag(FLAGS_row_bytes);
  w.seed = 12;
  absl::StatusOr<GreedyWorkload> workload = GenerateGreedyWorkload(w);
  if (!workload.ok()) {
    std::fprintf(stderr, "workload: %s\n", workload.status().ToString().c_str());
    return 2;
  }
  client::VerifierClientOptions co;
  co.address = absl::GetFlag(FLAGS_address);
  co.default_deadline = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<client::VerifierClient>> client =
      client::VerifierClient::Create(co);
  if (!client.ok()) {
    std::fprintf(stderr, "client: %s\n", client.status().ToString().c_str());
    return 2;
  }
  std::vector<v1::VerifyRequest> pool;
  for (int i = 0; i < 64; ++i) {
    client::GreedyRequestOptions r;
    r.first_sequence = i * spr;
    r.num_sequences = spr;
    r.kv_return = kv_return;
    pool.push_back(*client::BuildGreedyRequest(*workload, r));
  }

  Series raw{"raw gRPC round trip (VerifyCeiling)"}, verify{"verify round trip"},
      queue{"server queue"}, submit{"server submit"}, complete{"server complete"},
      total{"server total"}, device{"device (batch)"};
  int wrong = 0;
  int errors = 0;
  for (int i = 0; i < warmup + requests; ++i) {
    const v1::VerifyRequest& request = pool[i % pool.size()];
    const bool measured = i >= warmup;
    absl::Time t0 = absl::Now();
    absl::StatusOr<v1::VerifyResponse> c = (*client)->VerifyCeiling(request);
    const absl::Duration raw_rtt = absl::Now() - t0;
    t0 = absl::Now();
    absl::StatusOr<v1::VerifyResponse> v = (*client)->Verify(request);
    const absl::Duration verify_rtt = absl::Now() - t0;
    if (!c.ok() || !v.ok()) {
      if (++errors <= 3) {
        std::fprintf(stderr, "error: %s\n", (!c.ok() ? c.status() : v.status()).ToString().c_str());
      }
      continue;
    }
    client::GreedyCheckOptions check;
    check.first_sequence = static_cast<int32_t>(i % pool.size()) * spr;
    check.num_sequences = spr;
    check.kv_return = kv_return;
    check.expect_verified = v->verified();
    if (kv_return == v1::KV_RETURN_HANDLE) {
      // The rows stay on the server until their TTL otherwise.
      (void)(*client)->ReleaseKv(v->kv().id());
    }
    // The no-op backend's answers are placeholders (verified = false): timed,
    // not checked.
    if (absl::Status s = v->verified() ? client::CheckGreedyResponse(*workload, check, *v,
                                                                     std::nullopt)
                                       : absl::OkStatus();
        !s.ok()) {
      if (++wrong <= 3) std::fprintf(stderr, "wrong answer: %s\n", s.ToString().c_str());
    }
    if (!measured) continue;
    raw.ns.push_back(absl::ToInt64Nanoseconds(raw_rtt));
    verify.ns.push_back(absl::ToInt64Nanoseconds(verify_rtt));
    const v1::ServerTiming& t = v->timing();
    queue.ns.push_back(t.queue_ns());
    submit.ns.push_back(t.submit_ns());
    complete.ns.push_back(t.complete_ns());
    total.ns.push_back(t.server_ns());
    device.ns.push_back(t.device_ns());
  }

  const std::string label = absl::GetFlag(FLAGS_label);
  std::printf("latency breakdown%s: gamma=%d row_bytes=%ld seqs/request=%d kv=%s, %d pairs\n",
              label.empty() ? "" : absl::StrCat(" [", label, "]").c_str(),
              absl::GetFlag(FLAGS_gamma), static_cast<long>(absl::GetFlag(FLAGS_row_bytes)), spr,
              absl::GetFlag(FLAGS_kv_return).c_str(), static_cast<int>(verify.ns.size()));
  std::printf("%-38s %10s %10s %10s\n", "", "p50 us", "p90 us", "p99 us");
  std::string json = absl::StrCat("{\"label\":\"", label, "\",\"kv_return\":\"",
                                  absl::GetFlag(FLAGS_kv_return), "\",\"row_bytes\":",
                                  absl::GetFlag(FLAGS_row_bytes), ",\"series\":{");
  bool first = true;
  for (const Series* s : {&raw, &verify, &queue, &submit, &complete, &total, &device}) {
    std::printf("%-38s %10.1f %10.1f %10.1f\n", s->name.c_str(), s->Quantile(0.5) / 1e3,
                s->Quantile(0.9) / 1e3, s->Quantile(0.99) / 1e3);
    absl::StrAppend(&json, first ? "" : ",", "\"", s->name, "\":{\"p50_ns\":", s->Quantile(0.5),
                    ",\"p90_ns\":", s->Quantile(0.9), ",\"p99_ns\":", s->Quantile(0.99), "}");
    first = false;
  }
  const int64_t added = verify.Quantile(0.5) - raw.Quantile(0.5);
  std::printf("added over raw gRPC (p50): %.1f us; wrong answers %d, errors %d\n", added / 1e3,
              wrong, errors);
  absl::StrAppend(&json, "},\"added_p50_ns\":", added, ",\"wrong\":", wrong, ",\"errors\":",
                  errors, "}\n");
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return wrong > 0 || errors > 0 ? 1 : 0;
}

}  // namespace
}  // namespace specverify

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return specverify::Main();
}
