// A fixture for served tests parameterized by --device: the real server on
// loopback in-process and a real client. "cpu" and "cpu:0,1" (two CPU
// executors: the multi-device paths, issue #16) always run; a CUDA device
// ("cuda:0", or "cuda:0,0": two executors on one GPU) that cannot start here
// skips the test visibly.
#ifndef SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_
#define SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_

#include <memory>
#include <string>
#include <vector>

#include "client/verifier_client.h"
#include "gtest/gtest.h"
#include "server/app/verifier_server.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server::testing {

class DeviceServerTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Defaults every served test shares; a test's SetUp changes what it needs.
  void SetUp() override {
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = GetParam();
    options_.max_batch_sequences = 64;
    options_.max_sequences_per_request = 16;
    options_.cpu_threads = 2;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(5));
  }
  // Starts the server with options_; leaves server_ null (and the test
  // skipped) when a non-CPU device is not available here.
  void Start() {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_);
    if (!server.ok() && !IsCpu()) {
      GTEST_SKIP() << "no " << GetParam() << " backend here: " << server.status();
    }
    ASSERT_THAT(server, ::specverify::testing::IsOk());
    server_ = *std::move(server);
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(30);
    client_ = *client::VerifierClient::Create(c);
  }

  bool IsCpu() const { return GetParam().rfind("cpu", 0) == 0; }

  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<client::VerifierClient> client_;
};

// Test-name suffix of a device parameter: "cpu", "cuda", and with several
// executors "cpu_x2", "cuda_x2".
inline std::string DeviceName(const ::testing::TestParamInfo<std::string>& info) {
  const std::string kind = info.param.rfind("cpu", 0) == 0 ? "cpu" : "cuda";
  return info.param.find(',') == std::string::npos ? kind : kind + "_x2";
}

// Every device form a served suite runs on.
inline std::vector<std::string> ServedDevices() {
  return {"cpu", "cpu:0,1", "cuda:0", "cuda:0,0"};
}

}  // namespace specverify::server::testing

#endif  // SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_
