// gMock matchers for absl::Status / absl::StatusOr (the packaged abseil has no
// status_matchers.h). Usage:
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
//                                HasSubstr("draft_tokens")));
#ifndef SPECVERIFY_TESTS_TESTING_STATUS_MATCHERS_H_
#define SPECVERIFY_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace specverify::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) { return s.status(); }

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = GetStatus(arg);
  if (s.code() != code) {
    *result_listener << "whose status is " << s;
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "whose status is " << s;
  return s.ok();
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_TESTING_STATUS_MATCHERS_H_
