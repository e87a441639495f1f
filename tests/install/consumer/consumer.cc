// Built by tests/install against an installed specverify only: one greedy
// request to a running server through specverify::client, checked against
// the answer the verification rule gives (seed 000: k = first mismatch,
// next = target[k], the first k draft KV rows inline).
#include <cstdio>
#include <string>

#include "client/verifier_client.h"
#include "specverify/v1/verifier.pb.h"
#ifdef CONSUMER_HAS_CLIENT_CUDA
#include "client/cuda_region.h"
#endif

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail("usage: consumer host:port");
  specverify::client::VerifierClientOptions options;
  options.address = argv[1];
  auto client = specverify::client::VerifierClient::Create(options);
  if (!client.ok()) return Fail("Create: " + client.status().ToString());
  auto info = (*client)->GetServerInfo();
  if (!info.ok()) return Fail("GetServerInfo: " + info.status().ToString());

  constexpr int kRowBytes = 8;
  specverify::v1::VerifyRequest request;
  request.set_request_id("install-consumer");
  request.set_kv_return(specverify::v1::KV_RETURN_INLINE);
  specverify::v1::SequenceDraft* sequence = request.add_sequences();
  for (int token : {5, 7, 9}) sequence->add_draft_tokens(token);
  for (int token : {5, 7, 2, 4}) sequence->mutable_greedy()->add_target_tokens(token);
  std::string rows;
  for (int i = 0; i < 3 * kRowBytes; ++i) rows.push_back(static_cast<char>(i + 1));
  specverify::v1::Tensor* kv = sequence->mutable_draft_kv();
  kv->set_dtype(specverify::v1::DATA_TYPE_UINT8);
  kv->add_shape(3);
  kv->add_shape(kRowBytes);
  kv->set_data(rows);

  auto response = (*client)->Verify(request);
  if (!response.ok()) return Fail("Verify: " + response.status().ToString());
  if (response->results_size() != 1) return Fail("expected 1 result, got " + std::to_string(response->results_size()));
  const specverify::v1::SequenceResult& result = response->results(0);
  if (result.accepted_length() != 2 || result.next_token() != 2 || !result.mismatch()) {
    return Fail("expected k=2 next=2 mismatch, got k=" + std::to_string(result.accepted_length()) +
                " next=" + std::to_string(result.next_token()));
  }
  if (response->kv_inline() != rows.substr(0, 2 * kRowBytes)) return Fail("the inline KV rows are not the first two");
  std::printf("consumer: server %s answered k=2 next=2 with the two accepted rows inline\n", info->version().c_str());
  return 0;
}
