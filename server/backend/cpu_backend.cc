#include "server/backend/cpu_backend.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "kernels/common/status_macros.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/layout/row_copy.h"
#include "kernels/sampling/rejection_reference.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/tree/tree_reference.h"
#include "server/backend/accepted_row_copies.h"
#include "server/backend/host_region_copies.h"
#include "server/regions/host_region.h"

namespace specverify::server {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "cpu";
}

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(
    const CpuBackendOptions& options) {
  if (options.threads < 1 || options.threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu threads is ", options.threads, "; must lie in [1, 256]"));
  }
  if (options.max_batches_in_flight < 1) {
    return absl::InvalidArgumentError("max_batches_in_flight must be >= 1");
  }
  return std::unique_ptr<CpuBackend>(new CpuBackend(options));
}

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : options_(options),
      pool_(options.threads - 1),
      worker_([this](Batch& batch) { return Execute(batch); }) {}

CpuBackend::~CpuBackend() { worker_.Shutdown(); }

BackendDescription CpuBackend::Describe() const {
  BackendDescription d;
  d.name = "cpu";
  d.device_name = CpuModelName();
  d.region_kinds = {"system"};
  return d;
}

absl::StatusOr<std::unique_ptr<ArenaMemory>> CpuBackend::AllocateArenaMemory(
    int64_t bytes) {
  absl::StatusOr<std::unique_ptr<HostArenaMemory>> memory =
      HostArenaMemory::Create(bytes);
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<ArenaMemory>(*std::move(memory));
}

absl::StatusOr<std::unique_ptr<RegionMapping>> CpuBackend::MapRegion(const RegionSpec& spec) {
  return MapHostRegion(spec, "cpu");
}

void CpuBackend::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  worker_.Submit(std::move(batch), std::move(done));
}

void CpuBackend::Shutdown() { worker_.Shutdown(); }

namespace {

// The greedy params over a batch's host inputs, its result vectors and its
// arena range.
GreedyVerifyParams GreedyParamsOf(Batch& batch) {
  GreedyVerifyParams params;
  params.input = batch.inputs.view();
  params.output.accepted_lengths = batch.results.accepted_lengths.data();
  params.output.next_tokens = batch.results.next_tokens.data();
  params.output.mismatch = batch.results.mismatch.data();
  params.output.packed_row_offsets = batch.results.packed_row_offsets.data();
  params.output.packed_kv = params.input.row_bytes > 0 ? batch.packed_kv : nullptr;
  return params;
}

}  // namespace

void CpuBackend::ForEachSequenceRange(
    int64_t work, int32_t num_sequences,
    const std::function<void(int32_t begin, int32_t end)>& fn) {
  const int tasks =
      work < options_.min_parallel_work
          ? 1
          : static_cast<int>(std::min<int64_t>(pool_.num_threads() + 1, num_sequences));
  pool_.ParallelFor(tasks, [&](int t) {
    fn(static_cast<int32_t>(int64_t{num_sequences} * t / tasks),
       static_cast<int32_t>(int64_t{num_sequences} * (t + 1) / tasks));
  });
}

// Phases 2 and 3 of verify-and-pack, shared by both modes: offsets (serial),
// then the accepted rows copied in parallel ranges. Rows in regions are read
// there (no gather into the staging first), a KV_RETURN_REGION request's
// rows are written into its output (no pack into the arena first), and
// inline answers are copied from the staging by the batcher.
void CpuBackend::PackAcceptedRows(Batch& batch, const GreedyVerifyParams& params, int64_t work) {
  ReferencePackedRowOffsets(params);
  const int32_t b = params.input.num_sequences;
  if (params.input.row_bytes == 0 || b == 0) return;
  // Inline answers read the staged rows (each sequence's first k): with no
  // handle in the batch, no row is packed for them.
  batch.inline_rows_from_staging = batch.wants_host_rows && !batch.shape.kv_from_regions;
  std::vector<const std::byte*> sources(static_cast<size_t>(b));
  std::vector<std::byte*> destinations(static_cast<size_t>(b));
  PlanAcceptedRowCopies(batch, batch.inputs.draft_kv.data(), sources, destinations);
  ForEachSequenceRange(work, b, [&](int32_t begin, int32_t end) {
    RowGatherParams range;
    range.num_sequences = end - begin;
    range.row_bytes = params.input.row_bytes;
    range.draft_offsets = params.output.packed_row_offsets + begin;
    range.sources = sources.data() + begin;
    range.destinations = destinations.data() + begin;
    ReferenceRowGather(range);
  });
}

absl::Status CpuBackend::ExecuteTree(Batch& batch) {
  const absl::Time start = absl::Now();
  const int32_t b = batch.inputs.num_sequences();
  const int64_t nodes = batch.inputs.total_draft_rows();
  batch.results.Resize(b);
  batch.results.accepted_nodes.assign(static_cast<size_t>(nodes), -1);
  // Rows in regions are read where they are, only the accepted paths'
  // (kv_sources), unless a region is not mapped here; then they are
  // gathered into the staging first.
  const std::span<const std::byte*> sources = batch.regions.kv_sources;
  const bool rows_in_place = batch.inputs.row_bytes > 0 && !sources.empty() &&
                             std::find(sources.begin(), sources.end(), nullptr) == sources.end();
  const std::byte* const* kv_sources = rows_in_place ? sources.data() : nullptr;
  if (!rows_in_place) GatherRegionRowsOnHost(batch);
  // KV_RETURN_REGION requests' rows go from the pack straight into their
  // outputs (the others' into the arena), not packed and then delivered.
  TreeRowDestinations row_destinations;
  std::vector<std::byte*> destinations;
  std::vector<int32_t> origins;
  if (TreeAnswersRowsInRegions(batch.shape)) {
    destinations.resize(static_cast<size_t>(b));
    origins.resize(static_cast<size_t>(b));
    PlanAcceptedRowDestinations(batch, destinations, origins);
    row_destinations = TreeRowDestinations{destinations.data(), origins.data(), 1};
  }
  GreedyVerifyParams greedy = GreedyParamsOf(batch);
  if (batch.key.mode == VerifyMode::kGreedy) {
    TreeGreedyVerifyParams p;
    p.input = greedy.input;
    p.parent_indices = batch.inputs.parent_indices.data();
    p.output = greedy.output;
    p.accepted_nodes = batch.results.accepted_nodes.data();
    p.kv_sources = kv_sources;
    p.row_destinations = row_destinations;
    SV_RETURN_IF_ERROR(ValidateTreeGreedyBatch(p, BackendTreeLimits()));
    ReferenceTreeGreedyVerifyPack(p);
    batch.path = ExecutionPathLabel::kCpu;
  } else {
    RejectionSampleParams rejection = SampledHostParams(batch);
    std::vector<int32_t> path_nodes(static_cast<size_t>(nodes), -1);
    TreeSampleParams p;
    p.input = rejection.input;
    p.parent_indices = batch.inputs.parent_indices.data();
    p.output = rejection.output;
    p.output.greedy_target_tokens = nullptr;
    p.path_nodes = path_nodes.data();
    SV_RETURN_IF_ERROR(ValidateTreeSampleBatch(p, BackendTreeLimits()));
    ReferenceTreeSample(p);
    TreePackParams pack;
    pack.num_trees = b;
    pack.node_offsets = batch.inputs.draft_offsets.data();
    pack.accepted_lengths = batch.results.accepted_lengths.data();
    pack.path_nodes = path_nodes.data();
    pack.draft_kv = greedy.input.draft_kv;
    pack.row_bytes = greedy.input.row_bytes;
    pack.packed_row_offsets = batch.results.packed_row_offsets.data();
    pack.accepted_nodes = batch.results.accepted_nodes.data();
    pack.packed_kv = greedy.output.packed_kv;
    pack.kv_sources = kv_sources;
    pack.row_destinations = row_destinations;
    SV_RETURN_IF_ERROR(ValidateTreeRowDestinations(row_destinations, b, /*origins_readable=*/true));
    ReferenceTreePack(pack);
    batch.path = ExecutionPathLabel::kSampling;
  }
  batch.verified = true;
  batch.exact = true;
  batch.packed_kv_host = batch.packed_kv;  // the arena is host memory
  batch.device_time = absl::Now() - start;
  return absl::OkStatus();
}

absl::Status CpuBackend::ExecuteSampled(Batch& batch) {
  const absl::Time start = absl::Now();
  const int32_t b = batch.inputs.num_sequences();
  batch.results.Resize(b);
  RejectionSampleParams sample = SampledHostParams(batch);
  // The edge validated every request; this guards the reference's contract.
  SV_RETURN_IF_ERROR(ValidateRejectionBatch(sample));
  // Sequences are independent: split them when the rows read are many.
  const int64_t work = batch.inputs.total_draft_rows() +
                       int64_t{b} * batch.key.vocab_size / 16 +
                       batch.inputs.total_draft_rows() * batch.inputs.row_bytes / 64;
  ForEachSequenceRange(work, b, [&](int32_t begin, int32_t end) {
    ReferenceRejectionSampleRange(sample, begin, end);
  });
  // The greedy pack phases on the sampled lengths (a refused sequence has
  // k = 0 and packs nothing).
  PackAcceptedRows(batch, GreedyParamsOf(batch), work);
  batch.path = ExecutionPathLabel::kSampling;
  batch.verified = true;
  batch.packed_kv_host = batch.packed_kv;  // the arena is host memory
  batch.exact = IsExactMethod(batch.key.method);
  batch.device_time = absl::Now() - start;
  return absl::OkStatus();
}

absl::Status CpuBackend::Execute(Batch& batch) {
  if (batch.key.tree) return ExecuteTree(batch);
  if (batch.key.mode == VerifyMode::kSampled) return ExecuteSampled(batch);
  const absl::Time start = absl::Now();
  const int32_t b = batch.inputs.num_sequences();
  batch.results.Resize(b);
  const GreedyVerifyParams params = GreedyParamsOf(batch);
  const int64_t work = batch.inputs.total_draft_rows() +
                       batch.inputs.total_draft_rows() * batch.inputs.row_bytes / 64;
  ForEachSequenceRange(work, b, [&](int32_t begin, int32_t end) {
    ReferenceGreedyVerifyRange(params, begin, end);
  });
  PackAcceptedRows(batch, params, work);
  batch.path = ExecutionPathLabel::kCpu;
  batch.verified = true;
  batch.packed_kv_host = batch.packed_kv;  // the arena is host memory
  batch.device_time = absl::Now() - start;
  return absl::OkStatus();
}

}  // namespace specverify::server
