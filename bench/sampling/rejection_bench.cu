// Rejection-sampling benchmark (issue #8, part 5): LaunchRejectionSample over
// B in {1, 8, 32, 128}, gamma in {4, 8}, V in {32000, 128256, 151936}, fp32
// probabilities and logits, and fp32 log-probabilities (issue #17) at the
// headline shape B=8, gamma=8, V=151,936 only (or wherever --only logprobs,...
// asks), built from the same seed as the probabilities (log-softmax of the
// same logits) so the two are compared on the same distributions and draft
// tokens in one run; side by side with two floors measured in the same
// run: the bytes the algorithm must read (a streaming-read kernel over exactly
// those rows, same rotation, the faster of two block layouts) and an empty
// kernel launch. Every shape is timed twice, in turns (TimeInTurns): with the
// merge on the device (cuda_rejection) and with the race winners left in
// slots for the host to fold, as the server runs it
// (cuda_rejection_host_merge); the two must give the same tokens. Extra
// rows: the full-row validation option, and top-k/top-p on logits.
//
// Timing: device time per batch with CUDA events. A spin kernel holds the
// stream while the host queues a chunk of iterations, each between two
// events, so the GPU runs them back to back and an event pair measures one
// batch's device time, not the host's launch latency. >= 200 samples after
// 20 warm-up launches; median and p95. Inputs rotate among enough copies that
// all copies together exceed twice the 50 MB L2 (at most 64 copies).
//
// Usage: rejection_bench [--csv out.csv] [--runs N] [--quick]
//                        [--only probabilities|logits|logprobs,B,GAMMA,V] [--blocks-per-sm N]
//                        [--dtype fp32|bf16|fp16] [--filter-slices N] [--top-k K] [--top-p P]
//                        [--row-chunks N] [--shape peaked|flat|disjoint|identical|mixed] [--graph]
//                        [--caller-top-k K]
// --shape sets the rows' distributions (default peaked, draft noise 1);
// mixed gives sequence i shape i % 4, the load generator's served workload.
// --caller-top-k K stores probability and log-probability rows filtered to
// their K most likely tokens, renormalized (an engine that applies top-k
// before sending rows; the kind is reported as e.g. "probabilities_top50");
// logits rows are unchanged.
// --dtype stores the rows in that type (default fp32); the kind is then
// reported as e.g. "logits_bf16" and the read floor reads the same bytes.
// The top-k 50 + top-p 0.9 row runs in the full sweep and with --only at
// B=8, gamma=8, V=151936 logits (with --only logits,B,8,151936: at that B);
// --top-k K / --top-p P change its rules (0 / 1: that rule off);
// --filter-slices N (1-8) fixes the filter's blocks per row instead of the
// launcher's choice, which the row reports. --row-chunks N (1-8) fixes the
// consecutive chunks of a row each normalizer-pass block takes (logits; the
// full-row check) instead of the launcher's choice, printed with each row.
// Without a CUDA device it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_finish.h"
#include "kernels/sampling/rejection_sample.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/workload/sampling_workload.h"

namespace specverify::bench {
namespace {

#define BENCH_CUDA(expr)                                                                       \
  do {                                                                                         \
    const cudaError_t bench_error_ = (expr);                                                   \
    if (bench_error_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                      \
                   cudaGetErrorString(bench_error_));                                          \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr int kWarmup = 20;
constexpr int kChunk = 25;
constexpr int64_t kSpinCycles = 2'000'000;  // ~1 ms: longer than the host needs to queue a chunk
constexpr int kMaxCopies = 64;
constexpr int64_t kRotationBytes = int64_t{100} << 20;  // 2 x the H100's 50 MB L2
constexpr int32_t kUniqueSequences = 4;  // generated; the batch tiles them (new sequence indices)

__global__ void EmptyKernel() {}

__global__ void SpinKernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Streams `rows` rows of `row_floats` floats (row r at row_ptrs[r]) and
// writes one sum per block: the read floor of the bytes the sampler must
// touch. Each block reads a share of one row (blocks_per_row shares), every
// thread kFloorLoadsInFlight 16-byte loads before it adds any. The rows are
// the sampler's own, each once (FloorRows): until 2026-11-27 the logits
// floor read the target rows twice instead of reading the draft rows, and
// blocks reading a row and its repeat at once let DRAM serve both (fp32
// B=32 "read" 323 MB in 65.8 us, 4.9 TB/s).
constexpr int kFloorThreads = 256;
constexpr int kFloorLoadsInFlight = 8;
constexpr int32_t kFloorQuadsPerBlock = kFloorThreads * kFloorLoadsInFlight;

__global__ void __launch_bounds__(kFloorThreads) ReadRowsKernel(const float* const* __restrict__ row_ptrs,
                                                                int32_t row_floats, int32_t blocks_per_row,
                                                                float* __restrict__ sink) {
  const int32_t row = blockIdx.x / blocks_per_row;
  const int32_t part = blockIdx.x % blocks_per_row;
  const float4* p = reinterpret_cast<const float4*>(row_ptrs[row]);
  const int32_t quads = row_floats / 4;
  const int32_t per = (quads + blocks_per_row - 1) / blocks_per_row;
  const int32_t end = min(quads, (part + 1) * per);
  float acc = 0.0f;
  for (int32_t q0 = part * per + threadIdx.x; q0 < end; q0 += kFloorQuadsPerBlock) {
    float4 v[kFloorLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kFloorLoadsInFlight; ++u) {
      const int32_t q = q0 + u * kFloorThreads;
      v[u] = q < end ? __ldg(p + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kFloorLoadsInFlight; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (acc == 123.456f) sink[blockIdx.x] = acc;  // keeps the loads; never true for these inputs
}

struct Options {
  std::string csv_path = "rejection_bench.csv";
  int runs = 200;
  bool quick = false;
  // --only KIND,B,GAMMA,V: one configuration (profiling); --blocks-per-sm N.
  std::string only_kind;
  int32_t only_b = 0, only_gamma = 0, only_vocab = 0;
  int32_t blocks_per_sm = 0;
  int32_t filter_slices = 0;
  int32_t row_chunks = 0;  // --row-chunks N: chunks per row-pass block (0: the launcher's choice)
  int32_t top_k = 50;    // the filtered row's rules (0 / 1.0: that rule off)
  float top_p = 0.9f;
  SampleDtype dtype = SampleDtype::kFloat32;
  std::string dtype_suffix;  // "" for fp32, "_bf16", "_fp16"
  // --shape: the rows' distributions (the workload's DistributionShape).
  // Disjoint rows put half of each row at probability 0 (log-probabilities
  // about -1e4): the race's blocks over that half never find an entrant.
  DistributionShape shape = DistributionShape::kPeaked;
  // --caller-top-k K: (log-)probability rows filtered to their top K (0: not).
  int32_t caller_top_k = 0;
  // --graph: also time the host-merged launches replayed from a CUDA graph
  // captured once per input copy (what a server that keeps graphs would run).
  bool graph = false;
};

struct Stats {
  double median_us = 0, p95_us = 0, mean_us = 0;
};

Stats StatsOf(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  Stats s;
  s.median_us = 1000.0 * ms[ms.size() / 2];
  s.p95_us = 1000.0 * ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  double sum = 0;
  for (float v : ms) sum += v;
  s.mean_us = 1000.0 * sum / ms.size();
  return s;
}

// Several launch sequences timed in turns, a chunk of kChunk batches each, so
// that every one sees the same stretch of the device's clocks and power
// state: timed one after the other, fp32 logits B=128's host merge (timed
// second) read 5-15 us behind its device merge on the H200; in turns the two
// are equal (bench/sampling/results/2026-11-29-merge-order).
std::vector<Stats> TimeInTurns(const std::vector<std::function<void(int)>>& runs_of, int copies, int runs,
                               cudaStream_t stream) {
  for (const auto& run : runs_of) {
    for (int i = 0; i < kWarmup; ++i) run(i % copies);
  }
  std::vector<cudaEvent_t> events(kChunk + 1);
  for (cudaEvent_t& e : events) BENCH_CUDA(cudaEventCreate(&e));
  std::vector<std::vector<float>> ms(runs_of.size());
  std::vector<int> iteration(runs_of.size(), 0);
  while (static_cast<int>(ms.back().size()) < runs) {
    for (size_t f = 0; f < runs_of.size(); ++f) {
      SpinKernel<<<1, 1, 0, stream>>>(kSpinCycles);
      BENCH_CUDA(cudaGetLastError());
      BENCH_CUDA(cudaEventRecord(events[0], stream));
      for (int i = 0; i < kChunk; ++i) {
        runs_of[f](iteration[f]++ % copies);
        BENCH_CUDA(cudaEventRecord(events[i + 1], stream));
      }
      BENCH_CUDA(cudaStreamSynchronize(stream));
      for (int i = 0; i < kChunk; ++i) {
        float t = 0;
        BENCH_CUDA(cudaEventElapsedTime(&t, events[i], events[i + 1]));
        ms[f].push_back(t);
      }
    }
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  std::vector<Stats> stats;
  for (std::vector<float>& m : ms) stats.push_back(StatsOf(std::move(m)));
  return stats;
}

Stats TimeIt(const std::function<void(int)>& run, int copies, int runs, cudaStream_t stream) {
  return TimeInTurns({run}, copies, runs, stream)[0];
}

template <typename T>
T* DeviceCopy(const T* host, size_t count) {
  T* d = nullptr;
  BENCH_CUDA(cudaMalloc(&d, std::max<size_t>(1, count) * sizeof(T)));
  if (count > 0) BENCH_CUDA(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// A batch of B sequences tiled from a few generated ones.
struct HostBatch {
  std::vector<int32_t> offsets, tokens;
  std::vector<std::byte> target, draft;
  std::vector<SequenceSamplingParams> sequences;
  RejectionBatchInput input;
};

HostBatch Tile(const SamplingWorkload& w, int32_t b) {
  HostBatch h;
  const int64_t row_bytes = int64_t{w.options.vocab_size} * SampleDtypeBytes(w.options.dtype);
  h.offsets.push_back(0);
  for (int32_t i = 0; i < b; ++i) {
    const int32_t u = i % w.num_sequences();
    const int32_t first = w.draft_offsets[u];
    const int32_t gamma = w.gamma(u);
    h.tokens.insert(h.tokens.end(), w.draft_tokens.begin() + first, w.draft_tokens.begin() + first + gamma);
    h.offsets.push_back(h.offsets.back() + gamma);
    const auto t0 = w.target_values.begin() + (int64_t{first} + u) * row_bytes;
    h.target.insert(h.target.end(), t0, t0 + (gamma + 1) * row_bytes);
    if (w.options.has_draft_probs) {
      const auto d0 = w.draft_values.begin() + int64_t{first} * row_bytes;
      h.draft.insert(h.draft.end(), d0, d0 + gamma * row_bytes);
    }
    SequenceSamplingParams s = w.sequences[u];
    s.sequence_index = i;  // distinct random numbers per tiled sequence
    h.sequences.push_back(s);
  }
  h.input = w.input();
  h.input.num_sequences = b;
  h.input.total_draft_tokens = h.offsets.back();
  h.input.draft_offsets = h.offsets.data();
  h.input.draft_tokens = h.tokens.data();
  h.input.target_values = h.target.data();
  h.input.draft_values = w.options.has_draft_probs ? h.draft.data() : nullptr;
  h.input.sequences = h.sequences.data();
  return h;
}

struct DeviceCopySet {
  std::vector<RejectionBatchInput> inputs;
  std::vector<void*> owned;
};

DeviceCopySet Upload(const HostBatch& h, int copies) {
  DeviceCopySet set;
  for (int c = 0; c < copies; ++c) {
    RejectionBatchInput in = h.input;
    in.draft_offsets = DeviceCopy(h.offsets.data(), h.offsets.size());
    in.draft_tokens = DeviceCopy(h.tokens.data(), h.tokens.size());
    in.target_values = DeviceCopy(h.target.data(), h.target.size());
    in.draft_values = h.draft.empty() ? nullptr : DeviceCopy(h.draft.data(), h.draft.size());
    in.sequences = DeviceCopy(h.sequences.data(), h.sequences.size());
    set.owned.insert(set.owned.end(), {const_cast<int32_t*>(in.draft_offsets), const_cast<int32_t*>(in.draft_tokens),
                                       const_cast<void*>(in.target_values), const_cast<void*>(in.draft_values),
                                       const_cast<SequenceSamplingParams*>(in.sequences)});
    set.inputs.push_back(in);
  }
  return set;
}

// The rows the sampler must read, each once, for every copy (copy c's at
// [c * rows, (c + 1) * rows)): probabilities and log-probabilities one target
// and one draft row per sequence (the rows at its first rejection; which
// ones does not change the bytes), logits every target and draft row, which
// the normalizers need.
std::vector<const float*> FloorRows(const DeviceCopySet& set, int32_t b, int32_t gamma, int64_t row_bytes,
                                    bool all_rows) {
  std::vector<const float*> rows;
  for (const RejectionBatchInput& in : set.inputs) {
    const auto row = [&](const void* base, int64_t r) {
      return reinterpret_cast<const float*>(static_cast<const char*>(base) + r * row_bytes);
    };
    const int64_t target_rows = all_rows ? int64_t{b} * (gamma + 1) : b;
    const int64_t draft_rows = all_rows ? int64_t{b} * gamma : b;
    for (int64_t r = 0; r < target_rows; ++r) rows.push_back(row(in.target_values, all_rows ? r : r * (gamma + 1)));
    if (in.draft_values == nullptr) {  // the workloads here always store draft rows
      std::fprintf(stderr, "read floor: the batch has no draft rows\n");
      std::exit(1);
    }
    for (int64_t r = 0; r < draft_rows; ++r) rows.push_back(row(in.draft_values, all_rows ? r : r * gamma));
  }
  return rows;
}

struct Row {
  std::string kind, path;
  int32_t b, gamma, vocab, copies, blocks_per_sequence;
  int64_t floor_bytes;
  Stats stats;
};

int Main(const Options& opt) {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("rejection_bench: no CUDA device visible; nothing measured (skip)\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<int32_t> batch_sizes = opt.quick ? std::vector<int32_t>{1, 8} : std::vector<int32_t>{1, 8, 32, 128};
  std::vector<int32_t> gammas = opt.quick ? std::vector<int32_t>{8} : std::vector<int32_t>{4, 8};
  std::vector<int32_t> vocabs = opt.quick ? std::vector<int32_t>{151936}
                                          : std::vector<int32_t>{32000, 128256, 151936};
  if (opt.only_b > 0) {
    batch_sizes = {opt.only_b};
    gammas = {opt.only_gamma};
    vocabs = {opt.only_vocab};
  }
  const int32_t max_b = *std::max_element(batch_sizes.begin(), batch_sizes.end());
  const int32_t max_gamma = *std::max_element(gammas.begin(), gammas.end());
  const int32_t max_v = *std::max_element(vocabs.begin(), vocabs.end());
  RejectionScratchLimits limits{max_b, max_b * max_gamma, max_v};
  const size_t scratch_bytes = RejectionScratchBytes(limits);
  void* scratch_memory = nullptr;
  BENCH_CUDA(cudaMalloc(&scratch_memory, scratch_bytes));
  RejectionScratch scratch;
  BENCH_CUDA(InitRejectionScratch(scratch_memory, scratch_bytes, limits, stream, &scratch));
  if (opt.blocks_per_sm > 0) scratch.race_blocks_per_sm = opt.blocks_per_sm;
  scratch.filter_slices = opt.filter_slices;
  scratch.row_pass_chunks_per_block = opt.row_chunks;
  RejectionBatchOutput out;
  BENCH_CUDA(cudaMalloc(&out.accepted_lengths, max_b * sizeof(int32_t)));
  BENCH_CUDA(cudaMalloc(&out.next_tokens, max_b * sizeof(int32_t)));
  BENCH_CUDA(cudaMalloc(&out.mismatch, max_b));
  BENCH_CUDA(cudaMalloc(&out.status_codes, max_b * sizeof(int32_t)));
  BENCH_CUDA(cudaMalloc(&out.error_positions, max_b * sizeof(int32_t)));
  // The host-merged outputs: the same per-sequence arrays plus race slots.
  RejectionBatchOutput host_merged = out;
  const int64_t slot_capacity = RejectionRaceSlotsBound(scratch.limits, scratch.num_sms);
  BENCH_CUDA(cudaMalloc(&host_merged.race_slots, slot_capacity * sizeof(RejectionRaceSlot)));
  float* sink = nullptr;
  BENCH_CUDA(cudaMalloc(&sink, 1 << 20));

  std::vector<Row> rows;
  const Stats empty = TimeIt([&](int) { EmptyKernel<<<1, 32, 0, stream>>>(); }, 1, opt.runs, stream);
  std::printf("empty kernel launch: median %.2f us, p95 %.2f us\n", empty.median_us, empty.p95_us);
  rows.push_back(Row{"-", "empty_kernel", 0, 0, 0, 1, 0, 0, empty});

  // Headline medians of probabilities and log-probabilities, for the ratio
  // printed at the end (issue #17's target: log-probabilities within 10%).
  std::map<std::string, double> headline_median;
  for (SampleValueKind kind :
       {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
    const bool log_probs = kind == SampleValueKind::kLogProbabilities;
    const std::string base_kind_name = kind == SampleValueKind::kProbabilities ? "probabilities"
                                       : log_probs                             ? "logprobs"
                                                                               : "logits";
    if (!opt.only_kind.empty() && opt.only_kind != base_kind_name) continue;
    const bool caller_filtered = opt.caller_top_k > 0 && kind != SampleValueKind::kLogits;
    const std::string kind_name =
        base_kind_name + opt.dtype_suffix + (caller_filtered ? "_top" + std::to_string(opt.caller_top_k) : "");
    for (int32_t vocab : vocabs) {
      for (int32_t gamma : gammas) {
        SamplingWorkloadOptions o;
        o.num_sequences = kUniqueSequences;
        o.vocab_size = vocab;
        o.gamma_min = o.gamma_max = gamma;
        o.kind = kind;
        o.dtype = opt.dtype;
        o.shape = opt.shape;
        if (caller_filtered) o.caller_top_k = opt.caller_top_k;
        o.draft_noise = 1.0f;
        o.seed = 2026 + vocab + gamma;
        auto w = GenerateSamplingWorkload(o);
        if (!w.ok()) {
          std::fprintf(stderr, "workload: %s\n", w.status().ToString().c_str());
          return 1;
        }
        for (int32_t b : batch_sizes) {
          // Log-probabilities: the headline shape only, unless asked for with --only.
          if (log_probs && opt.only_kind.empty() && !(b == 8 && gamma == 8 && vocab == 151936)) continue;
          HostBatch h = Tile(*w, b);
          RejectionHostOutputs host_check(b, 0);
          RejectionLimits validate_limits;
          if (auto st = ValidateRejectionBatch(RejectionSampleParams{h.input, host_check.view()}, validate_limits);
              !st.ok()) {
            std::fprintf(stderr, "batch: %s\n", st.ToString().c_str());
            return 1;
          }
          const int64_t batch_bytes = static_cast<int64_t>(h.target.size() + h.draft.size());
          const int copies = static_cast<int>(std::clamp<int64_t>((kRotationBytes + batch_bytes - 1) / batch_bytes, 1,
                                                                  kMaxCopies));
          DeviceCopySet set = Upload(h, copies);
          const int32_t g = RejectionRaceBlocksPerSequence(b, vocab, scratch.num_sms, scratch.race_blocks_per_sm);

          // The floor: probabilities and log-probabilities read 2 rows per
          // sequence (the target row and the draft row at k); logits read all
          // 2*gamma+1 rows for the normalizers.
          const bool two_rows = kind != SampleValueKind::kLogits;
          const int32_t rows_read = two_rows ? 2 * b : (2 * gamma + 1) * b;
          // The floor kernel reads floats: a row of V half-precision values is V / 2 of them.
          const int32_t element_bytes = static_cast<int32_t>(SampleDtypeBytes(opt.dtype));
          const int32_t floor_row_floats = vocab * element_bytes / 4;
          const std::vector<const float*> floor_rows =
              FloorRows(set, b, gamma, int64_t{vocab} * element_bytes, !two_rows);
          const float** d_floor_rows = DeviceCopy(floor_rows.data(), floor_rows.size());
          const int64_t floor_bytes = int64_t{rows_read} * vocab * element_bytes +
                                      (two_rows ? int64_t{b} * gamma * 2 * 32 : 0);
          // Two layouts of the floor kernel, the faster taken: whole rows per
          // block (few long blocks: best up to B=32) and slices of
          // kFloorQuadsPerBlock (many short blocks: best for long batches,
          // where whole rows read at ~2.8 TB/s on the H100, slower than the
          // normalizer pass itself; 2026-11-26).
          const int32_t floor_layouts[2] = {
              std::max(1, (4 * prop.multiProcessorCount + rows_read - 1) / rows_read),
              std::max(1, (floor_row_floats / 4 + kFloorQuadsPerBlock - 1) / kFloorQuadsPerBlock)};

          auto launch = [&](int c, bool full_rows) {
            RejectionSampleParams p{set.inputs[c], out};
            p.input.validate_full_rows = full_rows;
            BENCH_CUDA(LaunchRejectionSample(p, scratch, stream));
          };
          BENCH_CUDA(RejectionRaceSlotsPerSequence(set.inputs[0], scratch, &host_merged.race_slots_per_sequence));
          if (int64_t{b} * host_merged.race_slots_per_sequence > slot_capacity) {
            std::fprintf(stderr, "race slots: %d x %d > %lld\n", b, host_merged.race_slots_per_sequence,
                         static_cast<long long>(slot_capacity));
            return 1;
          }
          auto launch_host_merged = [&](int c) {
            BENCH_CUDA(LaunchRejectionSample(RejectionSampleParams{set.inputs[c], host_merged}, scratch, stream));
          };
          const std::vector<Stats> merges =
              TimeInTurns({[&](int c) { launch(c, false); }, launch_host_merged}, copies, opt.runs, stream);
          const Stats ours = merges[0];
          const Stats ours_host_merged = merges[1];
          Stats ours_graph;
          if (opt.graph) {
            std::vector<cudaGraphExec_t> execs(copies);
            for (int c = 0; c < copies; ++c) {
              cudaGraph_t graph = nullptr;
              BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
              launch_host_merged(c);
              BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
              BENCH_CUDA(cudaGraphInstantiate(&execs[c], graph, 0));
              BENCH_CUDA(cudaGraphDestroy(graph));
            }
            ours_graph = TimeIt([&](int c) { BENCH_CUDA(cudaGraphLaunch(execs[c], stream)); }, copies, opt.runs, stream);
            // Host time per batch (the stream held by a spin kernel, so no
            // launch waits for the device): the launches themselves; a
            // pre-built graph's launch; and what a server whose kernel
            // arguments change every batch would do: capture the launches,
            // update an instantiated graph from the capture, launch it.
            const auto host_us = [&](const std::function<void(int)>& step) {
              constexpr int kSteps = 100;
              SpinKernel<<<1, 1, 0, stream>>>(20 * kSpinCycles);
              BENCH_CUDA(cudaGetLastError());
              const auto t0 = std::chrono::steady_clock::now();
              for (int n = 0; n < kSteps; ++n) step(n % copies);
              const auto t1 = std::chrono::steady_clock::now();
              BENCH_CUDA(cudaStreamSynchronize(stream));
              return std::chrono::duration<double, std::micro>(t1 - t0).count() / kSteps;
            };
            const auto capture_update_launch = [&](int c) {
              cudaGraph_t graph = nullptr;
              BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
              launch_host_merged(c);
              BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
              cudaGraphExecUpdateResultInfo info{};
              BENCH_CUDA(cudaGraphExecUpdate(execs[0], graph, &info));
              BENCH_CUDA(cudaGraphDestroy(graph));
              BENCH_CUDA(cudaGraphLaunch(execs[0], stream));
            };
            for (int round = 0; round < 3; ++round) {
              const double direct_host = host_us(launch_host_merged);
              const double replay_host = host_us([&](int c) { BENCH_CUDA(cudaGraphLaunch(execs[c], stream)); });
              const double update_host = host_us(capture_update_launch);
              std::printf("%-13s B=%-3d gamma=%d V=%-6d host us per batch: stream launches %.2f | graph launch %.2f | "
                          "capture + update + launch %.2f\n",
                          kind_name.c_str(), b, gamma, vocab, direct_host, replay_host, update_host);
            }
            const Stats updated = TimeIt(capture_update_launch, copies, opt.runs, stream);
            std::printf("%-13s B=%-3d gamma=%d V=%-6d capture + update + launch, device: median %7.2f us p95 %7.2f\n",
                        kind_name.c_str(), b, gamma, vocab, updated.median_us, updated.p95_us);
            for (cudaGraphExec_t e : execs) BENCH_CUDA(cudaGraphExecDestroy(e));
            std::printf("%-13s B=%-3d gamma=%d V=%-6d host merge as a graph replay: median %7.2f us p95 %7.2f\n",
                        kind_name.c_str(), b, gamma, vocab, ours_graph.median_us, ours_graph.p95_us);
          }
          Stats floor;
          for (int32_t blocks_per_row : floor_layouts) {
            const Stats layout = TimeIt(
                [&](int c) {
                  ReadRowsKernel<<<rows_read * blocks_per_row, kFloorThreads, 0, stream>>>(
                      d_floor_rows + int64_t{c} * rows_read, floor_row_floats, blocks_per_row, sink);
                },
                copies, opt.runs, stream);
            if (floor.median_us == 0 || layout.median_us < floor.median_us) floor = layout;
          }
          rows.push_back(Row{kind_name, "cuda_rejection", b, gamma, vocab, copies, g, floor_bytes, ours});
          rows.push_back(Row{kind_name, "cuda_rejection_host_merge", b, gamma, vocab, copies,
                             host_merged.race_slots_per_sequence, floor_bytes, ours_host_merged});
          rows.push_back(Row{kind_name, "read_floor", b, gamma, vocab, copies, 0, floor_bytes, floor});
          if (opt.graph) {
            rows.push_back(Row{kind_name, "cuda_rejection_host_merge_graph", b, gamma, vocab, copies,
                               host_merged.race_slots_per_sequence, floor_bytes, ours_graph});
          }
          const bool headline = b == 8 && gamma == 8 && vocab == 151936;
          if (headline) {
            headline_median[kind_name] = ours.median_us;
            headline_median[kind_name + "_host_merge"] = ours_host_merged.median_us;
          }
          if (headline || (!opt.quick && b == 32 && gamma == 8 && vocab == 128256)) {
            const Stats full = TimeIt([&](int c) { launch(c, true); }, copies, opt.runs, stream);
            rows.push_back(Row{kind_name, "cuda_rejection_full_row_check", b, gamma, vocab, copies, g, floor_bytes, full});
          }
          if (headline && kind == SampleValueKind::kProbabilities && opt.only_b == 0) {
            // The launcher's one tuning knob, swept in the same run: race
            // blocks per SM, up to the 2 the kernel is compiled for (the
            // launcher caps any larger request there).
            const int32_t chosen = scratch.race_blocks_per_sm;
            for (int32_t bps = 1; bps <= 2; ++bps) {
              scratch.race_blocks_per_sm = bps;
              const Stats swept = TimeIt([&](int c) { launch(c, false); }, copies, opt.runs, stream);
              const int32_t gs = RejectionRaceBlocksPerSequence(b, vocab, scratch.num_sms, bps);
              rows.push_back(Row{kind_name, "cuda_rejection_bps" + std::to_string(bps), b, gamma, vocab, copies,
                                 gs, floor_bytes, swept});
              std::printf("%-13s B=%-3d gamma=%d V=%-6d race blocks/SM %d (G=%d): median %7.2f us p95 %7.2f\n",
                          kind_name.c_str(), b, gamma, vocab, bps, gs, swept.median_us, swept.p95_us);
            }
            scratch.race_blocks_per_sm = chosen;
          }
          // Outcomes must be clean (no error codes) for the timing to mean
          // anything, and both merges must give the same tokens.
          RejectionHostOutputs merged[2] = {RejectionHostOutputs(b, 0), RejectionHostOutputs(b, 0)};
          for (int m = 0; m < 2; ++m) {
            const RejectionBatchOutput& o = m == 0 ? out : host_merged;
            if (m == 0) {
              launch(0, false);
            } else {
              launch_host_merged(0);
            }
            BENCH_CUDA(cudaStreamSynchronize(stream));
            RejectionBatchOutput h = merged[m].view();
            BENCH_CUDA(cudaMemcpy(h.accepted_lengths, o.accepted_lengths, b * sizeof(int32_t), cudaMemcpyDeviceToHost));
            BENCH_CUDA(cudaMemcpy(h.next_tokens, o.next_tokens, b * sizeof(int32_t), cudaMemcpyDeviceToHost));
            BENCH_CUDA(cudaMemcpy(h.mismatch, o.mismatch, b, cudaMemcpyDeviceToHost));
            BENCH_CUDA(cudaMemcpy(h.status_codes, o.status_codes, b * sizeof(int32_t), cudaMemcpyDeviceToHost));
            BENCH_CUDA(cudaMemcpy(h.error_positions, o.error_positions, b * sizeof(int32_t), cudaMemcpyDeviceToHost));
            if (m == 1) {
              std::vector<RejectionRaceSlot> slots(static_cast<size_t>(b) * o.race_slots_per_sequence);
              BENCH_CUDA(cudaMemcpy(slots.data(), o.race_slots, slots.size() * sizeof(RejectionRaceSlot),
                                    cudaMemcpyDeviceToHost));
              FinishRejectionOutcomes(b, slots.data(), o.race_slots_per_sequence, h);
            }
          }
          for (int32_t i = 0; i < b; ++i) {
            if (merged[0].status_codes[i] != kRejectionOk || merged[1].status_codes[i] != kRejectionOk) {
              std::fprintf(stderr, "sequence %d: code %d (device merge) / %d (host merge)\n", i,
                           merged[0].status_codes[i], merged[1].status_codes[i]);
              return 1;
            }
            if (merged[0].next_tokens[i] != merged[1].next_tokens[i] ||
                merged[0].accepted_lengths[i] != merged[1].accepted_lengths[i]) {
              std::fprintf(stderr, "sequence %d: the merges differ (k %d next %d against k %d next %d)\n", i,
                           merged[0].accepted_lengths[i], merged[0].next_tokens[i], merged[1].accepted_lengths[i],
                           merged[1].next_tokens[i]);
              return 1;
            }
          }
          // Chunks per normalizer-pass block (logits; 0: no pass).
          const int64_t pass_rows = int64_t{b} * (2 * gamma + 1);
          const int32_t chunks = rejection::NumChunks(vocab);
          const int32_t row_chunks = kind != SampleValueKind::kLogits ? 0
                                     : opt.row_chunks > 0
                                         ? std::min(opt.row_chunks, chunks)
                                         : RejectionRowPassChunksPerBlock(opt.dtype, pass_rows, chunks, scratch.num_sms);
          std::printf("%-13s B=%-3d gamma=%d V=%-6d G=%-3d copies=%-2d  ours median %7.2f us p95 %7.2f | host merge "
                      "%7.2f us p95 %7.2f | read floor %6.2f us (%.1f MB) | launch %.2f us | row chunks %d\n",
                      kind_name.c_str(), b, gamma, vocab, g, copies, ours.median_us, ours.p95_us,
                      ours_host_merged.median_us, ours_host_merged.p95_us, floor.median_us, floor_bytes / 1e6,
                      empty.median_us, row_chunks);
          std::fflush(stdout);
          for (void* p : set.owned) cudaFree(p);
          cudaFree(d_floor_rows);
        }
        if (kind == SampleValueKind::kLogits && gamma == 8 && vocab == 151936) {
          // Top-k then top-p on the logits (50 and 0.9 unless --top-k /
          // --top-p say otherwise), B = 8 or --only's B: the filter's cost.
          const int32_t fb = opt.only_b > 0 ? opt.only_b : 8;
          SamplingWorkloadOptions f = o;
          f.top_k = opt.top_k;
          f.top_p = opt.top_p;
          auto wf = GenerateSamplingWorkload(f);
          HostBatch h = Tile(*wf, fb);
          const int64_t filtered_bytes = static_cast<int64_t>(h.target.size() + h.draft.size());
          const int filtered_copies =
              static_cast<int>(std::clamp<int64_t>((kRotationBytes + filtered_bytes - 1) / filtered_bytes, 1, 64));
          DeviceCopySet set = Upload(h, filtered_copies);
          RejectionBatchOutput filtered_host_merged = host_merged;
          BENCH_CUDA(
              RejectionRaceSlotsPerSequence(set.inputs[0], scratch, &filtered_host_merged.race_slots_per_sequence));
          const std::vector<Stats> filtered_merges = TimeInTurns(
              {[&](int c) {
                 BENCH_CUDA(LaunchRejectionSample(RejectionSampleParams{set.inputs[c], out}, scratch, stream));
               },
               [&](int c) {
                 BENCH_CUDA(
                     LaunchRejectionSample(RejectionSampleParams{set.inputs[c], filtered_host_merged}, scratch, stream));
               }},
              filtered_copies, opt.runs, stream);
          const Stats filtered = filtered_merges[0];
          const Stats filtered_host = filtered_merges[1];
          char path[64];
          std::snprintf(path, sizeof(path), "cuda_rejection_topk%d_topp%g", opt.top_k, opt.top_p);
          const int32_t fg = RejectionRaceBlocksPerSequence(fb, vocab, scratch.num_sms, scratch.race_blocks_per_sm);
          rows.push_back(Row{kind_name, path, fb, gamma, vocab, filtered_copies, fg, 0, filtered});
          rows.push_back(Row{kind_name, std::string(path) + "_host_merge", fb, gamma, vocab, filtered_copies, fg, 0,
                             filtered_host});
          int32_t slices = opt.filter_slices;
          if (slices == 0) BENCH_CUDA(RejectionFilterSlices(opt.dtype, int64_t{fb} * (gamma + 1), &slices));
          std::printf("%s B=%d gamma=8 V=151936 top-k %d + top-p %g: median %.2f us p95 %.2f us | host merge %.2f us "
                      "p95 %.2f (filter: %d blocks per row)\n",
                      kind_name.c_str(), fb, opt.top_k, opt.top_p, filtered.median_us, filtered.p95_us,
                      filtered_host.median_us, filtered_host.p95_us, slices);
          for (void* p : set.owned) cudaFree(p);
        }
      }
    }
  }
  for (const char* merge : {"", "_host_merge"}) {
    const std::string logprobs = std::string("logprobs") + merge, probabilities = std::string("probabilities") + merge;
    if (headline_median.count(probabilities) == 0 || headline_median.count(logprobs) == 0) continue;
    const double ratio = headline_median[logprobs] / headline_median[probabilities];
    std::printf("headline B=8 gamma=8 V=151936%s: logprobs %.2f us / probabilities %.2f us = %.3f (target <= 1.10: %s)\n",
                *merge ? " (host merge, as served)" : "", headline_median[logprobs], headline_median[probabilities],
                ratio, ratio <= 1.10 ? "met" : "NOT met");
  }
  FILE* csv = std::fopen(opt.csv_path.c_str(), "w");
  if (csv == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", opt.csv_path.c_str());
    return 1;
  }
  std::fprintf(csv, "kind,path,b,gamma,vocab,copies,blocks_per_sequence,floor_bytes,median_us,p95_us,mean_us\n");
  for (const Row& r : rows) {
    std::fprintf(csv, "%s,%s,%d,%d,%d,%d,%d,%lld,%.3f,%.3f,%.3f\n", r.kind.c_str(), r.path.c_str(), r.b, r.gamma,
                 r.vocab, r.copies, r.blocks_per_sequence, static_cast<long long>(r.floor_bytes), r.stats.median_us,
                 r.stats.p95_us, r.stats.mean_us);
  }
  std::fclose(csv);
  std::printf("wrote %s (%zu rows)\n", opt.csv_path.c_str(), rows.size());
  return 0;
}

}  // namespace
}  // namespace specverify::bench

int main(int argc, char** argv) {
  specverify::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) {
      opt.csv_path = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      opt.runs = std::max(200, std::atoi(argv[++i]));
    } else if (a == "--row-chunks" && i + 1 < argc) {
      opt.row_chunks = std::atoi(argv[++i]);
      if (opt.row_chunks < 1 || opt.row_chunks > 8) {
        std::fprintf(stderr, "--row-chunks N: 1 to 8\n");
        return 2;
      }
    } else if (a == "--graph") {
      opt.graph = true;
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d == "fp32") {
        opt.dtype = specverify::SampleDtype::kFloat32;
        opt.dtype_suffix = "";
      } else if (d == "bf16" || d == "fp16") {
        opt.dtype = d == "bf16" ? specverify::SampleDtype::kBFloat16 : specverify::SampleDtype::kFloat16;
        opt.dtype_suffix = "_" + d;
      } else {
        std::fprintf(stderr, "--dtype fp32|bf16|fp16\n");
        return 2;
      }
    } else if (a == "--blocks-per-sm" && i + 1 < argc) {
      opt.blocks_per_sm = std::atoi(argv[++i]);
    } else if (a == "--top-k" && i + 1 < argc) {
      opt.top_k = std::atoi(argv[++i]);
      if (opt.top_k < 0) {
        std::fprintf(stderr, "--top-k K: K >= 0 (0: no top-k)\n");
        return 2;
      }
    } else if (a == "--top-p" && i + 1 < argc) {
      opt.top_p = static_cast<float>(std::atof(argv[++i]));
      if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f)) {
        std::fprintf(stderr, "--top-p P: 0 < P <= 1\n");
        return 2;
      }
    } else if (a == "--filter-slices" && i + 1 < argc) {
      opt.filter_slices = std::atoi(argv[++i]);
      if (opt.filter_slices < 1 || opt.filter_slices > 8) {
        std::fprintf(stderr, "--filter-slices N: 1 to 8\n");
        return 2;
      }
    } else if (a == "--caller-top-k" && i + 1 < argc) {
      opt.caller_top_k = std::atoi(argv[++i]);
      if (opt.caller_top_k < 1) {
        std::fprintf(stderr, "--caller-top-k K: K >= 1\n");
        return 2;
      }
    } else if (a == "--shape" && i + 1 < argc) {
      const std::string shape = argv[++i];
      if (shape == "peaked") {
        opt.shape = specverify::DistributionShape::kPeaked;
      } else if (shape == "flat") {
        opt.shape = specverify::DistributionShape::kFlat;
      } else if (shape == "disjoint") {
        opt.shape = specverify::DistributionShape::kDisjoint;
      } else if (shape == "identical") {
        opt.shape = specverify::DistributionShape::kIdentical;
      } else if (shape == "mixed") {
        opt.shape = specverify::DistributionShape::kMixed;
      } else {
        std::fprintf(stderr, "--shape peaked|flat|disjoint|identical|mixed\n");
        return 2;
      }
    } else if (a == "--only" && i + 1 < argc) {
      char kind[32] = {};
      if (std::sscanf(argv[++i], "%31[a-z],%d,%d,%d", kind, &opt.only_b, &opt.only_gamma, &opt.only_vocab) != 4) {
        std::fprintf(stderr, "--only KIND,B,GAMMA,V\n");
        return 2;
      }
      opt.only_kind = kind;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--csv out.csv] [--runs N>=200] [--quick] [--only KIND,B,GAMMA,V] "
                   "[--blocks-per-sm N] [--dtype fp32|bf16|fp16] [--filter-slices N] [--top-k K] [--top-p P] "
                   "[--row-chunks N] [--shape peaked|flat|disjoint|identical|mixed] [--graph] "
                   "[--caller-top-k K]\n",
                   argv[0]);
      return 2;
    }
  }
  return specverify::bench::Main(opt);
}
