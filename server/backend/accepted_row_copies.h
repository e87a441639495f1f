// Where each sequence's accepted KV rows are copied from and to, once a chain
// batch's accepted lengths are known on the host (every batch of the CPU
// backend; the CUDA executor's host-decided greedy chains): from its region
// or its staged rows, to its request's kv_output (KV_RETURN_REGION) or its
// packed place in the arena (every other return; nowhere, a null
// destination, when inline answers come from the staging and no request
// keeps a handle: Batch::inline_rows_from_staging). One row gather over the
// plan (kernels/layout/row_copy.h) then copies each accepted row once, where
// packing and then delivering copied rows returned into regions twice.
#ifndef SPECVERIFY_SERVER_BACKEND_ACCEPTED_ROW_COPIES_H_
#define SPECVERIFY_SERVER_BACKEND_ACCEPTED_ROW_COPIES_H_

#include <cstddef>
#include <span>

#include "server/backend/batch.h"

namespace specverify::server {

// Needs batch.results.packed_row_offsets and row_bytes > 0. `staged_kv` is
// the batch's staged draft rows (inputs.draft_kv) in the address space of
// whoever copies (the device's copy of the staging for CUDA); rows in regions
// come from batch.regions.kv_sources instead. Both spans hold b entries.
void PlanAcceptedRowCopies(const Batch& batch, const std::byte* staged_kv,
                           std::span<const std::byte*> sources,
                           std::span<std::byte*> destinations);

// The same plan when the accepted lengths are known on the device only (a
// sampled chain batch): a destination is where its group starts, origins[i]
// the group's first sequence (kernels/layout/row_copy.h,
// AcceptedRowCopyParams). KV_RETURN_REGION requests' sequences: their
// kv_output and first sequence; every other sequence (inline or handle
// answers, read from the arena): the arena and 0, i.e. its packed offset.
// All three spans hold b entries.
void PlanAcceptedRowCopiesOnDevice(const Batch& batch, const std::byte* staged_kv,
                                   std::span<const std::byte*> sources,
                                   std::span<std::byte*> destinations,
                                   std::span<int32_t> origins);

// The destinations and origins of that plan alone: a tree batch's pack reads
// its sources itself (kv_sources or the staging) and writes each tree's rows
// where this says (kernels/tree/tree_params.h, TreeRowDestinations). Both
// spans hold b entries.
void PlanAcceptedRowDestinations(const Batch& batch, std::span<std::byte*> destinations,
                                 std::span<int32_t> origins);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_ACCEPTED_ROW_COPIES_H_
