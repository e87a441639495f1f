#include "server/backend/staging.h"

#include <utility>

#include "server/backend/batch.h"

namespace specverify::server {

bool SampledChainCopiesAcceptedRows(const StagingShape& s) {
  return s.sampled && !s.tree && s.kv_bytes > 0;
}

bool TreeAnswersRowsInRegions(const StagingShape& s) {
  return s.tree && s.kv_bytes > 0 && s.deliveries > 0;
}

StagingLayout LayoutStaging(const StagingShape& s) {
  StagingLayout l;
  const int64_t b = s.sequences;
  const int64_t rows = s.draft_rows;
  l.offsets = 0;
  l.draft_tokens = StagingAlignUp(4 * (b + 1));
  l.target_tokens = l.draft_tokens + StagingAlignUp(4 * rows);
  constexpr int64_t kPointer = sizeof(void*);
  l.parent_indices = l.target_tokens + StagingAlignUp(4 * (rows + b));
  l.kv_sources = l.parent_indices + (s.tree ? StagingAlignUp(4 * rows) : 0);
  l.deliveries = l.kv_sources + (s.kv_from_regions ? StagingAlignUp(kPointer * b) : 0);
  l.packed_offsets = l.deliveries + StagingAlignUp(int64_t{sizeof(PackedDelivery)} * s.deliveries);
  const bool greedy_chain = !s.sampled && !s.tree;
  const bool sampled_plan = SampledChainCopiesAcceptedRows(s);
  const bool tree_plan = TreeAnswersRowsInRegions(s);
  const bool sources = (greedy_chain && s.deliveries > 0) || sampled_plan;
  const int64_t pointers = StagingAlignUp(kPointer * b);
  l.copy_sources = l.packed_offsets + (greedy_chain ? StagingAlignUp(4 * (b + 1)) : 0);
  l.copy_destinations = l.copy_sources + (sources ? pointers : 0);
  l.copy_origins = l.copy_destinations + (sources || tree_plan ? pointers : 0);
  l.draft_kv = l.copy_origins + (sampled_plan || tree_plan ? StagingAlignUp(4 * b) : 0);
  l.inputs_total = l.draft_kv + s.kv_bytes;
  l.inputs_host_filled = s.kv_from_regions ? l.draft_kv : l.inputs_total;
  if (s.sampled) {
    l.sequences = 0;
    l.target_rows = StagingAlignUp(int64_t{sizeof(SequenceSamplingParams)} * b);
    l.draft_rows =
        l.target_rows + (s.values_from_regions ? StagingAlignUp(kPointer * (rows + b)) : 0);
    l.target_values =
        l.draft_rows + (s.draft_rows_from_regions ? StagingAlignUp(kPointer * rows) : 0);
    l.draft_values = l.target_values + StagingAlignUp(s.target_value_bytes);
    l.sampled_total = l.draft_values + s.draft_value_bytes;
  }
  return l;
}

void ViewStagedBatch(const StagingShape& s, std::byte* in, std::byte* sampled_section,
                     Batch* batch) {
  const StagingLayout l = LayoutStaging(s);
  batch->shape = s;
  const size_t b = static_cast<size_t>(s.sequences);
  const size_t rows = static_cast<size_t>(s.draft_rows);
  GreedyHostInputs& inputs = batch->inputs;
  inputs.draft_offsets = {reinterpret_cast<int32_t*>(in + l.offsets), b + 1};
  inputs.draft_tokens = {reinterpret_cast<int32_t*>(in + l.draft_tokens), rows};
  inputs.target_tokens = {reinterpret_cast<int32_t*>(in + l.target_tokens), rows + b};
  inputs.draft_kv = {in + l.draft_kv, static_cast<size_t>(s.kv_bytes)};
  inputs.parent_indices = {};
  if (s.tree) inputs.parent_indices = {reinterpret_cast<int32_t*>(in + l.parent_indices), rows};
  RegionTables& tables = batch->regions;
  tables = RegionTables{};
  if (s.kv_from_regions) {
    tables.kv_sources = {reinterpret_cast<const std::byte**>(in + l.kv_sources), b};
  }
  tables.deliveries = {reinterpret_cast<PackedDelivery*>(in + l.deliveries),
                       static_cast<size_t>(s.deliveries)};
  if (s.sampled) {
    SampledHostInputs& sv = batch->sampled;
    if (s.values_from_regions) {
      tables.target_rows = {reinterpret_cast<const void**>(sampled_section + l.target_rows),
                            rows + b};
    }
    if (s.draft_rows_from_regions) {
      tables.draft_rows = {reinterpret_cast<const void**>(sampled_section + l.draft_rows), rows};
    }
    sv.sequences = {reinterpret_cast<SequenceSamplingParams*>(sampled_section + l.sequences), b};
    sv.target_values = {sampled_section + l.target_values,
                        static_cast<size_t>(s.target_value_bytes)};
    sv.draft_values = {sampled_section + l.draft_values,
                       static_cast<size_t>(s.draft_value_bytes)};
  }
}

class HostStagingPool::Lease final : public StagingLease {
 public:
  Lease(HostStagingPool* pool, std::vector<std::byte>* buffer) : pool_(pool), buffer_(buffer) {}
  ~Lease() override { pool_->Release(buffer_); }

 private:
  HostStagingPool* const pool_;
  std::vector<std::byte>* const buffer_;
};

HostStagingPool::HostStagingPool(int buffers) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < buffers; ++i) {
    buffers_.push_back(std::make_unique<std::vector<std::byte>>());
    free_.push_back(buffers_.back().get());
  }
}

absl::StatusOr<std::unique_ptr<StagingLease>> HostStagingPool::Acquire(
    const StagingShape& shape, Batch* batch) {
  std::vector<std::byte>* buffer;
  {
    absl::MutexLock lock(&mu_);
    const auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !free_.empty();
    };
    mu_.Await(absl::Condition(&available));
    buffer = free_.back();
    free_.pop_back();
  }
  const StagingLayout l = LayoutStaging(shape);
  const int64_t sampled_at = StagingAlignUp(l.inputs_total);
  const int64_t total = sampled_at + l.sampled_total;
  // Grows once to the largest batch seen; never shrinks.
  if (static_cast<int64_t>(buffer->size()) < total) buffer->resize(static_cast<size_t>(total));
  ViewStagedBatch(shape, buffer->data(), buffer->data() + sampled_at, batch);
  return std::unique_ptr<StagingLease>(new Lease(this, buffer));
}

void HostStagingPool::Release(std::vector<std::byte>* buffer) {
  absl::MutexLock lock(&mu_);
  free_.push_back(buffer);
}

}  // namespace specverify::server
