#include "client/loadgen/report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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
  ratio.p99_added_ns = 500'000;
  EXPECT_TRUE(MeetsServiceTarget(ratio, 200));   // 500 us <= 200 us + 300 us
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

// The raw-gRPC ceiling and the compare servers (issue #12): the overhead
// table's arithmetic and verdicts, and their JSON and CSV rows.
TEST(ReportTest, RawCeilingOverheadAndCompareServers) {
  RunReport report = MakeReport();
  report.config.raw_ceiling = true;
  report.config.workload.row_bytes = 4096;
  report.config.workload.kv_return = KvReturnMode::kInline;
  report.compare.push_back({"cpu2", {"127.0.0.1:5002", "cpu", "", "0.1.0", 0}});
  StepPair& c64 = report.steps[0];
  c64.server.spec.concurrency = 64;
  c64.has_raw = true;
  c64.raw = MakeStep(64, 4000, 150'000);
  c64.raw.target = "raw";
  c64.compare.push_back(MakeStep(64, 900, 210'000));
  c64.compare.back().target = "cpu2";
  StepPair c1;
  c1.server = MakeStep(1, 100, 230'000);
  c1.has_ceiling = true;
  c1.ceiling = MakeStep(1, 100, 200'000);
  c1.ceiling.target = "ceiling";
  c1.has_raw = true;
  c1.raw = MakeStep(1, 100, 180'000);
  c1.raw.target = "raw";
  report.steps.insert(report.steps.begin(), c1);

  EXPECT_NEAR(static_cast<double>(AddedOverRawP50Ns(report.steps[0])), 50'000, 3'000);
  EXPECT_EQ(AddedOverRawTargetNs(report.config.workload), 60'000);  // rows come back
  WorkloadConfig none = report.config.workload;
  none.kv_return = KvReturnMode::kNone;
  EXPECT_EQ(AddedOverRawTargetNs(none), 40'000);

  const std::string table = FormatTable(report);
  EXPECT_THAT(table, HasSubstr("service overhead vs raw gRPC"));
  EXPECT_THAT(table, HasSubstr("closed c=1 [raw]"));
  EXPECT_THAT(table, HasSubstr("closed c=64 [cpu2]"));
  // c=1: ~50 us added <= 60: met. c=64: half the no-op throughput: missed.
  std::vector<std::string> overhead;
  bool in_overhead = false;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (absl::StrContains(line, "service overhead")) in_overhead = true;
    if (in_overhead && absl::StartsWith(line, "closed")) overhead.emplace_back(line);
  }
  ASSERT_EQ(overhead.size(), 2u) << table;
  EXPECT_THAT(overhead[0], HasSubstr("met"));
  EXPECT_THAT(overhead[0], Not(HasSubstr("missed")));
  EXPECT_THAT(overhead[1], HasSubstr("missed"));

  const std::string json = FormatJson(report);
  EXPECT_TRUE(BalancedJson(json)) << json;
  EXPECT_THAT(json, HasSubstr("\"raw\":{\"target\":\"raw\""));
  EXPECT_THAT(json, HasSubstr("\"compare\":[{\"target\":\"cpu2\""));
  EXPECT_THAT(json, HasSubstr("\"added_over_raw_p50_ns\":"));
  const std::string csv = FormatCsv(report);
  EXPECT_THAT(csv, HasSubstr("\nraw,"));
  EXPECT_THAT(csv, HasSubstr("\ncpu2,cpu,"));
}

}  // namespace
}  // namespace specverify::loadgen
