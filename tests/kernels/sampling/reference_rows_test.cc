// The CPU references' row loops (kernels/sampling/reference_rows.h): the
// scalar chunk statistics are rejection_core.h's definition, the eight-wide
// path computes the same bits, and the validity scan finds the first value
// ValueIsValid rejects.
#include "kernels/sampling/reference_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/workload/random.h"

namespace specverify {
namespace {

using rejection::ChunkStats;
using rejection::kNormalizerChunk;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A row of float values stored as `dtype`.
struct StoredRow {
  SampleDtype dtype;
  std::vector<float> f32;
  std::vector<uint16_t> bits16;

  StoredRow(SampleDtype d, const std::vector<float>& values) : dtype(d) {
    if (d == SampleDtype::kFloat32) {
      f32 = values;
      return;
    }
    for (const float v : values) {
      bits16.push_back(d == SampleDtype::kBFloat16 ? detmath::FloatToBFloat16Bits(v)
                                                   : detmath::FloatToFloat16Bits(v));
    }
  }
  const void* data() const {
    return dtype == SampleDtype::kFloat32 ? static_cast<const void*>(f32.data())
                                          : static_cast<const void*>(bits16.data());
  }
  int32_t size() const {
    return static_cast<int32_t>(dtype == SampleDtype::kFloat32 ? f32.size() : bits16.size());
  }
};

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

// Same maximum (bits), argmax and sum (bits).
void ExpectSameStats(const ChunkStats& got, const ChunkStats& want, const std::string& where) {
  EXPECT_EQ(detmath::FloatToBits(got.max), detmath::FloatToBits(want.max)) << where;
  EXPECT_EQ(got.argmax, want.argmax) << where;
  EXPECT_EQ(Bits(got.sum), Bits(want.sum)) << where << ": " << got.sum << " vs " << want.sum;
}

// rejection_core.h's definition, element by element: the first element, then
// any strictly larger one; the sum of LogitWeight in the fixed lane order.
ChunkStats DefinedStats(const StoredRow& row, int32_t begin, int32_t end, float inv_t) {
  const auto load = [&](int32_t x) { return rejection::LoadValue(row.data(), row.dtype, x); };
  ChunkStats s{load(begin), begin, 0.0};
  for (int32_t x = begin + 1; x < end; ++x) {
    if (load(x) > s.max) {
      s.max = load(x);
      s.argmax = x;
    }
  }
  s.sum = reference_rows::ChunkSumFixedOrder(begin, end,
                                             [&](int32_t x) { return rejection::LogitWeight(load(x), s.max, inv_t); });
  return s;
}

std::vector<float> Gaussian(int32_t n, float sigma, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    // Box-Muller on the workload generator's uniforms (accuracy irrelevant here).
    const double u1 = 1.0 - rng.NextDouble(), u2 = rng.NextDouble();
    x = static_cast<float>(sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return v;
}

// Rows that reach every branch: ordinary spreads, a spread wide enough that
// some exponents fall below -125, ties at the maximum, a maximum of +0 and
// -0, a chunk of one repeated value.
std::vector<std::pair<std::string, std::vector<float>>> Rows(int32_t n) {
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  for (const float sigma : {0.1f, 3.0f, 30.0f, 300.0f}) {
    rows.emplace_back("sigma " + std::to_string(sigma), Gaussian(n, sigma, static_cast<uint64_t>(sigma * 10)));
  }
  std::vector<float> ties = Gaussian(n, 2.0f, 7);
  for (int32_t x = 5; x < n; x += 997) ties[x] = 9.5f;
  rows.emplace_back("ties at the maximum", ties);
  std::vector<float> zeros = Gaussian(n, 1.0f, 8);
  for (float& x : zeros) x = -std::fabs(x) - 0.5f;
  for (int32_t x = 3; x < n; x += 1500) zeros[x] = (x / 1500) % 2 == 0 ? -0.0f : 0.0f;
  rows.emplace_back("signed zero maxima", zeros);
  rows.emplace_back("one value", std::vector<float>(n, -4.25f));
  return rows;
}

constexpr float kInverseTemperatures[] = {1.0f, 1.0f / 0.7f, 0.0f, 1000.0f};

TEST(ReferenceRowsTest, ScalarChunkStatisticsAreTheDefinition) {
  const int32_t vocab = 2 * kNormalizerChunk + 300;  // two full chunks and a partial one
  for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    for (const auto& [name, values] : Rows(vocab)) {
      const StoredRow row(dtype, values);
      for (const float inv_t : kInverseTemperatures) {
        for (int32_t begin = 0; begin < vocab; begin += kNormalizerChunk) {
          const int32_t end = std::min(vocab, begin + kNormalizerChunk);
          const std::string where = name + ", dtype " + std::to_string(static_cast<int>(dtype)) + ", 1/T " +
                                    std::to_string(inv_t) + ", chunk at " + std::to_string(begin);
          ExpectSameStats(reference_rows::LogitChunkStatsScalar(row.data(), dtype, begin, end, inv_t),
                          DefinedStats(row, begin, end, inv_t), where);
          ExpectSameStats(reference_rows::LogitChunkStats(row.data(), dtype, begin, end, inv_t),
                          DefinedStats(row, begin, end, inv_t), where + " (the dispatched path)");
        }
      }
    }
  }
}

TEST(ReferenceRowsTest, VectorPathComputesTheScalarBits) {
  if (!reference_rows::VectorPathAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: scalar path only";
  for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    for (auto [name, values] : Rows(kNormalizerChunk)) {
      for (const float poison : {0.0f, kInf, -kInf, kNaN}) {
        // A non-finite value sends the chunk down the scalar path whole.
        if (poison != 0.0f) values[1234] = poison;
        const StoredRow row(dtype, values);
        for (const float inv_t : kInverseTemperatures) {
          const std::string where = name + ", dtype " + std::to_string(static_cast<int>(dtype)) + ", 1/T " +
                                    std::to_string(inv_t) + ", poison " + std::to_string(poison);
          ExpectSameStats(reference_rows::LogitChunkStats(row.data(), dtype, 0, kNormalizerChunk, inv_t),
                          reference_rows::LogitChunkStatsScalar(row.data(), dtype, 0, kNormalizerChunk, inv_t),
                          where);
        }
      }
    }
  }
}

// Lanes built so that order shows in the bits (weights 2^(z - max), exact
// for these integer exponents): a lane holding 1 and two 2^-24 sums to 1 or
// 1 + 2^-23 in float depending on which it adds first; lanes summing to 1,
// 2^-53 or 2^-124 fold to different doubles depending on which pairs meet
// first (1 + 2^-53 rounds to 1, 2^-53 + 2^-53 does not). An element added
// to the wrong lane or in the wrong order, or a lane folded in the wrong
// place, changes the sum.
TEST(ReferenceRowsTest, VectorPathKeepsTheLaneOrder) {
  if (!reference_rows::VectorPathAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: scalar path only";
  float inv_t = 1.0f / 1.44269504f;  // LogitScale(inv_t) == 1: weights are exactly 2^(z - max)
  while (rejection::LogitScale(inv_t) < 1.0f) inv_t = std::nextafter(inv_t, 2.0f);
  while (rejection::LogitScale(inv_t) > 1.0f) inv_t = std::nextafter(inv_t, 0.0f);
  ASSERT_EQ(rejection::LogitScale(inv_t), 1.0f);
  constexpr int32_t kPerLane = kNormalizerChunk / rejection::kChunkLanes;  // 16
  constexpr float kMax = 10.0f;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    SplitMix64 rng(seed);
    std::vector<float> values(kNormalizerChunk, kMax - 124.0f);
    // Each lane's kind depends on its place among 8 neighbours too, so the
    // eight partial folds differ in magnitude.
    uint64_t kind_of_place[8];
    for (uint64_t& k : kind_of_place) k = rng.NextBelow(4);
    for (int32_t lane = 0; lane < rejection::kChunkLanes; ++lane) {
      // The lane's k-th element, in the order the lane adds them.
      const auto at = [&](int32_t k) {
        return (k / rejection::kLaneWidth * rejection::kChunkLanes + lane) * rejection::kLaneWidth +
               k % rejection::kLaneWidth;
      };
      const uint64_t kind = rng.NextBelow(8) == 0 ? kind_of_place[lane % 8] : 3;
      if (kind == 0) {  // 1 and two 2^-24 in random places
        values[at(static_cast<int32_t>(rng.NextBelow(kPerLane)))] = kMax - 24.0f;
        values[at(static_cast<int32_t>(rng.NextBelow(kPerLane)))] = kMax - 24.0f;
        values[at(static_cast<int32_t>(rng.NextBelow(kPerLane)))] = kMax;
      } else if (kind == 1) {
        values[at(static_cast<int32_t>(rng.NextBelow(kPerLane)))] = kMax;
      } else if (kind == 2) {
        values[at(static_cast<int32_t>(rng.NextBelow(kPerLane)))] = kMax - 53.0f;
      }  // else every element 2^-124
    }
    values[rng.NextBelow(kNormalizerChunk)] = kMax;  // at least one maximum
    const StoredRow row(SampleDtype::kFloat32, values);
    ExpectSameStats(reference_rows::LogitChunkStats(row.data(), SampleDtype::kFloat32, 0, kNormalizerChunk, inv_t),
                    DefinedStats(row, 0, kNormalizerChunk, inv_t), "seed " + std::to_string(seed));
  }
}

TEST(ReferenceRowsTest, VectorPathTakesTheFirstOfTiedMaxima) {
  if (!reference_rows::VectorPathAvailable()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: scalar path only";
  std::vector<float> values(kNormalizerChunk, -1.0f);
  values[4000] = 0.0f;
  values[77] = -0.0f;  // equal to +0: the first of the two is the maximum, with its sign
  const StoredRow row(SampleDtype::kFloat32, values);
  const ChunkStats s = reference_rows::LogitChunkStats(row.data(), SampleDtype::kFloat32, 0, kNormalizerChunk, 1.0f);
  EXPECT_EQ(s.argmax, 77);
  EXPECT_TRUE(std::signbit(s.max));
}

TEST(ReferenceRowsTest, CheckedRowStatisticsAreTheScanThenTheChunkStatistics) {
  const int32_t vocab = 3 * kNormalizerChunk + 301;
  for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    const std::vector<float> values = Gaussian(vocab, 3.0f, 11);
    for (const float inv_t : kInverseTemperatures) {
      const StoredRow row(dtype, values);
      std::vector<ChunkStats> chunks;
      ASSERT_EQ(reference_rows::CheckedLogitRowStats(row.data(), dtype, vocab, inv_t, chunks), -1);
      ASSERT_EQ(chunks.size(), 4u);
      for (int32_t c = 0; c < 4; ++c) {
        const int32_t begin = c * kNormalizerChunk;
        ExpectSameStats(chunks[c],
                        reference_rows::LogitChunkStats(row.data(), dtype, begin,
                                                        std::min(vocab, begin + kNormalizerChunk), inv_t),
                        "chunk " + std::to_string(c));
      }
    }
    // The first invalid value, wherever it lies: a full chunk (either path),
    // the partial last chunk; a later one does not count.
    for (const int32_t at : {0, 77, kNormalizerChunk + 5, 3 * kNormalizerChunk + 300}) {
      for (const float poison : {kNaN, kInf, -kInf}) {
        std::vector<float> bad = values;
        bad[at] = poison;
        if (at + 9000 < vocab) bad[at + 9000] = poison;
        std::vector<ChunkStats> chunks;
        EXPECT_EQ(reference_rows::CheckedLogitRowStats(StoredRow(dtype, bad).data(), dtype, vocab, 1.0f, chunks), at)
            << "dtype " << static_cast<int>(dtype) << ", poison " << poison;
      }
    }
  }
}

TEST(ReferenceRowsTest, FirstInvalidElementIsTheFirstValueTheKindRejects) {
  const int32_t vocab = 3 * kNormalizerChunk + 17;
  struct Case {
    SampleValueKind kind;
    float invalid;  // a value this kind rejects
    std::vector<float> valid_specials;
  };
  const Case cases[] = {
      {SampleValueKind::kLogits, kInf, {-6e4f, 0.0f, -0.0f}},
      {SampleValueKind::kLogits, kNaN, {}},
      {SampleValueKind::kLogits, -kInf, {}},
      {SampleValueKind::kProbabilities, -0.25f, {0.0f, -0.0f}},
      {SampleValueKind::kProbabilities, kNaN, {}},
      {SampleValueKind::kLogProbabilities, kInf, {-kInf}},
      {SampleValueKind::kLogProbabilities, kNaN, {-kInf}},
  };
  for (const SampleDtype dtype : {SampleDtype::kFloat32, SampleDtype::kBFloat16, SampleDtype::kFloat16}) {
    for (const Case& c : cases) {
      std::vector<float> values(vocab, c.kind == SampleValueKind::kLogProbabilities ? -3.0f : 0.5f);
      for (size_t i = 0; i < c.valid_specials.size(); ++i) values[100 + 4500 * i] = c.valid_specials[i];
      const std::string where = "kind " + std::to_string(static_cast<int>(c.kind)) + ", dtype " +
                                std::to_string(static_cast<int>(dtype)) + ", invalid " + std::to_string(c.invalid);
      EXPECT_EQ(reference_rows::FirstInvalidElement(StoredRow(dtype, values).data(), dtype, c.kind, vocab), -1)
          << where;
      for (const int32_t at : {0, kNormalizerChunk - 1, kNormalizerChunk, vocab - 1}) {
        std::vector<float> bad = values;
        bad[at] = c.invalid;
        if (at + 5000 < vocab) bad[at + 5000] = c.invalid;  // a later one does not count
        EXPECT_EQ(reference_rows::FirstInvalidElement(StoredRow(dtype, bad).data(), dtype, c.kind, vocab), at)
            << where << " at " << at;
      }
    }
  }
}

}  // namespace
}  // namespace specverify
