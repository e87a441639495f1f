// Greedy verify-and-pack benchmark (issue #4): every CUDA path, the
// dispatcher, CUDA-graph replays, the host-decided pack the server runs for
// greedy chains (greedy_planned_pack.h: device time of its one launch, and
// the host decision's CPU time beside it), the launch floor (empty kernel)
// and the bandwidth floor (device-to-device copy of the same packed bytes),
// side by side over seed 000's grid extended to b <= 4096 and gamma <= 256.
//
// Timing: device time per batch with CUDA events. A spin kernel holds the
// stream while the host queues a chunk of iterations, each between two
// events, so the GPU runs them back to back and an event pair measures one
// batch's device time (kernel work plus the device-side gaps between the
// path's launches), not the host's launch latency. >= 200 samples after
// warm-up; median and p95. Inputs rotate among enough copies that the draft
// KV of all copies exceeds twice the L2 cache (at most 64 copies).
//
// Usage: greedy_bench [--csv out.csv] [--runs N] [--quick]
// Without a CUDA device it says so and exits 0 (a skip, not a failure).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/greedy/bench_kernels.cuh"
#include "kernels/common/cuda_status.h"
#include "kernels/common/status_macros.h"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/greedy/greedy_dispatch.h"
#include "kernels/greedy/greedy_planned_pack.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/workload/greedy_workload.h"

namespace specverify::bench {
namespace {

// Points whose draft KV exceeds this are left out (b=4096 x gamma>=64 x 4 KiB
// and the like: gigabytes per copy, and minutes of device time we do not have).
constexpr int64_t kMaxDraftKvBytes = int64_t{512} << 20;
constexpr int kWarmup = 20;
constexpr int kChunk = 25;           // iterations queued behind one spin
constexpr int64_t kSpinCycles = 2'000'000;  // ~1 ms at 1.98 GHz: longer than queuing a chunk
constexpr int kMaxCopies = 64;

struct Options {
  std::string csv_path = "greedy_bench.csv";
  int runs = 200;
  bool quick = false;
};

struct Stats {
  double median_us = 0, p95_us = 0, mean_us = 0;
};

Stats Summarize(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  Stats s;
  s.median_us = 1000.0 * ms[ms.size() / 2];
  s.p95_us = 1000.0 * ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  double sum = 0;
  for (float v : ms) sum += v;
  s.mean_us = 1000.0 * sum / ms.size();
  return s;
}

// Times `run(copy)` per iteration, copies rotating. See the file comment.
absl::StatusOr<Stats> TimeIt(const std::function<cudaError_t(int)>& run,
                             int copies, int runs, cudaStream_t stream) {
  for (int i = 0; i < kWarmup; ++i) SV_CUDA_RETURN_IF_ERROR(run(i % copies));
  std::vector<cudaEvent_t> events(kChunk + 1);
  for (cudaEvent_t& e : events) SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  std::vector<float> samples;
  int iteration = 0;
  absl::Status status;
  while (static_cast<int>(samples.size()) < runs && status.ok()) {
    status = CudaStatus(LaunchSpinKernel(kSpinCycles, stream), "spin");
    if (!status.ok()) break;
    status = CudaStatus(cudaEventRecord(events[0], stream), "cudaEventRecord");
    for (int i = 0; i < kChunk && status.ok(); ++i) {
      status = CudaStatus(run(iteration++ % copies), "timed launch");
      if (status.ok()) {
        status = CudaStatus(cudaEventRecord(events[i + 1], stream),
                            "cudaEventRecord");
      }
    }
    if (status.ok()) status = CudaStatus(cudaStreamSynchronize(stream), "sync");
    for (int i = 0; i < kChunk && status.ok(); ++i) {
      float ms = 0;
      status = CudaStatus(cudaEventElapsedTime(&ms, events[i], events[i + 1]),
                          "cudaEventElapsedTime");
      samples.push_back(ms);
    }
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  SV_RETURN_IF_ERROR(status);
  return Summarize(std::move(samples));
}

// Mean device time per launch of kChunk launches queued back to back between
// two events (a stream of batches: consecutive launches overlap their
// launch processing); median over chunks.
absl::StatusOr<Stats> TimeBackToBack(const std::function<cudaError_t(int)>& run,
                                     int copies, int runs, cudaStream_t stream) {
  cudaEvent_t start = nullptr, stop = nullptr;
  SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<float> samples;
  absl::Status status;
  int iteration = 0;
  const int chunks = std::max(8, runs / kChunk);
  for (int c = 0; c < chunks && status.ok(); ++c) {
    status = CudaStatus(LaunchSpinKernel(kSpinCycles, stream), "spin");
    if (status.ok()) status = CudaStatus(cudaEventRecord(start, stream), "record");
    for (int i = 0; i < kChunk && status.ok(); ++i) {
      status = CudaStatus(run(iteration++ % copies), "timed launch");
    }
    if (status.ok()) status = CudaStatus(cudaEventRecord(stop, stream), "record");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    if (status.ok()) status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    samples.push_back(ms / kChunk);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  SV_RETURN_IF_ERROR(status);
  return Summarize(std::move(samples));
}

// Device copies of one workload's inputs (rotated) and one output set.
struct BenchBatch {
  std::vector<GreedyDeviceBatch> copies;
  std::vector<DeviceBuffer> buffers;
  int64_t packed_bytes = 0;
  int64_t expected_total_rows = 0;
  // The host's decision for the host-decided pack: its packed offsets on the
  // device (as the server stages them) and the longest accepted run.
  const int32_t* planned_offsets = nullptr;
  int32_t max_accepted = 0;
};

// The host decision the server makes per greedy chain batch (acceptance and
// packed offsets from the tokens), timed on this host's CPU: median over
// `runs` samples of the mean of 100 decisions.
Stats TimeHostDecision(const GreedyWorkload& w, int runs) {
  const int32_t b = w.num_sequences();
  std::vector<int32_t> accepted(b), next(b), offsets(b + 1);
  std::vector<uint8_t> mismatch(b);
  GreedyVerifyParams p;
  p.input = w.input();
  p.input.draft_kv = nullptr;
  p.input.row_bytes = 0;
  p.output = {accepted.data(), next.data(), mismatch.data(), offsets.data(), nullptr};
  constexpr int kReps = 100;
  std::vector<float> ms;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) {
      ReferenceGreedyVerifyRange(p, 0, b);
      ReferencePackedRowOffsets(p);
    }
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    ms.push_back(static_cast<float>(took.count() / kReps));
  }
  return Summarize(std::move(ms));
}

// The packed bytes of the host-decided pack against the fused path's, for
// copy 0 (both write the same output buffer).
absl::Status CheckPlannedAgainstFused(const BenchBatch& bb, const GreedyScratch& scratch,
                                      cudaStream_t stream) {
  if (bb.packed_bytes == 0) return absl::OkStatus();
  const GreedyDeviceBatch& batch = bb.copies[0];
  std::vector<std::byte> fused(bb.packed_bytes), planned(bb.packed_bytes);
  SV_CUDA_RETURN_IF_ERROR(LaunchGreedyVerifyPack(batch, GreedyPath::kFused, scratch, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(fused.data(), batch.params.output.packed_kv,
                                          bb.packed_bytes, cudaMemcpyDeviceToHost, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(batch.params.output.packed_kv, 0, bb.packed_bytes, stream));
  GreedyPlannedPack pack;
  pack.num_sequences = batch.params.input.num_sequences;
  pack.draft_offsets = batch.params.input.draft_offsets;
  pack.packed_row_offsets = bb.planned_offsets;
  pack.draft_kv = batch.params.input.draft_kv;
  pack.row_bytes = batch.params.input.row_bytes;
  pack.packed_kv = batch.params.output.packed_kv;
  pack.max_accepted = bb.max_accepted;
  SV_CUDA_RETURN_IF_ERROR(LaunchGreedyPlannedPack(pack, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(planned.data(), batch.params.output.packed_kv,
                                          bb.packed_bytes, cudaMemcpyDeviceToHost, stream));
  SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (fused != planned) {
    return absl::InternalError("host_decided: packed bytes differ from the fused path's");
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchBatch> Prepare(const GreedyWorkload& w, int64_t row_bytes,
                                   int copies, cudaStream_t stream) {
  BenchBatch bb;
  const int32_t b = w.num_sequences();
  const int64_t rows = w.total_draft_rows();
  auto alloc = [&](size_t bytes) -> absl::StatusOr<void*> {
    SV_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Create(bytes));
    void* p = buf.data();
    bb.buffers.push_back(std::move(buf));
    return p;
  };
  GreedyDeviceBatch base;
  GreedyBatchOutput& out = base.params.output;
  SV_ASSIGN_OR_RETURN(void* accepted, alloc(sizeof(int32_t) * b));
  SV_ASSIGN_OR_RETURN(void* next, alloc(sizeof(int32_t) * b));
  SV_ASSIGN_OR_RETURN(void* mismatch, alloc(b));
  SV_ASSIGN_OR_RETURN(void* offsets_out, alloc(sizeof(int32_t) * (b + 1)));
  out.accepted_lengths = static_cast<int32_t*>(accepted);
  out.next_tokens = static_cast<int32_t*>(next);
  out.mismatch = static_cast<uint8_t*>(mismatch);
  out.packed_row_offsets = static_cast<int32_t*>(offsets_out);
  if (row_bytes > 0) {
    SV_ASSIGN_OR_RETURN(void* packed, alloc(rows * row_bytes));
    out.packed_kv = static_cast<std::byte*>(packed);
  }
  base.total_draft_rows = rows;
  for (int32_t i = 0; i < b; ++i) base.max_gamma = std::max(base.max_gamma, w.gamma(i));
  for (int c = 0; c < copies; ++c) {
    GreedyDeviceBatch batch = base;
    GreedyBatchInput& in = batch.params.input;
    in.num_sequences = b;
    in.row_bytes = row_bytes;
    SV_ASSIGN_OR_RETURN(void* off, alloc(sizeof(int32_t) * (b + 1)));
    SV_ASSIGN_OR_RETURN(void* draft, alloc(sizeof(int32_t) * rows));
    SV_ASSIGN_OR_RETURN(void* target, alloc(sizeof(int32_t) * (rows + b)));
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpy(off, w.draft_offsets.data(),
                                       sizeof(int32_t) * (b + 1),
                                       cudaMemcpyHostToDevice));
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpy(draft, w.draft_tokens.data(),
                                       sizeof(int32_t) * rows,
                                       cudaMemcpyHostToDevice));
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpy(target, w.target_tokens.data(),
                                       sizeof(int32_t) * (rows + b),
                                       cudaMemcpyHostToDevice));
    in.draft_offsets = static_cast<int32_t*>(off);
    in.draft_tokens = static_cast<int32_t*>(draft);
    in.target_tokens = static_cast<int32_t*>(target);
    if (row_bytes > 0) {
      SV_ASSIGN_OR_RETURN(void* kv, alloc(rows * row_bytes));
      SV_CUDA_RETURN_IF_ERROR(LaunchFillPattern(static_cast<std::byte*>(kv),
                                                rows * row_bytes, 77u + c, stream));
      in.draft_kv = static_cast<std::byte*>(kv);
    }
    bb.copies.push_back(batch);
  }
  bb.expected_total_rows = w.expected.packed_row_offsets.back();
  bb.packed_bytes = bb.expected_total_rows * row_bytes;
  SV_ASSIGN_OR_RETURN(void* planned, alloc(sizeof(int32_t) * (b + 1)));
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpy(planned, w.expected.packed_row_offsets.data(),
                                     sizeof(int32_t) * (b + 1), cudaMemcpyHostToDevice));
  bb.planned_offsets = static_cast<const int32_t*>(planned);
  for (int32_t k : w.expected.accepted_lengths) bb.max_accepted = std::max(bb.max_accepted, k);
  SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return bb;
}

// The accepted total the path wrote, against the workload's oracle.
absl::Status CheckTotal(const BenchBatch& bb, const char* what) {
  int32_t total = -1;
  const GreedyBatchOutput& out = bb.copies[0].params.output;
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpy(&total,
                                     out.packed_row_offsets + bb.copies[0].params.input.num_sequences,
                                     sizeof(total), cudaMemcpyDeviceToHost));
  if (total != bb.expected_total_rows) {
    return absl::InternalError(absl::StrCat(what, ": packed total ", total,
                                            " rows, oracle says ",
                                            bb.expected_total_rows));
  }
  return absl::OkStatus();
}

struct Row {
  std::string label;
  Stats stats;
};

absl::Status Run(const Options& opt) {
  cudaDeviceProp prop{};
  SV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t stream = nullptr;
  SV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  SV_ASSIGN_OR_RETURN(GreedyDispatchInfo calibration,
                      CalibrateGreedyDispatch(GreedyCalibrationOptions{}, stream));
  std::printf("dispatch: %s\n", calibration.summary.c_str());
  for (const GreedyCalibrationPoint& p : calibration.measurements) {
    std::printf("  calib pack_bytes=%ld b=%d gamma=%d fused_us=%.2f two_step_us=%.2f\n",
                static_cast<long>(p.pack_bytes), p.num_sequences, p.gamma,
                p.fused_us, p.two_step_us);
  }
  const GreedyDispatcher dispatcher(calibration, 1.0);
  SV_ASSIGN_OR_RETURN(GreedyScratchBuffer scratch,
                      AllocateGreedyScratch(GreedyScratchLimits{}, stream));

  FILE* csv = std::fopen(opt.csv_path.c_str(), "w");
  if (csv == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", opt.csv_path));
  }
  std::fprintf(csv,
               "b,gamma,alpha,row_bytes,packed_bytes,draft_kv_bytes,copies,"
               "path,median_us,p95_us,mean_us,tau_bytes,dispatch_choice\n");
  std::printf("\n%5s %4s %4s %5s %10s | %8s %8s %8s %8s %8s %8s %8s %8s | %8s %8s %8s | %6s"
              " | %8s %8s %6s\n",
              "b", "gam", "alph", "row", "packedKB", "fused", "twostep", "naive2s",
              "dispatch", "g_fused", "g_2step", "copy", "empty", "fus_b2b", "cp_b2b",
              "emp_b2b", "cp/fus", "hostdec", "hd_cpu", "cp/hd");

  std::vector<int> batch_sizes = {1, 4, 16, 32, 256, 1024, 4096};
  std::vector<int> gammas = {4, 8, 16, 32, 64, 128, 256};
  std::vector<double> alphas = {0.3, 0.6, 0.9};
  std::vector<int64_t> rows = {256, 4096};
  if (opt.quick) {
    batch_sizes = {1, 32, 1024};
    gammas = {8, 128};
    alphas = {0.6, 0.9};
  }
  for (int b : batch_sizes) {
    for (int gamma : gammas) {
      for (double alpha : alphas) {
        for (int64_t row_bytes : rows) {
          const int64_t kv_bytes = int64_t{b} * gamma * row_bytes;
          if (kv_bytes > kMaxDraftKvBytes) continue;
          GreedyWorkloadOptions wo;
          wo.num_sequences = b;
          wo.gamma_min = wo.gamma_max = gamma;
          wo.alpha = alpha;
          wo.row_bytes = 0;  // KV is filled on the device
          wo.seed = 4000 + b * 7 + gamma;
          SV_ASSIGN_OR_RETURN(GreedyWorkload w, GenerateGreedyWorkload(wo));
          const int copies = static_cast<int>(std::clamp<int64_t>(
              (2 * int64_t{prop.l2CacheSize} + kv_bytes - 1) / std::max<int64_t>(kv_bytes, 1),
              2, kMaxCopies));
          SV_ASSIGN_OR_RETURN(BenchBatch bb, Prepare(w, row_bytes, copies, stream));
          const GreedyPath choice = dispatcher.Choose(bb.copies[0]);

          std::vector<Row> results;
          // Per-batch event pairs for every label; back-to-back means as well
          // for the paths a server would stream.
          auto time_path = [&](const std::string& label,
                               const std::function<cudaError_t(int)>& fn) -> absl::Status {
            SV_ASSIGN_OR_RETURN(Stats s, TimeIt(fn, copies, opt.runs, stream));
            results.push_back({label, s});
            if (label == "fused" || label == "two_step" || label == "dispatch" ||
                label == "graph_fused" || label == "d2d_copy" || label == "empty_kernel" ||
                label == "host_decided") {
              SV_ASSIGN_OR_RETURN(Stats m, TimeBackToBack(fn, copies, opt.runs, stream));
              results.push_back({label + "_b2b", m});
            }
            return absl::OkStatus();
          };
          for (GreedyPath path : {GreedyPath::kFused, GreedyPath::kTwoStep,
                                  GreedyPath::kNaiveTwoStep}) {
            SV_RETURN_IF_ERROR(time_path(GreedyPathName(path), [&, path](int c) {
              return LaunchGreedyVerifyPack(bb.copies[c], path, scratch.view, stream);
            }));
            SV_RETURN_IF_ERROR(CheckTotal(bb, GreedyPathName(path)));
          }
          SV_RETURN_IF_ERROR(time_path("dispatch", [&](int c) {
            return dispatcher.Launch(bb.copies[c], scratch.view, stream);
          }));
          // Graph replays: one graph per input copy, captured once.
          for (GreedyPath path : {GreedyPath::kFused, GreedyPath::kTwoStep}) {
            std::vector<cudaGraphExec_t> execs(copies);
            for (int c = 0; c < copies; ++c) {
              cudaGraph_t graph = nullptr;
              SV_CUDA_RETURN_IF_ERROR(
                  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
              const cudaError_t launched =
                  LaunchGreedyVerifyPack(bb.copies[c], path, scratch.view, stream);
              SV_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream, &graph));
              SV_CUDA_RETURN_IF_ERROR(launched);
              SV_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&execs[c], graph, 0));
              SV_CUDA_RETURN_IF_ERROR(cudaGraphDestroy(graph));
            }
            SV_RETURN_IF_ERROR(time_path(std::string("graph_") + GreedyPathName(path),
                                         [&](int c) { return cudaGraphLaunch(execs[c], stream); }));
            SV_RETURN_IF_ERROR(CheckTotal(bb, "graph"));
            for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
          }
          if (row_bytes > 0) {
            // What the server runs for a greedy chain batch: the host decided
            // (timed below on the CPU), the device copies the accepted rows.
            SV_RETURN_IF_ERROR(time_path("host_decided", [&](int c) {
              GreedyPlannedPack pack;
              pack.num_sequences = b;
              pack.draft_offsets = bb.copies[c].params.input.draft_offsets;
              pack.packed_row_offsets = bb.planned_offsets;
              pack.draft_kv = bb.copies[c].params.input.draft_kv;
              pack.row_bytes = row_bytes;
              pack.packed_kv = bb.copies[c].params.output.packed_kv;
              pack.max_accepted = bb.max_accepted;
              return LaunchGreedyPlannedPack(pack, stream);
            }));
            SV_RETURN_IF_ERROR(CheckPlannedAgainstFused(bb, scratch.view, stream));
          }
          results.push_back({"host_decision_cpu", TimeHostDecision(w, opt.runs)});
          for (GreedyScanKernel k : {GreedyScanKernel::kNaive, GreedyScanKernel::kBallot}) {
            SV_RETURN_IF_ERROR(time_path(
                k == GreedyScanKernel::kNaive ? "scan_naive" : "scan_ballot",
                [&, k](int c) { return LaunchGreedyVerifyOnly(bb.copies[c], k, stream); }));
          }
          SV_RETURN_IF_ERROR(time_path("d2d_copy", [&](int c) {
            if (bb.packed_bytes == 0) return cudaSuccess;
            return cudaMemcpyAsync(bb.copies[0].params.output.packed_kv,
                                   bb.copies[c].params.input.draft_kv, bb.packed_bytes,
                                   cudaMemcpyDeviceToDevice, stream);
          }));
          SV_RETURN_IF_ERROR(time_path("empty_kernel",
                                       [&](int) { return LaunchEmptyKernel(stream); }));

          auto med = [&](const std::string& label) {
            for (const Row& r : results) if (r.label == label) return r.stats.median_us;
            return 0.0;
          };
          for (const Row& r : results) {
            std::fprintf(csv, "%d,%d,%.2f,%ld,%ld,%ld,%d,%s,%.3f,%.3f,%.3f,%ld,%s\n", b,
                         gamma, alpha, static_cast<long>(row_bytes),
                         static_cast<long>(bb.packed_bytes), static_cast<long>(kv_bytes),
                         copies, r.label.c_str(), r.stats.median_us, r.stats.p95_us,
                         r.stats.mean_us,
                         static_cast<long>(std::min<int64_t>(
                             calibration.dispatch_threshold_bytes, int64_t{1} << 62)),
                         GreedyPathName(choice));
          }
          std::fflush(csv);
          std::printf("%5d %4d %4.1f %5ld %10.1f | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %6.2f"
                      " | %8.2f %8.2f %6.2f\n",
                      b, gamma, alpha, static_cast<long>(row_bytes),
                      bb.packed_bytes / 1024.0, med("fused"), med("two_step"),
                      med("naive_two_step"), med("dispatch"), med("graph_fused"),
                      med("graph_two_step"), med("d2d_copy"), med("empty_kernel"),
                      med("fused_b2b"), med("d2d_copy_b2b"), med("empty_kernel_b2b"),
                      med("fused") > 0 ? med("d2d_copy") / med("fused") : 0.0,
                      med("host_decided"), med("host_decision_cpu"),
                      med("host_decided") > 0 ? med("d2d_copy") / med("host_decided") : 0.0);
          std::fflush(stdout);
        }
      }
    }
  }
  std::fclose(csv);
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

}  // namespace
}  // namespace specverify::bench

int main(int argc, char** argv) {
  specverify::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      opt.csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      opt.runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--quick")) {
      opt.quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--csv PATH] [--runs N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (!specverify::CudaDeviceAvailable()) {
    std::printf("greedy_bench: no CUDA device visible; nothing measured (skip)\n");
    return 0;
  }
  const absl::Status s = specverify::bench::Run(opt);
  if (!s.ok()) {
    std::fprintf(stderr, "greedy_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
