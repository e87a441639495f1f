#include "client/loadgen/loadgen.h"

#include "gtest/gtest.h"

namespace specverify::loadgen {
namespace {

RunReport OneStep(int64_t sent, int64_t errors) {
  RunReport report;
  StepPair pair;
  pair.server.sent = sent;
  pair.server.ok = sent - errors;
  pair.server.rpc_errors = errors;
  report.steps.push_back(pair);
  return report;
}

TEST(ExitCodeTest, CleanRunIsZeroEvenWithErrorsByDefault) {
  EXPECT_EQ(ExitCodeFor(OneStep(100, 0)), kExitOk);
  // Overload answers (RESOURCE_EXHAUSTED) are legitimate server behaviour:
  // reported, not fatal, unless --max_error_fraction says so.
  EXPECT_EQ(ExitCodeFor(OneStep(100, 40)), kExitOk);
}

TEST(ExitCodeTest, WrongAnswersAndKvMismatchesFail) {
  RunReport wrong = OneStep(100, 0);
  wrong.steps[0].server.wrong_answers = 1;
  EXPECT_EQ(ExitCodeFor(wrong), kExitWrongAnswers);
  RunReport kv = OneStep(100, 0);
  kv.steps[0].server.kv_mismatches = 1;
  EXPECT_EQ(ExitCodeFor(kv), kExitWrongAnswers);
  RunReport ceiling_wrong = OneStep(100, 0);
  ceiling_wrong.steps[0].has_ceiling = true;
  ceiling_wrong.steps[0].ceiling.wrong_answers = 1;
  EXPECT_EQ(ExitCodeFor(ceiling_wrong), kExitWrongAnswers);
}

TEST(ExitCodeTest, UnverifiedAnswersFailOnlyFromTheServerUnderTest) {
  RunReport ceiling = OneStep(100, 0);
  ceiling.steps[0].has_ceiling = true;
  ceiling.steps[0].ceiling.ok = 100;
  ceiling.steps[0].ceiling.unverified = 100;
  EXPECT_EQ(ExitCodeFor(ceiling), kExitOk);
  RunReport server = OneStep(100, 0);
  server.server.backend = "cuda";
  server.steps[0].server.unverified = 100;
  EXPECT_EQ(ExitCodeFor(server), kExitWrongAnswers);
  // Pointed at a no-op server on purpose: unverified is what it promises.
  server.server.backend = "noop";
  EXPECT_EQ(ExitCodeFor(server), kExitOk);
}

TEST(ExitCodeTest, ErrorFractionAboveTheLimitFails) {
  RunReport report = OneStep(100, 11);
  report.config.max_error_fraction = 0.1;
  EXPECT_EQ(ExitCodeFor(report), kExitTooManyErrors);
  report = OneStep(100, 10);
  report.config.max_error_fraction = 0.1;
  EXPECT_EQ(ExitCodeFor(report), kExitOk);
}

}  // namespace
}  // namespace specverify::loadgen
