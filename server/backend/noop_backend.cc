#include "server/backend/noop_backend.h"

#include <cstring>

#include "absl/time/clock.h"
#include "server/backend/host_region_copies.h"
#include "server/regions/host_region.h"

namespace specverify::server {

NoopBackend::NoopBackend() : worker_([](Batch& batch) { return Execute(batch); }) {}

NoopBackend::~NoopBackend() { worker_.Shutdown(); }

BackendDescription NoopBackend::Describe() const {
  BackendDescription d;
  d.name = "noop";
  d.device_name = "none (no-op transport ceiling)";
  d.verifies = false;
  d.region_kinds = {"system", "cuda"};  // cuda: accepted, never touched
  return d;
}

absl::StatusOr<std::unique_ptr<ArenaMemory>> NoopBackend::AllocateArenaMemory(
    int64_t bytes) {
  absl::StatusOr<std::unique_ptr<HostArenaMemory>> memory =
      HostArenaMemory::Create(bytes);
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<ArenaMemory>(*std::move(memory));
}

namespace {

// The transport ceiling accepts CUDA regions so that co-located workers can
// measure against it, but maps nothing: it reads no input and writes no
// packed row into them (its answers are unverified anyway).
class UnmappedCudaRegion final : public RegionMapping {
 public:
  explicit UnmappedCudaRegion(int32_t device) : device_(device) {}
  std::byte* address() const override { return nullptr; }
  int32_t device_ordinal() const override { return device_; }

 private:
  int32_t device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RegionMapping>> NoopBackend::MapRegion(const RegionSpec& spec) {
  if (spec.kind == RegionKind::kCuda) {
    return std::unique_ptr<RegionMapping>(new UnmappedCudaRegion(spec.device_ordinal));
  }
  return MapHostRegion(spec, "noop");
}

void NoopBackend::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  worker_.Submit(std::move(batch), std::move(done));
}

void NoopBackend::Shutdown() { worker_.Shutdown(); }

absl::Status NoopBackend::Execute(Batch& batch) {
  const absl::Time start = absl::Now();
  const GreedyHostInputs& in = batch.inputs;
  const int32_t b = in.num_sequences();
  batch.results.Resize(b);
  int32_t rows = 0;
  for (int32_t i = 0; i < b; ++i) {
    const int32_t gamma = in.draft_offsets[i + 1] - in.draft_offsets[i];
    batch.results.accepted_lengths[i] = gamma;
    // A sampled batch has no target tokens yet: answer the last draft token.
    batch.results.next_tokens[i] = batch.key.mode == VerifyMode::kSampled
                                       ? in.draft_tokens[in.draft_offsets[i] + gamma - 1]
                                       : in.target_tokens[in.draft_offsets[i] + i + gamma];
    batch.results.mismatch[i] = 0;
    batch.results.packed_row_offsets[i] = rows;
    rows += gamma;
  }
  batch.results.packed_row_offsets[b] = rows;
  GatherRegionRowsOnHost(batch);
  // k = gamma for every sequence, so the packed rows are the staged draft
  // rows as they lie: one copy into the arena, and handles, FetchKv and
  // inline answers carry as many bytes as a real server's largest answer.
  if (in.row_bytes > 0 && batch.packed_kv != nullptr && !in.draft_kv.empty()) {
    std::memcpy(batch.packed_kv, in.draft_kv.data(), in.draft_kv.size());
    batch.packed_kv_host = batch.packed_kv;
  }
  DeliverPackedRowsOnHost(batch);
  batch.path = ExecutionPathLabel::kNoop;
  batch.verified = false;
  batch.exact = IsExactMethod(batch.key.method);
  batch.device_time = absl::Now() - start;
  return absl::OkStatus();
}

}  // namespace specverify::server
