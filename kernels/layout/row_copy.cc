#include "kernels/layout/row_copy.h"

#include <algorithm>
#include <cstring>

namespace specverify {

absl::Status ValidateRowGather(const RowGatherParams& p) {
  if (p.num_sequences < 0 || p.total_rows < 0 || p.max_rows < 0 || p.row_bytes <= 0) {
    return absl::InvalidArgumentError(
        "row gather: num_sequences, total_rows, max_rows >= 0 and row_bytes > 0");
  }
  if (p.num_sequences > 0 && (p.draft_offsets == nullptr || p.sources == nullptr ||
                              (p.rows == nullptr && p.destinations == nullptr))) {
    return absl::InvalidArgumentError(
        "row gather: draft_offsets, sources and rows or destinations must be set");
  }
  return absl::OkStatus();
}

absl::Status ValidatePackedDelivery(const PackedDeliveryParams& p) {
  if (p.num_deliveries < 0 || p.max_rows < 0 || p.row_bytes <= 0) {
    return absl::InvalidArgumentError(
        "packed delivery: num_deliveries, max_rows >= 0 and row_bytes > 0");
  }
  if (p.num_deliveries > 0 &&
      (p.deliveries == nullptr || p.packed_row_offsets == nullptr || p.packed_kv == nullptr)) {
    return absl::InvalidArgumentError(
        "packed delivery: deliveries, packed_row_offsets and packed_kv must be set");
  }
  return absl::OkStatus();
}

absl::Status ValidateAcceptedRowCopy(const AcceptedRowCopyParams& p) {
  if (p.num_sequences < 0 || p.max_rows < 0 || p.row_bytes <= 0) {
    return absl::InvalidArgumentError(
        "accepted row copy: num_sequences, max_rows >= 0 and row_bytes > 0");
  }
  if (p.num_sequences > 0 && (p.accepted_lengths == nullptr || p.sources == nullptr ||
                              p.destinations == nullptr || p.origins == nullptr)) {
    return absl::InvalidArgumentError(
        "accepted row copy: accepted_lengths, sources, destinations and origins must be set");
  }
  return absl::OkStatus();
}

void ReferenceRowGather(const RowGatherParams& p) {
  for (int32_t i = 0; i < p.num_sequences; ++i) {
    const int64_t rows = p.draft_offsets[i + 1] - p.draft_offsets[i];
    if (rows == 0) continue;
    std::byte* const to = p.destinations != nullptr
                              ? p.destinations[i]
                              : p.rows + int64_t{p.draft_offsets[i]} * p.row_bytes;
    if (to == nullptr) continue;
    std::memcpy(to, p.sources[i], static_cast<size_t>(rows * p.row_bytes));
  }
}

void ReferencePackedDelivery(const PackedDeliveryParams& p) {
  for (int32_t d = 0; d < p.num_deliveries; ++d) {
    const PackedDelivery& del = p.deliveries[d];
    const int64_t first = p.packed_row_offsets[del.first_sequence];
    const int64_t rows = p.packed_row_offsets[del.first_sequence + del.num_sequences] - first;
    if (rows == 0) continue;
    std::memcpy(del.destination, p.packed_kv + first * p.row_bytes,
                static_cast<size_t>(rows * p.row_bytes));
  }
}

void ReferenceAcceptedRowCopy(const AcceptedRowCopyParams& p) {
  for (int32_t i = 0; i < p.num_sequences; ++i) {
    const int64_t rows = std::min(p.accepted_lengths[i], p.max_rows);
    if (rows <= 0 || p.destinations[i] == nullptr) continue;
    int64_t before = 0;
    for (int32_t j = p.origins[i]; j < i; ++j) before += std::min(p.accepted_lengths[j], p.max_rows);
    std::memcpy(p.destinations[i] + before * p.row_bytes, p.sources[i],
                static_cast<size_t>(rows * p.row_bytes));
  }
}

}  // namespace specverify
