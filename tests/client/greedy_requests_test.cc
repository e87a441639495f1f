#include "client/greedy_requests.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/greedy/greedy_reference.h"
#include "tests/testing/status_matchers.h"

namespace specverify::client {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;
constexpr auto kMismatch = absl::StatusCode::kFailedPrecondition;

class GreedyRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GreedyWorkloadOptions o;
    o.num_sequences = 7;
    o.gamma_min = 1;
    o.gamma_max = 9;
    o.row_bytes = 12;
    o.vocab_size = 97;
    o.alpha = 0.8;
    o.seed = 5;
    workload_ = *GenerateGreedyWorkload(o);
  }
  // A correct response for sequences [first, first + n), computed by the CPU
  // reference from the request itself (independent of the workload oracle).
  v1::VerifyResponse Answer(const v1::VerifyRequest& request, v1::KvReturn kv_return) {
    const int n = request.sequences_size();
    std::vector<int32_t> offsets{0}, draft, target;
    std::vector<std::byte> kv;
    for (const auto& s : request.sequences()) {
      offsets.push_back(offsets.back() + s.draft_tokens_size());
      draft.insert(draft.end(), s.draft_tokens().begin(), s.draft_tokens().end());
      target.insert(target.end(), s.greedy().target_tokens().begin(),
                    s.greedy().target_tokens().end());
      const auto* p = reinterpret_cast<const std::byte*>(s.draft_kv().data().data());
      kv.insert(kv.end(), p, p + s.draft_kv().data().size());
    }
    GreedyBatchInput in;
    in.num_sequences = n;
    in.draft_offsets = offsets.data();
    in.draft_tokens = draft.data();
    in.target_tokens = target.data();
    in.draft_kv = kv.data();
    in.row_bytes = workload_.row_bytes();
    GreedyHostOutputs out(in, std::byte{0});
    GreedyVerifyParams params{in, out.view()};
    ReferenceGreedyVerifyPack(params);
    v1::VerifyResponse r;
    r.set_request_id(request.request_id());
    r.set_verified(true);
    for (int i = 0; i < n; ++i) {
      auto* s = r.add_results();
      s->set_accepted_length(out.accepted_lengths[i]);
      s->set_next_token(out.next_tokens[i]);
      s->set_mismatch(out.mismatch[i] != 0);
      s->set_kv_row_offset(out.packed_row_offsets[i]);
      s->set_kv_row_count(out.accepted_lengths[i]);
    }
    const int64_t bytes = int64_t{out.packed_row_offsets[n]} * in.row_bytes;
    if (kv_return == v1::KV_RETURN_HANDLE) {
      r.mutable_kv()->set_id("h");
      r.mutable_kv()->set_row_bytes(in.row_bytes);
      r.mutable_kv()->set_num_rows(out.packed_row_offsets[n]);
    } else if (kv_return == v1::KV_RETURN_INLINE) {
      r.set_kv_inline(reinterpret_cast<const char*>(out.packed_kv.data()), bytes);
    }
    return r;
  }

  GreedyWorkload workload_;
};

TEST_F(GreedyRequestsTest, BuildsTheRangesTokensAndRows) {
  GreedyRequestOptions o;
  o.first_sequence = 2;
  o.num_sequences = 3;
  o.request_id = "abc";
  o.kv_return = v1::KV_RETURN_INLINE;
  absl::StatusOr<v1::VerifyRequest> r = BuildGreedyRequest(workload_, o);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->request_id(), "abc");
  EXPECT_EQ(r->kv_return(), v1::KV_RETURN_INLINE);
  ASSERT_EQ(r->sequences_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const auto& s = r->sequences(i);
    const int w = 2 + i;
    EXPECT_EQ(s.draft_tokens_size(), workload_.gamma(w));
    EXPECT_EQ(s.draft_tokens(0), workload_.draft_tokens_of(w)[0]);
    EXPECT_EQ(s.greedy().target_tokens_size(), workload_.gamma(w) + 1);
    EXPECT_EQ(s.vocab_size(), 97);
    EXPECT_EQ(s.draft_kv().shape(0), workload_.gamma(w));
    EXPECT_EQ(s.draft_kv().shape(1), 12);
    EXPECT_EQ(0, std::memcmp(s.draft_kv().data().data(), workload_.draft_kv_of(w).data(),
                             workload_.draft_kv_of(w).size()));
  }
  o.first_sequence = 5;
  EXPECT_THAT(BuildGreedyRequest(workload_, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence range [5, 8) lies outside the workload's 7 sequences")));
}

TEST_F(GreedyRequestsTest, AcceptsACorrectAnswerInEveryMode) {
  for (auto mode : {v1::KV_RETURN_HANDLE, v1::KV_RETURN_INLINE, v1::KV_RETURN_NONE}) {
    GreedyRequestOptions o;
    o.first_sequence = 1;
    o.num_sequences = 5;
    o.kv_return = mode;
    const v1::VerifyRequest request = *BuildGreedyRequest(workload_, o);
    const v1::VerifyResponse response = Answer(request, mode);
    GreedyCheckOptions c;
    c.first_sequence = 1;
    c.num_sequences = 5;
    c.kv_return = mode;
    const auto fetched = ExpectedPackedKv(workload_, 1, 5);
    EXPECT_THAT(CheckGreedyResponse(workload_, c, response,
                                    mode == v1::KV_RETURN_HANDLE ? std::optional(fetched) : std::nullopt),
                IsOk())
        << mode;
  }
}

TEST_F(GreedyRequestsTest, NamesTheFirstDifference) {
  GreedyRequestOptions o;
  o.num_sequences = 4;
  o.kv_return = v1::KV_RETURN_INLINE;
  const v1::VerifyRequest request = *BuildGreedyRequest(workload_, o);
  const v1::VerifyResponse good = Answer(request, v1::KV_RETURN_INLINE);
  GreedyCheckOptions c;
  c.num_sequences = 4;
  c.kv_return = v1::KV_RETURN_INLINE;

  v1::VerifyResponse r = good;
  r.mutable_results(2)->set_next_token(good.results(2).next_token() + 1);
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r),
              StatusIs(kMismatch, HasSubstr(absl::StrCat("results[2].next_token (workload sequence 2) is ",
                                                         good.results(2).next_token() + 1))));
  r = good;
  r.mutable_results(1)->set_accepted_length(good.results(1).accepted_length() + 1);
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r),
              StatusIs(kMismatch, HasSubstr("results[1].accepted_length")));
  r = good;
  r.mutable_results(3)->set_kv_row_offset(99);
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r),
              StatusIs(kMismatch, HasSubstr("results[3].kv_row_offset (workload sequence 3) is 99")));
  r = good;
  r.mutable_results(0)->set_mismatch(!good.results(0).mismatch());
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), StatusIs(kMismatch, HasSubstr("results[0].mismatch")));
  r = good;
  r.mutable_results()->RemoveLast();
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r),
              StatusIs(kMismatch, HasSubstr("results has 3 entries, expected 4")));
  r = good;
  if (!r.kv_inline().empty()) {
    (*r.mutable_kv_inline())[0] ^= 1;
    EXPECT_THAT(CheckGreedyResponse(workload_, c, r),
                StatusIs(kMismatch, HasSubstr("kv_inline: first difference at byte 0")));
  }
  r = good;
  r.set_verified(false);
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), StatusIs(kMismatch, HasSubstr("verified is 0")));
  c.request_id = "want";
  EXPECT_THAT(CheckGreedyResponse(workload_, c, good),
              StatusIs(kMismatch, HasSubstr("request_id is \"\", expected \"want\"")));
}

TEST_F(GreedyRequestsTest, ChecksHandleAndFetchedBytes) {
  GreedyRequestOptions o;
  o.num_sequences = 7;
  o.kv_return = v1::KV_RETURN_HANDLE;
  const v1::VerifyResponse good = Answer(*BuildGreedyRequest(workload_, o), v1::KV_RETURN_HANDLE);
  GreedyCheckOptions c;
  c.num_sequences = 7;
  c.kv_return = v1::KV_RETURN_HANDLE;
  auto expected = ExpectedPackedKv(workload_, 0, 7);
  ASSERT_FALSE(expected.empty());
  std::vector<std::byte> fetched(expected.begin(), expected.end());
  fetched.back() ^= std::byte{0x80};
  EXPECT_THAT(CheckGreedyResponse(workload_, c, good, std::span<const std::byte>(fetched)),
              StatusIs(kMismatch, HasSubstr(absl::StrCat("fetched kv: first difference at byte ",
                                                         fetched.size() - 1))));
  v1::VerifyResponse r = good;
  r.clear_kv();
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), StatusIs(kMismatch, HasSubstr("kv handle is missing")));
  r = good;
  r.mutable_kv()->set_num_rows(good.kv().num_rows() + 1);
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), StatusIs(kMismatch, HasSubstr("kv.num_rows")));
}

TEST_F(GreedyRequestsTest, NoopAnswersAreCheckedForTheirFixedShape) {
  GreedyRequestOptions o;
  o.num_sequences = 2;
  const v1::VerifyRequest request = *BuildGreedyRequest(workload_, o);
  v1::VerifyResponse r;
  int64_t rows = 0;
  for (int i = 0; i < 2; ++i) {
    auto* s = r.add_results();
    s->set_accepted_length(workload_.gamma(i));
    s->set_next_token(workload_.target_tokens_of(i)[workload_.gamma(i)]);
    s->set_kv_row_offset(rows);
    s->set_kv_row_count(workload_.gamma(i));
    rows += workload_.gamma(i);
  }
  GreedyCheckOptions c;
  c.num_sequences = 2;
  c.expect_verified = false;
  c.kv_return = v1::KV_RETURN_NONE;
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), IsOk());
  // Its packed rows are every draft row of the range, as they lie.
  const std::span<const std::byte> all_rows = std::span<const std::byte>(workload_.draft_kv)
      .first(static_cast<size_t>(rows * workload_.row_bytes()));
  c.kv_return = v1::KV_RETURN_INLINE;
  r.set_kv_inline(std::string(reinterpret_cast<const char*>(all_rows.data()), all_rows.size()));
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), IsOk());
  // The accepted rows alone (what a verifying server packs) are not enough.
  r.set_kv_inline(r.kv_inline().substr(0, ExpectedPackedKv(workload_, 0, 2).size()));
  EXPECT_THAT(CheckGreedyResponse(workload_, c, r), StatusIs(kMismatch, HasSubstr("kv_inline")));
}

}  // namespace
}  // namespace specverify::client
