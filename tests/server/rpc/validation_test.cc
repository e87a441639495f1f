#include "server/rpc/validation.h"

#include <string>

#include "client/greedy_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/echo.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions options;
    options.num_sequences = 4;
    options.gamma_min = 3;
    options.gamma_max = 6;
    options.row_bytes = 16;
    options.vocab_size = 100;
    workload_ = *GenerateGreedyWorkload(options);
    client::GreedyRequestOptions request_options;
    request_options.num_sequences = 4;
    request_options.request_id = "r1";
    request_ = *client::BuildGreedyRequest(workload_, request_options);
    limits_.max_sequences_per_request = 8;
    limits_.max_draft_tokens = 8;
  }
  absl::StatusOr<ValidatedRequest> Validate() { return ValidateVerifyRequest(request_, limits_); }

  GreedyWorkload workload_;
  v1::VerifyRequest request_;
  RequestLimits limits_;
};

TEST_F(ValidationTest, ValidRequestYieldsItsBatchKeyAndSizes) {
  absl::StatusOr<ValidatedRequest> v = Validate();
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->num_sequences, 4);
  EXPECT_EQ(v->total_draft_rows, workload_.total_draft_rows());
  EXPECT_EQ(v->key.row_bytes, 16);
  EXPECT_EQ(v->key.vocab_size, 100);
  EXPECT_EQ(v->key.kv_dtype, v1::DATA_TYPE_UINT8);
  EXPECT_EQ(v->kv_return, v1::KV_RETURN_HANDLE);  // UNSPECIFIED with rows
  const int64_t rows = workload_.total_draft_rows();
  EXPECT_EQ(v->payload_bytes, 4 * (2 * rows + 4) + 16 * rows);
}

TEST_F(ValidationTest, KvReturnNoneStagesNoRows) {
  request_.set_kv_return(v1::KV_RETURN_NONE);
  absl::StatusOr<ValidatedRequest> v = Validate();
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(v->key.row_bytes, 0);
  EXPECT_EQ(v->key.kv_dtype, 0);
  EXPECT_EQ(v->payload_bytes, 4 * (2 * workload_.total_draft_rows() + 4));
}

TEST_F(ValidationTest, RequestIdLength) {
  request_.set_request_id(std::string(129, 'x'));
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("request_id is 129 bytes; limit 128")));
  request_.set_request_id(std::string(128, 'x'));
  EXPECT_THAT(Validate(), IsOk());
}

TEST_F(ValidationTest, SequenceCount) {
  v1::VerifyRequest empty;
  EXPECT_THAT(ValidateVerifyRequest(empty, limits_),
              StatusIs(kInvalid, HasSubstr("sequences is empty; a request carries 1 to "
                                           "max_sequences_per_request=8")));
  limits_.max_sequences_per_request = 3;
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences has 4 entries; limit "
                                                       "max_sequences_per_request=3")));
}

TEST_F(ValidationTest, GammaRange) {
  limits_.max_draft_tokens = 4;
  // Some sequence has gamma 5 or 6 > 4; find it to name it.
  int bad = -1;
  for (int i = 0; i < 4 && bad < 0; ++i) {
    if (workload_.gamma(i) > 4) bad = i;
  }
  ASSERT_GE(bad, 0);
  EXPECT_THAT(Validate(),
              StatusIs(kInvalid, HasSubstr(absl::StrCat(
                                     "sequences[", bad, "].draft_tokens has ",
                                     workload_.gamma(bad),
                                     " tokens; gamma must lie in [1, max_draft_tokens=4]"))));
  request_.mutable_sequences(0)->clear_draft_tokens();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[0].draft_tokens has 0 tokens")));
}

TEST_F(ValidationTest, TokenRanges) {
  request_.mutable_sequences(2)->set_draft_tokens(1, -4);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[2].draft_tokens[1] is -4; "
                                                       "token ids must lie in [0, vocab_size=100)")));
  SetUp();
  request_.mutable_sequences(1)->mutable_greedy()->set_target_tokens(2, 100);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].greedy.target_tokens[2] is "
                                                       "100; token ids must lie in [0, vocab_size=100)")));
  // Unknown vocabulary: only >= 0 is checked.
  SetUp();
  for (auto& seq : *request_.mutable_sequences()) seq.set_vocab_size(0);
  request_.mutable_sequences(1)->mutable_greedy()->set_target_tokens(2, 1 << 30);
  EXPECT_THAT(Validate(), IsOk());
  request_.mutable_sequences(3)->set_draft_tokens(0, -1);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[3].draft_tokens[0] is -1; token "
                                                       "ids must lie in [0, 2^31) (vocab_size unknown)")));
}

TEST_F(ValidationTest, VocabSize) {
  request_.mutable_sequences(1)->set_vocab_size(-2);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].vocab_size is -2; must be > 0")));
  request_.mutable_sequences(1)->set_vocab_size(200);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].vocab_size is 200 but "
                                                       "sequences[0].vocab_size is 100")));
}

TEST_F(ValidationTest, GreedyTargetLength) {
  const int gamma = workload_.gamma(3);
  request_.mutable_sequences(3)->mutable_greedy()->mutable_target_tokens()->RemoveLast();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr(absl::StrCat(
                                                 "sequences[3].greedy.target_tokens has ", gamma,
                                                 " tokens; must be gamma + 1 = ", gamma + 1))));
}

TEST_F(ValidationTest, TargetMustBeSet) {
  request_.mutable_sequences(2)->clear_greedy();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[2].target is not set")));
}

TEST_F(ValidationTest, MixingGreedyAndSampledIsInvalid) {
  request_.mutable_sequences(1)->mutable_sampled()->set_temperature(1.0f);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1] is sampled but sequences[0] is "
                                                       "greedy; all sequences of a request must use "
                                                       "the same mode")));
}

// Sampled requests are served; their field checks are in
// tests/server/rpc/sampled_validation_test.cc.
TEST_F(ValidationTest, SampledWithoutTargetRowsIsInvalid) {
  for (auto& seq : *request_.mutable_sequences()) seq.mutable_sampled()->set_temperature(1.0f);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[0].sampled.target is not set")));
}

TEST_F(ValidationTest, DraftKvTensor) {
  const int gamma = workload_.gamma(1);
  v1::Tensor* kv = request_.mutable_sequences(1)->mutable_draft_kv();
  kv->set_dtype(v1::DATA_TYPE_UNSPECIFIED);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].draft_kv.dtype is 0")));
  kv->set_dtype(v1::DATA_TYPE_UINT8);
  kv->mutable_shape()->RemoveLast();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].draft_kv.shape has rank 1; "
                                                       "must be [gamma, d1, ...] with rank >= 2")));
  kv->add_shape(16);
  kv->set_shape(0, gamma + 1);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr(absl::StrCat(
                                                 "sequences[1].draft_kv.shape[0] is ", gamma + 1,
                                                 "; must equal gamma = ", gamma))));
  kv->set_shape(0, gamma);
  kv->set_shape(1, 0);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[1].draft_kv.shape[1] is 0")));
  kv->set_shape(1, 16);
  kv->mutable_data()->pop_back();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr(absl::StrCat(
                                                 "sequences[1].draft_kv.data is ", gamma * 16 - 1,
                                                 " bytes; shape x dtype size requires ", gamma * 16))));
}

TEST_F(ValidationTest, OneRowSizeAndDtypePerRequest) {
  v1::Tensor* kv = request_.mutable_sequences(2)->mutable_draft_kv();
  // Same bytes as [gamma, 8] float16: row_bytes 16, dtype differs.
  kv->set_dtype(v1::DATA_TYPE_FLOAT16);
  kv->set_shape(1, 8);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[2].draft_kv.dtype is 2 but "
                                                       "sequences[0].draft_kv.dtype is 4")));
  // [gamma, 2, 8] uint8 = row_bytes 16: same row size, same dtype: valid.
  kv->set_dtype(v1::DATA_TYPE_UINT8);
  kv->set_shape(1, 2);
  kv->add_shape(8);
  EXPECT_THAT(Validate(), IsOk());
  kv->set_shape(2, 4);
  kv->mutable_data()->resize(kv->data().size() / 2);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[2].draft_kv has row_bytes 8 but "
                                                       "sequences[0].draft_kv has 16")));
  request_.mutable_sequences(2)->clear_draft_kv();
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[2].draft_kv is absent but "
                                                       "sequences[0].draft_kv is present")));
}

TEST_F(ValidationTest, DimensionOverflowIsCaught) {
  v1::Tensor* kv = request_.mutable_sequences(0)->mutable_draft_kv();
  kv->set_shape(1, int64_t{1} << 30);
  kv->add_shape(int64_t{1} << 30);
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("sequences[0].draft_kv.shape[2] is")));
}

TEST_F(ValidationTest, KvReturnMustBeKnown) {
  request_.set_kv_return(static_cast<v1::KvReturn>(9));
  EXPECT_THAT(Validate(), StatusIs(kInvalid, HasSubstr("kv_return is 9; not a KvReturn value")));
}

TEST(FetchKvValidationTest, Fields) {
  v1::FetchKvRequest r;
  EXPECT_THAT(ValidateFetchKvRequest(r), StatusIs(kInvalid, HasSubstr("handle is empty")));
  r.set_handle("0123456789abcdef0123456789abcdef");
  r.set_first_row(-1);
  EXPECT_THAT(ValidateFetchKvRequest(r), StatusIs(kInvalid, HasSubstr("first_row is -1")));
  r.set_first_row(0);
  r.set_num_rows(-1);
  EXPECT_THAT(ValidateFetchKvRequest(r), StatusIs(kInvalid, HasSubstr("num_rows is -1")));
  r.set_num_rows(0);
  r.set_chunk_bytes(-5);
  EXPECT_THAT(ValidateFetchKvRequest(r), StatusIs(kInvalid, HasSubstr("chunk_bytes is -5")));
  r.set_chunk_bytes(0);
  EXPECT_THAT(ValidateFetchKvRequest(r), IsOk());
  r.set_handle("h");
  EXPECT_THAT(ValidateFetchKvRequest(r),
              StatusIs(kInvalid, HasSubstr("handle is 1 bytes; a KV handle is 32 lowercase hex")));
}

// Issue #15: a handle is checked against the arena's format, and what the
// message quotes of a malformed one is bounded.
TEST(HandleFieldValidationTest, FormatAndBoundedEcho) {
  EXPECT_THAT(ValidateHandleField("0123456789abcdef0123456789abcdef"), IsOk());
  EXPECT_THAT(ValidateHandleField(""), StatusIs(kInvalid, HasSubstr("handle is empty")));
  const absl::Status huge = ValidateHandleField(std::string(8000, 'z'));
  EXPECT_THAT(huge, StatusIs(kInvalid, HasSubstr("handle is 8000 bytes; a KV handle is 32 "
                                                "lowercase hex digits")));
  EXPECT_LT(huge.message().size(), 120u);
  EXPECT_THAT(ValidateHandleField("0123456789ABCDEF0123456789abcdef"),
              StatusIs(kInvalid, HasSubstr("handle \"0123456789ABCDEF0123456789abcdef\" has "
                                           "characters other than 0-9 a-f")));
  EXPECT_THAT(ValidateHandleField(std::string(31, 'a') + "\n"),
              StatusIs(kInvalid, HasSubstr("aaa\\n\" has characters other than")));
}

TEST(RequestIdValidationTest, LimitIsNamed) {
  EXPECT_THAT(ValidateRequestId(std::string(kMaxRequestIdBytes, 'x')), IsOk());
  EXPECT_THAT(ValidateRequestId(std::string(kMaxRequestIdBytes + 1, 'x')),
              StatusIs(kInvalid, HasSubstr("request_id is 129 bytes; limit 128")));
}

TEST(EchoForMessageTest, QuotesEscapesAndBoundsClientText) {
  EXPECT_EQ(EchoForMessage("abc"), "\"abc\"");
  EXPECT_EQ(EchoForMessage(""), "\"\"");
  EXPECT_EQ(EchoForMessage(std::string("a\"\xff\n", 4)), "\"a\\\"\\xff\\n\"");
  const std::string exact(kMaxEchoedChars, 'x');
  EXPECT_EQ(EchoForMessage(exact), "\"" + exact + "\"");
  EXPECT_EQ(EchoForMessage(std::string(8000, 'x')),
            "\"" + exact + "...\" (8000 bytes)");
  // An escape is never cut in half: 63 plain characters, then "\xff" does
  // not fit in the 64 left.
  EXPECT_EQ(EchoForMessage(std::string(63, 'y') + "\xff"),
            "\"" + std::string(63, 'y') + "...\" (64 bytes)");
}

}  // namespace
}  // namespace specverify::server
