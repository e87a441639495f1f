#include "client/loadgen/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(LoadgenConfigTest, ParsesSweeps) {
  auto c = ParsePositiveIntList("1, 8,64,256", "concurrency");
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(*c, ElementsAre(1, 8, 64, 256));
  auto r = ParsePositiveDoubleList("1000,5000.5", "rate");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(*r, ElementsAre(1000.0, 5000.5));
  EXPECT_THAT(ParsePositiveIntList("1,0", "concurrency").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--concurrency")));
  EXPECT_THAT(ParsePositiveIntList("1,,2", "concurrency").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--concurrency")));
  EXPECT_THAT(ParsePositiveDoubleList("fast", "rate").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'fast'")));
}

TEST(LoadgenConfigTest, ParsesGammaAsFixedOrRange) {
  auto fixed = ParseGammaRange("8");
  ASSERT_TRUE(fixed.ok());
  EXPECT_THAT(*fixed, Pair(8, 8));
  auto range = ParseGammaRange("4:16");
  ASSERT_TRUE(range.ok());
  EXPECT_THAT(*range, Pair(4, 16));
  for (const char* bad : {"0", "16:4", "4:", "a", "1:2:3"}) {
    EXPECT_THAT(ParseGammaRange(bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--gamma")))
        << bad;
  }
}

TEST(LoadgenConfigTest, ParsesEnums) {
  EXPECT_EQ(*ParseRpcKind("stream"), RpcKind::kStream);
  EXPECT_EQ(*ParseArrivalProcess("poisson"), ArrivalProcess::kPoisson);
  EXPECT_EQ(*ParseKvReturnMode("inline"), KvReturnMode::kInline);
  EXPECT_THAT(ParseRpcKind("bidi").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--rpc")));
  EXPECT_THAT(ParseKvReturnMode("all").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--kv_return")));
}

TEST(LoadgenConfigTest, ValidationNamesTheFlag) {
  LoadgenConfig c;
  EXPECT_THAT(ValidateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--address")));
  c.address = "127.0.0.1:1";
  EXPECT_TRUE(ValidateConfig(c).ok());

  LoadgenConfig open = c;
  open.mode = LoopMode::kOpen;
  EXPECT_THAT(ValidateConfig(open), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--rate")));

  LoadgenConfig fetch = c;
  fetch.workload.fetch_kv_fraction = 1.0;
  fetch.workload.kv_return = KvReturnMode::kInline;
  EXPECT_THAT(ValidateConfig(fetch),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--fetch_kv")));

  LoadgenConfig no_rows = c;
  no_rows.workload.fetch_kv_fraction = 0.5;
  no_rows.workload.row_bytes = 0;
  EXPECT_THAT(ValidateConfig(no_rows),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--row_bytes")));

  LoadgenConfig metrics = c;
  metrics.metrics_url = "https://host:9090/metrics";
  EXPECT_THAT(ValidateConfig(metrics),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--metrics_url")));

  LoadgenConfig copies = c;
  copies.workload.region_copies = 2;  // inline transport: no region to copy
  EXPECT_THAT(ValidateConfig(copies),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--region_copies")));
  copies.workload.transport = Transport::kShm;
  EXPECT_TRUE(ValidateConfig(copies).ok());
  copies.workload.region_copies = 0;
  EXPECT_THAT(ValidateConfig(copies),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--region_copies")));

  LoadgenConfig start = c;
  start.start_at_unix_s = -1;
  EXPECT_THAT(ValidateConfig(start),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--start_at_unix")));

  LoadgenConfig duration = c;
  duration.duration_s = 0;
  EXPECT_THAT(ValidateConfig(duration),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--duration")));
  duration.requests = 100;  // a request count replaces the duration
  EXPECT_TRUE(ValidateConfig(duration).ok());

  LoadgenConfig resend = c;
  resend.resend_unanswered = 3;  // unary calls are not resent
  EXPECT_THAT(ValidateConfig(resend),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--resend_unanswered: needs --rpc=stream")));
  resend.rpc = RpcKind::kStream;
  EXPECT_TRUE(ValidateConfig(resend).ok());
  resend.resend_unanswered = -1;
  EXPECT_THAT(ValidateConfig(resend),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--resend_unanswered: must be in [0, 1000], got -1")));
}

TEST(LoadgenConfigTest, ParsesLabeledCompareAddresses) {
  auto parsed = ParseLabeledAddresses("cpu=127.0.0.1:1, gpu_2=host:2");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].first, "cpu");
  EXPECT_EQ((*parsed)[0].second, "127.0.0.1:1");
  EXPECT_EQ((*parsed)[1].first, "gpu_2");
  for (const char* bad : {"127.0.0.1:1", "=host:1", "cpu=", "a b=host:1", "noop=host:1",
                          "cpu=h:1,cpu=h:2"}) {
    auto r = ParseLabeledAddresses(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("--compare_address"))
        << bad;
  }
}

}  // namespace
}  // namespace specverify::loadgen
