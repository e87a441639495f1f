// GPU rejection sampling against the CPU reference: identical outputs (tokens,
// lengths, codes) over dtypes, kinds, shapes, ragged gammas and odd
// vocabularies, with the race merged on the device and finished on the host
// (race slots); bad values and ids reported per sequence; graph replay; and
// the statistical cases of the CPU suite re-run on the device. Skips visibly
// where no GPU is present.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_finish.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/sampling/rejection_sample.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/workload/random.h"
#include "kernels/workload/sampling_workload.h"
#include "tests/kernels/sampling/sampling_stat_cases.h"
#include "tests/testing/status_matchers.h"

namespace specverify {
namespace {

using ::specverify::testing::ExplicitBatch;
using ::specverify::testing::IsOk;

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

template <typename T>
T* Upload(const T* host, size_t count, std::vector<void*>& owned) {
  if (count == 0 || host == nullptr) return nullptr;
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, count * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  owned.push_back(d);
  return static_cast<T*>(d);
}

// Runs one batch on the device (optionally through a captured graph replayed
// `replays` times) and returns the host copy of the outputs; with
// set_host_merge, through race slots the host folds as a server does.
class DeviceRunner {
 public:
  ~DeviceRunner() {
    for (void* p : owned_) cudaFree(p);
  }

  // `greedy_targets`, when given, receives output.greedy_target_tokens.
  // With `row_tables`, the rows are uploaded in reverse order into separate
  // buffers and read through RejectionBatchInput::target_rows / draft_rows
  // (the data plane's rows read in place from a worker's region).
  RejectionHostOutputs Run(const RejectionBatchInput& host, int replays = 0,
                           std::vector<int32_t>* greedy_targets = nullptr,
                           bool row_tables = false) {
    const int32_t b = host.num_sequences;
    const int64_t target_rows = static_cast<int64_t>(host.total_draft_tokens) + b;
    const int64_t bytes_per_row = host.vocab_size * SampleDtypeBytes(host.dtype);
    RejectionBatchInput in = host;
    in.draft_offsets = Upload(host.draft_offsets, b + 1, owned_);
    in.draft_tokens = Upload(host.draft_tokens, host.total_draft_tokens, owned_);
    in.target_values = Upload(static_cast<const std::byte*>(host.target_values), target_rows * bytes_per_row, owned_);
    in.draft_values = host.has_draft_probs
                          ? Upload(static_cast<const std::byte*>(host.draft_values),
                                   host.total_draft_tokens * bytes_per_row, owned_)
                          : nullptr;
    in.sequences = Upload(host.sequences, b, owned_);
    if (row_tables) {
      in.target_rows = ScatterRows(host.target_values, target_rows, bytes_per_row);
      in.target_values = nullptr;
      if (host.has_draft_probs) {
        in.draft_rows = ScatterRows(host.draft_values, host.total_draft_tokens, bytes_per_row);
        in.draft_values = nullptr;
      }
    }
    RejectionBatchOutput out;
    out.accepted_lengths = Alloc<int32_t>(b);
    out.next_tokens = Alloc<int32_t>(b);
    out.mismatch = Alloc<uint8_t>(b);
    out.status_codes = Alloc<int32_t>(b);
    out.error_positions = Alloc<int32_t>(b);
    if (greedy_targets != nullptr) out.greedy_target_tokens = Alloc<int32_t>(target_rows);
    EXPECT_FALSE(host_merge_ && greedy_targets != nullptr) << "greedy targets need the device merge";
    cudaStream_t stream;
    EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    if (!keep_scratch_ || !scratch_ready_) {
      const RejectionScratchLimits limits =
          keep_scratch_ ? kept_limits_ : RejectionScratchLimits{b, host.total_draft_tokens, host.vocab_size};
      const size_t scratch_bytes = RejectionScratchBytes(limits);
      void* scratch_memory = Alloc<std::byte>(scratch_bytes);
      EXPECT_EQ(InitRejectionScratch(scratch_memory, scratch_bytes, limits, stream, &scratch_), cudaSuccess);
      scratch_ready_ = true;
    }
    RejectionScratch scratch = scratch_;
    scratch.filter_slices = filter_slices_;
    scratch.row_pass_chunks_per_block = row_pass_chunks_per_block_;
    scratch.race_blocks_per_sm = race_blocks_per_sm_;
    int32_t slots_per_sequence = 0;
    if (host_merge_) {
      EXPECT_EQ(RejectionRaceSlotsPerSequence(in, scratch, &slots_per_sequence), cudaSuccess);
      EXPECT_GE(slots_per_sequence, 1);
      EXPECT_LE(int64_t{b} * slots_per_sequence, RejectionRaceSlotsBound(scratch.limits, scratch.num_sms));
      // Filled with 0xEE like every output: a slot its block did not write
      // would be a word better than any real entrant.
      out.race_slots = Alloc<RejectionRaceSlot>(static_cast<size_t>(b) * slots_per_sequence);
      out.race_slots_per_sequence = slots_per_sequence;
    }
    const RejectionSampleParams params{in, out};
    if (replays == 0) {
      EXPECT_EQ(LaunchRejectionSample(params, scratch, stream), cudaSuccess);
    } else {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      EXPECT_EQ(LaunchRejectionSample(params, scratch, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (int r = 0; r < replays; ++r) EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
      EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    RejectionHostOutputs host_out(b, 0xCD);
    Download(host_out.accepted_lengths.data(), out.accepted_lengths, b);
    Download(host_out.next_tokens.data(), out.next_tokens, b);
    Download(host_out.mismatch.data(), out.mismatch, b);
    Download(host_out.status_codes.data(), out.status_codes, b);
    Download(host_out.error_positions.data(), out.error_positions, b);
    if (greedy_targets != nullptr) {
      greedy_targets->resize(target_rows);
      Download(greedy_targets->data(), out.greedy_target_tokens, target_rows);
    }
    if (host_merge_) {
      std::vector<RejectionRaceSlot> slots(static_cast<size_t>(b) * slots_per_sequence);
      Download(slots.data(), out.race_slots, slots.size());
      FinishRejectionOutcomes(b, slots.data(), slots_per_sequence, host_out.view());
    }
    return host_out;
  }

  // Blocks per filtered row (RejectionScratch::filter_slices); 0 lets the
  // launcher choose.
  void set_filter_slices(int32_t slices) { filter_slices_ = slices; }
  // Chunks per row-pass block (RejectionScratch::row_pass_chunks_per_block).
  void set_row_pass_chunks_per_block(int32_t chunks) { row_pass_chunks_per_block_ = chunks; }
  // Race blocks per SM (RejectionScratch::race_blocks_per_sm); 0 lets the
  // launcher choose.
  void set_race_blocks_per_sm(int32_t blocks) { race_blocks_per_sm_ = blocks; }
  // Race winners left in slots and folded on the host
  // (RejectionBatchOutput::race_slots, FinishRejectionOutcomes).
  void set_host_merge(bool host_merge) { host_merge_ = host_merge; }
  // Every Run launches on one scratch of `limits`, allocated by the first, as
  // a server's stream does.
  void keep_scratch(const RejectionScratchLimits& limits) {
    keep_scratch_ = true;
    kept_limits_ = limits;
  }

 private:
  // Rows copied to the device in reverse order (row r at slot rows - 1 - r,
  // 16-byte aligned), and the device table of their addresses by row.
  const void* const* ScatterRows(const void* host, int64_t rows, int64_t bytes_per_row) {
    const int64_t stride = (bytes_per_row + 15) / 16 * 16;
    std::byte* scattered = Alloc<std::byte>(static_cast<size_t>(rows * stride));
    std::vector<const void*> table(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      std::byte* slot = scattered + (rows - 1 - r) * stride;
      EXPECT_EQ(cudaMemcpy(slot, static_cast<const std::byte*>(host) + r * bytes_per_row,
                           static_cast<size_t>(bytes_per_row), cudaMemcpyHostToDevice),
                cudaSuccess);
      table[static_cast<size_t>(r)] = slot;
    }
    return Upload(table.data(), table.size(), owned_);
  }
  template <typename T>
  T* Alloc(size_t count) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(1, count) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(d, 0xEE, std::max<size_t>(1, count) * sizeof(T)), cudaSuccess);
    owned_.push_back(d);
    return static_cast<T*>(d);
  }
  template <typename T>
  void Download(T* host, const T* device, size_t count) {
    EXPECT_EQ(cudaMemcpy(host, device, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  std::vector<void*> owned_;
  int32_t filter_slices_ = 0;
  int32_t row_pass_chunks_per_block_ = 0;
  int32_t race_blocks_per_sm_ = 0;
  bool host_merge_ = false;
  bool keep_scratch_ = false;
  bool scratch_ready_ = false;
  RejectionScratchLimits kept_limits_;
  RejectionScratch scratch_;
};

RejectionHostOutputs RunCpu(const RejectionBatchInput& in, std::vector<int32_t>* greedy_targets = nullptr) {
  RejectionHostOutputs out(in.num_sequences, 0xAB);
  RejectionBatchOutput view = out.view();
  if (greedy_targets != nullptr) {
    greedy_targets->assign(static_cast<size_t>(in.total_draft_tokens) + in.num_sequences, -7);
    view.greedy_target_tokens = greedy_targets->data();
  }
  ReferenceRejectionSample(RejectionSampleParams{in, view});
  return out;
}

// A kMixed workload of `b` sequences with 1 to `gamma_max` draft tokens each.
SamplingWorkloadOptions MixedWorkload(SampleValueKind kind, SampleDtype dtype, bool draft, int32_t b, int32_t vocab,
                                      int32_t gamma_max, uint64_t seed) {
  SamplingWorkloadOptions o;
  o.num_sequences = b;
  o.vocab_size = vocab;
  o.gamma_min = 1;
  o.gamma_max = gamma_max;
  o.dtype = dtype;
  o.kind = kind;
  o.has_draft_probs = draft;
  o.shape = DistributionShape::kMixed;
  o.seed = seed;
  return o;
}

std::string MergeName(bool host_merge) { return host_merge ? " (host merge)" : " (device merge)"; }

void ExpectSameOutputs(const RejectionHostOutputs& gpu, const RejectionHostOutputs& cpu, const std::string& what) {
  SCOPED_TRACE(what);
  int32_t reported = 0;
  for (size_t i = 0; i < cpu.next_tokens.size() && reported < 5; ++i) {
    const bool same = gpu.accepted_lengths[i] == cpu.accepted_lengths[i] &&
                      gpu.next_tokens[i] == cpu.next_tokens[i] && gpu.mismatch[i] == cpu.mismatch[i] &&
                      gpu.status_codes[i] == cpu.status_codes[i] &&
                      gpu.error_positions[i] == cpu.error_positions[i];
    if (!same) {
      ++reported;
      ADD_FAILURE() << "sequence " << i << ": gpu (k " << gpu.accepted_lengths[i] << ", next "
                    << gpu.next_tokens[i] << ", mismatch " << int{gpu.mismatch[i]} << ", code "
                    << gpu.status_codes[i] << " @" << gpu.error_positions[i] << ") vs cpu (k "
                    << cpu.accepted_lengths[i] << ", next " << cpu.next_tokens[i] << ", mismatch "
                    << int{cpu.mismatch[i]} << ", code " << cpu.status_codes[i] << " @" << cpu.error_positions[i]
                    << ")";
    }
  }
}

class RejectionCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU parity tests skipped";
  }
};

struct GridPoint {
  int32_t b;
  int32_t vocab;
  int32_t gamma_max;
};

TEST_F(RejectionCudaTest, MatchesTheCpuReferenceAcrossTheGrid) {
  const GridPoint points[] = {{1, 97, 4}, {7, 32000, 8}, {33, 4099, 16}, {3, 128256, 8}};
  uint64_t seed = 500;
  for (const GridPoint& g : points) {
    for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
      for (SampleValueKind kind :
           {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
        for (bool draft : {true, false}) {
          SamplingWorkloadOptions o = MixedWorkload(kind, dtype, draft, g.b, g.vocab, g.gamma_max, ++seed);
          o.sequences_per_request = 2;
          auto w = GenerateSamplingWorkload(o);
          ASSERT_TRUE(w.ok());
          const std::string what = absl::StrCat("b ", g.b, " V ", g.vocab, " dtype ", static_cast<int>(dtype),
                                                " kind ", static_cast<int>(kind), " draft ", draft, " seed ", o.seed);
          std::vector<int32_t> gpu_targets, cpu_targets;
          const RejectionHostOutputs cpu = RunCpu(w->input(), &cpu_targets);
          DeviceRunner runner;
          ExpectSameOutputs(runner.Run(w->input(), 0, &gpu_targets), cpu, what + MergeName(false));
          EXPECT_EQ(gpu_targets, cpu_targets) << what << ": greedy_target_tokens";
          DeviceRunner host_merge;
          host_merge.set_host_merge(true);
          ExpectSameOutputs(host_merge.Run(w->input()), cpu, what + MergeName(true));
        }
      }
    }
  }
}

// Every row of a logits batch is normalized at its own sequence's
// temperature: the row pass looks the sequence up per block (a warp-wide
// search over the draft offsets, two steps past 32 sequences). Temperatures
// differ per sequence here, greedy (T = 0) rows among sampled ones, so a row
// weighed at a neighbour's temperature changes the outcome. V = 8200: two
// whole chunks (sampled rows take the full-chunk path, greedy rows the
// argmax one) and a partial one; V = 4099: no whole chunk (rows not a
// multiple of 4).
TEST_F(RejectionCudaTest, EachRowIsNormalizedAtItsOwnSequencesTemperature) {
  for (const int32_t b : {5, 40, 70}) {
    for (const int32_t vocab : {8200, 4099}) {
      for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16}) {
        for (bool draft : {true, false}) {
          SamplingWorkloadOptions o;
          o.num_sequences = b;
          o.vocab_size = vocab;
          o.gamma_min = 1;
          o.gamma_max = 6;
          o.dtype = dtype;
          o.kind = SampleValueKind::kLogits;
          o.has_draft_probs = draft;
          o.shape = DistributionShape::kMixed;
          o.seed = 7000 + b + vocab;
          auto w = GenerateSamplingWorkload(o);
          ASSERT_TRUE(w.ok());
          RejectionBatchInput in = w->input();
          std::vector<SequenceSamplingParams> sequences(in.sequences, in.sequences + b);
          for (int32_t i = 0; i < b; ++i) {
            sequences[i].temperature = i % 7 == 3 ? 0.0f : 0.25f + 0.15f * static_cast<float>(i % 11);
          }
          in.sequences = sequences.data();
          const std::string what = absl::StrCat("b ", b, " V ", vocab, " dtype ", static_cast<int>(dtype), " draft ",
                                                draft, " seed ", o.seed);
          DeviceRunner runner;
          ExpectSameOutputs(runner.Run(in), RunCpu(in), what);
        }
      }
    }
  }
}

// Rows read through row tables (scattered, in reverse order) give the CPU
// reference's outputs on the contiguous rows, bit for bit.
TEST_F(RejectionCudaTest, RowTablesMatchTheContiguousReference) {
  uint64_t seed = 900;
  for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16}) {
    for (SampleValueKind kind :
         {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
      for (bool draft : {true, false}) {
        const SamplingWorkloadOptions o = MixedWorkload(kind, dtype, draft, 9, 4096, 8, ++seed);
        auto w = GenerateSamplingWorkload(o);
        ASSERT_TRUE(w.ok());
        DeviceRunner runner;
        std::vector<int32_t> gpu_targets, cpu_targets;
        ExpectSameOutputs(runner.Run(w->input(), 0, &gpu_targets, /*row_tables=*/true),
                          RunCpu(w->input(), &cpu_targets),
                          absl::StrCat("row tables, dtype ", static_cast<int>(dtype), " kind ",
                                       static_cast<int>(kind), " draft ", draft));
        EXPECT_EQ(gpu_targets, cpu_targets);
      }
    }
  }
}

TEST_F(RejectionCudaTest, TargetShapeOfTheBenchmarkMatches) {
  // B = 8, gamma = 8, V = 151,936, fp32 probabilities, logits and
  // log-probabilities; and fp32 / bf16 logits under top-k 50 + top-p 0.9.
  struct Shape {
    SampleValueKind kind;
    SampleDtype dtype;
    bool filtered;
  };
  for (const Shape& shape : {Shape{SampleValueKind::kProbabilities, SampleDtype::kFloat32, false},
                             Shape{SampleValueKind::kLogits, SampleDtype::kFloat32, false},
                             Shape{SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, false},
                             Shape{SampleValueKind::kLogits, SampleDtype::kFloat32, true},
                             Shape{SampleValueKind::kLogits, SampleDtype::kBFloat16, true}}) {
    SamplingWorkloadOptions o;
    o.num_sequences = 8;
    o.vocab_size = 151936;
    o.kind = shape.kind;
    o.dtype = shape.dtype;
    o.shape = DistributionShape::kPeaked;
    if (shape.filtered) {
      o.top_k = 50;
      o.top_p = 0.9f;
    }
    o.seed = 42;
    auto w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    const RejectionHostOutputs cpu = RunCpu(w->input());
    for (bool host_merge : {false, true}) {
      DeviceRunner runner;
      runner.set_host_merge(host_merge);
      ExpectSameOutputs(runner.Run(w->input()), cpu,
                        absl::StrCat("kind ", static_cast<int>(shape.kind), " dtype ", static_cast<int>(shape.dtype),
                                     shape.filtered ? " top-k 50 + top-p 0.9" : "", MergeName(host_merge)));
    }
  }
}

TEST_F(RejectionCudaTest, GreedyFilteredAndSigmoidLogitsMatch) {
  struct Variant {
    std::string name;
    float temperature;
    int32_t top_k;
    float top_p;
    SampleMethod method;
  };
  const Variant variants[] = {{"greedy", 0.0f, 0, 1.0f, SampleMethod::kExact},
                              {"top_k_50", 0.8f, 50, 1.0f, SampleMethod::kExact},
                              {"top_p_0.9", 1.3f, 0, 0.9f, SampleMethod::kExact},
                              {"top_k_top_p", 0.6f, 1000, 0.5f, SampleMethod::kExact},
                              {"top_k_50_top_p_0.9", 1.0f, 50, 0.9f, SampleMethod::kExact},
                              {"top_p_0.5", 0.7f, 0, 0.5f, SampleMethod::kExact},
                              {"top_k_1", 1.0f, 1, 1.0f, SampleMethod::kExact},
                              {"sigmoid", 1.0f, 0, 1.0f, SampleMethod::kSigmoid}};
  for (const Variant& v : variants) {
    // 5003: a last partial quad (V % 4 != 0) in every pass over a row.
    for (int32_t vocab : {1000, 5003, 32000}) {
      SamplingWorkloadOptions o;
      o.num_sequences = 9;
      o.vocab_size = vocab;
      o.gamma_min = 1;
      o.gamma_max = 8;
      o.kind = SampleValueKind::kLogits;
      o.dtype = SampleDtype::kBFloat16;
      o.shape = DistributionShape::kMixed;
      o.temperature = v.temperature;
      o.top_k = v.top_k;
      o.top_p = v.top_p;
      o.seed = 900 + vocab;
      auto w = GenerateSamplingWorkload(o);
      ASSERT_TRUE(w.ok());
      RejectionBatchInput in = w->input();
      in.method = v.method;
      in.sigmoid_alpha = -10.0f;
      in.sigmoid_beta = 10.0f;
      RejectionHostOutputs check(in.num_sequences, 0);
      ASSERT_THAT(ValidateRejectionBatch(RejectionSampleParams{in, check.view()}), IsOk()) << v.name;
      DeviceRunner runner;
      ExpectSameOutputs(runner.Run(in), RunCpu(in), absl::StrCat(v.name, " V ", vocab));
    }
  }
}

// The filter splits a row among up to 8 blocks (a cluster on sm_90) that
// each read a slice and gather the candidates in one block's shared memory:
// every split gives the reference's tokens, on rows whose last quad is
// partial (5003), whose candidates overflow shared memory (top-k 3000: the
// whole-row passes), and for top-p alone (the row's mass summed over the
// slices). Below sm_90 every count runs as one slice.
TEST_F(RejectionCudaTest, FilteredRowsMatchForEveryNumberOfSlices) {
  struct Filter {
    int32_t top_k;
    float top_p;
  };
  const Filter filters[] = {{50, 0.9f}, {0, 0.9f}, {3000, 1.0f}, {1, 1.0f}, {700, 0.3f}};
  uint64_t seed = 4400;
  for (const Filter& f : filters) {
    for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
      for (int32_t vocab : {5003, 32000}) {
        SamplingWorkloadOptions o;
        o.num_sequences = 5;
        o.vocab_size = vocab;
        o.gamma_min = 1;
        o.gamma_max = 8;
        o.kind = SampleValueKind::kLogits;
        o.dtype = dtype;
        o.shape = DistributionShape::kMixed;
        o.temperature = 0.9f;
        o.top_k = f.top_k;
        o.top_p = f.top_p;
        o.seed = ++seed;
        auto w = GenerateSamplingWorkload(o);
        ASSERT_TRUE(w.ok());
        const RejectionHostOutputs cpu = RunCpu(w->input());
        for (int32_t slices : {1, 2, 3, 8, 0}) {
          DeviceRunner runner;
          runner.set_filter_slices(slices);
          ExpectSameOutputs(runner.Run(w->input()), cpu,
                            absl::StrCat("top_k ", f.top_k, " top_p ", f.top_p, " dtype ", static_cast<int>(dtype),
                                         " V ", vocab, " slices ", slices));
        }
      }
    }
  }
}

// Top-k with k at most half of a row's warp maxima (8 per 4,096-logit chunk
// of the row pass) takes as candidates the elements at or above the k-th
// largest maximum, read only from the groups whose maximum reaches it. A row
// whose last quad is partial (151,937) has no maxima (every chunk takes the
// general path): all its groups are read, the candidates overflow shared
// memory and the histogram takes over; so does a row whose ties put more
// than 2,048 elements at or above the bound. A masked row (mostly -1000, the
// documented mask: -inf logits are invalid) keeps the one-pass path.
TEST_F(RejectionCudaTest, FilteredRowsFromWarpMaximaMatch) {
  struct Case {
    int32_t vocab;
    SampleDtype dtype;
    int32_t top_k;
    float top_p;
  };
  const Case cases[] = {{151936, SampleDtype::kFloat32, 1, 1.0f},   {151936, SampleDtype::kFloat32, 50, 1.0f},
                        {151936, SampleDtype::kFloat32, 50, 0.9f},  {151936, SampleDtype::kFloat32, 150, 0.5f},
                        {151936, SampleDtype::kBFloat16, 50, 0.9f}, {151936, SampleDtype::kFloat16, 7, 0.9f},
                        {151937, SampleDtype::kFloat32, 50, 0.9f}};
  uint64_t seed = 5100;
  for (const Case& c : cases) {
    SamplingWorkloadOptions o;
    o.num_sequences = 4;
    o.vocab_size = c.vocab;
    o.gamma_min = 1;
    o.gamma_max = 4;
    o.kind = SampleValueKind::kLogits;
    o.dtype = c.dtype;
    o.shape = DistributionShape::kMixed;
    o.temperature = 0.8f;
    o.top_k = c.top_k;
    o.top_p = c.top_p;
    o.seed = ++seed;
    auto w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    const RejectionHostOutputs cpu = RunCpu(w->input());
    for (int32_t slices : {1, 3, 0}) {
      DeviceRunner runner;
      runner.set_filter_slices(slices);
      ExpectSameOutputs(runner.Run(w->input()), cpu,
                        absl::StrCat("V ", c.vocab, " dtype ", static_cast<int>(c.dtype), " top_k ", c.top_k,
                                     " top_p ", c.top_p, " slices ", slices));
    }
  }
  // Ties and masks: a row of zeros with 20 ones (the 50th largest maximum is
  // 0: every element is at or above it, which overflows shared memory into
  // the histogram and then the whole-row rounds), and a row masked to -1000
  // but for 300 values (most groups' maxima are the mask).
  constexpr int32_t kVocab = 151936;
  std::vector<float> ties(kVocab, 0.0f), masked(kVocab, -1000.0f);
  SplitMix64 rng(77);
  for (int32_t i = 0; i < 20; ++i) ties[(i * 7919) % kVocab] = 1.0f;
  for (int32_t i = 0; i < 300; ++i) masked[(i * 4099 + 13) % kVocab] = static_cast<float>(rng.NextBelow(1000)) / 100.0f;
  ExplicitBatch batch(kVocab, SampleValueKind::kLogits, SampleDtype::kFloat32, true);
  int32_t i = 0;
  for (const std::vector<float>* row : {&ties, &masked}) {
    for (const int32_t top_k : {5, 50}) {
      SequenceSamplingParams s;
      s.seed = 91;
      s.sequence_index = i++;
      s.temperature = 1.0f;
      s.top_k = top_k;
      s.top_p = 0.95f;
      batch.Add({*row, *row}, {*row}, {(i * 4099 + 13) % kVocab}, s);
    }
  }
  const RejectionHostOutputs cpu = RunCpu(batch.input());
  for (int32_t slices : {1, 4}) {
    DeviceRunner runner;
    runner.set_filter_slices(slices);
    ExpectSameOutputs(runner.Run(batch.input()), cpu, absl::StrCat("ties and masks, slices ", slices));
  }
}

// Top-p boundaries are decided on integer masses (rejection::TopPMassUnits),
// so the GPU's atomics agree with the CPU's sorted sum even where the mass
// above a value equals the budget exactly. Rows of tied levels whose weights
// are exact powers of two; the staircase puts more than 2,048 tokens into the
// top coarse bins, so its filter takes the whole-row radix path.
TEST_F(RejectionCudaTest, TopPBoundariesOnExactMassesMatchTheReference) {
  float half = -0.69f;  // weight exactly 1/2 at T = 1 under a maximum of 0
  while (rejection::LogitWeight(half, 0.0f, 1.0f) > 0.5f) half = std::nextafter(half, -1.0f);
  while (rejection::LogitWeight(half, 0.0f, 1.0f) < 0.5f) half = std::nextafter(half, 0.0f);
  ASSERT_EQ(rejection::LogitWeight(half, 0.0f, 1.0f), 0.5f);
  float quarter = 2.0f * half;
  while (rejection::LogitWeight(quarter, 0.0f, 1.0f) > 0.25f) quarter = std::nextafter(quarter, -2.0f);
  while (rejection::LogitWeight(quarter, 0.0f, 1.0f) < 0.25f) quarter = std::nextafter(quarter, 0.0f);
  ASSERT_EQ(rejection::LogitWeight(quarter, 0.0f, 1.0f), 0.25f);

  constexpr int32_t kVocab = 4099;
  std::vector<float> halves(kVocab, -1000.0f), staircase(kVocab, -1000.0f);
  halves[7] = 0.0f;
  halves[100] = halves[4098] = half;
  for (int32_t x = 0; x < 3 * 1025; ++x) staircase[(x * 7) % kVocab] = x % 3 == 0 ? 0.0f : (x % 3 == 1 ? half : quarter);
  for (const std::vector<float>* row : {&halves, &staircase}) {
    ExplicitBatch batch(kVocab, SampleValueKind::kLogits, SampleDtype::kFloat32, false);
    int32_t i = 0;
    for (const float top_p : {0.5f, std::nextafter(0.5f, 1.0f), std::nextafter(0.5f, 0.0f), 0.25f,
                              4.0f / 7.0f, 0.75f, 6.0f / 7.0f, 0.9f}) {
      for (const int32_t top_k : {0, 2, 1500}) {
        SequenceSamplingParams s;
        s.seed = 77;
        s.sequence_index = i;
        s.temperature = 1.0f;
        s.top_p = top_p;
        s.top_k = top_k;
        batch.Add({*row, *row}, {}, {(i * 97) % kVocab}, s);
        ++i;
      }
    }
    DeviceRunner runner;
    ExpectSameOutputs(runner.Run(batch.input()), RunCpu(batch.input()),
                      row == &halves ? "halves" : "staircase");
  }
}

// A vocabulary of 5003 takes every chunk through the general path; 8200 (two
// whole chunks and a partial one, rows 16-byte aligned) takes the whole
// chunks through the vectorized ones, the full-row check's included.
TEST_F(RejectionCudaTest, BadValuesAndIdsAreReportedLikeTheReference) {
  for (SampleValueKind kind :
       {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
    for (const auto [vocab, full_rows] : {std::pair{5003, false}, std::pair{5003, true}, std::pair{8200, false},
                                          std::pair{8200, true}}) {
      SamplingWorkloadOptions o;
      o.num_sequences = 24;
      o.vocab_size = vocab;
      o.gamma_min = 2;
      o.gamma_max = 6;
      o.kind = kind;
      o.seed = 1234;
      auto w = GenerateSamplingWorkload(o);
      ASSERT_TRUE(w.ok());
      float* target = reinterpret_cast<float*>(w->target_values.data());
      float* draft = reinterpret_cast<float*>(w->draft_values.data());
      const int64_t v = o.vocab_size;
      // Sequence 1: NaN at a drafted target element. 3: Inf in the draft's
      // drafted element. 5: negative (probabilities) / -Inf somewhere in a
      // bonus row (log-probabilities: +Inf, as -Inf is valid there). 7: draft
      // id out of range (the device checks again). 9: NaN in an element nobody
      // reads unless rows are fully checked.
      const auto trow = [&](int32_t i, int32_t j) { return target + (w->draft_offsets[i] + i + j) * v; };
      const auto drow = [&](int32_t i, int32_t j) { return draft + (w->draft_offsets[i] + j) * v; };
      trow(1, 1)[w->draft_tokens[w->draft_offsets[1] + 1]] = std::numeric_limits<float>::quiet_NaN();
      drow(3, 0)[w->draft_tokens[w->draft_offsets[3]]] = std::numeric_limits<float>::infinity();
      trow(5, w->gamma(5))[17] = kind == SampleValueKind::kProbabilities ? -0.5f
                                 : kind == SampleValueKind::kLogits      ? -std::numeric_limits<float>::infinity()
                                                                         : std::numeric_limits<float>::infinity();
      w->draft_tokens[w->draft_offsets[7] + 1] = o.vocab_size + 3;
      const int32_t unread = (w->draft_tokens[w->draft_offsets[9]] + 1) % o.vocab_size;
      drow(9, 0)[unread] = std::numeric_limits<float>::quiet_NaN();
      RejectionBatchInput in = w->input();
      in.validate_full_rows = full_rows;
      const RejectionHostOutputs cpu = RunCpu(in);
      EXPECT_EQ(cpu.status_codes[1], kRejectionBadTargetValue);
      EXPECT_EQ(cpu.status_codes[3], kRejectionBadDraftValue);
      EXPECT_EQ(cpu.status_codes[7], kRejectionDraftTokenOutOfRange);
      EXPECT_EQ(cpu.error_positions[7], 1);
      for (bool host_merge : {false, true}) {
        DeviceRunner runner;
        runner.set_host_merge(host_merge);
        ExpectSameOutputs(runner.Run(in), cpu,
                          absl::StrCat("kind ", static_cast<int>(kind), " V ", vocab, " full ", full_rows,
                                       MergeName(host_merge)));
      }
    }
  }
}

// Log-probabilities decide through ex2-based bounds on the GPU (the hopeless
// test) and ExpDet for the entrants that can win; the reference runs the full
// race. Rows built to stress the bounds: -inf runs, values whose exp is
// subnormal or 0, values whose exp overflows to +inf, draft rows within 1e-6
// of the target (residuals near 0, uncertain signs), at a vector-aligned and
// an odd vocabulary, fp32 and bf16, with and without draft rows.
TEST_F(RejectionCudaTest, LogProbabilityEdgeValuesMatch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int32_t vocab : {8192, 4099}) {
    for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16}) {
      for (bool draft : {true, false}) {
        SplitMix64 rng(vocab * 7 + static_cast<int>(dtype) * 3 + (draft ? 1 : 0));
        testing::ExplicitBatch batch(vocab, SampleValueKind::kLogProbabilities, dtype, draft);
        constexpr int32_t kGamma = 4;
        for (int32_t i = 0; i < 16; ++i) {
          const int32_t style = i % 4;
          std::vector<std::vector<float>> target(kGamma + 1, std::vector<float>(vocab));
          std::vector<std::vector<float>> draft_rows(kGamma, std::vector<float>(vocab));
          for (int32_t j = 0; j <= kGamma; ++j) {
            for (int32_t x = 0; x < vocab; ++x) {
              const double u = rng.NextDouble();
              float value;
              if (style == 2) {
                // exp subnormal or 0 everywhere (plus -inf).
                value = u < 0.1 ? ninf : static_cast<float>(-110.0 + 25.0 * rng.NextDouble());
              } else {
                value = u < 0.3   ? ninf
                        : u < 0.5 ? static_cast<float>(-110.0 + 30.0 * rng.NextDouble())
                                  : static_cast<float>(-15.0 * rng.NextDouble());
              }
              target[j][x] = value;
            }
            if (style == 3) {
              // exp overflows: p = +inf at two tokens (ties go to the lower index).
              target[j][static_cast<int32_t>(rng.NextBelow(vocab))] = 89.0f;
              target[j][static_cast<int32_t>(rng.NextBelow(vocab))] = 95.0f;
            }
            if (j == kGamma) break;
            for (int32_t x = 0; x < vocab; ++x) {
              const float t = target[j][x];
              if (style == 1) {
                draft_rows[j][x] = t == ninf ? ninf : t * (1.0f + 1e-6f * static_cast<float>(rng.NextDouble() - 0.5));
              } else {
                draft_rows[j][x] = t == ninf ? (rng.NextDouble() < 0.5 ? ninf : -3.0f)
                                             : t + static_cast<float>(rng.NextDouble() - 0.5);
              }
            }
          }
          std::vector<int32_t> tokens(kGamma);
          for (int32_t j = 0; j < kGamma; ++j) tokens[j] = static_cast<int32_t>(rng.NextBelow(vocab));
          SequenceSamplingParams s;
          s.seed = 4242 + i;
          s.sequence_index = i;
          batch.Add(target, draft_rows, tokens, s);
        }
        const RejectionBatchInput in = batch.input();
        RejectionHostOutputs check(in.num_sequences, 0);
        ASSERT_THAT(ValidateRejectionBatch(RejectionSampleParams{in, check.view()}), IsOk());
        const RejectionHostOutputs cpu = RunCpu(in);
        for (bool host_merge : {false, true}) {
          DeviceRunner runner;
          runner.set_host_merge(host_merge);
          ExpectSameOutputs(runner.Run(in), cpu,
                            absl::StrCat("log-probability edges, V ", vocab, " dtype ", static_cast<int>(dtype),
                                         " draft ", draft, MergeName(host_merge)));
        }
      }
    }
  }
}

// The decision on log-probabilities settles coin * q <= p from ex2 bounds
// and computes the exact weights only near the boundary: drafted tokens whose
// p / q sits at the position's own coin times 1 + delta, delta from 0.5% (the
// bounds decide) down to 0 (only the exact weights can), on both sides, with
// q = 0 and p = 0 among them, give the reference's outcomes.
TEST_F(RejectionCudaTest, LogProbabilityAcceptanceAtTheCoinMatches) {
  const float ninf = -std::numeric_limits<float>::infinity();
  constexpr int32_t kVocab = 4096, kGamma = 8, kSequences = 96;
  const double deltas[] = {-5e-3, -1e-3, -1e-5, 0.0, 0.0, 1e-5, 1e-3, 5e-3};
  for (bool draft : {true, false}) {
    SplitMix64 rng(draft ? 31 : 32);
    testing::ExplicitBatch batch(kVocab, SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, draft);
    for (int32_t i = 0; i < kSequences; ++i) {
      SequenceSamplingParams s;
      s.seed = 9100 + i;
      s.sequence_index = i;
      std::vector<std::vector<float>> target(kGamma + 1, std::vector<float>(kVocab));
      std::vector<std::vector<float>> draft_rows(kGamma, std::vector<float>(kVocab));
      for (auto& row : target) {
        for (float& v : row) v = static_cast<float>(-12.0 * rng.NextDouble()) - 2.0f;
      }
      for (auto& row : draft_rows) {
        for (float& v : row) v = static_cast<float>(-12.0 * rng.NextDouble()) - 2.0f;
      }
      std::vector<int32_t> tokens(kGamma);
      for (int32_t j = 0; j < kGamma; ++j) {
        const int32_t x = static_cast<int32_t>(rng.NextBelow(kVocab));
        tokens[j] = x;
        const double coin = AcceptCoin(s.seed, static_cast<uint32_t>(i), static_cast<uint32_t>(j));
        const double q_log = draft ? -1.0 - 3.0 * rng.NextDouble() : 0.0;
        const int32_t pick = static_cast<int32_t>(rng.NextBelow(40));
        if (draft && pick == 0) {
          draft_rows[j][x] = ninf;  // q = 0: accepted wherever p > 0
          target[j][x] = static_cast<float>(q_log);
        } else if (pick == 1) {
          target[j][x] = ninf;  // p = 0: rejected
          if (draft) draft_rows[j][x] = static_cast<float>(q_log);
        } else {
          // Mostly at or above the coin, so the decision reaches later positions.
          const double delta = deltas[pick % 8 < 3 && rng.NextBelow(3) != 0 ? 3 + pick % 5 : pick % 8];
          target[j][x] = static_cast<float>(q_log + std::log(coin) + std::log1p(delta));
          if (draft) draft_rows[j][x] = static_cast<float>(q_log);
        }
      }
      batch.Add(target, draft_rows, tokens, s);
    }
    const RejectionBatchInput in = batch.input();
    const RejectionHostOutputs cpu = RunCpu(in);
    int32_t deepest = 0;
    for (int32_t k : cpu.accepted_lengths) deepest = std::max(deepest, k);
    EXPECT_GE(deepest, 3) << "the workload should reach past the first positions";
    DeviceRunner runner;
    ExpectSameOutputs(runner.Run(in), cpu, absl::StrCat("log-probability acceptance at the coin, draft ", draft));
  }
}

// A row-pass block may take several consecutive chunks of its row (one
// row, sequence and temperature lookup for all of them): every run length,
// including runs that end on a row's partial last chunk or take the whole
// row, gives the reference's outputs: sampled and greedy logits rows,
// top-k / top-p (the filter reads the warp maxima each chunk leaves), the
// full-row check of probability rows, and a NaN that only the pass reads;
// 16-bit rows also in pairs of whole chunks.
TEST_F(RejectionCudaTest, RowPassRunsOfSeveralChunksMatch) {
  struct Case {
    SampleValueKind kind;
    SampleDtype dtype;
    int32_t vocab;
    bool filtered;
    bool full_rows;
  };
  uint64_t seed = 9100;
  for (const Case& c : {Case{SampleValueKind::kLogits, SampleDtype::kFloat32, 4096 * 5 + 1000, false, false},
                        Case{SampleValueKind::kLogits, SampleDtype::kBFloat16, 4096 * 7, false, false},
                        Case{SampleValueKind::kLogits, SampleDtype::kFloat32, 4096 * 6 + 3, false, false},
                        Case{SampleValueKind::kLogits, SampleDtype::kFloat32, 4096 * 9 + 12, true, false},
                        // 16-bit rows take two whole chunks at a time where a run has them
                        // (FullChunkPairStats): unfiltered, and filtered (both chunks' warp maxima).
                        Case{SampleValueKind::kLogits, SampleDtype::kFloat16, 4096 * 6 + 8, false, false},
                        Case{SampleValueKind::kLogits, SampleDtype::kBFloat16, 4096 * 9 + 12, true, false},
                        Case{SampleValueKind::kProbabilities, SampleDtype::kFloat16, 4096 * 4 + 100, false, true}}) {
    SamplingWorkloadOptions o = MixedWorkload(c.kind, c.dtype, /*draft=*/true, 11, c.vocab, 5, ++seed);
    if (c.filtered) {
      o.top_k = 40;
      o.top_p = 0.8f;
    }
    auto w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    RejectionBatchInput in = w->input();
    in.validate_full_rows = c.full_rows;
    std::vector<SequenceSamplingParams> sequences(in.sequences, in.sequences + o.num_sequences);
    if (c.kind == SampleValueKind::kLogits) {
      for (int32_t i = 0; i < o.num_sequences; ++i) {
        if (i % 4 == 1) sequences[i].temperature = 0.0f;
      }
    }
    in.sequences = sequences.data();
    // Sequence 6: a NaN in the last draft row's third chunk, which no
    // decision reads (the pass, or the full-row check, must find it).
    const int64_t row_bytes = int64_t{c.vocab} * SampleDtypeBytes(c.dtype);
    std::byte* element = reinterpret_cast<std::byte*>(w->draft_values.data()) +
                         (w->draft_offsets[7] - 1) * row_bytes + (2 * 4096 + 5) * SampleDtypeBytes(c.dtype);
    if (c.dtype == SampleDtype::kFloat32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(element, &nan, sizeof(nan));
    } else {
      const uint16_t nan = c.dtype == SampleDtype::kBFloat16 ? 0x7fc0 : 0x7e00;
      std::memcpy(element, &nan, sizeof(nan));
    }
    const RejectionHostOutputs cpu = RunCpu(in);
    EXPECT_EQ(cpu.status_codes[6], kRejectionBadDraftValue) << "dtype " << static_cast<int>(c.dtype);
    for (int32_t chunks : {1, 2, 3, 8}) {
      DeviceRunner runner;
      runner.set_row_pass_chunks_per_block(chunks);
      ExpectSameOutputs(runner.Run(in), cpu,
                        absl::StrCat("kind ", static_cast<int>(c.kind), " dtype ", static_cast<int>(c.dtype), " V ",
                                     c.vocab, c.filtered ? " filtered" : "", c.full_rows ? " full rows" : "",
                                     " chunks per block ", chunks));
    }
  }
}

// Drafts longer than a warp: the decision takes positions 32 on in a second
// round of its lanes (the exact-logits race preloads only 0..31, and warp 3
// prefetches the rest), so acceptance past position 31, a bonus row at
// gamma >= 32 and a draft id out of range at the last position (>= 32) must
// give the reference's outputs. With draft rows, identical draft and target
// rows (shape i % 4 == 3) accept every position.
TEST_F(RejectionCudaTest, DraftsLongerThanAWarpMatch) {
  uint64_t seed = 9400;
  for (SampleValueKind kind : {SampleValueKind::kLogits, SampleValueKind::kProbabilities}) {
    for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16}) {
      for (bool draft : {true, false}) {
        SamplingWorkloadOptions o = MixedWorkload(kind, dtype, draft, 12, 4099, 40, ++seed);
        o.gamma_min = 33;
        auto w = GenerateSamplingWorkload(o);
        ASSERT_TRUE(w.ok());
        const int32_t last = w->gamma(5) - 1;
        w->draft_tokens[w->draft_offsets[5] + last] = o.vocab_size + 1;
        const RejectionBatchInput in = w->input();
        const RejectionHostOutputs cpu = RunCpu(in);
        EXPECT_EQ(cpu.status_codes[5], kRejectionDraftTokenOutOfRange);
        EXPECT_EQ(cpu.error_positions[5], last);
        if (draft) {
          for (int32_t i : {3, 7, 11}) EXPECT_EQ(cpu.accepted_lengths[i], w->gamma(i)) << "sequence " << i;
        }
        DeviceRunner runner;
        ExpectSameOutputs(runner.Run(in), cpu,
                          absl::StrCat("kind ", static_cast<int>(kind), " dtype ", static_cast<int>(dtype),
                                       draft ? " draft rows" : " one-hot"));
      }
    }
  }
}

// More rows than a grid's y or z dimension holds (65,535), in the row
// pass's draft-first order of a filtered batch too: every sequence's
// outcome is the reference's, the last rows' included (a grid that kept
// rows in y, as one variant of the one-chunk pass did, would need them
// split; bench/sampling/results/2026-11-29-one-chunk-grid).
TEST_F(RejectionCudaTest, RowPassCoversMoreRowsThanOneGridDimension) {
  uint64_t seed = 9700;
  for (bool filtered : {false, true}) {
    // 4,096 sequences of gamma 8 to 16 with draft rows: 73,728 to 135,168 rows.
    SamplingWorkloadOptions o = MixedWorkload(SampleValueKind::kLogits, SampleDtype::kFloat32, true, 4096, 40, 16,
                                              ++seed);
    o.gamma_min = 8;
    if (filtered) {
      o.top_k = 5;
      o.top_p = 0.9f;
    }
    auto w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    const RejectionBatchInput in = w->input();
    ASSERT_GT(int64_t{in.total_draft_tokens} * 2 + in.num_sequences, 65535);
    DeviceRunner runner;
    ExpectSameOutputs(runner.Run(in), RunCpu(in), filtered ? "top-k / top-p" : "unfiltered");
  }
}

// The 16-bit row pass takes each thread's maximum and minimum on packed
// pairs (max.NaN / min.NaN on bf16x2 or f16x2): +inf (the maximum), -inf
// (the minimum) and NaN (both) in whole chunks that no decision reads, in
// target and draft rows, must each make the sequence's outcome the
// reference's invalid-value error, and the other sequences' outcomes stay
// the reference's. In one-chunk blocks, and in runs of chunks, whose chunk
// pairs carry their validity as a NaN maximum (the chunks poked are the
// first and the second of a pair, and with runs of 3 a chunk alone too).
TEST_F(RejectionCudaTest, SixteenBitPassFindsInfinitiesAndNaNsInWholeChunks) {
  struct Bits {
    uint16_t plus_inf, minus_inf, nan;
  };
  uint64_t seed = 9300;
  for (SampleDtype dtype : {SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    const Bits bits = dtype == SampleDtype::kBFloat16 ? Bits{0x7f80, 0xff80, 0x7fc0} : Bits{0x7c00, 0xfc00, 0x7e00};
    constexpr int32_t kVocab = 4096 * 6;
    SamplingWorkloadOptions o = MixedWorkload(SampleValueKind::kLogits, dtype, /*draft=*/true, 9, kVocab, 4, ++seed);
    auto w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    const int64_t row_bytes = int64_t{kVocab} * SampleDtypeBytes(dtype);
    // Element `x` of row `row` (a target row, or a draft row), moved off the
    // position's drafted token so that only the pass reads it.
    const auto poke = [&](bool draft, int64_t row, int32_t drafted, int32_t x, uint16_t value) {
      if (x == drafted) ++x;
      std::byte* base = reinterpret_cast<std::byte*>(draft ? w->draft_values.data() : w->target_values.data());
      std::memcpy(base + row * row_bytes + int64_t{x} * 2, &value, sizeof(value));
    };
    const auto drafted = [&](int32_t i, int32_t j) {
      return j < w->gamma(i) ? w->draft_tokens[w->draft_offsets[i] + j] : -1;
    };
    // Sequence 1: +inf in target row 0, chunk 1. 3: -inf in draft row 0,
    // chunk 4. 5: NaN in the bonus row, chunk 2. 7: -inf in target row 0,
    // chunk 5 (the row's last whole chunk).
    poke(false, w->draft_offsets[1] + 1, drafted(1, 0), 1 * 4096 + 11, bits.plus_inf);
    poke(true, w->draft_offsets[3], drafted(3, 0), 4 * 4096 + 300, bits.minus_inf);
    poke(false, w->draft_offsets[5] + 5 + w->gamma(5), drafted(5, w->gamma(5)), 2 * 4096 + 2047, bits.nan);
    poke(false, w->draft_offsets[7] + 7, drafted(7, 0), 5 * 4096 + 4095 - 1, bits.minus_inf);
    const RejectionBatchInput in = w->input();
    const RejectionHostOutputs cpu = RunCpu(in);
    for (int32_t i : {1, 5, 7}) EXPECT_EQ(cpu.status_codes[i], kRejectionBadTargetValue) << "sequence " << i;
    EXPECT_EQ(cpu.status_codes[3], kRejectionBadDraftValue);
    for (int32_t i : {0, 2, 4, 6, 8}) EXPECT_EQ(cpu.status_codes[i], kRejectionOk) << "sequence " << i;
    for (int32_t chunks : {0, 1, 2, 3, 6}) {
      DeviceRunner runner;
      if (chunks > 0) runner.set_row_pass_chunks_per_block(chunks);
      ExpectSameOutputs(runner.Run(in), cpu,
                        absl::StrCat("dtype ", static_cast<int>(dtype), " chunks per block ",
                                     chunks == 0 ? "planned" : absl::StrCat(chunks)));
    }
  }
}

// Probability rows with long runs of zero weight, where a warp skips the
// quads in which none of its lanes has an entrant (and their Philox draws):
// targets the caller filtered to their top 50 (renormalized) against full
// draft rows, disjoint supports, bonus rows of identical drafts, bonus rows
// of filtered targets (every draft row the filtered target, every draft
// token its most likely one: all accepted), and rows whose residual
// max(0, p - q) is zero everywhere (q = p but for the drafted token,
// weighed 4x: the recovery falls back to the race over p after every
// rejection). 8 and 96 sequences: shares of one row over 8 blocks and over
// 2, one of which sees no residual entrant at all.
TEST_F(RejectionCudaTest, ProbabilityRowsWithZeroRunsMatch) {
  constexpr int32_t kVocab = 8192;
  constexpr int32_t kTopK = 50;
  const auto filter_to_top_k = [](float* row) {
    std::vector<float> sorted(row, row + kVocab);
    std::nth_element(sorted.begin(), sorted.begin() + (kTopK - 1), sorted.end(), std::greater<float>());
    const float threshold = sorted[kTopK - 1];
    float kept = 0.0f;
    for (int32_t x = 0; x < kVocab; ++x) {
      if (row[x] < threshold) row[x] = 0.0f;
      kept += row[x];
    }
    for (int32_t x = 0; x < kVocab; ++x) row[x] /= kept;
  };
  uint64_t seed = 9200;
  for (const int32_t b : {8, 96}) {
    for (bool draft : {true, false}) {
      auto w = GenerateSamplingWorkload(
          MixedWorkload(SampleValueKind::kProbabilities, SampleDtype::kFloat32, draft, b, kVocab, 8, ++seed));
      ASSERT_TRUE(w.ok());
      float* target = reinterpret_cast<float*>(w->target_values.data());
      float* draft_rows = reinterpret_cast<float*>(w->draft_values.data());
      for (int32_t i = 0; i < b; ++i) {
        const int32_t first = w->draft_offsets[i];
        if (i % 4 == 0) {  // peaked: the target filtered to its top k
          for (int32_t j = 0; j <= w->gamma(i); ++j) {
            filter_to_top_k(target + static_cast<int64_t>(first + i + j) * kVocab);
          }
        } else if (i % 4 == 3 && draft) {  // identical: a filtered target's bonus row
          for (int32_t j = 0; j <= w->gamma(i); ++j) {
            float* p = target + static_cast<int64_t>(first + i + j) * kVocab;
            filter_to_top_k(p);
            if (j == w->gamma(i)) break;
            std::copy(p, p + kVocab, draft_rows + static_cast<int64_t>(first + j) * kVocab);
            w->draft_tokens[first + j] = static_cast<int32_t>(std::max_element(p, p + kVocab) - p);
          }
        } else if (i % 4 == 1 && draft) {  // flat: a residual of zero at every position
          for (int32_t j = 0; j < w->gamma(i); ++j) {
            const float* p = target + static_cast<int64_t>(first + i + j) * kVocab;
            float* q = draft_rows + static_cast<int64_t>(first + j) * kVocab;
            std::copy(p, p + kVocab, q);
            q[w->draft_tokens[first + j]] *= 4.0f;
          }
        }
      }
      const RejectionHostOutputs cpu = RunCpu(w->input());
      bool fell_back = false;
      for (int32_t i = 0; i < b; ++i) {
        EXPECT_EQ(cpu.status_codes[i], kRejectionOk) << "sequence " << i;
        fell_back = fell_back || (draft && i % 4 == 1 && cpu.accepted_lengths[i] < w->gamma(i));
        if (draft && i % 4 == 3) {
          EXPECT_EQ(cpu.accepted_lengths[i], w->gamma(i)) << "filtered bonus, sequence " << i;
        }
      }
      EXPECT_EQ(fell_back, draft) << "a zero residual's fallback race ran in the reference";
      for (bool host_merge : {false, true}) {
        DeviceRunner runner;
        runner.set_host_merge(host_merge);
        ExpectSameOutputs(runner.Run(w->input()), cpu,
                          absl::StrCat("b ", b, " draft ", draft, " seed ", seed, MergeName(host_merge)));
      }
    }
  }
}

// The race's plan (blocks per SM, hence shares per sequence) changes only
// the speed: 1 and 2 blocks, and 3, which the launcher takes as the 2 its
// kernel is compiled for. Every value kind, with and without draft rows, a
// batch past 32 sequences.
TEST_F(RejectionCudaTest, RaceBlocksPerSmChangeNoOutcome) {
  uint64_t seed = 9300;
  for (SampleValueKind kind :
       {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
    for (SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16}) {
      for (bool draft : {true, false}) {
        auto w = GenerateSamplingWorkload(MixedWorkload(kind, dtype, draft, 40, 32000, 8, ++seed));
        ASSERT_TRUE(w.ok());
        const RejectionHostOutputs cpu = RunCpu(w->input());
        for (int32_t blocks : {1, 2, 3}) {
          for (bool host_merge : {false, true}) {
            DeviceRunner runner;
            runner.set_race_blocks_per_sm(blocks);
            runner.set_host_merge(host_merge);
            ExpectSameOutputs(runner.Run(w->input()), cpu,
                              absl::StrCat("kind ", static_cast<int>(kind), " dtype ", static_cast<int>(dtype),
                                           " draft ", draft, " race blocks per SM ", blocks, MergeName(host_merge)));
          }
        }
      }
    }
  }
}

// Every launch leaves its scratch as it found it (race words, flags and
// tickets at zero), so the next batch on the same scratch is right: batches
// of every value kind and of both row races, each checked against the CPU
// reference, one after another on one scratch, device and host merges
// taking turns. A ticket or word left behind would leave an outcome
// unwritten (the output keeps its fill) or let a stale winner through.
TEST_F(RejectionCudaTest, BatchesInARowOnOneScratchMatch) {
  DeviceRunner runner;
  runner.keep_scratch(RejectionScratchLimits{12, 12 * 6, 20000});
  uint64_t seed = 9400;
  for (int round = 0; round < 2; ++round) {
    for (SampleValueKind kind :
         {SampleValueKind::kProbabilities, SampleValueKind::kLogits, SampleValueKind::kLogProbabilities}) {
      for (bool draft : {true, false}) {
        auto w = GenerateSamplingWorkload(MixedWorkload(kind, SampleDtype::kFloat32, draft, 12, 20000, 6, ++seed));
        ASSERT_TRUE(w.ok());
        const bool host_merge = (round + (draft ? 1 : 0)) % 2 == 1;
        runner.set_host_merge(host_merge);
        ExpectSameOutputs(runner.Run(w->input()), RunCpu(w->input()),
                          absl::StrCat("round ", round, " kind ", static_cast<int>(kind), " draft ", draft, " seed ",
                                       seed, MergeName(host_merge)));
      }
    }
  }
}

TEST_F(RejectionCudaTest, GraphReplaysGiveTheSameResults) {
  SamplingWorkloadOptions o;
  o.num_sequences = 5;
  o.vocab_size = 70000;
  o.kind = SampleValueKind::kLogits;
  o.seed = 77;
  auto w = GenerateSamplingWorkload(o);
  ASSERT_TRUE(w.ok());
  const RejectionHostOutputs cpu = RunCpu(w->input());
  // Three replays: the tickets each launch leaves at zero make the next one
  // right; host-merged, each replay rewrites every slot it folds.
  for (bool host_merge : {false, true}) {
    DeviceRunner runner;
    runner.set_host_merge(host_merge);
    ExpectSameOutputs(runner.Run(w->input(), /*replays=*/3), cpu, "graph x3" + MergeName(host_merge));
  }
}

// A host-merged launch is refused before anything is enqueued when its slots
// are not those of the race it plans (the host would fold the wrong blocks
// together) or when greedy targets, which need the token on the device, are
// asked for as well.
TEST_F(RejectionCudaTest, HostMergeNeedsTheSlotsOfItsPlanAndNoGreedyTargets) {
  RejectionBatchInput in;
  in.num_sequences = 8;
  in.vocab_size = 151936;
  in.total_draft_tokens = 64;
  const RejectionScratchLimits limits{8, 64, 151936};
  const size_t bytes = RejectionScratchBytes(limits);
  void* memory = nullptr;
  ASSERT_CUDA(cudaMalloc(&memory, bytes));
  RejectionScratch scratch;
  ASSERT_CUDA(InitRejectionScratch(memory, bytes, limits, nullptr, &scratch));
  int32_t slots = 0;
  ASSERT_CUDA(RejectionRaceSlotsPerSequence(in, scratch, &slots));
  EXPECT_EQ(slots, RejectionRaceBlocksPerSequence(8, 151936, scratch.num_sms));
  EXPECT_LE(int64_t{8} * slots, RejectionRaceSlotsBound(scratch.limits, scratch.num_sms));
  RejectionBatchOutput out;  // never written: nothing may be launched
  int32_t* unused = static_cast<int32_t*>(memory);
  out.accepted_lengths = out.next_tokens = out.status_codes = out.error_positions = unused;
  out.mismatch = static_cast<uint8_t*>(memory);
  out.race_slots = static_cast<RejectionRaceSlot*>(memory);
  out.race_slots_per_sequence = slots + 1;
  EXPECT_EQ(LaunchRejectionSample(RejectionSampleParams{in, out}, scratch, nullptr), cudaErrorInvalidValue);
  out.race_slots_per_sequence = slots;
  out.greedy_target_tokens = unused;
  EXPECT_EQ(LaunchRejectionSample(RejectionSampleParams{in, out}, scratch, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFree(memory), cudaSuccess);
}

// The row pass's plan (host only, so it runs without a GPU too): fp32 rows
// always one chunk a block; 16-bit rows in runs of 8 from 32 single-chunk
// waves, runs of 4 from 6 waves, filtered or not, never longer than
// the row. At gamma = 8 a sequence has 17 rows, V = 151,936 38 chunks: on
// 132 SMs B=8 is 6 waves, B=4 3, B=32 26, B=40 32.
constexpr int32_t kPlanChunks = 38;

TEST(RejectionRowPassPlanTest, RunsByDtypeAndBatch) {
  const auto plan = [](SampleDtype dtype, int64_t batch, int32_t chunks = kPlanChunks) {
    return RejectionRowPassChunksPerBlock(dtype, batch * 17, chunks, /*num_sms=*/132);
  };
  for (int64_t batch : {1, 8, 32, 128}) {
    EXPECT_EQ(plan(SampleDtype::kFloat32, batch), 1) << "fp32 B=" << batch;
  }
  for (SampleDtype dtype : {SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    EXPECT_EQ(plan(dtype, 1), 1);
    EXPECT_EQ(plan(dtype, 4), 1);
    EXPECT_EQ(plan(dtype, 8), 4);
    EXPECT_EQ(plan(dtype, 32), 4);
    EXPECT_EQ(plan(dtype, 40), 8);
    EXPECT_EQ(plan(dtype, 128), 8);
    // Short rows: a run is at most the row (more rows give the same waves).
    EXPECT_EQ(plan(dtype, 8 * 38 / 3, 3), 3);
    EXPECT_EQ(plan(dtype, 40 * 38 / 2, 2), 2);
  }
  // Fewer SMs, more waves for the same batch.
  EXPECT_EQ(RejectionRowPassChunksPerBlock(SampleDtype::kBFloat16, 4 * 17, kPlanChunks, 66), 4);
}

class RejectionCudaStatsTest : public ::testing::TestWithParam<testing::StatCase> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU statistical tests skipped";
  }
};

TEST_P(RejectionCudaStatsTest, DeviceTokensEqualTheReferenceAndFollowTheTarget) {
  constexpr uint64_t kSeed = 31337;
  const testing::StatCase& c = GetParam();
  const testing::ExplicitBatch batch = testing::BuildStatBatch(c, kSeed);
  const RejectionBatchInput in = testing::StatInput(c, batch);
  DeviceRunner runner;
  const RejectionHostOutputs gpu = runner.Run(in);
  ExpectSameOutputs(gpu, RunCpu(in), c.name);
  testing::ExpectStatistics(c, batch, gpu.accepted_lengths.data(), gpu.next_tokens.data(), "gpu", kSeed);
}

INSTANTIATE_TEST_SUITE_P(Cases, RejectionCudaStatsTest, ::testing::ValuesIn(testing::StatCases()),
                         [](const ::testing::TestParamInfo<testing::StatCase>& info) { return info.param.name; });

}  // namespace
}  // namespace specverify
