// The specverify-client-id header's rule (proto/runtime/client_id.h): what
// the server accepts as a unix-socket client's name, and the default names
// the client library makes.
#include "proto/runtime/client_id.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::grpc_runtime {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ClientIdTest, AcceptsNamesOfTheAlphabetUpTo128Characters) {
  EXPECT_THAT(ValidateClientId("w"), IsOk());
  EXPECT_THAT(ValidateClientId("vllm-worker_3.rank:0"), IsOk());
  EXPECT_THAT(ValidateClientId(std::string(128, 'a')), IsOk());
}

TEST(ClientIdTest, RefusesEmptyLongAndOtherCharactersNamingTheRule) {
  EXPECT_THAT(ValidateClientId(""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("specverify-client-id has 0 characters; must be 1-128 characters of "
                                 "[A-Za-z0-9._:-]")));
  EXPECT_THAT(ValidateClientId(std::string(129, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has 129 characters")));
  EXPECT_THAT(ValidateClientId("a/b"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("character code 47 at offset 1")));
  EXPECT_THAT(ValidateClientId("ok\""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("character code 34 at offset 2")));
}

TEST(ClientIdTest, DefaultNamesAreValidAndDistinct) {
  std::set<std::string> names;
  for (int i = 0; i < 100; ++i) {
    const std::string name = NewProcessClientId();
    EXPECT_THAT(ValidateClientId(name), IsOk()) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 100u);
}

}  // namespace
}  // namespace specverify::grpc_runtime
