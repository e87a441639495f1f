#include "tests/client/loadgen/fake_verifier.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace specverify::testing {

grpc::Status FakeVerifier::Answer(const v1::VerifyRequest& request, v1::VerifyResponse* response) {
  const int64_t n = verify_requests_.fetch_add(1) + 1;
  if (options_.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.delay_us));
  response->set_request_id(request.request_id());
  response->set_verified(!options_.noop);
  response->set_exact(true);
  std::string packed;
  int64_t row_bytes = 0;
  int64_t offset = 0;
  for (const v1::SequenceDraft& seq : request.sequences()) {
    const int32_t gamma = seq.draft_tokens_size();
    if (!seq.has_greedy() || seq.greedy().target_tokens_size() != gamma + 1) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "sequences[].greedy.target_tokens must hold gamma + 1 tokens");
    }
    int32_t k = 0;
    if (options_.noop) {
      k = gamma;
    } else {
      while (k < gamma && seq.draft_tokens(k) == seq.greedy().target_tokens(k)) ++k;
    }
    v1::SequenceResult* result = response->add_results();
    result->set_accepted_length(k);
    result->set_next_token(seq.greedy().target_tokens(k));
    result->set_mismatch(!options_.noop && k < gamma);
    result->set_kv_row_offset(offset);
    result->set_kv_row_count(k);
    offset += k;
    if (seq.has_draft_kv() && !options_.noop) {
      row_bytes = static_cast<int64_t>(seq.draft_kv().data().size()) / gamma;
      packed.append(seq.draft_kv().data(), 0, static_cast<size_t>(k * row_bytes));
    }
  }
  if (options_.wrong_next_token_every > 0 && n % options_.wrong_next_token_every == 0) {
    response->mutable_results(0)->set_next_token(response->results(0).next_token() + 1);
  }
  response->mutable_timing()->set_queue_ns(1000);
  response->mutable_timing()->set_server_ns(5000);
  if (row_bytes == 0) return grpc::Status::OK;
  const v1::KvReturn mode =
      request.kv_return() == v1::KV_RETURN_UNSPECIFIED ? v1::KV_RETURN_HANDLE : request.kv_return();
  if (mode == v1::KV_RETURN_INLINE) {
    response->set_kv_inline(std::move(packed));
  } else if (mode == v1::KV_RETURN_HANDLE) {
    const std::string id = absl::StrCat("h", next_handle_.fetch_add(1));
    v1::KvHandle* kv = response->mutable_kv();
    kv->set_id(id);
    kv->set_row_bytes(row_bytes);
    kv->set_num_rows(offset);
    kv->set_dtype(v1::DATA_TYPE_UINT8);
    kv->set_ttl_ms(60000);
    std::lock_guard<std::mutex> lock(mu_);
    handles_[id] = std::move(packed);
  }
  return grpc::Status::OK;
}

grpc::Status FakeVerifier::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                  v1::VerifyResponse* response) {
  return Answer(*request, response);
}

grpc::Status FakeVerifier::VerifyStream(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<v1::VerifyStreamResponse, v1::VerifyRequest>* stream) {
  stream_calls_.fetch_add(1);
  v1::VerifyRequest request;
  int64_t read = 0;
  while (stream->Read(&request)) {
    if (++read == options_.end_stream_after) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the fake ends this stream");
    }
    v1::VerifyStreamResponse out;
    out.set_request_id(request.request_id());
    grpc::Status status = Answer(request, out.mutable_response());
    if (!status.ok()) {
      out.mutable_error()->set_code(status.error_code());
      out.mutable_error()->set_message(status.error_message());
    }
    if (!stream->Write(out)) break;
  }
  return grpc::Status::OK;
}

grpc::Status FakeVerifier::FetchKv(grpc::ServerContext*, const v1::FetchKvRequest* request,
                                   grpc::ServerWriter<v1::FetchKvChunk>* writer) {
  std::string rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handles_.find(request->handle());
    if (it == handles_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown handle");
    rows = it->second;
    if (request->release_after()) {
      handles_.erase(it);
      released_handles_.fetch_add(1);
    }
  }
  const int64_t n = fetches_.fetch_add(1) + 1;
  if (options_.corrupt_fetch_every > 0 && n % options_.corrupt_fetch_every == 0 && !rows.empty()) {
    rows[rows.size() / 2] ^= 0x5a;
  }
  // Two chunks when there is more than one byte, so reassembly is exercised.
  const size_t half = rows.size() / 2;
  for (auto [begin, end] : {std::pair<size_t, size_t>{0, half}, {half, rows.size()}}) {
    if (begin == end && !(begin == 0 && rows.empty())) continue;
    v1::FetchKvChunk chunk;
    chunk.set_offset(static_cast<int64_t>(begin));
    chunk.set_total_bytes(static_cast<int64_t>(rows.size()));
    chunk.set_data(rows.substr(begin, end - begin));
    writer->Write(chunk);
    if (rows.empty()) break;
  }
  return grpc::Status::OK;
}

grpc::Status FakeVerifier::ReleaseKv(grpc::ServerContext*, const v1::ReleaseKvRequest* request,
                                     v1::ReleaseKvResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(request->handle());
  if (it == handles_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown handle");
  response->set_released_bytes(static_cast<int64_t>(it->second.size()));
  handles_.erase(it);
  released_handles_.fetch_add(1);
  return grpc::Status::OK;
}

grpc::Status FakeVerifier::GetServerInfo(grpc::ServerContext*, const v1::GetServerInfoRequest*,
                                         v1::ServerInfo* response) {
  response->set_version("fake");
  response->set_backend(!options_.backend.empty() ? options_.backend
                                                  : options_.noop ? "noop" : "fake");
  response->set_device_name("test fake");
  response->add_modes("greedy");
  return grpc::Status::OK;
}

int64_t FakeVerifier::live_handles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(handles_.size());
}

LoopbackServer::LoopbackServer(grpc::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service);
  server_ = builder.BuildAndStart();
}

LoopbackServer::~LoopbackServer() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace specverify::testing
