// Philox known answers, the open-interval uniforms, and the accuracy of the
// bit-reproducible exp/log and half-precision conversions.
#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "kernels/sampling/det_math.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/rejection_core.h"

namespace specverify {
namespace {

struct Kat {
  uint32_t counter[4];
  uint32_t key[2];
  uint32_t expected[4];
};

// Random123 tests/kat_vectors, the three "philox4x32 10" lines.
constexpr Kat kPhiloxKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  for (const Kat& kat : kPhiloxKats) {
    const Philox4x32 out = Philox4x32_10(
        Philox4x32{{kat.counter[0], kat.counter[1], kat.counter[2], kat.counter[3]}}, kat.key[0], kat.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], kat.expected[i]) << "word " << i;
  }
}

TEST(PhiloxTest, UniformsLieStrictlyInsideTheUnitInterval) {
  EXPECT_GT(UniformOpenFloat(0u), 0.0f);
  EXPECT_LT(UniformOpenFloat(0xffffffffu), 1.0f);
  EXPECT_EQ(UniformOpenFloat(0u), 0x1.0p-24f);
  EXPECT_EQ(UniformOpenFloat(0xffffffffu), 1.0f - 0x1.0p-24f);
  EXPECT_GT(UniformOpenDouble(0u, 0u), 0.0);
  EXPECT_LT(UniformOpenDouble(0xffffffffu, 0xffffffffu), 1.0);
  // -log u is finite and positive at both ends.
  EXPECT_GT(RaceExponential(0xffffffffu), 0.0f);
  EXPECT_TRUE(std::isfinite(RaceExponential(0u)));
}

TEST(PhiloxTest, KeyingSeparatesSeedsSequencesPositionsAndStreams) {
  const double base = AcceptCoin(7, 0, 0);
  EXPECT_NE(base, AcceptCoin(8, 0, 0));
  EXPECT_NE(base, AcceptCoin(7, 1, 0));
  EXPECT_NE(base, AcceptCoin(7, 0, 1));
  EXPECT_NE(RaceBits(7, 0, 0, 0).v[0], Philox4x32_10(Philox4x32{{0, 0, 0, kStreamAcceptCoin}}, 7, 0).v[0]);
  // The high word of the seed matters.
  EXPECT_NE(AcceptCoin(7, 0, 0), AcceptCoin(7 + (uint64_t{1} << 32), 0, 0));
}

TEST(DetMathTest, ExpWithinTwoUlpOverTheSoftmaxRange) {
  double worst = 0.0;
  for (float x = -103.0f; x <= 0.0f; x += 0.0137f) {
    const double truth = std::exp(static_cast<double>(x));
    const float got = detmath::ExpDet(x);
    if (truth < 1e-37) continue;  // subnormal results: absolute error below 1e-45 is all that matters
    const double ulp = std::nextafter(static_cast<float>(truth), 2.0f * static_cast<float>(truth) + 1.0f) -
                       static_cast<float>(truth);
    worst = std::max(worst, std::abs(got - truth) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(detmath::ExpDet(0.0f), 1.0f);
  EXPECT_EQ(detmath::ExpDet(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(detmath::ExpDet(100.0f)));
  EXPECT_GT(detmath::ExpDet(-100.0f), 0.0f);  // subnormal range handled
}

// The row pass's fast exp is Exp2Det itself wherever the row pass takes it
// (every exponent in [-125, 0]): the GPU's normalizer and the CPU reference
// (which calls Exp2Det) must agree bit for bit.
TEST(DetMathTest, Exp2NonPositiveIsExp2DetBitForBitOnItsRange) {
  const auto same_bits = [](float t) {
    return detmath::FloatToBits(detmath::Exp2DetNonPositive(t)) == detmath::FloatToBits(detmath::Exp2Det(t));
  };
  const uint32_t last = detmath::FloatToBits(-125.0f);  // negative floats: bits grow with |t|
  int64_t checked = 0;
  for (uint64_t bits = 0x80000000u; bits <= last; bits += 997) {
    const float t = detmath::BitsToFloat(static_cast<uint32_t>(bits));
    ASSERT_TRUE(same_bits(t)) << "t = " << t;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
  // Every float near the ends and around the rounding ties of n.
  for (uint32_t k = 0; k < 100000; ++k) {
    ASSERT_TRUE(same_bits(detmath::BitsToFloat(last - k))) << "k = " << k;
    ASSERT_TRUE(same_bits(detmath::BitsToFloat(0x80000000u + k))) << "k = " << k;
  }
  for (int32_t n = -125; n <= 0; ++n) {
    for (const float t : {static_cast<float>(n), n - 0.5f, n + 0.5f}) {
      if (t < -125.0f || t > 0.0f) continue;
      ASSERT_TRUE(same_bits(t)) << "t = " << t;
      ASSERT_TRUE(same_bits(std::nextafter(t, 0.0f))) << "t = " << t;
      ASSERT_TRUE(same_bits(std::nextafter(t, -200.0f)) || std::nextafter(t, -200.0f) < -125.0f) << "t = " << t;
    }
  }
  EXPECT_EQ(detmath::Exp2DetNonPositive(0.0f), 1.0f);
  EXPECT_EQ(detmath::Exp2DetNonPositive(-125.0f), std::ldexp(1.0f, -125));
}

// The race's exact log-probability weights use the branch-free ExpDet: it
// must give ExpDet's bits for every float, so the GPU's outcome stays the
// CPU reference's.
TEST(DetMathTest, ExpDetBranchFreeIsExpDetBitForBit) {
  const auto same_bits = [](float x) {
    return detmath::FloatToBits(detmath::ExpDetBranchFree(x)) == detmath::FloatToBits(detmath::ExpDet(x));
  };
  int64_t checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 251) {
    const float x = detmath::BitsToFloat(static_cast<uint32_t>(bits));
    ASSERT_TRUE(same_bits(x)) << "x = " << x << " (bits " << bits << ")";
    ++checked;
  }
  EXPECT_GT(checked, 17000000);
  // Every float around the cut-offs and the scaling branches (2^n with n
  // below -126 or above 127), and a dense run of ordinary log-probabilities.
  for (const float edge : {-103.5f, 88.72f, -87.3365f, -87.6f, 88.0296f, 88.3762f, 0.0f, -20.0f}) {
    float lo = edge, hi = edge;
    for (int k = 0; k < 20000; ++k) {
      ASSERT_TRUE(same_bits(lo)) << "x = " << lo;
      ASSERT_TRUE(same_bits(hi)) << "x = " << hi;
      lo = std::nextafter(lo, -1e30f);
      hi = std::nextafter(hi, 1e30f);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, 1e-45f, -1e-45f}) {
    EXPECT_TRUE(same_bits(x)) << "x = " << x;
  }
}

// The softmax weights' exp (LogitWeight): 2^t within 1 ulp for normal
// results, within one step of 2^-149 for subnormal ones, 0 from -151 and
// +inf from 128.
TEST(DetMathTest, Exp2WithinOneUlpAndRoundsSubnormalsCorrectly) {
  double worst = 0.0;
  for (float t = -149.9f; t < 127.9f; t += 0.00731f) {
    const long double truth = std::exp2(static_cast<long double>(t));
    const float got = detmath::Exp2Det(t);
    if (truth < 1.1754943508222875e-38L) {
      ASSERT_LE(std::fabs(static_cast<long double>(got) - truth), std::ldexp(1.0L, -149)) << "t = " << t;
      continue;
    }
    const float rounded = static_cast<float>(truth);
    const double ulp = std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded;
    worst = std::max(worst, static_cast<double>(std::fabs(static_cast<long double>(got) - truth)) / ulp);
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(detmath::Exp2Det(0.0f), 1.0f);
  EXPECT_EQ(detmath::Exp2Det(-0.0f), 1.0f);
  EXPECT_EQ(detmath::Exp2Det(-1.0f), 0.5f);
  EXPECT_EQ(detmath::Exp2Det(-149.0f), std::ldexp(1.0f, -149));
  EXPECT_EQ(detmath::Exp2Det(-151.0f), 0.0f);
  EXPECT_EQ(detmath::Exp2Det(-1e30f), 0.0f);
  EXPECT_TRUE(std::isinf(detmath::Exp2Det(128.0f)));
  EXPECT_TRUE(std::isinf(detmath::Exp2Det(1e30f)));
  EXPECT_EQ(detmath::Exp2Det(127.0f), std::ldexp(1.0f, 127));
  EXPECT_EQ(detmath::Exp2Det(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(detmath::Exp2Det(std::numeric_limits<float>::quiet_NaN()), 0.0f);
  // The weight is exactly 1 at the maximum and decreasing below it.
  EXPECT_EQ(rejection::LogitWeight(3.0f, 3.0f, 1e30f), 1.0f);
  EXPECT_EQ(rejection::LogitWeight(2.0f, 3.0f, 1e38f), 0.0f);
  EXPECT_NEAR(rejection::LogitWeight(2.0f, 3.0f, 1.0f), std::exp(-1.0), 1e-7);
}

// Log-probabilities: the CUDA race prunes with up = ex2(v log2 e) * 1.001 +
// 2^-126 and lo = ex2(v log2 e) * 0.999 - 2^-126 as bounds on ExpDet(v)
// (rejection_sample.cu, LogProbabilityBounds). The ex2 side is the PTX
// approximation's (relative error ~2^-22, plus the rounding of v log2 e);
// this checks ExpDet's side over every value a log-probability can take
// (v > 0 included): relative error far below the 0.1% margin for normal
// results, absolute error far below 2^-126 for subnormal ones, 0 below -103.5,
// +inf from 88.72, and monotone (the sampled order of weights is kept).
TEST(DetMathTest, ExpDetStaysInsideTheLogProbabilityBoundsMargins) {
  constexpr double kMinNormal = 1.17549435e-38;
  double worst_relative = 0.0, worst_absolute_subnormal = 0.0;
  float previous = 0.0f;
  for (float v = -104.0f; v < 88.72f; v += 0.00731f) {
    const float got = detmath::ExpDet(v);
    ASSERT_GE(got, previous) << "ExpDet is not monotone at " << v;
    previous = got;
    if (v <= -103.5f) {
      ASSERT_EQ(got, 0.0f) << v;
      continue;
    }
    const double truth = std::exp(static_cast<double>(v));
    if (truth >= kMinNormal) {
      worst_relative = std::max(worst_relative, std::abs(got - truth) / truth);
    } else {
      worst_absolute_subnormal = std::max(worst_absolute_subnormal, std::abs(got - truth));
    }
  }
  EXPECT_LT(worst_relative, 1e-6);                         // vs a 1e-3 margin
  EXPECT_LT(worst_absolute_subnormal, kMinNormal * 1e-3);  // vs a 2^-126 additive term
  EXPECT_TRUE(std::isinf(detmath::ExpDet(88.72f)));
  EXPECT_EQ(detmath::ExpDet(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(detmath::ExpDet(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

TEST(DetMathTest, LogWithinTwoUlpOnTheUniforms) {
  double worst = 0.0;
  for (uint32_t bits = 0; bits < 0xffffffffu - (1u << 20); bits += (1u << 20) + 12345u) {
    const float u = UniformOpenFloat(bits);
    const double truth = std::log(static_cast<double>(u));
    const float got = detmath::LogDet(u);
    const float t = static_cast<float>(truth);
    const double ulp = std::abs(std::nextafter(t, 0.0f) - t);
    if (ulp == 0.0) continue;
    worst = std::max(worst, std::abs(got - truth) / ulp);
  }
  EXPECT_LE(worst, 2.0);
}

TEST(DetMathTest, HalfConversionsRoundTripEveryPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f16 = detmath::Float16BitsToFloat(bits);
    if (!std::isnan(f16)) {
      ASSERT_EQ(detmath::FloatToFloat16Bits(f16), bits) << std::hex << h;
    }
    const float bf = detmath::BFloat16BitsToFloat(bits);
    if (!std::isnan(bf)) {
      ASSERT_EQ(detmath::FloatToBFloat16Bits(bf), bits) << std::hex << h;
    }
  }
  // Round to nearest even between representable halves.
  EXPECT_EQ(detmath::Float16BitsToFloat(detmath::FloatToFloat16Bits(1.0f + 0x1.0p-11f)), 1.0f);
  EXPECT_EQ(detmath::Float16BitsToFloat(detmath::FloatToFloat16Bits(1.0f + 0x1.8p-11f)), 1.0f + 0x1.0p-10f);
  EXPECT_EQ(detmath::Float16BitsToFloat(detmath::FloatToFloat16Bits(70000.0f)),
            std::numeric_limits<float>::infinity());
}

// Top-p masses are integers (rejection_core.h) so that the GPU's atomics and
// the CPU's sorted sum agree on every boundary: the unit is 2^-40 of the row
// maximum's weight, truncated, and the budget truncates top_p x kept.
TEST(TopPMassTest, UnitsAreTruncatedTwoToTheMinus40OfTheMaximum) {
  EXPECT_EQ(rejection::TopPMassUnits(1.0f), uint64_t{1} << 40);
  EXPECT_EQ(rejection::TopPMassUnits(0.5f), uint64_t{1} << 39);
  EXPECT_EQ(rejection::TopPMassUnits(std::ldexp(1.0f, -40)), 1u);
  EXPECT_EQ(rejection::TopPMassUnits(std::ldexp(1.0f, -41)), 0u);  // lighter tokens count 0
  EXPECT_EQ(rejection::TopPMassUnits(0.0f), 0u);
  EXPECT_EQ(rejection::TopPMassUnits(std::nextafter(1.0f, 0.0f)), (uint64_t{1} << 40) - (uint64_t{1} << 16));
  uint64_t previous = 0;
  for (float w = std::ldexp(1.0f, -45); w <= 1.0f; w *= 1.01f) {
    const uint64_t u = rejection::TopPMassUnits(w);
    ASSERT_GE(u, previous) << w;
    ASSERT_LE(static_cast<double>(u), std::ldexp(static_cast<double>(w), 40)) << w;
    ASSERT_GT(static_cast<double>(u) + 1.0, std::ldexp(static_cast<double>(w), 40)) << w;
    previous = u;
  }
}

TEST(TopPMassTest, BudgetTruncatesTopPTimesTheKeptMass) {
  EXPECT_EQ(rejection::TopPBudgetUnits(0.5f, uint64_t{1} << 41), uint64_t{1} << 40);
  EXPECT_EQ(rejection::TopPBudgetUnits(1.0f, 12345), 12345u);
  EXPECT_EQ(rejection::TopPBudgetUnits(0.9f, 10), 8u);  // 0.9f * 10 = 8.99999976...
  // 2^20 tokens of weight 1: the largest kept mass stays exact in the budget.
  EXPECT_EQ(rejection::TopPBudgetUnits(0.75f, uint64_t{1} << 60), uint64_t{3} << 58);
}

}  // namespace
}  // namespace specverify
