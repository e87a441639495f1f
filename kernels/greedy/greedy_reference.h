// CPU reference of greedy verify-and-pack (seed 000), on the ragged layout of
// kernels/layout/ragged_batch.h. It is the oracle every CUDA kernel is tested
// against bit for bit, and the CPU backend of the server.
//
// The work splits in three phases so a caller may spread phases 1 and 3 over
// threads (sequence ranges are independent); phase 2 is a serial scan over b.
//
// REQUIRES: every pointer is host memory and the batch passed
// ValidateGreedyBatch.
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_REFERENCE_H_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_REFERENCE_H_

#include <cstdint>

#include "kernels/layout/ragged_batch.h"

namespace specverify {

// Phase 1: accepted_lengths, next_tokens and mismatch of sequences [begin, end).
void ReferenceGreedyVerifyRange(const GreedyVerifyParams& params,
                                int32_t begin, int32_t end);

// Phase 2: packed_row_offsets = exclusive prefix sum of accepted_lengths, with
// the total at index b.
void ReferencePackedRowOffsets(const GreedyVerifyParams& params);

// Phase 3: copies the accepted KV rows of sequences [begin, end) to packed_kv.
// No-op when row_bytes == 0.
void ReferencePackRange(const GreedyVerifyParams& params, int32_t begin,
                        int32_t end);

// All three phases, single-threaded.
void ReferenceGreedyVerifyPack(const GreedyVerifyParams& params);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_REFERENCE_H_
