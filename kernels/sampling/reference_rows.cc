#include "kernels/sampling/reference_rows.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specverify::reference_rows {
namespace {

using rejection::ChunkStats;
using rejection::kChunkLanes;
using rejection::kLaneWidth;
using rejection::kNormalizerChunk;

// Values [begin, begin + count) of a row as floats (every conversion exact):
// fp32 rows in place, 16-bit ones converted into `buffer`.
const float* ValuesOf(const void* row, SampleDtype dtype, int32_t begin, int32_t count, float* buffer) {
  switch (dtype) {
    case SampleDtype::kFloat32:
      return static_cast<const float*>(row) + begin;
    case SampleDtype::kBFloat16: {
      const uint16_t* bits = static_cast<const uint16_t*>(row) + begin;
      for (int32_t i = 0; i < count; ++i) buffer[i] = detmath::BFloat16BitsToFloat(bits[i]);
      return buffer;
    }
    case SampleDtype::kFloat16: {
      const uint16_t* bits = static_cast<const uint16_t*>(row) + begin;
      for (int32_t i = 0; i < count; ++i) buffer[i] = detmath::Float16BitsToFloat(bits[i]);
      return buffer;
    }
  }
  return buffer;
}

// The first maximum as the reference defines it: the first element, then any
// strictly larger one.
ChunkStats FirstMaximum(const float* z, int32_t begin, int32_t count) {
  ChunkStats s{z[0], begin, 0.0};
  for (int32_t o = 1; o < count; ++o) {
    if (z[o] > s.max) {
      s.max = z[o];
      s.argmax = begin + o;
    }
  }
  return s;
}

double WeightSumScalar(const float* z, int32_t count, float max, float inv_t) {
  return ChunkSumFixedOrder(0, count, [&](int32_t o) { return rejection::LogitWeight(z[o], max, inv_t); });
}

#if defined(__x86_64__)

bool CpuHasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

// detmath::Exp2DetNonPositive((z - max) * scale) for eight values, operation
// for operation (each intrinsic is one correctly rounded IEEE operation, and
// _mm256_fmadd_ps rounds once, as std::fmaf).
__attribute__((target("avx2,fma"))) inline __m256 LogitWeights8(__m256 z, __m256 max, __m256 scale) {
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23, as Exp2Reduce
  const __m256 t = _mm256_mul_ps(_mm256_sub_ps(z, max), scale);
  const __m256 shifted = _mm256_add_ps(t, magic);
  const __m256 nf = _mm256_sub_ps(shifted, magic);
  const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(magic));
  const __m256 r = _mm256_sub_ps(t, nf);
  __m256 q = _mm256_set1_ps(1.535320480e-4f);
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.339883078e-3f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(9.618437849e-3f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(5.550332740e-2f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(2.402264774e-1f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(6.931471825e-1f));
  const __m256 p = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(n, 23)));
}

struct MaxMin {
  float max;
  int32_t argmax;  // offset in the chunk
  float min;
  bool finite;  // every value finite: only then are max and min FirstMaximum's
};

// FirstMaximum and the minimum of a whole chunk, eight values at a time: the
// largest value, then the first offset holding an equal one (FirstMaximum's
// choice: values equal to the maximum, +0 and -0 included, are never
// strictly larger, so it keeps the first).
__attribute__((target("avx2,fma"))) MaxMin ChunkMaxMinAvx2(const float* z) {
  const __m256 infinity = _mm256_set1_ps(detmath::BitsToFloat(0x7f800000u));
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 hi = _mm256_loadu_ps(z), lo = hi, non_finite = _mm256_setzero_ps();
  for (int32_t o = 0; o < kNormalizerChunk; o += 8) {
    const __m256 v = _mm256_loadu_ps(z + o);
    hi = _mm256_max_ps(hi, v);
    lo = _mm256_min_ps(lo, v);
    // |v| >= inf or unordered: inf or NaN.
    non_finite = _mm256_or_ps(non_finite, _mm256_cmp_ps(_mm256_and_ps(v, magnitude), infinity, _CMP_NLT_UQ));
  }
  MaxMin m{0.0f, -1, 0.0f, _mm256_movemask_ps(non_finite) == 0};
  if (!m.finite) return m;
  alignas(32) float his[8], los[8];
  _mm256_store_ps(his, hi);
  _mm256_store_ps(los, lo);
  m.max = his[0];
  m.min = los[0];
  for (int32_t k = 1; k < 8; ++k) {
    m.max = his[k] > m.max ? his[k] : m.max;
    m.min = los[k] < m.min ? los[k] : m.min;
  }
  const __m256 target = _mm256_set1_ps(m.max);
  for (int32_t o = 0; o < kNormalizerChunk; o += 8) {
    const int equal = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(z + o), target, _CMP_EQ_OQ));
    if (equal != 0) {
      m.argmax = o + __builtin_ctz(static_cast<unsigned>(equal));
      m.max = z[m.argmax];
      break;
    }
  }
  return m;
}

// A whole chunk's weight sum whose exponents all lie in [-125, 0], eight
// lanes at a time. 32 consecutive values are lanes 8g..8g+7 with their four
// elements each; a 4x8 transpose turns their weights into four vectors of
// one element per lane, added in element order (lanes held in the order
// 0, 2, 4, 6, 1, 3, 5, 7 of the group, undone when stored).
__attribute__((target("avx2,fma"))) double FullChunkWeightSumAvx2(const float* z, float max, float scale) {
  static_assert(kChunkLanes % 8 == 0 && kLaneWidth == 4);
  constexpr int32_t kGroups = kChunkLanes / 8;
  __m256 sums[kGroups];
  for (__m256& s : sums) s = _mm256_setzero_ps();
  const __m256 vmax = _mm256_set1_ps(max), vscale = _mm256_set1_ps(scale);
  for (int32_t r = 0; r < kRounds; ++r) {
    for (int32_t g = 0; g < kGroups; ++g) {
      const float* p = z + (r * kChunkLanes + 8 * g) * kLaneWidth;
      const __m256 a = LogitWeights8(_mm256_loadu_ps(p), vmax, vscale);       // lanes 0, 1
      const __m256 b = LogitWeights8(_mm256_loadu_ps(p + 8), vmax, vscale);   // lanes 2, 3
      const __m256 c = LogitWeights8(_mm256_loadu_ps(p + 16), vmax, vscale);  // lanes 4, 5
      const __m256 d = LogitWeights8(_mm256_loadu_ps(p + 24), vmax, vscale);  // lanes 6, 7
      const __m256 ab_lo = _mm256_unpacklo_ps(a, b), ab_hi = _mm256_unpackhi_ps(a, b);
      const __m256 cd_lo = _mm256_unpacklo_ps(c, d), cd_hi = _mm256_unpackhi_ps(c, d);
      sums[g] = _mm256_add_ps(sums[g], _mm256_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(1, 0, 1, 0)));  // element 0
      sums[g] = _mm256_add_ps(sums[g], _mm256_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(3, 2, 3, 2)));  // element 1
      sums[g] = _mm256_add_ps(sums[g], _mm256_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(1, 0, 1, 0)));  // element 2
      sums[g] = _mm256_add_ps(sums[g], _mm256_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(3, 2, 3, 2)));  // element 3
    }
  }
  constexpr int32_t kLaneOfSlot[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  float lane_sums[kChunkLanes];
  for (int32_t g = 0; g < kGroups; ++g) {
    alignas(32) float slots[8];
    _mm256_store_ps(slots, sums[g]);
    for (int32_t k = 0; k < 8; ++k) lane_sums[8 * g + kLaneOfSlot[k]] = slots[k];
  }
  return FoldLaneSums(lane_sums);
}

#else

bool CpuHasAvx2Fma() { return false; }

#endif

// The first offset in z[0, count) holding a value ValueIsValid(kind, .)
// rejects, or -1: branch-free over the chunk (the common case: nothing
// invalid), then the first offender.
int32_t FirstInvalidOffset(const float* z, int32_t count, SampleValueKind kind) {
  bool any_invalid = false;
  for (int32_t o = 0; o < count; ++o) any_invalid |= !rejection::ValueIsValid(kind, z[o]);
  if (!any_invalid) return -1;
  for (int32_t o = 0; o < count; ++o) {
    if (!rejection::ValueIsValid(kind, z[o])) return o;
  }
  return -1;
}

// LogitChunkStats of the chunk's values z[0, count) (the chunk at `begin`),
// and, where all_finite is not null, whether every value is finite (a valid
// logit): the vector path learns it with the maximum, the scalar path scans.
ChunkStats ChunkStatsOfValues(const float* z, int32_t begin, int32_t count, float inv_t, bool vector_path,
                              bool* all_finite) {
#if defined(__x86_64__)
  if (vector_path && count == kNormalizerChunk) {
    const MaxMin m = ChunkMaxMinAvx2(z);
    if (all_finite != nullptr) *all_finite = m.finite;
    if (m.finite) {
      ChunkStats s{m.max, begin + m.argmax, 0.0};
      // Every exponent (z - max) * scale is <= 0 and monotone in z: when the
      // smallest value's is >= -125, Exp2DetNonPositive is Exp2Det bit for
      // bit (the GPU's row pass takes the same shortcut).
      const float scale = rejection::LogitScale(inv_t);
      s.sum = detmath::Mul(detmath::Sub(m.min, m.max), scale) >= -125.0f ? FullChunkWeightSumAvx2(z, m.max, scale)
                                                                          : WeightSumScalar(z, count, m.max, inv_t);
      return s;
    }
  } else if (all_finite != nullptr) {
    *all_finite = FirstInvalidOffset(z, count, SampleValueKind::kLogits) < 0;
  }
#else
  (void)vector_path;
  if (all_finite != nullptr) *all_finite = FirstInvalidOffset(z, count, SampleValueKind::kLogits) < 0;
#endif
  ChunkStats s = FirstMaximum(z, begin, count);
  s.sum = WeightSumScalar(z, count, s.max, inv_t);
  return s;
}

ChunkStats LogitChunkStatsOn(const void* row, SampleDtype dtype, int32_t begin, int32_t end, float inv_t,
                             bool vector_path) {
  float buffer[kNormalizerChunk];
  const int32_t count = end - begin;
  return ChunkStatsOfValues(ValuesOf(row, dtype, begin, count, buffer), begin, count, inv_t, vector_path,
                            /*all_finite=*/nullptr);
}

}  // namespace

double FoldLaneSums(const float (&lane_sums)[kChunkLanes]) {
  double lanes[kChunkLanes];
  for (int32_t t = 0; t < kChunkLanes; ++t) lanes[t] = static_cast<double>(lane_sums[t]);
  for (int32_t stride = kChunkLanes / 2; stride > 0; stride /= 2) {
    for (int32_t t = 0; t < stride; ++t) lanes[t] = detmath::AddD(lanes[t], lanes[t + stride]);
  }
  return lanes[0];
}

int32_t FirstInvalidElement(const void* row, SampleDtype dtype, SampleValueKind kind, int32_t vocab_size) {
  float buffer[kNormalizerChunk];
  for (int32_t begin = 0; begin < vocab_size; begin += kNormalizerChunk) {
    const int32_t count = std::min(kNormalizerChunk, vocab_size - begin);
    if (const int32_t o = FirstInvalidOffset(ValuesOf(row, dtype, begin, count, buffer), count, kind); o >= 0) {
      return begin + o;
    }
  }
  return -1;
}

int32_t CheckedLogitRowStats(const void* row, SampleDtype dtype, int32_t vocab_size, float inv_t,
                             std::vector<ChunkStats>& chunks) {
  const bool vector_path = CpuHasAvx2Fma();
  chunks.resize(rejection::NumChunks(vocab_size));
  float buffer[kNormalizerChunk];
  for (int32_t c = 0; c < static_cast<int32_t>(chunks.size()); ++c) {
    const int32_t begin = c * kNormalizerChunk;
    const int32_t count = std::min(kNormalizerChunk, vocab_size - begin);
    const float* z = ValuesOf(row, dtype, begin, count, buffer);
    bool all_finite = false;
    chunks[c] = ChunkStatsOfValues(z, begin, count, inv_t, vector_path, &all_finite);
    if (!all_finite) return begin + FirstInvalidOffset(z, count, SampleValueKind::kLogits);
  }
  return -1;
}

ChunkStats LogitChunkStats(const void* row, SampleDtype dtype, int32_t begin, int32_t end, float inv_t) {
  return LogitChunkStatsOn(row, dtype, begin, end, inv_t, CpuHasAvx2Fma());
}

bool VectorPathAvailable() { return CpuHasAvx2Fma(); }

ChunkStats LogitChunkStatsScalar(const void* row, SampleDtype dtype, int32_t begin, int32_t end, float inv_t) {
  return LogitChunkStatsOn(row, dtype, begin, end, inv_t, false);
}

}  // namespace specverify::reference_rows
