// A fixture for served tests parameterized by --device: the real server on
// loopback in-process and a real client. "cpu" always runs; another device
// (e.g. "cuda:0") that cannot start here skips the test visibly.
#ifndef SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_
#define SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_

#include <memory>
#include <string>

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
    if (!server.ok() && GetParam() != "cpu") {
      GTEST_SKIP() << "no " << GetParam() << " backend here: " << server.status();
    }
    ASSERT_THAT(server, ::specverify::testing::IsOk());
    server_ = *std::move(server);
    client::VerifierClientOptions c;
    c.address = server_->local_address();
    c.default_deadline = absl::Seconds(30);
    client_ = *client::VerifierClient::Create(c);
  }

  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
  std::unique_ptr<client::VerifierClient> client_;
};

// Test-name suffix of a device parameter: "cpu", "cuda".
inline std::string DeviceName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param == "cpu" ? std::string("cpu") : std::string("cuda");
}

}  // namespace specverify::server::testing

#endif  // SPECVERIFY_TESTS_SERVER_TESTING_DEVICE_SERVER_TEST_H_
