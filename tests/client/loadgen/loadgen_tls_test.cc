// TLS and mutual TLS end to end (issue #15, item 10): the real
// specverify-server as a child process with --tls_* flags, the client
// library and the load generator over TLS. Certificates (a CA, a server
// certificate for localhost/127.0.0.1, a client certificate) are made with
// the openssl command at test time; without it the tests skip visibly.
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/region.h"
#include "client/loadgen/loadgen.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/workload/greedy_workload.h"
#include "tests/client/loadgen/server_process.h"

namespace specverify::loadgen {
namespace {

using ::specverify::testing::ServerProcess;

std::string* cert_dir = nullptr;   // null: no openssl here
std::string File(const char* name) { return absl::StrCat(*cert_dir, "/", name); }

// EC keys: fast to make; one day of validity is plenty for a test.
bool MakeCertificates(const std::string& dir) {
  const std::string cd = absl::StrCat("cd '", dir, "' && ");
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string quiet = " > openssl.log 2>&1";
  for (const std::string& command : {
           absl::StrCat("openssl req -x509 ", key, " -keyout ca.key -out ca.pem -days 1 "
                        "-subj /CN=specverify-test-ca", quiet),
           absl::StrCat("openssl req ", key, " -keyout server.key -out server.csr "
                        "-subj /CN=localhost", quiet),
           std::string("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext"),
           absl::StrCat("openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                        "-CAcreateserial -out server.pem -days 1 -extfile server.ext", quiet),
           absl::StrCat("openssl req ", key, " -keyout client.key -out client.csr "
                        "-subj /CN=worker-a", quiet),
           absl::StrCat("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
                        "-CAcreateserial -out client.pem -days 1", quiet),
           absl::StrCat("openssl req ", key, " -keyout client-b.key -out client-b.csr "
                        "-subj /CN=worker-b", quiet),
           absl::StrCat("openssl x509 -req -in client-b.csr -CA ca.pem -CAkey ca.key "
                        "-CAcreateserial -out client-b.pem -days 1", quiet)}) {
    if (std::system((cd + command).c_str()) != 0) return false;
  }
  return true;
}

class LoadgenTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;
    char pattern[] = "/tmp/specverify-tls.XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;
    if (!MakeCertificates(pattern)) return;
    cert_dir = new std::string(pattern);
    auto tls = ServerProcess::Start(
        SPECVERIFY_SERVER_BINARY,
        {"--device=cpu", "--metrics_address=", "--tls_cert_file=" + File("server.pem"),
         "--tls_key_file=" + File("server.key")});
    ASSERT_TRUE(tls.ok()) << tls.status();
    tls_ = new ServerProcess(std::move(*tls));
    auto mtls = ServerProcess::Start(
        SPECVERIFY_SERVER_BINARY,
        {"--device=cpu", "--metrics_address=", "--tls_cert_file=" + File("server.pem"),
         "--tls_key_file=" + File("server.key"), "--tls_client_ca_file=" + File("ca.pem")});
    ASSERT_TRUE(mtls.ok()) << mtls.status();
    mtls_ = new ServerProcess(std::move(*mtls));
  }
  static void TearDownTestSuite() {
    for (ServerProcess** p : {&tls_, &mtls_}) {
      if (*p == nullptr) continue;
      absl::StatusOr<int> code = (*p)->Stop();
      EXPECT_TRUE(code.ok()) << code.status();
      if (code.ok()) {
        EXPECT_EQ(*code, 0);
      }
      delete *p;
      *p = nullptr;
    }
    if (cert_dir != nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(*cert_dir, ignored);  // private keys included
      delete cert_dir;
      cert_dir = nullptr;
    }
  }
  void SetUp() override {
    if (cert_dir == nullptr) GTEST_SKIP() << "no openssl command: cannot make test certificates";
    ASSERT_NE(tls_, nullptr);
    ASSERT_NE(mtls_, nullptr);
  }

  static client::VerifierClientOptions ClientOptions(const std::string& address, bool tls,
                                                     bool client_cert) {
    client::VerifierClientOptions o;
    o.address = address;
    o.default_deadline = absl::Seconds(5);
    o.use_tls = tls;
    if (tls) {
      o.tls_root_cert_file = File("ca.pem");
      o.tls_server_name = "localhost";
    }
    if (client_cert) {
      o.tls_cert_file = File("client.pem");
      o.tls_key_file = File("client.key");
    }
    return o;
  }

  // One checked greedy Verify.
  static absl::Status VerifyOnce(client::VerifierClient& c) {
    GreedyWorkloadOptions w;
    w.num_sequences = 4;
    w.row_bytes = 64;
    const GreedyWorkload workload = *GenerateGreedyWorkload(w);
    client::GreedyRequestOptions r;
    r.num_sequences = 4;
    r.kv_return = v1::KV_RETURN_INLINE;
    absl::StatusOr<v1::VerifyResponse> response = c.Verify(*client::BuildGreedyRequest(workload, r));
    if (!response.ok()) return response.status();
    client::GreedyCheckOptions check;
    check.num_sequences = 4;
    check.kv_return = v1::KV_RETURN_INLINE;
    return client::CheckGreedyResponse(workload, check, *response, std::nullopt);
  }

  static ServerProcess* tls_;
  static ServerProcess* mtls_;
};

ServerProcess* LoadgenTlsTest::tls_ = nullptr;
ServerProcess* LoadgenTlsTest::mtls_ = nullptr;

TEST_F(LoadgenTlsTest, TlsClientIsServedAndAPlaintextClientIsNot) {
  auto secure = client::VerifierClient::Create(ClientOptions(tls_->address(), true, false));
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_TRUE(VerifyOnce(**secure).ok());
  auto plain = client::VerifierClient::Create(ClientOptions(tls_->address(), false, false));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(VerifyOnce(**plain).code(), absl::StatusCode::kUnavailable);
}

TEST_F(LoadgenTlsTest, MutualTlsRequiresAClientCertificateTheCaSigned) {
  auto without = client::VerifierClient::Create(ClientOptions(mtls_->address(), true, false));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(VerifyOnce(**without).code(), absl::StatusCode::kUnavailable);
  auto with = client::VerifierClient::Create(ClientOptions(mtls_->address(), true, true));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(VerifyOnce(**with).ok());
  // A certificate the server's client CA did not sign is refused: the
  // server's own certificate, presented as a client's, is signed by the same
  // CA here, so use a self-signed one instead.
  ASSERT_EQ(std::system(absl::StrCat("cd '", *cert_dir,
                                     "' && openssl req -x509 -newkey ec -pkeyopt "
                                     "ec_paramgen_curve:prime256v1 -nodes -keyout rogue.key "
                                     "-out rogue.pem -days 1 -subj /CN=rogue > /dev/null 2>&1")
                            .c_str()),
            0);
  client::VerifierClientOptions rogue = ClientOptions(mtls_->address(), true, false);
  rogue.tls_cert_file = File("rogue.pem");
  rogue.tls_key_file = File("rogue.key");
  auto rogue_client = client::VerifierClient::Create(rogue);
  ASSERT_TRUE(rogue_client.ok()) << rogue_client.status();
  EXPECT_EQ(VerifyOnce(**rogue_client).code(), absl::StatusCode::kUnavailable);
}

// Issue #15, item 11: under mutual TLS a KV handle belongs to the identity
// that created it; another identity gets NOT_FOUND, as for a handle that
// does not exist.
TEST_F(LoadgenTlsTest, HandlesBelongToTheClientIdentityThatCreatedThem) {
  auto a = client::VerifierClient::Create(ClientOptions(mtls_->address(), true, true));
  ASSERT_TRUE(a.ok()) << a.status();
  client::VerifierClientOptions b_options = ClientOptions(mtls_->address(), true, false);
  b_options.tls_cert_file = File("client-b.pem");
  b_options.tls_key_file = File("client-b.key");
  auto b = client::VerifierClient::Create(b_options);
  ASSERT_TRUE(b.ok()) << b.status();

  GreedyWorkloadOptions w;
  w.num_sequences = 4;
  w.row_bytes = 64;
  w.alpha = 1.0;  // every row kept: the handle has rows
  const GreedyWorkload workload = *GenerateGreedyWorkload(w);
  client::GreedyRequestOptions r;
  r.num_sequences = 4;
  r.kv_return = v1::KV_RETURN_HANDLE;
  absl::StatusOr<v1::VerifyResponse> answer = (*a)->Verify(*client::BuildGreedyRequest(workload, r));
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::string handle = answer->kv().id();
  ASSERT_FALSE(handle.empty());

  absl::StatusOr<std::string> stolen = (*b)->FetchKv(handle);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kNotFound) << stolen.status();
  EXPECT_THAT(std::string(stolen.status().message()), ::testing::HasSubstr("unknown, released or expired"));
  EXPECT_EQ((*b)->ReleaseKv(handle).status().code(), absl::StatusCode::kNotFound);
  // B's attempts changed nothing: A still reads and then releases its rows.
  absl::StatusOr<std::string> rows = (*a)->FetchKv(handle);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->size(), static_cast<size_t>(answer->kv().num_rows() * 64));
  EXPECT_TRUE((*a)->ReleaseKv(handle).ok());
}

// Issue #15, item 11, for the data plane (issue #13): under mutual TLS a
// region belongs to the identity that registered it. Another identity does
// not see it, cannot unregister it, and cannot name it in a request (NOT_FOUND,
// as for a name nobody registered); names are per identity.
TEST_F(LoadgenTlsTest, RegionsBelongToTheClientIdentityThatRegisteredThem) {
  auto a = client::VerifierClient::Create(ClientOptions(mtls_->address(), true, true));
  ASSERT_TRUE(a.ok()) << a.status();
  client::VerifierClientOptions b_options = ClientOptions(mtls_->address(), true, false);
  b_options.tls_cert_file = File("client-b.pem");
  b_options.tls_key_file = File("client-b.key");
  auto b = client::VerifierClient::Create(b_options);
  ASSERT_TRUE(b.ok()) << b.status();

  auto shm = client::SharedMemoryRegion::Create(
      absl::StrCat("specverify-tls-test-", getpid()), 1 << 20);
  ASSERT_TRUE(shm.ok()) << shm.status();
  ASSERT_TRUE((*a)->RegisterRegion((*shm)->Registration("kv")).ok());
  absl::StatusOr<v1::ListRegionsResponse> seen_by_b = (*b)->ListRegions();
  ASSERT_TRUE(seen_by_b.ok()) << seen_by_b.status();
  EXPECT_EQ(seen_by_b->regions_size(), 0);
  EXPECT_EQ((*b)->UnregisterRegion("kv").status().code(), absl::StatusCode::kNotFound);

  GreedyWorkloadOptions w;
  w.num_sequences = 2;
  w.row_bytes = 64;
  const GreedyWorkload workload = *GenerateGreedyWorkload(w);
  client::GreedyRequestOptions r;
  r.num_sequences = 2;
  r.kv_return = v1::KV_RETURN_INLINE;
  v1::VerifyRequest request = *client::BuildGreedyRequest(workload, r);
  client::RegionWriter writer("kv", (*shm)->data(), (*shm)->size());
  ASSERT_TRUE(writer.MoveInputsToRegion(&request, /*return_into_region=*/true).ok());
  absl::StatusOr<v1::VerifyResponse> by_b = (*b)->Verify(request);
  EXPECT_EQ(by_b.status().code(), absl::StatusCode::kNotFound) << by_b.status();
  EXPECT_TRUE((*a)->Verify(request).ok());

  // B's own "kv" is another region; removing it leaves A's.
  ASSERT_TRUE((*b)->RegisterRegion((*shm)->Registration("kv")).ok());
  EXPECT_TRUE((*b)->UnregisterRegion("kv").ok());
  absl::StatusOr<v1::ListRegionsResponse> seen_by_a = (*a)->ListRegions();
  ASSERT_TRUE(seen_by_a.ok()) << seen_by_a.status();
  ASSERT_EQ(seen_by_a->regions_size(), 1);
  EXPECT_EQ(seen_by_a->regions(0).requests_total(), 1);
  EXPECT_TRUE((*a)->UnregisterRegion("kv").ok());
}

TEST_F(LoadgenTlsTest, LoadgenRunsACheckedSweepOverMutualTls) {
  LoadgenConfig c;
  c.address = mtls_->address();
  c.concurrency = {4};
  c.requests = 200;
  c.warmup_s = 0.1;
  c.connect_timeout_s = 5;
  c.transport.tls = true;
  c.transport.tls_ca_file = File("ca.pem");
  c.transport.tls_cert_file = File("client.pem");
  c.transport.tls_key_file = File("client.key");
  c.transport.tls_server_name = "localhost";
  c.wait_for_serving_s = 10;  // the health check goes over mutual TLS too
  c.workload.row_bytes = 256;
  c.workload.kv_return = KvReturnMode::kHandle;
  c.workload.fetch_kv_fraction = 0.5;
  c.workload.pool_requests = 64;
  absl::StatusOr<RunReport> report = RunLoadgen(c);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->steps.size(), 1u);
  EXPECT_EQ(report->steps[0].server.ok, 200);
  EXPECT_EQ(report->steps[0].server.rpc_errors, 0);
  EXPECT_GT(report->steps[0].server.kv_fetches, 0);
  EXPECT_EQ(report->total_wrong_answers(), 0);
  EXPECT_EQ(report->total_kv_mismatches(), 0);
}

}  // namespace
}  // namespace specverify::loadgen
