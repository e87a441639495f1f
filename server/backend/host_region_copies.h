// The data plane's row copies (kernels/layout/row_copy.h) for backends that
// compute on the host: the CPU reference and the no-op ceiling. They play the
// part the device plays on CUDA: region rows in, packed rows out.
#ifndef SPECVERIFY_SERVER_BACKEND_HOST_REGION_COPIES_H_
#define SPECVERIFY_SERVER_BACKEND_HOST_REGION_COPIES_H_

#include "server/backend/batch.h"

namespace specverify::server {

// Copies each sequence's KV rows from its region into batch.inputs.draft_kv
// (the batch's key has kv_in_regions). No-op otherwise. Sequences and
// deliveries with null addresses (regions the backend accepted without
// mapping them: the no-op ceiling's CUDA regions) are skipped.
void GatherRegionRowsOnHost(Batch& batch);

// Writes each KV_RETURN_REGION request's packed rows into its output region
// (after the pack). No-op without deliveries.
void DeliverPackedRowsOnHost(Batch& batch);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_HOST_REGION_COPIES_H_
