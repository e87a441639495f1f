// Whole-row loops of the CPU references (rejection_reference.cc,
// tree_reference.cc): the validity scan, a chunk's sum in the fixed lane
// order, and a logits chunk's statistics.
//
// Why a module of its own: the CPU backend serves sampled batches with the
// reference, and at V = 151,936 a logits sequence reads 17 rows of which
// every element pays one exp. Evaluated through a per-element callback and
// libm's fmaf, B=8 took 766 ms on one core (2026-11-27). These loops read
// the typed row directly and, on x86-64 CPUs with AVX2 and FMA, weigh eight
// elements at a time with the same IEEE operations in the same order, so
// the bits are those of rejection_core.h's definitions (LogitWeight summed
// by ChunkSumFixedOrder), which the GPU kernels reproduce.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REFERENCE_ROWS_H_
#define SPECVERIFY_KERNELS_SAMPLING_REFERENCE_ROWS_H_

#include <cstdint>
#include <vector>

#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify::reference_rows {

inline constexpr int32_t kRounds = rejection::kNormalizerChunk / (rejection::kChunkLanes * rejection::kLaneWidth);

// The lane sums of a chunk folded pairwise in double (rejection_core.h's
// fixed order, after each lane has added its elements in float).
double FoldLaneSums(const float (&lane_sums)[rejection::kChunkLanes]);

// sum over e in [begin, end) of contribution(e), in the fixed lane order:
// element e belongs to lane ((e - begin) / kLaneWidth) % kChunkLanes, each
// lane adds its elements in increasing e in float, then FoldLaneSums.
template <typename F>
double ChunkSumFixedOrder(int32_t begin, int32_t end, F contribution) {
  float lane_sums[rejection::kChunkLanes] = {};
  for (int32_t r = 0; r < kRounds; ++r) {
    for (int32_t lane = 0; lane < rejection::kChunkLanes; ++lane) {
      for (int32_t i = 0; i < rejection::kLaneWidth; ++i) {
        const int32_t e = begin + (r * rejection::kChunkLanes + lane) * rejection::kLaneWidth + i;
        if (e < end) lane_sums[lane] = detmath::Add(lane_sums[lane], contribution(e));
      }
    }
  }
  return FoldLaneSums(lane_sums);
}

// Index of the first element of a row of `vocab_size` values that
// ValueIsValid(kind, .) rejects, or -1.
int32_t FirstInvalidElement(const void* row, SampleDtype dtype, SampleValueKind kind, int32_t vocab_size);

// Chunk [begin, end) (at most kNormalizerChunk values) of a logits row at
// 1/T = inv_t: the maximum and the lowest index attaining it, and the sum of
// LogitWeight(z, max, inv_t) over the chunk in the fixed lane order. For
// finite values. The reference itself takes CheckedLogitRowStats, which
// checks as it goes; this per-chunk form is what tests compare it with.
rejection::ChunkStats LogitChunkStats(const void* row, SampleDtype dtype, int32_t begin, int32_t end, float inv_t);

// A logits row's check and chunk statistics in one pass over it: the index
// of its first invalid (non-finite) value, or -1 with `chunks` holding
// LogitChunkStats of every chunk (contents unspecified after an invalid
// value). What FirstInvalidElement then LogitChunkStats chunk by chunk
// compute, reading the row once.
int32_t CheckedLogitRowStats(const void* row, SampleDtype dtype, int32_t vocab_size, float inv_t,
                             std::vector<rejection::ChunkStats>& chunks);

// Whether LogitChunkStats takes its eight-wide path on this CPU (x86-64 with
// AVX2 and FMA), for tests that compare the two paths.
bool VectorPathAvailable();

// LogitChunkStats on the element-by-element path, whatever the CPU (tests).
rejection::ChunkStats LogitChunkStatsScalar(const void* row, SampleDtype dtype, int32_t begin, int32_t end,
                                            float inv_t);

}  // namespace specverify::reference_rows

#endif  // SPECVERIFY_KERNELS_SAMPLING_REFERENCE_ROWS_H_
