#include "server/backend/host_region_copies.h"

#include <algorithm>
#include <cstring>

namespace specverify::server {

void GatherRegionRowsOnHost(Batch& batch) {
  if (batch.regions.kv_sources.empty() || batch.inputs.row_bytes == 0) return;
  RowGatherParams p;
  p.num_sequences = batch.inputs.num_sequences();
  p.total_rows = batch.inputs.total_draft_rows();
  p.max_rows = batch.inputs.max_gamma();
  p.row_bytes = batch.inputs.row_bytes;
  p.draft_offsets = batch.inputs.draft_offsets.data();
  p.sources = batch.regions.kv_sources.data();
  p.rows = batch.inputs.draft_kv.data();
  const auto& sources = batch.regions.kv_sources;
  if (std::find(sources.begin(), sources.end(), nullptr) == sources.end()) {
    ReferenceRowGather(p);
    return;
  }
  // Some regions are not mapped (the no-op ceiling's CUDA regions): their
  // rows stay as staged.
  for (int32_t i = 0; i < p.num_sequences; ++i) {
    if (sources[i] == nullptr) continue;
    const int64_t rows = p.draft_offsets[i + 1] - p.draft_offsets[i];
    std::memcpy(p.rows + int64_t{p.draft_offsets[i]} * p.row_bytes, sources[i],
                static_cast<size_t>(rows * p.row_bytes));
  }
}

void DeliverPackedRowsOnHost(Batch& batch) {
  if (batch.regions.deliveries.empty() || batch.packed_kv == nullptr) return;
  PackedDeliveryParams p;
  p.num_deliveries = static_cast<int32_t>(batch.regions.deliveries.size());
  p.row_bytes = batch.key.row_bytes;
  p.deliveries = batch.regions.deliveries.data();
  p.packed_row_offsets = batch.results.packed_row_offsets.data();
  p.packed_kv = batch.packed_kv;
  const auto& deliveries = batch.regions.deliveries;
  if (std::none_of(deliveries.begin(), deliveries.end(),
                   [](const PackedDelivery& d) { return d.destination == nullptr; })) {
    ReferencePackedDelivery(p);
    return;
  }
  for (const PackedDelivery& d : deliveries) {
    if (d.destination == nullptr) continue;  // not mapped: nothing to write into
    PackedDeliveryParams one = p;
    one.num_deliveries = 1;
    one.deliveries = &d;
    ReferencePackedDelivery(one);
  }
}

}  // namespace specverify::server
