#include "client/loadgen/schedule.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ArrivalScheduleTest, ConstantRateIsExactAndDoesNotDrift) {
  auto schedule = ArrivalSchedule::Create(ArrivalProcess::kConstant, 3.0, 1);
  ASSERT_TRUE(schedule.ok());
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(schedule->Next().count(), std::llround(i * 1e9 / 3.0)) << i;
  }
  // Computed from the index, not by summing rounded gaps: no drift after
  // a million requests.
  for (int64_t i = 1000; i < 1000000; ++i) schedule->Next();
  EXPECT_EQ(schedule->Next().count(), std::llround(1000000 * 1e9 / 3.0));
}

TEST(ArrivalScheduleTest, PoissonGapsHaveTheRightMeanAndSpread) {
  constexpr double kRate = 5000.0;
  constexpr int kSamples = 200000;
  auto schedule = ArrivalSchedule::Create(ArrivalProcess::kPoisson, kRate, 42);
  ASSERT_TRUE(schedule.ok());
  EXPECT_EQ(schedule->Next().count(), 0);  // the first request goes at once
  std::vector<double> gaps;
  double previous = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double t = schedule->Next().count() * 1e-9;
    ASSERT_GE(t, previous);
    gaps.push_back(t - previous);
    previous = t;
  }
  double sum = 0, sum_sq = 0;
  for (double g : gaps) {
    sum += g;
    sum_sq += g * g;
  }
  const double mean = sum / kSamples;
  const double stddev = std::sqrt(sum_sq / kSamples - mean * mean);
  // Standard error of the mean of 200k exponential gaps is 0.22% of it;
  // 1% is over 4 standard errors.
  EXPECT_NEAR(mean, 1.0 / kRate, 0.01 / kRate);
  EXPECT_NEAR(stddev / mean, 1.0, 0.02);  // exponential: coefficient of variation 1
  // Fraction of gaps above the mean: exp(-1) for an exponential.
  int above = 0;
  for (double g : gaps) above += g > 1.0 / kRate ? 1 : 0;
  EXPECT_NEAR(above / static_cast<double>(kSamples), std::exp(-1.0), 0.01);
}

TEST(ArrivalScheduleTest, PoissonIsReproducibleFromItsSeed) {
  auto a = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 100.0, 7);
  auto b = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 100.0, 7);
  auto c = ArrivalSchedule::Create(ArrivalProcess::kPoisson, 100.0, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a->Next();
    ASSERT_EQ(x, b->Next());
    differs |= x != c->Next();
  }
  EXPECT_TRUE(differs);
}

TEST(ArrivalScheduleTest, RejectsNonPositiveRates) {
  for (double rate : {0.0, -1.0, std::nan(""), static_cast<double>(INFINITY)}) {
    EXPECT_THAT(ArrivalSchedule::Create(ArrivalProcess::kConstant, rate, 1).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rate")))
        << rate;
  }
}

}  // namespace
}  // namespace specverify::loadgen
