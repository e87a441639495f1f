#include "client/loadgen/report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace specverify::loadgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

StepResult MakeStep(int32_t concurrency, int64_t ok, int64_t latency_ns) {
  StepResult r;
  r.spec.concurrency = concurrency;
  r.backend = "cpu";
  r.sent = ok + 1;
  r.ok = ok;
  r.rpc_errors = 1;
  r.errors_by_code["RESOURCE_EXHAUSTED"] = 1;
  r.sequences = ok * 4;
  r.draft_tokens = ok * 32;
  r.accepted_tokens = ok * 16;
  r.emitted_tokens = r.accepted_tokens + r.sequences;
  r.window_s = 2.0;
  for (int64_t i = 0; i < ok; ++i) r.latency.Record(latency_ns);
  return r;
}

RunReport MakeReport() {
  RunReport report;
  report.config.address = "127.0.0.1:5000";
  report.server = {"127.0.0.1:5000", "cpu", "Some \"CPU\"", "0.1.0", 200};
  report.has_ceiling = true;
  report.ceiling = {"127.0.0.1:5001", "noop", "", "0.1.0"};
  StepPair pair;
  pair.server = MakeStep(8, 1000, 200'000);
  pair.has_ceiling = true;
  pair.ceiling = MakeStep(8, 2000, 100'000);
  pair.ceiling.target = "ceiling";
  report.steps.push_back(pair);
  return report;
}

// Brackets and braces balance outside string literals, and nothing but
// whitespace follows the top-level object: a cheap structural JSON check.
bool BalancedJson(const std::string& json) {
  std::vector<char> stack;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char ch = json[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '{' || ch == '[') stack.push_back(ch);
    else if (ch == '}' || ch == ']') {
      if (stack.empty() || stack.back() != (ch == '}' ? '{' : '[')) return false;
      stack.pop_back();
      if (stack.empty()) return json.find_first_not_of(" \n", i + 1) == std::string::npos;
    }
  }
  return false;
}

TEST(ReportTest, CeilingRatioComparesThroughputAndP99) {
  const RunReport report = MakeReport();
  const CeilingRatio ratio = ComputeCeilingRatio(report.steps[0]);
  EXPECT_DOUBLE_EQ(ratio.throughput_ratio, 0.5);  // 500 req/s vs 1000 req/s
  EXPECT_NEAR(ratio.p99_ratio, 2.0, 0.02);
  EXPECT_NEAR(static_cast<double>(ratio.p99_added_ns), 100'000, 1'000);
}

TEST(ReportTest, ServiceTargetNeedsThroughputAndP99) {
  CeilingRatio ratio;
  ratio.throughput_ratio = 0.95;
  ratio.p99_added_ns = 300'000;
  EXPECT_TRUE(MeetsServiceTarget(ratio, 200));   // 300 us <= 200 us + 100 us
  EXPECT_FALSE(MeetsServiceTarget(ratio, 199));
  ratio.throughput_ratio = 0.89;
  EXPECT_FALSE(MeetsServiceTarget(ratio, 1000));
  // The fixture's server runs at half the no-op throughput: missed.
  EXPECT_THAT(FormatTable(MakeReport()), HasSubstr("missed"));
}

TEST(ReportTest, JsonIsWellFormedAndCarriesTheCounts) {
  const std::string json = FormatJson(MakeReport());
  EXPECT_TRUE(BalancedJson(json)) << json;
  EXPECT_THAT(json, HasSubstr("\"device_name\":\"Some \\\"CPU\\\"\""));
  EXPECT_THAT(json, HasSubstr("\"sent\":1001,\"ok\":1000,\"rpc_errors\":1"));
  EXPECT_THAT(json, HasSubstr("\"errors_by_code\":{\"RESOURCE_EXHAUSTED\":1}"));
  EXPECT_THAT(json, HasSubstr("\"acceptance\":0.5"));
  EXPECT_THAT(json, HasSubstr("\"requests_per_s\":500"));
  EXPECT_THAT(json, HasSubstr("\"ceiling_ratio\":{\"throughput\":0.5"));
  EXPECT_THAT(json, HasSubstr("\"wrong_answers\":0"));
}

TEST(ReportTest, CsvRowsMatchTheHeader) {
  const std::string csv = FormatCsv(MakeReport());
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);  // header, server, ceiling
  const auto columns = std::count(lines[0].begin(), lines[0].end(), ',');
  for (const std::string& line : lines) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  }
  EXPECT_THAT(lines[1], HasSubstr("server,cpu,closed,unary,1,8,"));
  EXPECT_THAT(lines[2], HasSubstr("ceiling,cpu,closed"));
}

TEST(ReportTest, TableShowsTheStepsTheRatioAndTheVerdict) {
  RunReport report = MakeReport();
  std::string table = FormatTable(report);
  EXPECT_THAT(table, HasSubstr("backend=cpu"));
  EXPECT_THAT(table, HasSubstr("closed c=8"));
  EXPECT_THAT(table, HasSubstr("closed c=8 [noop]"));
  EXPECT_THAT(table, HasSubstr("transport ceiling"));
  EXPECT_THAT(table, HasSubstr("RESOURCE_EXHAUSTED:1"));
  EXPECT_THAT(table, HasSubstr("every checked answer matched the oracle"));
  EXPECT_THAT(table, Not(HasSubstr("WRONG")));

  report.steps[0].server.wrong_answers = 2;
  report.steps[0].server.wrong_answer_examples = {"results[0].next_token is 5, expected 4"};
  table = FormatTable(report);
  EXPECT_THAT(table, HasSubstr("2 WRONG ANSWERS"));
  EXPECT_THAT(table, HasSubstr("next_token is 5, expected 4"));
  EXPECT_EQ(report.total_wrong_answers(), 2);
}

TEST(ReportTest, JsonEscapesControlCharacters) {
  EXPECT_EQ(JsonEscape("a\"b\\c\nd\x01"), "a\\\"b\\\\c\\nd\\u0001");
}

}  // namespace
}  // namespace specverify::loadgen
