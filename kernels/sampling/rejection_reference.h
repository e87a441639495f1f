// CPU reference of rejection-sampling verification (rejection_params.h,
// docs/SAMPLING.md): the oracle the CUDA kernels are tested against token for
// token, and the CPU backend of the server. It reads host memory only.
//
// Like the GPU path it checks the elements it reads and reports a bad value or
// draft id per sequence through output.status_codes / error_positions instead
// of emitting a token; RejectionOutcomeStatus turns those into
// INVALID_ARGUMENT. Sequences are independent: a caller may split [0, b) over
// threads with ReferenceRejectionSampleRange.
//
// REQUIRES: every pointer is host memory and the batch passed
// ValidateRejectionBatch (structure, draft ids, per-sequence parameters).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_REFERENCE_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_REFERENCE_H_

#include <cstdint>

#include "kernels/sampling/rejection_params.h"

namespace specverify {

// Sequences [begin, end) of the batch.
void ReferenceRejectionSampleRange(const RejectionSampleParams& params, int32_t begin, int32_t end);

// The whole batch, single-threaded.
void ReferenceRejectionSample(const RejectionSampleParams& params);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_REFERENCE_H_
