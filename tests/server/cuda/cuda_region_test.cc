// CUDA regions across processes (issue #13): a separate worker process
// (cuda_ipc_worker) allocates and exports device memory; the server, in this
// process on the GPU backend, imports it with cudaIpcOpenMemHandle, reads
// inputs there and writes the packed rows there. Also: the worker killed
// while its request is queued, and registration errors. Skips visibly
// without a GPU.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/greedy_requests.h"
#include "client/region.h"
#include "client/sampled_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/cuda_status.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "server/app/verifier_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace specverify::server {
namespace {

using ::specverify::client::RegionWriter;
using ::specverify::client::VerifierClient;
using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

// The worker binary: beside this test (a bundle copied to the GPU machine),
// else where the build put it.
std::string WorkerPath() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/') + 1);
    const std::string beside = dir + "cuda_ipc_worker";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  return SPECVERIFY_CUDA_IPC_WORKER;
}

// The worker process, spoken to over two pipes.
class Worker {
 public:
  // Starts the worker with `image` as its region's bytes; empty handle() on
  // failure.
  explicit Worker(const std::vector<std::byte>& image) : size_(static_cast<int64_t>(image.size())) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = ::specverify::testing::ForkTiedToParent();
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      close(to_child[1]);
      close(from_child[0]);
      const std::string path = WorkerPath();
      execl(path.c_str(), path.c_str(), nullptr);
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
    if (!Write(&size_, sizeof(size_)) || !Write(image.data(), image.size())) return;
    handle_.resize(64);
    if (!Read(handle_.data(), handle_.size())) handle_.clear();
  }
  ~Worker() {
    if (to_ >= 0) {
      const char q = 'Q';
      (void)!write(to_, &q, 1);
      close(to_);
    }
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& handle() const { return handle_; }
  // The region's bytes as they are now on the device.
  std::vector<std::byte> ReadBack() {
    std::vector<std::byte> bytes(static_cast<size_t>(size_));
    const char r = 'R';
    if (!Write(&r, 1) || !Read(bytes.data(), bytes.size())) bytes.clear();
    return bytes;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  v1::RegisterRegionRequest Registration(const std::string& name) const {
    v1::RegisterRegionRequest r;
    r.set_name(name);
    r.set_byte_size(size_);
    r.mutable_cuda()->set_ipc_handle(handle_);
    r.mutable_cuda()->set_device_ordinal(0);
    return r;
  }

 private:
  bool Write(const void* data, size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = write(to_, p, bytes);
      if (n <= 0) return false;
      p += n;
      bytes -= static_cast<size_t>(n);
    }
    return true;
  }
  bool Read(void* data, size_t bytes) {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = read(from_, p, bytes);
      if (n <= 0) return false;
      p += n;
      bytes -= static_cast<size_t>(n);
    }
    return true;
  }
  int64_t size_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string handle_;
};

class CudaRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: CUDA region tests skipped";
    // A worker that died must fail the test, not kill it with SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = "cuda:0";
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.kv_arena_bytes = 16 << 20;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }
  void Start() {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_);
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(20);
    client_ = *VerifierClient::Create(c);
  }
  GreedyWorkload Greedy(int32_t sequences, uint64_t seed) {
    GreedyWorkloadOptions w;
    w.num_sequences = sequences;
    w.gamma_min = 1;
    w.gamma_max = 9;
    w.alpha = 0.7;
    w.row_bytes = 4096;
    w.vocab_size = 32000;
    w.seed = seed;
    return *GenerateGreedyWorkload(w);
  }
  // The request for `w`'s sequences laid out in a host image of the region.
  v1::VerifyRequest InRegion(const GreedyWorkload& w, std::vector<std::byte>& image) {
    client::GreedyRequestOptions o;
    o.num_sequences = w.num_sequences();
    o.kv_return = v1::KV_RETURN_INLINE;
    v1::VerifyRequest request = *client::BuildGreedyRequest(w, o);
    RegionWriter writer("gpu", image.data(), static_cast<int64_t>(image.size()));
    EXPECT_THAT(writer.MoveInputsToRegion(&request, /*return_into_region=*/true), IsOk());
    return request;
  }
  absl::Status CheckRegionAnswer(const GreedyWorkload& w, const v1::VerifyRequest& request,
                                 const v1::VerifyResponse& response,
                                 const std::vector<std::byte>& region) {
    int64_t rows = 0;
    for (const auto& r : response.results()) rows += r.kv_row_count();
    v1::VerifyResponse as_inline = response;
    as_inline.set_kv_inline(std::string(
        reinterpret_cast<const char*>(region.data() + request.kv_output().offset_bytes()),
        static_cast<size_t>(rows * w.row_bytes())));
    client::GreedyCheckOptions check;
    check.num_sequences = w.num_sequences();
    check.kv_return = v1::KV_RETURN_INLINE;
    return client::CheckGreedyResponse(w, check, as_inline);
  }

  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<VerifierClient> client_;
};

TEST_F(CudaRegionTest, GreedyKvFromAnotherProcessAndPackedBackIntoIt) {
  Start();
  const GreedyWorkload w = Greedy(16, 21);
  std::vector<std::byte> image(4 << 20, std::byte{0x5A});
  const v1::VerifyRequest request = InRegion(w, image);
  Worker worker(image);
  ASSERT_EQ(worker.handle().size(), 64u) << "the worker process did not export its memory";
  ASSERT_THAT(client_->RegisterRegion(worker.Registration("gpu")), IsOk());
  absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
  ASSERT_THAT(response, IsOk());
  int64_t token_bytes = 0;
  for (int32_t i = 0; i < w.num_sequences(); ++i) token_bytes += 4 * (2 * w.gamma(i) + 1);
  // Zero host copies of payload bytes: only the tokens crossed the host.
  EXPECT_EQ(response->timing().host_copy_in_bytes(), token_bytes);
  EXPECT_EQ(response->timing().host_copy_out_bytes(), 0);
  EXPECT_THAT(CheckRegionAnswer(w, request, *response, worker.ReadBack()), IsOk());
  EXPECT_THAT(client_->UnregisterRegion("gpu"), IsOk());
}

TEST_F(CudaRegionTest, SampledRowsReadFromAnotherProcessMatchTheReference) {
  Start();
  SamplingWorkloadOptions o;
  o.num_sequences = 8;
  o.gamma_min = 8;
  o.gamma_max = 8;
  o.vocab_size = 32000;
  o.has_draft_probs = true;
  o.shape = DistributionShape::kMixed;
  o.sequences_per_request = 8;
  o.seed = 5;
  const SamplingWorkload w = *GenerateSamplingWorkload(o);
  client::SampledRequestSettings settings;
  const RejectionHostOutputs expected = client::SampledReference(w, settings);
  v1::VerifyRequest request = *client::BuildSampledRequest(w, 0, settings);
  std::vector<std::byte> image(32 << 20);
  RegionWriter writer("dist", image.data(), static_cast<int64_t>(image.size()));
  ASSERT_THAT(writer.MoveInputsToRegion(&request, false), IsOk());
  Worker worker(image);
  ASSERT_EQ(worker.handle().size(), 64u);
  ASSERT_THAT(client_->RegisterRegion(worker.Registration("dist")), IsOk());
  absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
  ASSERT_THAT(response, IsOk());
  EXPECT_THAT(client::CheckSampledResponse(w, 0, settings, expected, *response), IsOk());
  EXPECT_LT(response->timing().host_copy_in_bytes(), 1024);
}

// CUDA IPC: the driver keeps an exported allocation's memory while an
// importer has it open. The worker dies while its request is queued; the
// server still answers it and keeps serving; unregistering then closes the
// last mapping (docs/DATA_PLANE.md).
TEST_F(CudaRegionTest, WorkerKilledWhileItsRequestIsQueued) {
  options_.preferred_batch_sequences = 60;
  options_.max_queue_delay_us = 300'000;
  Start();
  const GreedyWorkload w = Greedy(4, 33);
  std::vector<std::byte> image(1 << 20);
  const v1::VerifyRequest request = InRegion(w, image);
  auto worker = std::make_unique<Worker>(image);
  ASSERT_EQ(worker->handle().size(), 64u);
  ASSERT_THAT(client_->RegisterRegion(worker->Registration("gpu")), IsOk());
  absl::Notification answered;
  absl::StatusOr<v1::VerifyResponse> response = absl::UnknownError("none");
  client_->VerifyAsync(request, [&](absl::StatusOr<v1::VerifyResponse> r) {
    response = std::move(r);
    answered.Notify();
  });
  absl::SleepFor(absl::Milliseconds(50));  // queued: waiting for company
  worker->Kill();
  answered.WaitForNotification();
  // The request's own fate is the worker's business (its memory is gone from
  // its point of view); the server's is ours: it must still serve.
  EXPECT_TRUE(response.ok() || response.status().code() != absl::StatusCode::kInternal)
      << response.status();
  std::cerr << "answer after the worker died: "
            << (response.ok() ? std::string("OK") : response.status().ToString()) << "\n";
  EXPECT_THAT(client_->CheckHealth(), IsOk());
  EXPECT_THAT(client_->UnregisterRegion("gpu"), IsOk());
  client::GreedyRequestOptions o;
  o.num_sequences = w.num_sequences();
  o.kv_return = v1::KV_RETURN_INLINE;
  absl::StatusOr<v1::VerifyResponse> inline_answer =
      client_->Verify(*client::BuildGreedyRequest(w, o));
  ASSERT_THAT(inline_answer, IsOk());
  client::GreedyCheckOptions check;
  check.num_sequences = w.num_sequences();
  check.kv_return = v1::KV_RETURN_INLINE;
  EXPECT_THAT(client::CheckGreedyResponse(w, check, *inline_answer), IsOk());
}

TEST_F(CudaRegionTest, RegistrationErrorsNameTheField) {
  Start();
  std::vector<std::byte> image(1 << 16);
  Worker worker(image);
  ASSERT_EQ(worker.handle().size(), 64u);
  v1::RegisterRegionRequest r = worker.Registration("gpu");
  r.mutable_cuda()->set_device_ordinal(1);
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda.device_ordinal")));
  r = worker.Registration("gpu");
  r.mutable_cuda()->set_ipc_handle("short");
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda.ipc_handle")));
  r = worker.Registration("gpu");
  r.set_byte_size(int64_t{1} << 30);
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("exported allocation")));
  r = worker.Registration("gpu");
  r.mutable_cuda()->set_ipc_handle(std::string(64, '\x01'));
  EXPECT_THAT(client_->RegisterRegion(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cuda.ipc_handle")));
  EXPECT_THAT(client_->RegisterRegion(worker.Registration("gpu")), IsOk());
  absl::StatusOr<v1::ListRegionsResponse> list = client_->ListRegions();
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->regions_size(), 1);
  EXPECT_EQ(list->regions(0).kind(), v1::REGION_KIND_CUDA);
  EXPECT_EQ(list->regions(0).device_ordinal(), 0);
}

// Two executors on the GPU a CUDA region lives on (issue #16; on a machine
// with two GPUs, --device=cuda:0,1 pins the region's requests to cuda:0's
// executor the same way): every request using the region runs on an
// executor of its GPU, both take turns, every answer is right, and a region
// on a GPU no executor runs on is refused naming the executors.
TEST_F(CudaRegionTest, RegionRequestsRunOnTheExecutorsOfTheirGpu) {
  options_.device = "cuda:0,0";
  Start();
  const GreedyWorkload w = Greedy(16, 33);
  std::vector<std::byte> image(4 << 20, std::byte{0x5A});
  const v1::VerifyRequest request = InRegion(w, image);
  Worker worker(image);
  ASSERT_EQ(worker.handle().size(), 64u);
  v1::RegisterRegionRequest elsewhere = worker.Registration("gpu");
  elsewhere.mutable_cuda()->set_device_ordinal(3);
  EXPECT_THAT(client_->RegisterRegion(elsewhere),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cuda.device_ordinal is 3; this server's executors run on "
                                 "cuda:0, cuda:0#1")));
  ASSERT_THAT(client_->RegisterRegion(worker.Registration("gpu")), IsOk());
  std::set<int32_t> devices;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<v1::VerifyResponse> response = client_->Verify(request);
    ASSERT_THAT(response, IsOk());
    devices.insert(response->timing().device());
    EXPECT_THAT(CheckRegionAnswer(w, request, *response, worker.ReadBack()), IsOk()) << i;
  }
  EXPECT_EQ(devices, (std::set<int32_t>{0, 1}));
  EXPECT_THAT(client_->UnregisterRegion("gpu"), IsOk());
}

}  // namespace
}  // namespace specverify::server
