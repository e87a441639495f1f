#include <chrono>
#include <cstdio>
#include <string>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>
#include "specverify/v1/verifier.pb.h"
using namespace specverify;
int main() {
  v1::VerifyRequest r;
  r.set_request_id("loadgen-123-456");
  for (int i = 0; i < 8; ++i) {
    auto* s = r.add_sequences();
    for (int j = 0; j < 8; ++j) s->add_draft_tokens(1000 + j);
    auto* st = s->mutable_sampled();
    st->set_temperature(1.0f);
    auto* t = st->mutable_target()->mutable_values_ref();
    t->set_region("loadgen-12345"); t->set_offset_bytes(i * 1000000); t->add_shape(9); t->add_shape(151936); t->set_dtype(v1::DATA_TYPE_FLOAT32);
    st->mutable_target()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
    auto* d = st->mutable_draft()->mutable_values_ref();
    d->set_region("loadgen-12345"); d->set_offset_bytes(i * 1000000 + 500000); d->add_shape(8); d->add_shape(151936); d->set_dtype(v1::DATA_TYPE_FLOAT32);
    st->mutable_draft()->set_kind(v1::DISTRIBUTION_KIND_PROBABILITIES);
  }
  std::string bytes = r.SerializeAsString();
  std::printf("bytes %zu\n", bytes.size());
  const int N = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int n = 0; n < N; ++n) { v1::VerifyRequest p; p.ParseFromString(bytes); }
  auto t1 = std::chrono::steady_clock::now();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer bb(&slice, 1);
  for (int n = 0; n < N; ++n) { v1::VerifyRequest p; grpc::ByteBuffer copy(bb); grpc::ProtoBufferReader reader(&copy); p.ParseFromZeroCopyStream(&reader); }
  auto t2 = std::chrono::steady_clock::now();
  v1::VerifyRequest reuse;
  for (int n = 0; n < N; ++n) { reuse.Clear(); reuse.ParseFromString(bytes); }
  auto t3 = std::chrono::steady_clock::now();
  auto t4 = std::chrono::steady_clock::now();
  for (int n = 0; n < N; ++n) { char block[8192]; google::protobuf::ArenaOptions o; o.initial_block = block; o.initial_block_size = sizeof(block); google::protobuf::Arena arena(o); auto* p = google::protobuf::Arena::CreateMessage<v1::VerifyRequest>(&arena); p->ParseFromString(bytes); }
  auto t5 = std::chrono::steady_clock::now();
  auto us = [&](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count() / N; };
  std::printf("ParseFromString fresh %.2f us | ByteBuffer reader fresh %.2f us | reuse message %.2f us\n", us(t0, t1), us(t1, t2), us(t2, t3));
  std::printf("arena with an 8 KB initial block %.2f us\n", us(t4, t5));
}
