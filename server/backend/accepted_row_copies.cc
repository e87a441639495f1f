#include "server/backend/accepted_row_copies.h"

#include <cstdint>
#include <vector>

namespace specverify::server {
namespace {

// Where sequence i's draft rows are: its region, or the staging.
const std::byte* RowsOf(const Batch& batch, const std::byte* staged_kv, int32_t i) {
  return batch.shape.kv_from_regions
             ? batch.regions.kv_sources[i]
             : staged_kv + int64_t{batch.inputs.draft_offsets[i]} * batch.inputs.row_bytes;
}

}  // namespace

void PlanAcceptedRowCopies(const Batch& batch, const std::byte* staged_kv,
                           std::span<const std::byte*> sources,
                           std::span<std::byte*> destinations) {
  const GreedyHostInputs& in = batch.inputs;
  const std::vector<int32_t>& packed = batch.results.packed_row_offsets;
  const int64_t row_bytes = in.row_bytes;
  // Inline and handle requests' rows go to the arena, unless inline answers
  // come from the staging and no request keeps a handle: then they need no
  // copy at all (a null destination).
  const bool to_arena = !batch.inline_rows_from_staging || batch.wants_handle_rows;
  for (int32_t i = 0; i < in.num_sequences(); ++i) {
    sources[i] = RowsOf(batch, staged_kv, i);
    destinations[i] = to_arena ? batch.packed_kv + int64_t{packed[i]} * row_bytes : nullptr;
  }
  // A request's rows lie in its kv_output as they would in the arena: its
  // sequences' accepted rows in order, from the output's first row.
  for (const PackedDelivery& d : batch.regions.deliveries) {
    const int32_t base = packed[d.first_sequence];
    for (int32_t i = d.first_sequence; i < d.first_sequence + d.num_sequences; ++i) {
      destinations[i] = d.destination + int64_t{packed[i] - base} * row_bytes;
    }
  }
}

void PlanAcceptedRowCopiesOnDevice(const Batch& batch, const std::byte* staged_kv,
                                   std::span<const std::byte*> sources,
                                   std::span<std::byte*> destinations,
                                   std::span<int32_t> origins) {
  for (int32_t i = 0; i < batch.inputs.num_sequences(); ++i) sources[i] = RowsOf(batch, staged_kv, i);
  PlanAcceptedRowDestinations(batch, destinations, origins);
}

void PlanAcceptedRowDestinations(const Batch& batch, std::span<std::byte*> destinations,
                                 std::span<int32_t> origins) {
  for (int32_t i = 0; i < batch.inputs.num_sequences(); ++i) {
    destinations[i] = batch.packed_kv;
    origins[i] = 0;
  }
  for (const PackedDelivery& d : batch.regions.deliveries) {
    for (int32_t i = d.first_sequence; i < d.first_sequence + d.num_sequences; ++i) {
      destinations[i] = d.destination;
      origins[i] = d.first_sequence;
    }
  }
}

}  // namespace specverify::server
