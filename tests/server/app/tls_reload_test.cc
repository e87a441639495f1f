// TLS files reloaded without a restart (issue #15, item 10): the in-process
// server with --tls_reload_interval_s=1; the test rotates the certificate
// files and checks that new connections see the new ones and established
// connections keep working. With the same certificates: under mutual TLS
// the per-client account is the certificate's identity, not the connection
// (issue #15, item 12). Two CAs, each with a server and a client
// certificate, are made with the openssl command at test time; without it
// the tests skip visibly.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/greedy_requests.h"
#include "client/verifier_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app/verifier_server.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;

// The watcher's refresh interval; a rotation shows within about this long.
constexpr int kReloadSeconds = 1;
// How long a test waits for a rotation to show (interval, plus a loaded
// 2-core machine).
constexpr absl::Duration kRotationLimit = absl::Seconds(15);

std::string* cert_dir = nullptr;  // null: no openssl here
std::string File(const std::string& name) { return absl::StrCat(*cert_dir, "/", name); }

// EC keys: fast to make. For CA n in {1, 2}: ca<n>.pem, server<n>.{pem,key}
// (localhost, 127.0.0.1), client<n>.{pem,key} (CN worker-<n>).
bool MakeCertificates(const std::string& dir) {
  const std::string cd = absl::StrCat("cd '", dir, "' && ");
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string quiet = " >> openssl.log 2>&1";
  if (std::system((cd + "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext")
                      .c_str()) != 0) {
    return false;
  }
  for (const char* n : {"1", "2"}) {
    for (const std::string& command : {
             absl::StrCat("openssl req -x509 ", key, " -keyout ca", n, ".key -out ca", n,
                          ".pem -days 1 -subj /CN=specverify-test-ca-", n, quiet),
             absl::StrCat("openssl req ", key, " -keyout server", n, ".key -out server", n,
                          ".csr -subj /CN=localhost", quiet),
             absl::StrCat("openssl x509 -req -in server", n, ".csr -CA ca", n, ".pem -CAkey ca", n,
                          ".key -CAcreateserial -out server", n,
                          ".pem -days 1 -extfile server.ext", quiet),
             absl::StrCat("openssl req ", key, " -keyout client", n, ".key -out client", n,
                          ".csr -subj /CN=worker-", n, quiet),
             absl::StrCat("openssl x509 -req -in client", n, ".csr -CA ca", n, ".pem -CAkey ca", n,
                          ".key -CAcreateserial -out client", n, ".pem -days 1", quiet)}) {
      if (std::system((cd + command).c_str()) != 0) return false;
    }
  }
  return true;
}

// Replaces `to` by a copy of `from` atomically (copy beside it, rename over
// it), as a certificate manager (or a Kubernetes secret volume) does.
void Install(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(tmp, to);
}

class TlsReloadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system("openssl version > /dev/null 2>&1") != 0) return;
    char pattern[] = "/tmp/specverify-tls-reload.XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;
    if (!MakeCertificates(pattern)) return;
    cert_dir = new std::string(pattern);
  }
  static void TearDownTestSuite() {
    if (cert_dir == nullptr) return;
    std::error_code ignored;
    std::filesystem::remove_all(*cert_dir, ignored);  // private keys included
    delete cert_dir;
    cert_dir = nullptr;
  }
  void SetUp() override {
    if (cert_dir == nullptr) GTEST_SKIP() << "no openssl command: cannot make test certificates";
    // The files the server is configured with; the tests rotate them.
    Install(File("server1.pem"), File("live-server.pem"));
    Install(File("server1.key"), File("live-server.key"));
    Install(File("ca1.pem"), File("live-client-ca.pem"));
    options_.listen_address = "127.0.0.1:0";
    options_.metrics_address = "";
    options_.device = "noop";
    options_.kv_arena_bytes = 1 << 20;
    options_.tls_cert_file = File("live-server.pem");
    options_.tls_key_file = File("live-server.key");
    options_.tls_reload_interval_s = kReloadSeconds;
  }
  void TearDown() override {
    if (server_ != nullptr) (void)server_->Shutdown(absl::Seconds(2));
  }
  void Start() {
    absl::StatusOr<std::unique_ptr<VerifierServer>> server =
        VerifierServer::Start(options_, &metrics_);
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
  }
  // A client on a connection of its own (a new TLS handshake) that trusts
  // `ca` and, when `client_cert` is set, presents that certificate.
  std::unique_ptr<client::VerifierClient> NewClient(const std::string& ca,
                                                    const std::string& client_cert = "") {
    client::VerifierClientOptions o;
    o.address = server_->local_address();
    o.use_tls = true;
    o.tls_root_cert_file = File(ca + ".pem");
    o.tls_server_name = "localhost";
    if (!client_cert.empty()) {
      o.tls_cert_file = File(client_cert + ".pem");
      o.tls_key_file = File(client_cert + ".key");
    }
    o.own_connection = true;
    o.default_deadline = absl::Seconds(3);
    return *client::VerifierClient::Create(o);
  }
  // True once a new connection with these credentials is served, polling
  // (the watcher reloads on its own schedule).
  bool EventuallyServed(const std::string& ca, const std::string& client_cert = "") {
    const absl::Time deadline = absl::Now() + kRotationLimit;
    while (absl::Now() < deadline) {
      if (NewClient(ca, client_cert)->GetServerInfo().ok()) return true;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }

  ServerOptions options_;
  NoopServerMetrics metrics_;
  std::unique_ptr<VerifierServer> server_;
};

TEST_F(TlsReloadTest, ANewConnectionSeesTheRotatedServerCertificate) {
  Start();
  std::unique_ptr<client::VerifierClient> before = NewClient("ca1");
  ASSERT_THAT(before->GetServerInfo(), IsOk());
  // A client trusting only the next CA cannot connect yet.
  EXPECT_FALSE(NewClient("ca2")->GetServerInfo().ok());

  Install(File("server2.key"), File("live-server.key"));
  Install(File("server2.pem"), File("live-server.pem"));
  ASSERT_TRUE(EventuallyServed("ca2")) << "the rotated certificate was not served within "
                                       << kRotationLimit;
  // New connections now get the new certificate, which the old CA did not sign.
  EXPECT_FALSE(NewClient("ca1")->GetServerInfo().ok());
  // The connection made before the rotation keeps working.
  EXPECT_THAT(before->GetServerInfo(), IsOk());
}

TEST_F(TlsReloadTest, ANewConnectionIsCheckedAgainstTheRotatedClientCa) {
  options_.tls_client_ca_file = File("live-client-ca.pem");
  Start();
  std::unique_ptr<client::VerifierClient> before = NewClient("ca1", "client1");
  ASSERT_THAT(before->GetServerInfo(), IsOk());
  EXPECT_FALSE(NewClient("ca1", "client2")->GetServerInfo().ok());

  Install(File("ca2.pem"), File("live-client-ca.pem"));
  ASSERT_TRUE(EventuallyServed("ca1", "client2"))
      << "a certificate of the rotated client CA was not accepted within " << kRotationLimit;
  EXPECT_FALSE(NewClient("ca1", "client1")->GetServerInfo().ok());
  EXPECT_THAT(before->GetServerInfo(), IsOk());
}

TEST_F(TlsReloadTest, UnderMutualTlsTheCertificateIsTheClientWhateverTheConnection) {
  GreedyWorkloadOptions w;
  w.num_sequences = 16;
  w.gamma_min = 4;
  w.gamma_max = 4;
  w.alpha = 1.0;  // every row kept: a handle holds its request's whole upper bound
  w.row_bytes = 64;
  const GreedyWorkload workload = *GenerateGreedyWorkload(w);
  const auto request = [&](int i) {
    client::GreedyRequestOptions r;
    r.first_sequence = 2 * i;
    r.num_sequences = 2;
    r.kv_return = v1::KV_RETURN_HANDLE;
    return *client::BuildGreedyRequest(workload, r);
  };
  options_.device = "cpu";
  options_.tls_client_ca_file = File("live-client-ca.pem");
  options_.max_arena_bytes_per_client = 2 * 4 * 64;  // one request's rows
  Start();
  std::unique_ptr<client::VerifierClient> first = NewClient("ca1", "client1");
  absl::StatusOr<v1::VerifyResponse> kept = first->Verify(request(0));
  ASSERT_THAT(kept, IsOk());
  // Another connection with the same certificate is the same client: its
  // quota is held by the handle the first connection made.
  EXPECT_THAT(NewClient("ca1", "client1")->Verify(request(1)),
              ::specverify::testing::StatusIs(
                  absl::StatusCode::kResourceExhausted,
                  ::testing::HasSubstr("client \"worker-1\" holds 512 KV arena bytes")));
  // The second CA's client is another identity; the server accepts it once
  // the client CA file names both CAs.
  Install(File("ca1.pem"), File("both.pem"));
  std::filesystem::path both = File("both.pem");
  {
    std::ifstream ca2(File("ca2.pem"));
    std::ofstream out(both, std::ios::app);
    out << ca2.rdbuf();
  }
  Install(File("both.pem"), File("live-client-ca.pem"));
  ASSERT_TRUE(EventuallyServed("ca1", "client2"));
  EXPECT_THAT(NewClient("ca1", "client2")->Verify(request(2)), IsOk());
  // Released, the first identity may keep rows again, on any connection.
  ASSERT_THAT(first->ReleaseKv(kept->kv().id()), IsOk());
  EXPECT_THAT(NewClient("ca1", "client1")->Verify(request(3)), IsOk());
}

TEST_F(TlsReloadTest, UnreadableFilesStillStopStartUpNamingTheFlag) {
  options_.tls_cert_file = File("missing.pem");
  EXPECT_THAT(VerifierServer::Start(options_, &metrics_),
              ::specverify::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                              ::testing::HasSubstr("--tls_cert_file=")));
}

}  // namespace
}  // namespace specverify::server
