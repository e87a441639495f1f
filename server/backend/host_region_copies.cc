#include "server/backend/host_region_copies.h"

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
  ReferenceRowGather(p);
}

void DeliverPackedRowsOnHost(Batch& batch) {
  if (batch.regions.deliveries.empty() || batch.packed_kv == nullptr) return;
  PackedDeliveryParams p;
  p.num_deliveries = static_cast<int32_t>(batch.regions.deliveries.size());
  p.row_bytes = batch.key.row_bytes;
  p.deliveries = batch.regions.deliveries.data();
  p.packed_row_offsets = batch.results.packed_row_offsets.data();
  p.packed_kv = batch.packed_kv;
  ReferencePackedDelivery(p);
}

}  // namespace specverify::server
