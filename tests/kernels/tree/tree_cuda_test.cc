// GPU token-tree verification against the CPU reference, bit for bit: greedy
// verify+pack over random trees (sizes, shapes, duplicates, ragged batches up
// to 4096 trees, odd row sizes, graph replays), chains given as trees against
// the chain kernels' reference, sampled trees over dtypes, vocabularies,
// cluster sizes, with and without draft rows, bad values, the pack of
// sampled paths, and the statistical cases on the device. Skips visibly
// where no GPU is present.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/tree/tree_cuda.h"
#include "kernels/tree/tree_reference.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"
#include "tests/kernels/tree/tree_stat_cases.h"
#include "tests/kernels/tree/tree_test_util.h"

namespace specverify {
namespace {

using testing::RandomSampledTreeOptions;
using testing::SampledTreeBatch;
using testing::TreeSampleOutputs;

class DeviceMemory {
 public:
  ~DeviceMemory() {
    for (void* p : owned_) cudaFree(p);
  }
  template <typename T>
  T* Upload(const T* host, size_t count) {
    T* d = Alloc<T>(count);
    if (count > 0) {
      EXPECT_EQ(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    return d;
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
  std::vector<T> Download(const T* device, size_t count) {
    std::vector<T> host(count);
    if (count > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }

 private:
  std::vector<void*> owned_;
};

// Each tree's KV rows in a device buffer of its own, `shift` bytes past an
// allocation's start (as a worker's region holds them): the device table of
// where each tree's rows start, for kv_sources. The rows are the contiguous
// `kv`'s, so a pack through the table must equal the pack of `kv`.
const std::byte* const* ScatterTreeRows(DeviceMemory& mem, const std::byte* kv, const int32_t* offsets,
                                        int32_t trees, int64_t row_bytes, int64_t shift) {
  std::vector<const std::byte*> sources(trees);
  for (int32_t i = 0; i < trees; ++i) {
    const int64_t bytes = int64_t{offsets[i + 1] - offsets[i]} * row_bytes;
    std::vector<std::byte> padded(static_cast<size_t>(shift + bytes), std::byte{0x3C});
    std::copy(kv + int64_t{offsets[i]} * row_bytes, kv + int64_t{offsets[i + 1]} * row_bytes,
              padded.begin() + shift);
    sources[i] = mem.Upload(padded.data(), padded.size()) + shift;
  }
  return mem.Upload(sources.data(), sources.size());
}

// The largest power of two <= 16 dividing `shift` (cudaMalloc's 256-byte
// alignment supplies the rest).
int32_t ShiftAlignment(int64_t shift) {
  int32_t a = 16;
  while (a > 1 && shift % a != 0) a /= 2;
  return a;
}

// Trees grouped into requests of 1-3 trees, as a batch of several requests
// holds them: every other request takes its rows into an output of its own
// (a KV_RETURN_REGION kv_output), `shift` bytes past a 256-byte boundary of
// one device buffer, its trees' rows one after another; the others at their
// packed place (destination packed_kv, origin 0); the fourth request, where
// there is one, nowhere (a null destination).
struct RowDestinationPlan {
  struct Output {
    int32_t first_tree = 0, trees = 0;
    std::byte* at = nullptr;   // device
    int64_t capacity = 0;      // bytes: every node's row
  };
  TreeRowDestinations device;  // tables in device memory
  std::vector<Output> outputs;
  std::vector<uint8_t> at_packed_place;  // per tree
};

constexpr std::byte kOutputFill{0x5A};

RowDestinationPlan PlanRowDestinations(DeviceMemory& mem, int32_t b, const int32_t* node_offsets,
                                       int64_t row_bytes, std::byte* packed_kv, int64_t shift) {
  RowDestinationPlan plan;
  plan.at_packed_place.assign(b, 0);
  std::vector<int32_t> origins(b);
  std::vector<int64_t> output_offsets;  // into the buffer, per output
  std::vector<int32_t> output_of(b, -1);
  int64_t buffer_bytes = 0;
  for (int32_t first = 0, r = 0; first < b; ++r) {
    const int32_t trees = std::min(b - first, 1 + (r * 7) % 3);
    for (int32_t i = first; i < first + trees; ++i) origins[i] = r % 2 == 0 ? first : 0;
    if (r % 2 == 0) {
      RowDestinationPlan::Output o;
      o.first_tree = first;
      o.trees = trees;
      o.capacity = int64_t{node_offsets[first + trees] - node_offsets[first]} * row_bytes;
      output_offsets.push_back(buffer_bytes + shift);
      buffer_bytes += (shift + o.capacity + 255) / 256 * 256;
      for (int32_t i = first; i < first + trees; ++i) output_of[i] = static_cast<int32_t>(plan.outputs.size());
      plan.outputs.push_back(o);
    } else if (r != 3) {
      for (int32_t i = first; i < first + trees; ++i) plan.at_packed_place[i] = 1;
    }
    first += trees;
  }
  std::byte* buffer = mem.Alloc<std::byte>(static_cast<size_t>(std::max<int64_t>(buffer_bytes, 1)));
  EXPECT_EQ(cudaMemset(buffer, static_cast<int>(kOutputFill), static_cast<size_t>(std::max<int64_t>(buffer_bytes, 1))),
            cudaSuccess);
  for (size_t k = 0; k < plan.outputs.size(); ++k) plan.outputs[k].at = buffer + output_offsets[k];
  std::vector<std::byte*> destinations(b);
  for (int32_t i = 0; i < b; ++i) {
    destinations[i] = output_of[i] >= 0 ? plan.outputs[output_of[i]].at
                      : plan.at_packed_place[i] ? packed_kv
                                                : nullptr;
  }
  plan.device.destinations = mem.Upload(destinations.data(), destinations.size());
  plan.device.origins = mem.Upload(origins.data(), origins.size());
  plan.device.alignment = ShiftAlignment(shift);
  return plan;
}

// Each output holds its request's rows as the reference packed them (the
// rows from its first tree's packed offset on) and nothing past them; trees
// at their packed place are there; the packed places of the others are
// untouched (DeviceMemory fills 0xEE).
void ExpectRowsAtDestinations(DeviceMemory& mem, const RowDestinationPlan& plan,
                              const std::vector<int32_t>& packed_offsets, const std::byte* expected_packed,
                              const std::byte* packed_kv, int64_t row_bytes) {
  for (const RowDestinationPlan::Output& o : plan.outputs) {
    SCOPED_TRACE(absl::StrCat("output of trees ", o.first_tree, "..", o.first_tree + o.trees - 1));
    const std::vector<std::byte> got = mem.Download(o.at, static_cast<size_t>(o.capacity));
    const int64_t rows = packed_offsets[o.first_tree + o.trees] - packed_offsets[o.first_tree];
    const std::byte* want = expected_packed + int64_t{packed_offsets[o.first_tree]} * row_bytes;
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + rows * row_bytes, want)) << "rows in the output";
    EXPECT_TRUE(std::all_of(got.begin() + rows * row_bytes, got.end(), [](std::byte x) { return x == kOutputFill; }))
        << "written past the output's rows";
  }
  const int32_t b = static_cast<int32_t>(plan.at_packed_place.size());
  const std::vector<std::byte> packed = mem.Download(packed_kv, int64_t{packed_offsets[b]} * row_bytes);
  for (int32_t i = 0; i < b; ++i) {
    const int64_t begin = int64_t{packed_offsets[i]} * row_bytes, end = int64_t{packed_offsets[i + 1]} * row_bytes;
    if (plan.at_packed_place[i]) {
      EXPECT_TRUE(std::equal(packed.begin() + begin, packed.begin() + end, expected_packed + begin))
          << "tree " << i << " at its packed place";
    } else {
      EXPECT_TRUE(std::all_of(packed.begin() + begin, packed.begin() + end,
                              [](std::byte x) { return x == std::byte{0xEE}; }))
          << "tree " << i << " answered elsewhere was packed too";
    }
  }
}

class TreeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU tree tests skipped";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    absl::StatusOr<TreeScratchBuffer> scratch = AllocateTreeScratch(kMaxBatchSequences, stream_);
    ASSERT_TRUE(scratch.ok()) << scratch.status();
    scratch_ = std::move(*scratch);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs the greedy kernel (through a graph replayed `replays` times when
  // > 0) and compares every output with the CPU reference.
  void ExpectGreedyParity(const GreedyBatchInput& host_in, const std::vector<int32_t>& parents,
                          const std::string& what, int replays = 0) {
    SCOPED_TRACE(what);
    const int32_t b = host_in.num_sequences;
    const int64_t total = host_in.draft_offsets[b];
    const int64_t rb = host_in.row_bytes;
    // CPU.
    GreedyHostOutputs cpu(host_in, std::byte{0xA5});
    std::vector<int32_t> cpu_nodes(total, -7);
    TreeGreedyVerifyParams cp{host_in, parents.data(), cpu.view(), cpu_nodes.data()};
    TreeLimits limits;
    limits.max_tree_nodes = kMaxTreeNodes;
    ASSERT_TRUE(ValidateTreeGreedyBatch(cp, limits).ok());
    ReferenceTreeGreedyVerifyPack(cp);
    // GPU.
    DeviceMemory mem;
    TreeGreedyDeviceBatch batch;
    GreedyBatchInput& in = batch.params.input;
    in = host_in;
    in.draft_offsets = mem.Upload(host_in.draft_offsets, b + 1);
    in.draft_tokens = mem.Upload(host_in.draft_tokens, total);
    in.target_tokens = mem.Upload(host_in.target_tokens, total + b);
    in.draft_kv = rb > 0 ? mem.Upload(host_in.draft_kv, total * rb) : nullptr;
    batch.params.parent_indices = mem.Upload(parents.data(), total);
    GreedyBatchOutput& out = batch.params.output;
    out.accepted_lengths = mem.Alloc<int32_t>(b);
    out.next_tokens = mem.Alloc<int32_t>(b);
    out.mismatch = mem.Alloc<uint8_t>(b);
    out.packed_row_offsets = mem.Alloc<int32_t>(b + 1);
    out.packed_kv = rb > 0 ? mem.Alloc<std::byte>(total * rb) : nullptr;
    batch.params.accepted_nodes = mem.Alloc<int32_t>(total);
    batch.total_nodes = total;
    ASSERT_TRUE(ValidateTreeGreedyDeviceBatch(batch, scratch_.view).ok());
    if (replays == 0) {
      ASSERT_EQ(LaunchTreeGreedyVerifyPack(batch, scratch_.view, stream_), cudaSuccess);
    } else {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
      ASSERT_EQ(LaunchTreeGreedyVerifyPack(batch, scratch_.view, stream_), cudaSuccess);
      ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (int r = 0; r < replays; ++r) ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
      ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
      ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(mem.Download(out.accepted_lengths, b), cpu.accepted_lengths);
    EXPECT_EQ(mem.Download(out.next_tokens, b), cpu.next_tokens);
    EXPECT_EQ(mem.Download(out.mismatch, b), cpu.mismatch);
    EXPECT_EQ(mem.Download(out.packed_row_offsets, b + 1), cpu.packed_row_offsets);
    const int32_t accepted = cpu.packed_row_offsets[b];
    const std::vector<int32_t> gpu_nodes = mem.Download(batch.params.accepted_nodes, accepted);
    EXPECT_TRUE(std::equal(gpu_nodes.begin(), gpu_nodes.end(), cpu_nodes.begin())) << "accepted_nodes";
    if (rb > 0) {
      const std::vector<std::byte> kv = mem.Download(out.packed_kv, accepted * rb);
      EXPECT_TRUE(std::equal(kv.begin(), kv.end(), cpu.packed_kv.begin())) << "packed_kv";
      // Rows past the accepted total are never written.
      const std::vector<std::byte> tail = mem.Download(out.packed_kv, total * rb);
      EXPECT_TRUE(std::all_of(tail.begin() + accepted * rb, tail.end(), [](std::byte x) { return x == std::byte{0xEE}; }))
          << "packed_kv written past the accepted rows";
      // The same batch with each tree's rows where a worker's region would
      // hold them (kv_sources), at two alignments: the same rows come out.
      for (const int64_t shift : {int64_t{16}, int64_t{4}, int64_t{1}}) {
        SCOPED_TRACE(absl::StrCat("kv_sources, shift ", shift));
        batch.params.kv_sources = ScatterTreeRows(mem, host_in.draft_kv, host_in.draft_offsets, b, rb, shift);
        batch.params.kv_source_alignment = ShiftAlignment(shift);
        out.packed_kv = mem.Alloc<std::byte>(total * rb);
        ASSERT_EQ(LaunchTreeGreedyVerifyPack(batch, scratch_.view, stream_), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        EXPECT_EQ(mem.Download(out.packed_row_offsets, b + 1), cpu.packed_row_offsets);
        const std::vector<std::byte> from_sources = mem.Download(out.packed_kv, accepted * rb);
        EXPECT_TRUE(std::equal(from_sources.begin(), from_sources.end(), cpu.packed_kv.begin()))
            << "packed_kv from kv_sources";
      }
      // Some requests' rows answered straight into outputs of their own
      // (row destinations), from the staged rows and from kv_sources, at
      // three output alignments: the reference's packed rows, each where
      // its plan puts it.
      for (const bool from_sources : {false, true}) {
        for (const int64_t shift : {int64_t{0}, int64_t{8}, int64_t{2}}) {
          SCOPED_TRACE(absl::StrCat("row destinations, shift ", shift, from_sources ? ", kv_sources" : ""));
          batch.params.kv_sources =
              from_sources ? ScatterTreeRows(mem, host_in.draft_kv, host_in.draft_offsets, b, rb, 4) : nullptr;
          batch.params.kv_source_alignment = from_sources ? 4 : 1;
          out.packed_kv = mem.Alloc<std::byte>(total * rb);
          const RowDestinationPlan plan = PlanRowDestinations(mem, b, host_in.draft_offsets, rb, out.packed_kv, shift);
          batch.params.row_destinations = plan.device;
          ASSERT_TRUE(ValidateTreeGreedyDeviceBatch(batch, scratch_.view).ok());
          ASSERT_EQ(LaunchTreeGreedyVerifyPack(batch, scratch_.view, stream_), cudaSuccess);
          ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
          EXPECT_EQ(mem.Download(out.accepted_lengths, b), cpu.accepted_lengths);
          EXPECT_EQ(mem.Download(out.packed_row_offsets, b + 1), cpu.packed_row_offsets);
          const std::vector<int32_t> nodes = mem.Download(batch.params.accepted_nodes, accepted);
          EXPECT_TRUE(std::equal(nodes.begin(), nodes.end(), cpu_nodes.begin())) << "accepted_nodes";
          ExpectRowsAtDestinations(mem, plan, cpu.packed_row_offsets, cpu.packed_kv.data(), out.packed_kv, rb);
        }
      }
      batch.params.kv_sources = nullptr;
      batch.params.row_destinations = {};
    }
  }

  cudaStream_t stream_ = nullptr;
  TreeScratchBuffer scratch_;
};

TEST_F(TreeCudaTest, GreedyMatchesTheReferenceOnRandomTrees) {
  struct Point {
    int32_t trees, nodes;
    int64_t row_bytes;
    double dup;
  };
  const Point points[] = {{1, 1, 16, 0.0},   {7, 64, 4096, 0.2}, {32, 64, 4096, 0.0}, {33, 256, 96, 0.3},
                          {128, 16, 4100, 0.0}, {333, 100, 6, 0.1}, {4096, 16, 64, 0.0}, {5, 1024, 0, 0.2}};
  uint64_t seed = 100;
  for (const Point& pt : points) {
    TreeWorkloadOptions o;
    o.num_trees = pt.trees;
    o.num_nodes = pt.nodes;
    o.row_bytes = pt.row_bytes;
    o.duplicate_sibling_rate = pt.dup;
    o.level_acceptance = {0.95, 0.9, 0.8};
    o.seed = ++seed;
    absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
    ASSERT_TRUE(w.ok()) << w.status();
    ExpectGreedyParity(w->input(), w->parent_indices,
                       absl::StrCat("b ", pt.trees, " n ", pt.nodes, " row ", pt.row_bytes, " seed ", o.seed));
  }
}

TEST_F(TreeCudaTest, GreedyChainsAndNamedShapes) {
  for (const TreeShape& shape : {ChainShape(256), MedusaStyleShape(), EagleStyleShape(), *FullTreeShape(4, 3)}) {
    TreeWorkloadOptions o;
    o.num_trees = 64;
    o.shape = shape;
    o.row_bytes = 4096;
    o.level_acceptance = {1.0, 0.95};
    absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
    ASSERT_TRUE(w.ok());
    ExpectGreedyParity(w->input(), w->parent_indices, absl::StrCat("shape of ", shape.num_nodes(), " nodes"));
  }
}

TEST_F(TreeCudaTest, GreedyGraphReplaysGiveTheSameResults) {
  TreeWorkloadOptions o;
  o.num_trees = 300;
  o.num_nodes = 64;
  o.row_bytes = 256;
  absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  ExpectGreedyParity(w->input(), w->parent_indices, "graph", /*replays=*/3);
  // And a plain launch after the replays (epochs advanced by the graph).
  ExpectGreedyParity(w->input(), w->parent_indices, "after graph");
}

// Origins the host would refuse (after their tree, past the batch), written
// to the device anyway: the kernel clamps them instead of waiting forever
// for a look-back word no tree publishes; the walk's results are unaffected.
TEST_F(TreeCudaTest, GreedyPackFinishesWithOriginsPastTheirTrees) {
  TreeWorkloadOptions o;
  o.num_trees = 64;
  o.num_nodes = 32;
  o.row_bytes = 64;
  absl::StatusOr<TreeGreedyWorkload> w = GenerateTreeGreedyWorkload(o);
  ASSERT_TRUE(w.ok());
  const GreedyBatchInput host_in = w->input();
  const int32_t b = host_in.num_sequences;
  const int64_t total = host_in.draft_offsets[b];
  GreedyHostOutputs cpu(host_in, std::byte{0xA5});
  std::vector<int32_t> cpu_nodes(total, -7);
  ReferenceTreeGreedyVerifyPack({host_in, w->parent_indices.data(), cpu.view(), cpu_nodes.data()});
  DeviceMemory mem;
  TreeGreedyDeviceBatch batch;
  GreedyBatchInput& in = batch.params.input;
  in = host_in;
  in.draft_offsets = mem.Upload(host_in.draft_offsets, b + 1);
  in.draft_tokens = mem.Upload(host_in.draft_tokens, total);
  in.target_tokens = mem.Upload(host_in.target_tokens, total + b);
  in.draft_kv = mem.Upload(host_in.draft_kv, total * o.row_bytes);
  batch.params.parent_indices = mem.Upload(w->parent_indices.data(), total);
  GreedyBatchOutput& out = batch.params.output;
  out.accepted_lengths = mem.Alloc<int32_t>(b);
  out.next_tokens = mem.Alloc<int32_t>(b);
  out.mismatch = mem.Alloc<uint8_t>(b);
  out.packed_row_offsets = mem.Alloc<int32_t>(b + 1);
  out.packed_kv = mem.Alloc<std::byte>(total * o.row_bytes);
  batch.params.accepted_nodes = mem.Alloc<int32_t>(total);
  batch.total_nodes = total;
  const std::vector<std::byte*> destinations(b, out.packed_kv);
  // Past the batch: no tree there ever publishes its look-back word.
  const std::vector<int32_t> origins(b, b + 7);
  batch.params.row_destinations = {mem.Upload(destinations.data(), b), mem.Upload(origins.data(), b), 16};
  ASSERT_EQ(LaunchTreeGreedyVerifyPack(batch, scratch_.view, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(mem.Download(out.accepted_lengths, b), cpu.accepted_lengths);
  EXPECT_EQ(mem.Download(out.packed_row_offsets, b + 1), cpu.packed_row_offsets);
}

// --- Sampled ------------------------------------------------------------------------

struct SampledRun {
  TreeSampleOutputs out;
  std::vector<int32_t> packed_row_offsets, accepted_nodes;
  std::vector<std::byte> packed_kv;
};

// Runs the sampled kernel and then the pack of its paths on KV rows of
// `row_bytes` derived from the node index.
// Row tables for `rows` rows of `row_bytes` staged contiguously at
// `values` (device): each row copied to its own 16-byte-aligned slot of a new
// buffer, in reverse order, as rows scattered over a worker's region are.
const void* const* ScatterRows(DeviceMemory& mem, const void* values, int64_t rows, int64_t row_bytes) {
  const int64_t stride = (row_bytes + 31) / 16 * 16;  // aligned, with a gap
  std::byte* scattered = mem.Alloc<std::byte>(static_cast<size_t>(rows * stride));
  std::vector<const void*> table(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* to = scattered + (rows - 1 - r) * stride;
    EXPECT_EQ(cudaMemcpy(to, static_cast<const std::byte*>(values) + r * row_bytes, row_bytes,
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
    table[static_cast<size_t>(r)] = to;
  }
  return mem.Upload(table.data(), table.size());
}

SampledRun RunSampledOnDevice(const SampledTreeBatch& batch, int32_t cluster_blocks, int64_t row_bytes,
                              const TreeScratch& scratch, cudaStream_t stream, bool row_tables = false) {
  const RejectionBatchInput host = batch.input();
  const int32_t b = host.num_sequences;
  const int32_t total = host.total_draft_tokens;
  const int64_t row = int64_t{host.vocab_size} * SampleDtypeBytes(host.dtype);
  DeviceMemory mem;
  TreeSampleParams p;
  p.input = host;
  p.input.draft_offsets = mem.Upload(host.draft_offsets, b + 1);
  p.input.draft_tokens = mem.Upload(host.draft_tokens, total);
  p.input.target_values = mem.Upload(batch.target_.data(), (int64_t{total} + b) * row);
  p.input.draft_values = host.has_draft_probs ? mem.Upload(batch.draft_.data(), int64_t{total} * row) : nullptr;
  p.input.sequences = mem.Upload(host.sequences, b);
  if (row_tables) {
    // The same rows read through row tables (distributions in a region).
    p.input.target_rows = ScatterRows(mem, p.input.target_values, int64_t{total} + b, row);
    p.input.draft_rows =
        host.has_draft_probs ? ScatterRows(mem, p.input.draft_values, total, row) : nullptr;
    p.input.target_values = nullptr;
    p.input.draft_values = nullptr;
  }
  p.parent_indices = mem.Upload(batch.parents_.data(), total);
  p.output.accepted_lengths = mem.Alloc<int32_t>(b);
  p.output.next_tokens = mem.Alloc<int32_t>(b);
  p.output.mismatch = mem.Alloc<uint8_t>(b);
  p.output.status_codes = mem.Alloc<int32_t>(b);
  p.output.error_positions = mem.Alloc<int32_t>(b);
  p.path_nodes = mem.Alloc<int32_t>(total);
  p.row_reads = mem.Alloc<int32_t>(b);
  EXPECT_EQ(LaunchTreeSample(p, stream, cluster_blocks), cudaSuccess);
  std::vector<std::byte> kv(static_cast<size_t>(total) * row_bytes);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<std::byte>((i * 131 + i / 7) & 0xff);
  TreePackParams pack;
  pack.num_trees = b;
  pack.node_offsets = p.input.draft_offsets;
  pack.accepted_lengths = p.output.accepted_lengths;
  pack.path_nodes = p.path_nodes;
  pack.row_bytes = row_bytes;
  pack.draft_kv = row_bytes > 0 ? mem.Upload(kv.data(), kv.size()) : nullptr;
  pack.packed_row_offsets = mem.Alloc<int32_t>(b + 1);
  pack.accepted_nodes = mem.Alloc<int32_t>(total);
  pack.packed_kv = row_bytes > 0 ? mem.Alloc<std::byte>(kv.size()) : nullptr;
  EXPECT_EQ(LaunchTreePack(pack, scratch, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  SampledRun r{TreeSampleOutputs(b, total, 0), {}, {}, {}};
  r.out.accepted_lengths = mem.Download(p.output.accepted_lengths, b);
  r.out.next_tokens = mem.Download(p.output.next_tokens, b);
  r.out.mismatch = mem.Download(p.output.mismatch, b);
  r.out.status_codes = mem.Download(p.output.status_codes, b);
  r.out.error_positions = mem.Download(p.output.error_positions, b);
  r.out.path_nodes = mem.Download(p.path_nodes, total);
  r.out.row_reads = mem.Download(p.row_reads, b);
  r.packed_row_offsets = mem.Download(pack.packed_row_offsets, b + 1);
  r.accepted_nodes = mem.Download(pack.accepted_nodes, r.packed_row_offsets[b]);
  if (row_bytes > 0) r.packed_kv = mem.Download(pack.packed_kv, int64_t{r.packed_row_offsets[b]} * row_bytes);
  // The CPU pack of the same paths, for comparison.
  TreePackParams cpu_pack = pack;
  std::vector<int32_t> offsets(b + 1), nodes(total);
  std::vector<std::byte> packed(kv.size());
  cpu_pack.node_offsets = host.draft_offsets;
  cpu_pack.accepted_lengths = r.out.accepted_lengths.data();
  cpu_pack.path_nodes = r.out.path_nodes.data();
  cpu_pack.draft_kv = kv.data();
  cpu_pack.packed_row_offsets = offsets.data();
  cpu_pack.accepted_nodes = nodes.data();
  cpu_pack.packed_kv = row_bytes > 0 ? packed.data() : nullptr;
  ReferenceTreePack(cpu_pack);
  EXPECT_EQ(offsets, r.packed_row_offsets) << "pack offsets";
  EXPECT_TRUE(std::equal(r.accepted_nodes.begin(), r.accepted_nodes.end(), nodes.begin())) << "pack accepted_nodes";
  EXPECT_TRUE(std::equal(r.packed_kv.begin(), r.packed_kv.end(), packed.begin())) << "pack rows";
  if (row_bytes > 0) {
    // The pack of the same paths with each tree's rows in a buffer of its
    // own, 4 bytes past its start (kv_sources): the same rows.
    pack.kv_sources = ScatterTreeRows(mem, kv.data(), host.draft_offsets, b, row_bytes, 4);
    pack.kv_source_alignment = 4;
    pack.packed_kv = mem.Alloc<std::byte>(kv.size());
    EXPECT_EQ(LaunchTreePack(pack, scratch, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<std::byte> from_sources =
        mem.Download(pack.packed_kv, int64_t{r.packed_row_offsets[b]} * row_bytes);
    EXPECT_EQ(from_sources, r.packed_kv) << "pack rows from kv_sources";
    // And with some requests' rows answered into outputs of their own.
    pack.packed_kv = mem.Alloc<std::byte>(kv.size());
    const RowDestinationPlan plan = PlanRowDestinations(mem, b, host.draft_offsets, row_bytes, pack.packed_kv, 4);
    pack.row_destinations = plan.device;
    EXPECT_EQ(LaunchTreePack(pack, scratch, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(mem.Download(pack.packed_row_offsets, b + 1), r.packed_row_offsets);
    ExpectRowsAtDestinations(mem, plan, r.packed_row_offsets, packed.data(), pack.packed_kv, row_bytes);
  }
  return r;
}

void ExpectSampledParity(const SampledTreeBatch& batch, const SampledRun& gpu, const std::string& what) {
  SCOPED_TRACE(what);
  TreeSampleOutputs cpu(batch.num_trees(), batch.total_nodes(), 0xA5);
  const TreeSampleParams params = cpu.params(batch);
  ReferenceTreeSample(params);
  int reported = 0;
  for (int32_t i = 0; i < batch.num_trees() && reported < 5; ++i) {
    bool same = gpu.out.accepted_lengths[i] == cpu.accepted_lengths[i] &&
                gpu.out.next_tokens[i] == cpu.next_tokens[i] && gpu.out.mismatch[i] == cpu.mismatch[i] &&
                gpu.out.status_codes[i] == cpu.status_codes[i] &&
                gpu.out.error_positions[i] == cpu.error_positions[i] && gpu.out.row_reads[i] == cpu.row_reads[i];
    for (int32_t d = 0; same && d < cpu.accepted_lengths[i]; ++d) {
      same = gpu.out.path_nodes[batch.offsets_[i] + d] == cpu.path_nodes[batch.offsets_[i] + d];
    }
    if (!same) {
      ++reported;
      ADD_FAILURE() << "tree " << i << ": gpu (depth " << gpu.out.accepted_lengths[i] << ", next "
                    << gpu.out.next_tokens[i] << ", code " << gpu.out.status_codes[i] << " @"
                    << gpu.out.error_positions[i] << ", rows " << gpu.out.row_reads[i] << ") vs cpu (depth "
                    << cpu.accepted_lengths[i] << ", next " << cpu.next_tokens[i] << ", code " << cpu.status_codes[i]
                    << " @" << cpu.error_positions[i] << ", rows " << cpu.row_reads[i] << ")";
    }
  }
}

// The sampled kernel needs thread-block clusters (TreeSamplingSupported):
// elsewhere it is refused, which the server answers FAILED_PRECONDITION.
class TreeCudaSampledTest : public TreeCudaTest {
 protected:
  void SetUp() override {
    TreeCudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    bool supported = false;
    ASSERT_EQ(TreeSamplingSupported(&supported), cudaSuccess);
    if (!supported) GTEST_SKIP() << "this device does not run the build's sm_90 code: sampled trees need clusters";
  }
};

TEST_F(TreeCudaSampledTest, SampledMatchesTheReferenceAcrossTheGrid) {
  struct Point {
    int32_t trees, vocab, max_nodes;
  };
  const Point points[] = {{1, 97, 4}, {7, 4099, 24}, {33, 97, 64}, {5, 32000, 64}, {3, 151936, 16}};
  uint64_t seed = 900;
  for (const Point& pt : points) {
    for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kFloat16, SampleDtype::kBFloat16}) {
      for (const bool draft : {true, false}) {
        RandomSampledTreeOptions o;
        o.num_trees = pt.trees;
        o.vocab = pt.vocab;
        o.max_nodes = pt.max_nodes;
        o.dtype = dtype;
        o.has_draft = draft;
        o.seed = ++seed;
        const SampledTreeBatch batch = testing::RandomSampledTrees(o);
        const std::string what = absl::StrCat("b ", pt.trees, " V ", pt.vocab, " dtype ", static_cast<int>(dtype),
                                              " draft ", draft, " seed ", o.seed);
        ExpectSampledParity(batch, RunSampledOnDevice(batch, 0, 64, scratch_.view, stream_), what);
      }
    }
  }
}

// Distribution rows read through row tables (the worker's region) give the
// reference's outcome, as the staged rows do, on vocabularies with and
// without the vector loads and with and without draft rows.
TEST_F(TreeCudaSampledTest, SampledRowsThroughRowTablesMatchTheReference) {
  uint64_t seed = 1700;
  for (const int32_t vocab : {97, 4096, 32000}) {
    for (const bool draft : {true, false}) {
      RandomSampledTreeOptions o;
      o.num_trees = 9;
      o.vocab = vocab;
      o.max_nodes = 24;
      o.dtype = vocab == 4096 ? SampleDtype::kBFloat16 : SampleDtype::kFloat32;
      o.has_draft = draft;
      o.seed = ++seed;
      const SampledTreeBatch batch = testing::RandomSampledTrees(o);
      ExpectSampledParity(batch, RunSampledOnDevice(batch, 0, 16, scratch_.view, stream_, /*row_tables=*/true),
                          absl::StrCat("row tables, V ", vocab, " draft ", draft, " seed ", o.seed));
    }
  }
}

TEST_F(TreeCudaSampledTest, SampledClusterSizesGiveIdenticalResults) {
  RandomSampledTreeOptions o;
  o.num_trees = 8;
  o.vocab = 65543;  // 17 chunks, odd: the scalar-load path
  o.max_nodes = 24;
  o.seed = 4242;
  const SampledTreeBatch batch = testing::RandomSampledTrees(o);
  for (const int32_t cluster : {1, 2, 3, 8, 16}) {
    ExpectSampledParity(batch, RunSampledOnDevice(batch, cluster, 4096, scratch_.view, stream_),
                        absl::StrCat("cluster ", cluster));
  }
}

TEST_F(TreeCudaSampledTest, SampledChainsMatchTheChainSampler) {
  for (const bool draft : {true, false}) {
    SamplingWorkloadOptions o;
    o.num_sequences = 33;
    o.gamma_min = 1;
    o.gamma_max = 16;
    o.vocab_size = 32000;
    o.has_draft_probs = draft;
    o.draft_noise = 0.3f;
    o.sequences_per_request = 4;
    absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
    ASSERT_TRUE(w.ok());
    RejectionHostOutputs chain(o.num_sequences, 0xA5);
    ReferenceRejectionSample(RejectionSampleParams{w->input(), chain.view()});
    SampledTreeBatch batch(o.vocab_size, o.dtype, draft);
    const int64_t row = int64_t{o.vocab_size} * 4;
    for (int32_t i = 0; i < o.num_sequences; ++i) {
      const int32_t g = w->gamma(i);
      std::vector<int32_t> parents(g), tokens(w->draft_tokens.begin() + w->draft_offsets[i],
                                              w->draft_tokens.begin() + w->draft_offsets[i + 1]);
      for (int32_t j = 0; j < g; ++j) parents[j] = j - 1;
      const auto t0 = w->target_values.begin() + (int64_t{w->draft_offsets[i]} + i) * row;
      const std::vector<std::byte> target(t0, t0 + (g + 1) * row);
      std::vector<std::byte> drafts;
      if (draft) {
        const auto d0 = w->draft_values.begin() + int64_t{w->draft_offsets[i]} * row;
        drafts.assign(d0, d0 + g * row);
      }
      batch.AddEncoded(parents, tokens, target, drafts, w->sequences[i]);
    }
    const SampledRun gpu = RunSampledOnDevice(batch, 0, 0, scratch_.view, stream_);
    EXPECT_EQ(gpu.out.accepted_lengths, chain.accepted_lengths) << "draft " << draft;
    EXPECT_EQ(gpu.out.next_tokens, chain.next_tokens) << "draft " << draft;
    EXPECT_EQ(gpu.out.mismatch, chain.mismatch) << "draft " << draft;
  }
}

// The sampled workload generator's trees (the load generator's), on named
// shapes, against both the CPU reference and its outcome helper.
TEST_F(TreeCudaSampledTest, SampledWorkloadShapesMatchTheReference) {
  for (const bool draft : {true, false}) {
    for (const TreeShape& shape : {MedusaStyleShape(), EagleStyleShape()}) {
      TreeSampledWorkloadOptions o;
      o.num_trees = 9;
      o.shape = shape;
      o.vocab_size = 32000;
      o.dtype = SampleDtype::kFloat16;
      o.has_draft_probs = draft;
      o.level_acceptance = {0.9, 0.8, 0.7};
      o.sequences_per_request = 3;
      absl::StatusOr<TreeSampledWorkload> w = GenerateTreeSampledWorkload(o);
      ASSERT_TRUE(w.ok());
      SampledTreeBatch batch(o.vocab_size, o.dtype, draft);
      const int64_t row = int64_t{o.vocab_size} * 2;
      for (int32_t i = 0; i < w->num_trees(); ++i) {
        const int32_t first = w->node_offsets[i], n = w->node_offsets[i + 1] - first;
        const auto t0 = w->target_values.begin() + (int64_t{first} + i) * row;
        std::vector<std::byte> drafts;
        if (draft) drafts.assign(w->draft_values.begin() + first * row, w->draft_values.begin() + (first + n) * row);
        batch.AddEncoded(std::vector<int32_t>(w->parent_indices.begin() + first, w->parent_indices.begin() + first + n),
                         std::vector<int32_t>(w->draft_tokens.begin() + first, w->draft_tokens.begin() + first + n),
                         std::vector<std::byte>(t0, t0 + (n + 1) * row), drafts, w->sequences[i]);
      }
      const SampledRun gpu = RunSampledOnDevice(batch, 0, 128, scratch_.view, stream_);
      const std::string what = absl::StrCat("shape of ", shape.num_nodes(), " nodes, draft ", draft);
      ExpectSampledParity(batch, gpu, what);
      const TreeSampledExpected e = ReferenceTreeOutcome(*w);
      EXPECT_EQ(gpu.out.accepted_lengths, e.accepted_lengths) << what;
      EXPECT_EQ(gpu.out.next_tokens, e.next_tokens) << what;
    }
  }
}

TEST_F(TreeCudaSampledTest, SampledBadValuesAreReportedLikeTheReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int32_t v = 4099;
  RandomSampledTreeOptions o;
  o.num_trees = 12;
  o.vocab = v;
  o.max_nodes = 16;
  const SampledTreeBatch clean = testing::RandomSampledTrees(o);
  SampledTreeBatch batch = clean;
  float* target = reinterpret_cast<float*>(batch.target_.data());
  float* draft = reinterpret_cast<float*>(batch.draft_.data());
  // Tree 0: NaN everywhere in its root row; tree 1: a negative draft value in
  // node 0's row; tree 2: an out-of-range token; tree 3: a bad parent; tree
  // 4: infinity deep in the last target row (read only if the walk gets
  // there); tree 5: NaN in the middle of node 1's draft row.
  for (int32_t x = 0; x < v; ++x) target[(int64_t{batch.offsets_[0]} + 0) * v + x] = nan;
  for (int32_t x = 0; x < v; ++x) draft[int64_t{batch.offsets_[1]} * v + x] = -1.0f;
  batch.tokens_[batch.offsets_[2]] = v;
  if (batch.offsets_[4] - batch.offsets_[3] > 1) batch.parents_[batch.offsets_[3] + 1] = 1;
  target[(int64_t{batch.offsets_[4]} + 4 + (batch.offsets_[5] - batch.offsets_[4])) * v + 17] =
      std::numeric_limits<float>::infinity();
  if (batch.offsets_[6] - batch.offsets_[5] > 1) draft[(int64_t{batch.offsets_[5]} + 1) * v + v / 2] = nan;
  ExpectSampledParity(batch, RunSampledOnDevice(batch, 0, 32, scratch_.view, stream_), "bad values");
}

class TreeCudaStatsTest : public ::testing::TestWithParam<testing::TreeStatCase> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU tree tests skipped";
    bool supported = false;
    ASSERT_EQ(TreeSamplingSupported(&supported), cudaSuccess);
    if (!supported) GTEST_SKIP() << "this device does not run the build's sm_90 code: sampled trees need clusters";
  }
};

TEST_P(TreeCudaStatsTest, EmittedTokensFollowTheTargetOnTheDevice) {
  const testing::TreeStatCase& c = GetParam();
  const testing::TreeStatBatch batch = testing::BuildTreeStatBatch(c);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  TreeSampleOutputs all(batch.batch.num_trees(), batch.batch.total_nodes(), 0);
  TreeSampleOutputs cpu(batch.batch.num_trees(), batch.batch.total_nodes(), 0xA5);
  ReferenceTreeSample(cpu.params(batch.batch));
  // All 10^5 trees in one launch (the sampled kernel has no batch bound of
  // its own; the pack is checked on smaller batches above).
  DeviceMemory mem;
  const RejectionBatchInput host = batch.batch.input();
  const int32_t b = host.num_sequences;
  const int32_t total = host.total_draft_tokens;
  const int64_t row = int64_t{host.vocab_size} * SampleDtypeBytes(host.dtype);
  TreeSampleParams p;
  p.input = host;
  p.input.draft_offsets = mem.Upload(host.draft_offsets, b + 1);
  p.input.draft_tokens = mem.Upload(host.draft_tokens, total);
  p.input.target_values = mem.Upload(batch.batch.target_.data(), (int64_t{total} + b) * row);
  p.input.draft_values = host.has_draft_probs ? mem.Upload(batch.batch.draft_.data(), int64_t{total} * row) : nullptr;
  p.input.sequences = mem.Upload(host.sequences, b);
  p.parent_indices = mem.Upload(batch.batch.parents_.data(), total);
  p.output.accepted_lengths = mem.Alloc<int32_t>(b);
  p.output.next_tokens = mem.Alloc<int32_t>(b);
  p.output.mismatch = mem.Alloc<uint8_t>(b);
  p.output.status_codes = mem.Alloc<int32_t>(b);
  p.output.error_positions = mem.Alloc<int32_t>(b);
  p.path_nodes = mem.Alloc<int32_t>(total);
  ASSERT_EQ(LaunchTreeSample(p, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  all.accepted_lengths = mem.Download(p.output.accepted_lengths, b);
  all.next_tokens = mem.Download(p.output.next_tokens, b);
  all.mismatch = mem.Download(p.output.mismatch, b);
  all.status_codes = mem.Download(p.output.status_codes, b);
  all.error_positions = mem.Download(p.output.error_positions, b);
  all.path_nodes = mem.Download(p.path_nodes, total);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  // Bit-identical to the CPU (which passes the same statistical checks in
  // tree_stats_test), and the checks themselves on the device's tokens.
  EXPECT_EQ(all.accepted_lengths, cpu.accepted_lengths);
  EXPECT_EQ(all.next_tokens, cpu.next_tokens);
  testing::CheckTreeStatOutcome(c, batch, all);
}

INSTANTIATE_TEST_SUITE_P(Cases, TreeCudaStatsTest, ::testing::ValuesIn(testing::TreeStatCases()),
                         [](const ::testing::TestParamInfo<testing::TreeStatCase>& info) { return info.param.name; });

}  // namespace
}  // namespace specverify
