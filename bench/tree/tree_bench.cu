// Token-tree verification benchmark (issue #14, item 6), CUDA events.
//
//   tree_bench [--csv FILE] [--samples N] [--quick]
//
// Greedy verify+pack: B in {1, 8, 32, 128} random trees (1-4 children per
// node, per-level acceptance 0.9, 0.8, 0.7, 0.6, ...) of 16, 64 and 256
// nodes, 4 KiB rows; every answer of the first input set is checked against
// the workload's construction oracle. Sampled: the same shapes at V =
// 151,936 fp32 probabilities, with and without draft rows; rows are made on
// the device (hashed weights u^3, with planted mass on the children's tokens
// so that paths go deep: target mass 0.6 / children on each child's token,
// draft mass 0.8 on a node's own token), timed as the sample launch alone and
// as sample + pack (4 KiB rows).
//
// Per point, two timings with CUDA events, as bench/greedy and
// bench/sampling take them: a spin kernel holds the stream while the host
// queues a chunk of 25 launches, so the GPU runs them back to back; (1) each
// launch between two events of a chain (median and p95 of >= 300 samples
// after 20 warm-ups: one batch's device time) and (2) the mean per launch of
// a chunk between one pair of events ("back to back": consecutive launches
// overlap their launch processing; median over chunks). Inputs rotate over
// up to 4 sets (distinct rows and seeds). Floors in the same run, timed the
// same two ways: an empty kernel launch and a device-to-device copy of the
// bytes the algorithm must touch (greedy: the packed rows; sampled: the
// V-length rows it reads in full, counted by the kernel's own row_reads
// output; the copy also writes them, so it is a generous floor).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/tree/tree_cuda.h"
#include "kernels/workload/random.h"
#include "kernels/workload/tree_workload.h"

namespace specverify {
namespace {

#define CHECK_CUDA(expr)                                                                          \
  do {                                                                                            \
    const cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

constexpr int kWarmup = 20;
constexpr int kMaxVariants = 4;
constexpr int64_t kRowBytes = 4096;
constexpr int32_t kVocab = 151936;
constexpr int kChunk = 25;                  // launches queued behind one spin kernel
constexpr long long kSpinCycles = 2000000;  // ~1 ms: longer than queuing a chunk

__global__ void EmptyKernel() {}

// Holds the stream while the host queues a chunk, so the GPU then runs the
// chunk back to back and the events measure device time, not the host's
// launch latency (the method of bench/greedy and bench/sampling).
__global__ void SpinKernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Stats {
  double median_us = 0.0;  // per event pair
  double p95_us = 0.0;
  double b2b_us = 0.0;     // mean per launch of a chunk queued back to back (median over chunks)
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `launch(i)` for warm-up + `samples` iterations: each between two events of
// a chain (events[i], events[i+1]) queued behind a spin kernel; then chunks
// of kChunk launches between one pair of events for the back-to-back mean.
template <typename F>
Stats TimeLaunches(int samples, cudaStream_t stream, F launch) {
  for (int i = 0; i < kWarmup; ++i) launch(i);
  std::vector<cudaEvent_t> events(kChunk + 1);
  for (auto& e : events) CHECK_CUDA(cudaEventCreate(&e));
  std::vector<double> us;
  int iteration = 0;
  while (static_cast<int>(us.size()) < samples) {
    SpinKernel<<<1, 1, 0, stream>>>(kSpinCycles);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(events[0], stream));
    for (int i = 0; i < kChunk; ++i) {
      launch(iteration++);
      CHECK_CUDA(cudaEventRecord(events[i + 1], stream));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int i = 0; i < kChunk; ++i) {
      float ms = 0.0f;
      CHECK_CUDA(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
      us.push_back(ms * 1000.0);
    }
  }
  std::vector<double> chunks;
  for (int c = 0; c < std::max(8, samples / kChunk); ++c) {
    SpinKernel<<<1, 1, 0, stream>>>(kSpinCycles);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaEventRecord(events[0], stream));
    for (int i = 0; i < kChunk; ++i) launch(iteration++);
    CHECK_CUDA(cudaEventRecord(events[1], stream));
    CHECK_CUDA(cudaEventSynchronize(events[1]));
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, events[0], events[1]));
    chunks.push_back(ms * 1000.0 / kChunk);
  }
  for (auto& e : events) CHECK_CUDA(cudaEventDestroy(e));
  std::sort(us.begin(), us.end());
  Stats s;
  s.median_us = us[us.size() / 2];
  s.p95_us = us[std::min(us.size() - 1, us.size() * 95 / 100)];
  s.b2b_us = Median(chunks);
  return s;
}

// A device-to-device copy of `bytes` (0 bytes: zeros), timed like the kernels.
Stats CopyStats(int64_t bytes, int samples, cudaStream_t stream) {
  if (bytes <= 0) return Stats{};
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  const Stats s = TimeLaunches(samples, stream, [&](int) {
    CHECK_CUDA(cudaMemcpyAsync(b, a, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
  });
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return s;
}

template <typename T>
T* ToDevice(const std::vector<T>& host) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, host.size()) * sizeof(T)));
  if (!host.empty()) CHECK_CUDA(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
T* DeviceAlloc(size_t count) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, count) * sizeof(T)));
  return d;
}

struct Options {
  std::string csv;
  int samples = 300;
  bool quick = false;
};

FILE* g_csv = nullptr;

// Floors: `copy` of the bytes touched plus one `launch` (the empty kernel),
// per event pair and back to back.
void CsvRow(const char* kind, int b, int nodes, const char* draft, const Stats& s, const Stats& copy,
            const Stats& launch, int64_t bytes, double mean_depth, double mean_row_reads) {
  if (g_csv == nullptr) return;
  std::fprintf(g_csv, "%s,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%lld,%.3f,%.3f\n", kind, b, nodes, draft,
               s.median_us, s.p95_us, s.b2b_us, copy.median_us, copy.b2b_us, launch.median_us, launch.b2b_us,
               static_cast<long long>(bytes), mean_depth, mean_row_reads);
  std::fflush(g_csv);
}

// --- Greedy ---------------------------------------------------------------------------

struct GreedyDevice {
  TreeGreedyDeviceBatch batch;
  std::vector<void*> owned;
  ~GreedyDevice() {
    for (void* p : owned) cudaFree(p);
  }
};

void UploadGreedy(const TreeGreedyWorkload& w, GreedyDevice& d) {
  const int32_t b = w.num_trees();
  const int64_t total = w.total_nodes();
  auto own = [&d](auto* p) {
    d.owned.push_back(p);
    return p;
  };
  TreeGreedyVerifyParams& p = d.batch.params;
  p.input.num_sequences = b;
  p.input.draft_offsets = own(ToDevice(w.node_offsets));
  p.input.draft_tokens = own(ToDevice(w.draft_tokens));
  p.input.target_tokens = own(ToDevice(w.target_tokens));
  p.input.draft_kv = own(ToDevice(w.draft_kv));
  p.input.row_bytes = w.options.row_bytes;
  p.parent_indices = own(ToDevice(w.parent_indices));
  p.output.accepted_lengths = own(DeviceAlloc<int32_t>(b));
  p.output.next_tokens = own(DeviceAlloc<int32_t>(b));
  p.output.mismatch = own(DeviceAlloc<uint8_t>(b));
  p.output.packed_row_offsets = own(DeviceAlloc<int32_t>(b + 1));
  p.output.packed_kv = own(DeviceAlloc<std::byte>(total * w.options.row_bytes));
  p.accepted_nodes = own(DeviceAlloc<int32_t>(total));
  d.batch.total_nodes = total;
}

bool CheckGreedy(const TreeGreedyWorkload& w, const GreedyDevice& d) {
  const int32_t b = w.num_trees();
  const TreeGreedyExpected& e = w.expected;
  std::vector<int32_t> lengths(b), next(b), offsets(b + 1);
  CHECK_CUDA(cudaMemcpy(lengths.data(), d.batch.params.output.accepted_lengths, b * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(next.data(), d.batch.params.output.next_tokens, b * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(offsets.data(), d.batch.params.output.packed_row_offsets, (b + 1) * 4, cudaMemcpyDeviceToHost));
  std::vector<int32_t> nodes(e.accepted_nodes.size());
  std::vector<std::byte> kv(e.packed_kv.size());
  if (!nodes.empty()) {
    CHECK_CUDA(cudaMemcpy(nodes.data(), d.batch.params.accepted_nodes, nodes.size() * 4, cudaMemcpyDeviceToHost));
  }
  if (!kv.empty()) CHECK_CUDA(cudaMemcpy(kv.data(), d.batch.params.output.packed_kv, kv.size(), cudaMemcpyDeviceToHost));
  return lengths == e.accepted_lengths && next == e.next_tokens && offsets == e.packed_row_offsets &&
         nodes == e.accepted_nodes && kv == e.packed_kv;
}

void BenchGreedy(const Options& o, cudaStream_t stream, const TreeScratch& scratch, const Stats& launch) {
  std::printf("\n== greedy verify+pack (one launch), random trees 1-4 children/node, 4 KiB rows ==\n");
  std::printf("(us per event pair, and back to back; floor = D2D copy of the packed bytes + an empty launch)\n");
  std::printf("%-5s %-6s %10s %11s %9s %9s %9s %12s %12s\n", "B", "nodes", "mean_depth", "packed_KiB", "pair_us",
              "p95_us", "b2b_us", "floor_pair", "floor_b2b");
  for (const int nodes : {16, 64, 256}) {
    for (const int b : {1, 8, 32, 128}) {
      std::vector<TreeGreedyWorkload> sets;
      std::vector<GreedyDevice> devs(kMaxVariants);
      for (int v = 0; v < kMaxVariants; ++v) {
        TreeWorkloadOptions w;
        w.num_trees = b;
        w.num_nodes = nodes;
        w.level_acceptance = {0.9, 0.8, 0.7, 0.6, 0.5};
        w.row_bytes = kRowBytes;
        w.vocab_size = kVocab;
        w.seed = 1000 + 17 * v + nodes;
        absl::StatusOr<TreeGreedyWorkload> gen = GenerateTreeGreedyWorkload(w);
        if (!gen.ok()) {
          std::fprintf(stderr, "workload: %s\n", std::string(gen.status().message()).c_str());
          std::exit(1);
        }
        sets.push_back(std::move(*gen));
        UploadGreedy(sets.back(), devs[v]);
      }
      CHECK_CUDA(LaunchTreeGreedyVerifyPack(devs[0].batch, scratch, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const bool ok = CheckGreedy(sets[0], devs[0]);
      const Stats s = TimeLaunches(o.samples, stream, [&](int i) {
        CHECK_CUDA(LaunchTreeGreedyVerifyPack(devs[i % kMaxVariants].batch, scratch, stream));
      });
      const int64_t rows = sets[0].expected.packed_row_offsets.back();
      const int64_t bytes = rows * kRowBytes;
      const Stats copy = CopyStats(bytes, o.samples, stream);
      const double mean_depth = static_cast<double>(rows) / b;
      std::printf("%-5d %-6d %10.2f %11.1f %9.2f %9.2f %9.2f %12.2f %12.2f%s\n", b, nodes, mean_depth, bytes / 1024.0,
                  s.median_us, s.p95_us, s.b2b_us, copy.median_us + launch.median_us, copy.b2b_us + launch.b2b_us,
                  ok ? "" : "  CHECK FAILED");
      CsvRow(ok ? "cuda_greedy" : "cuda_greedy_CHECK_FAILED", b, nodes, "-", s, copy, launch, bytes, mean_depth, 0.0);
      if (o.quick && nodes == 16) break;
    }
  }
}

// --- Sampled ---------------------------------------------------------------------------

__device__ __forceinline__ float HashUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed ^ (index * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

// Row r (of `rows` starting at `first`): weights u^3, then its sum.
__global__ void FillRowsKernel(float* values, int64_t first, int vocab, uint64_t seed, float* sums) {
  __shared__ float partial[256];
  const int64_t r = first + blockIdx.x;
  float s = 0.0f;
  for (int x = threadIdx.x; x < vocab; x += blockDim.x) {
    const float u = HashUniform(seed, static_cast<uint64_t>(r) * vocab + x);
    const float w = u * u * u;
    values[r * vocab + x] = w;
    s += w;
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// Scales row r to mass 1 - F_r and plants its (token, mass) entries (CSR).
__global__ void PlantKernel(float* values, int64_t first, int vocab, const float* sums, const int* plant_offsets,
                            const int* plant_tokens, const float* plant_mass) {
  const int64_t r = first + blockIdx.x;
  float planted = 0.0f;
  for (int e = plant_offsets[blockIdx.x]; e < plant_offsets[blockIdx.x + 1]; ++e) planted += plant_mass[e];
  const float scale = (1.0f - planted) / sums[blockIdx.x];
  for (int x = threadIdx.x; x < vocab; x += blockDim.x) values[r * vocab + x] *= scale;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int e = plant_offsets[blockIdx.x]; e < plant_offsets[blockIdx.x + 1]; ++e) {
      values[r * vocab + plant_tokens[e]] = plant_mass[e];
    }
  }
}

// Rows [first, first + plants.size()) of `values`, filled and planted.
void MakeRows(float* values, int64_t first, const std::vector<std::vector<std::pair<int, float>>>& plants,
              uint64_t seed, cudaStream_t stream) {
  const int rows = static_cast<int>(plants.size());
  std::vector<int> offsets{0}, tokens;
  std::vector<float> mass;
  for (const auto& row : plants) {
    for (const auto& [t, m] : row) {
      tokens.push_back(t);
      mass.push_back(m);
    }
    offsets.push_back(static_cast<int>(tokens.size()));
  }
  float* sums = DeviceAlloc<float>(rows);
  int* d_offsets = ToDevice(offsets);
  int* d_tokens = ToDevice(tokens);
  float* d_mass = ToDevice(mass);
  FillRowsKernel<<<rows, 256, 0, stream>>>(values, first, kVocab, seed, sums);
  CHECK_CUDA(cudaGetLastError());
  PlantKernel<<<rows, 256, 0, stream>>>(values, first, kVocab, sums, d_offsets, d_tokens, d_mass);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(sums));
  CHECK_CUDA(cudaFree(d_offsets));
  CHECK_CUDA(cudaFree(d_tokens));
  CHECK_CUDA(cudaFree(d_mass));
}

struct SampledSet {
  TreeSampleParams params;
  TreePackParams pack;
  std::vector<void*> owned;
};

void BenchSampled(const Options& o, cudaStream_t stream, const TreeScratch& scratch, const Stats& launch) {
  std::printf("\n== sampled tree verification, V=%d fp32 probabilities, random trees 1-4 children/node ==\n", kVocab);
  std::printf("(us per event pair / back to back; floor = D2D copy of the rows read in full + an empty launch)\n");
  std::printf("%-5s %-6s %-5s %6s %9s %9s %9s %9s %10s %9s %11s %11s\n", "B", "nodes", "draft", "depth", "rows_read",
              "pair_us", "b2b_us", "p95_us", "+pack_b2b", "floor_MB", "floor_pair", "floor_b2b");
  size_t free_bytes = 0, total_bytes = 0;
  CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int64_t budget = static_cast<int64_t>(free_bytes * 0.75);
  const int64_t row_bytes = int64_t{kVocab} * 4;
  float* target = nullptr;
  float* draft = nullptr;
  for (const bool with_draft : {true, false}) {
    for (const int nodes : {16, 64, 256}) {
      for (const int b : {1, 8, 32, 128}) {
        const int64_t target_rows = int64_t{b} * (nodes + 1);
        const int64_t draft_rows = with_draft ? int64_t{b} * nodes : 0;
        const int64_t set_bytes = (target_rows + draft_rows) * row_bytes;
        if (set_bytes > budget) {
          std::printf("%-5d %-6d %-5s skipped: %.1f GB of rows exceed the memory budget (%.1f GB)\n", b, nodes,
                      with_draft ? "yes" : "no", set_bytes / 1e9, budget / 1e9);
          continue;
        }
        const int variants = static_cast<int>(std::min<int64_t>(kMaxVariants, budget / set_bytes));
        CHECK_CUDA(cudaMalloc(&target, target_rows * variants * row_bytes));
        if (with_draft) CHECK_CUDA(cudaMalloc(&draft, draft_rows * variants * row_bytes));
        std::vector<SampledSet> sets(variants);
        for (int v = 0; v < variants; ++v) {
          SplitMix64 rng(DeriveSeed(77 + nodes * 131 + b, static_cast<uint64_t>(v)));
          std::vector<int32_t> offsets{0}, tokens, parents;
          std::vector<std::vector<std::pair<int, float>>> target_plants, draft_plants;
          std::vector<SequenceSamplingParams> seqs;
          for (int i = 0; i < b; ++i) {
            const TreeShape shape = RandomTreeShape(nodes, 1, 4, rng);
            std::vector<std::vector<int>> children(nodes + 1);
            for (int j = 0; j < nodes; ++j) children[shape.parents[j] + 1].push_back(j);
            std::vector<int32_t> tok(nodes);
            for (const auto& kids : children) {
              std::vector<int32_t> used;
              for (const int j : kids) {
                int32_t t;
                do {
                  t = static_cast<int32_t>(rng.NextBelow(kVocab));
                } while (std::find(used.begin(), used.end(), t) != used.end());
                used.push_back(t);
                tok[j] = t;
              }
            }
            for (int r = 0; r <= nodes; ++r) {
              std::vector<std::pair<int, float>> plant;
              for (const int j : children[r]) plant.emplace_back(tok[j], 0.6f / children[r].size());
              target_plants.push_back(plant);
            }
            if (with_draft) {
              for (int j = 0; j < nodes; ++j) draft_plants.push_back({{tok[j], 0.8f}});
            }
            tokens.insert(tokens.end(), tok.begin(), tok.end());
            parents.insert(parents.end(), shape.parents.begin(), shape.parents.end());
            offsets.push_back(offsets.back() + nodes);
            SequenceSamplingParams s;
            s.seed = rng.Next();
            s.sequence_index = i;
            seqs.push_back(s);
          }
          MakeRows(target, v * target_rows, target_plants, 1 + v, stream);
          if (with_draft) MakeRows(draft, v * draft_rows, draft_plants, 100 + v, stream);
          SampledSet& set = sets[v];
          auto own = [&set](auto* p) {
            set.owned.push_back(p);
            return p;
          };
          TreeSampleParams& p = set.params;
          p.input.num_sequences = b;
          p.input.vocab_size = kVocab;
          p.input.total_draft_tokens = offsets.back();
          p.input.dtype = SampleDtype::kFloat32;
          p.input.kind = SampleValueKind::kProbabilities;
          p.input.has_draft_probs = with_draft;
          p.input.draft_offsets = own(ToDevice(offsets));
          p.input.draft_tokens = own(ToDevice(tokens));
          p.input.target_values = target + v * target_rows * kVocab;
          p.input.draft_values = with_draft ? draft + v * draft_rows * kVocab : nullptr;
          p.input.sequences = own(ToDevice(seqs));
          p.parent_indices = own(ToDevice(parents));
          p.output.accepted_lengths = own(DeviceAlloc<int32_t>(b));
          p.output.next_tokens = own(DeviceAlloc<int32_t>(b));
          p.output.mismatch = own(DeviceAlloc<uint8_t>(b));
          p.output.status_codes = own(DeviceAlloc<int32_t>(b));
          p.output.error_positions = own(DeviceAlloc<int32_t>(b));
          p.path_nodes = own(DeviceAlloc<int32_t>(offsets.back()));
          p.row_reads = own(DeviceAlloc<int32_t>(b));
          TreePackParams& k = set.pack;
          k.num_trees = b;
          k.node_offsets = p.input.draft_offsets;
          k.accepted_lengths = p.output.accepted_lengths;
          k.path_nodes = p.path_nodes;
          k.row_bytes = kRowBytes;
          k.draft_kv = own(DeviceAlloc<std::byte>(int64_t{offsets.back()} * kRowBytes));
          CHECK_CUDA(cudaMemset(const_cast<std::byte*>(k.draft_kv), 3, int64_t{offsets.back()} * kRowBytes));
          k.packed_row_offsets = own(DeviceAlloc<int32_t>(b + 1));
          k.accepted_nodes = own(DeviceAlloc<int32_t>(offsets.back()));
          k.packed_kv = own(DeviceAlloc<std::byte>(int64_t{offsets.back()} * kRowBytes));
        }
        // One launch to read the outcome: depths, rows read, codes.
        CHECK_CUDA(LaunchTreeSample(sets[0].params, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        std::vector<int32_t> depth(b), reads(b), codes(b);
        CHECK_CUDA(cudaMemcpy(depth.data(), sets[0].params.output.accepted_lengths, b * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(reads.data(), sets[0].params.row_reads, b * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(codes.data(), sets[0].params.output.status_codes, b * 4, cudaMemcpyDeviceToHost));
        int64_t depth_sum = 0, read_sum = 0;
        bool ok = true;
        for (int i = 0; i < b; ++i) {
          depth_sum += depth[i];
          read_sum += reads[i];
          ok = ok && codes[i] == kRejectionOk;
        }
        const Stats sample = TimeLaunches(o.samples, stream, [&](int i) {
          CHECK_CUDA(LaunchTreeSample(sets[i % variants].params, stream));
        });
        const Stats both = TimeLaunches(o.samples, stream, [&](int i) {
          CHECK_CUDA(LaunchTreeSample(sets[i % variants].params, stream));
          CHECK_CUDA(LaunchTreePack(sets[i % variants].pack, scratch, stream));
        });
        const int64_t floor_bytes = read_sum * row_bytes;
        const Stats copy = CopyStats(floor_bytes, std::min(o.samples, 200), stream);
        std::printf("%-5d %-6d %-5s %6.2f %9.2f %9.2f %9.2f %9.2f %10.2f %9.1f %11.2f %11.2f%s\n", b, nodes,
                    with_draft ? "yes" : "no", static_cast<double>(depth_sum) / b, static_cast<double>(read_sum) / b,
                    sample.median_us, sample.b2b_us, sample.p95_us, both.b2b_us, floor_bytes / 1e6,
                    copy.median_us + launch.median_us, copy.b2b_us + launch.b2b_us, ok ? "" : "  ERROR CODES");
        CsvRow(ok ? "cuda_sample" : "cuda_sample_ERROR", b, nodes, with_draft ? "yes" : "no", sample, copy, launch,
               floor_bytes, static_cast<double>(depth_sum) / b, static_cast<double>(read_sum) / b);
        CsvRow(ok ? "cuda_sample_pack" : "cuda_sample_pack_ERROR", b, nodes, with_draft ? "yes" : "no", both, copy,
               launch, floor_bytes, static_cast<double>(depth_sum) / b, static_cast<double>(read_sum) / b);
        for (auto& set : sets) {
          for (void* p : set.owned) CHECK_CUDA(cudaFree(p));
        }
        CHECK_CUDA(cudaFree(target));
        if (with_draft) CHECK_CUDA(cudaFree(draft));
        target = draft = nullptr;
        if (o.quick && b >= 8) break;
      }
    }
  }
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--csv" && i + 1 < argc) {
      o.csv = argv[++i];
    } else if (a == "--samples" && i + 1 < argc) {
      o.samples = std::max(10, std::atoi(argv[++i]));
    } else if (a == "--quick") {
      o.quick = true;
      o.samples = 100;
    } else {
      std::fprintf(stderr, "usage: %s [--csv FILE] [--samples N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("tree_bench: no CUDA device visible; skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (!o.csv.empty()) {
    g_csv = std::fopen(o.csv.c_str(), "w");
    if (g_csv == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", o.csv.c_str());
      return 1;
    }
    std::fprintf(g_csv, "kind,B,nodes,draft,median_us,p95_us,b2b_us,copy_us,copy_b2b_us,launch_us,launch_b2b_us,"
                        "floor_bytes,mean_depth,mean_row_reads\n");
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  absl::StatusOr<TreeScratchBuffer> scratch = AllocateTreeScratch(kMaxBatchSequences, stream);
  if (!scratch.ok()) {
    std::fprintf(stderr, "scratch: %s\n", std::string(scratch.status().message()).c_str());
    return 1;
  }
  const Stats empty = TimeLaunches(o.samples, stream, [&](int) { EmptyKernel<<<1, 32, 0, stream>>>(); });
  std::printf("empty kernel launch: median %.2f us per event pair (p95 %.2f), %.2f us back to back\n",
              empty.median_us, empty.p95_us, empty.b2b_us);
  CsvRow("empty_launch", 0, 0, "-", empty, Stats{}, empty, 0, 0.0, 0.0);
  BenchGreedy(o, stream, scratch->view, empty);
  BenchSampled(o, stream, scratch->view, empty);
  CHECK_CUDA(cudaStreamDestroy(stream));
  if (g_csv != nullptr) std::fclose(g_csv);
  return 0;
}

}  // namespace
}  // namespace specverify

int main(int argc, char** argv) { return specverify::Main(argc, argv); }
