#include "server/app/server_options.h"
#include "server/rpc/grpc_tuning.h"

#include <algorithm>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app/listen_address.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ServerOptionsTest, DefaultsAreValid) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->metrics_address, "0.0.0.0:9401");
  EXPECT_EQ(o->device, "auto");
  EXPECT_EQ(o->max_stream_buffered_answers, 64);
}

// Issue #15: the per-stream bound on owed answers is a validated flag.
TEST(ServerOptionsTest, MaxStreamBufferedAnswersIsBounded) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({"--max-stream-buffered-answers=8"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_stream_buffered_answers, 8);
  EXPECT_THAT(ParseServerFlags({"--max_stream_buffered_answers=0"}),
              StatusIs(kInvalid, HasSubstr("--max_stream_buffered_answers is 0; must lie in "
                                           "[1, 65536]")));
  EXPECT_THAT(ParseServerFlags({"--max_stream_buffered_answers=65537"}),
              StatusIs(kInvalid, HasSubstr("--max_stream_buffered_answers is 65537")));
  EXPECT_THAT(FlagsHelp(), HasSubstr("--max_stream_buffered_answers (default \"64\")"));
}

TEST(ServerOptionsTest, PerClientLimitsDefaultToNoneAndAreBounded) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_queued_sequences_per_client, 0);
  EXPECT_EQ(o->max_arena_bytes_per_client, 0);
  o = ParseServerFlags(
      {"--max_queued_sequences_per_client=512", "--max_arena_bytes_per_client=1048576"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_queued_sequences_per_client, 512);
  EXPECT_EQ(o->max_arena_bytes_per_client, 1048576);
  // Below the largest request, that request could never queue.
  EXPECT_THAT(ParseServerFlags({"--max_queued_sequences_per_client=255"}),
              StatusIs(kInvalid, HasSubstr("--max_queued_sequences_per_client is 255; must be 0 "
                                           "(no limit) or lie in [max_sequences_per_request=256, "
                                           "max_queue_sequences=16384]")));
  EXPECT_THAT(ParseServerFlags({"--max_queued_sequences_per_client=16385"}),
              StatusIs(kInvalid, HasSubstr("--max_queued_sequences_per_client is 16385")));
  EXPECT_THAT(ParseServerFlags({"--max_arena_bytes_per_client=-1"}),
              StatusIs(kInvalid, HasSubstr("--max_arena_bytes_per_client is -1; must be >= 0")));
  EXPECT_THAT(FlagsHelp(), HasSubstr("--max_queued_sequences_per_client (default \"0\")"));
  EXPECT_THAT(FlagsHelp(), HasSubstr("--max_arena_bytes_per_client (default \"0\")"));
}

TEST(ServerOptionsTest, TlsReloadIntervalNeedsTlsAndIsBounded) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tls_reload_interval_s, 0);
  EXPECT_THAT(ParseServerFlags({"--tls_reload_interval_s=60"}),
              StatusIs(kInvalid, HasSubstr("--tls_reload_interval_s needs --tls_cert_file")));
  EXPECT_THAT(ParseServerFlags({"--tls_cert_file=c.pem", "--tls_key_file=k.pem",
                                "--tls_reload_interval_s=-1"}),
              StatusIs(kInvalid, HasSubstr("--tls_reload_interval_s is -1; must lie in [0, 86400]")));
  o = ParseServerFlags({"--tls_cert_file=c.pem", "--tls_key_file=k.pem",
                        "--tls_reload_interval_s=300"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tls_reload_interval_s, 300);
}

TEST(ServerOptionsTest, ParsesBothSpellingsAndForms) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags(
      {"--max_batch_sequences=32", "--max-queue-delay-us", "500", "--device=noop",
       "--metrics-address=", "--listen_address=127.0.0.1:0", "--max_sequences_per_request=8"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_batch_sequences, 32);
  EXPECT_EQ(o->max_queue_delay_us, 500);
  EXPECT_EQ(o->device, "noop");
  EXPECT_EQ(o->metrics_address, "");
}

// Regression: a bare boolean flag used to swallow the next argument as its
// value ("--calibrate_dispatch --device=cuda:0" failed on "--device=cuda:0").
TEST(ServerOptionsTest, BareBooleanFlagMeansTrueAndTakesNoValue) {
  absl::StatusOr<ServerOptions> o =
      ParseServerFlags({"--calibrate_dispatch", "--device=noop"});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->calibrate_dispatch);
  EXPECT_EQ(o->device, "noop");
  o = ParseServerFlags({"--calibrate-dispatch=false"});
  ASSERT_THAT(o, IsOk());
  EXPECT_FALSE(o->calibrate_dispatch);
  // Non-boolean flags still take the next argument.
  o = ParseServerFlags({"--device", "noop"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->device, "noop");
}

TEST(ServerOptionsTest, UnknownFlagIsNamed) {
  EXPECT_THAT(ParseServerFlags({"--max_batch_seqs=3"}),
              StatusIs(kInvalid, HasSubstr("unknown flag --max_batch_seqs")));
  EXPECT_THAT(ParseServerFlags({"stray"}), StatusIs(kInvalid, HasSubstr("unexpected argument \"stray\"")));
}

TEST(ServerOptionsTest, InvalidValuesAreNamed) {
  EXPECT_THAT(ParseServerFlags({"--max_batch_bytes=lots"}),
              StatusIs(kInvalid, HasSubstr("--max_batch_bytes is \"lots\"; is not an integer")));
  EXPECT_THAT(ParseServerFlags({"--max_draft_tokens=257"}),
              StatusIs(kInvalid, HasSubstr("--max_draft_tokens is 257; must lie in [1, 256]")));
  EXPECT_THAT(ParseServerFlags({"--device=tpu"}),
              StatusIs(kInvalid, HasSubstr("--device is \"tpu\"; must be one of auto, cpu, cpu:N[,M...], cuda:N")));
  EXPECT_THAT(ParseServerFlags({"--device=cuda:x"}), StatusIs(kInvalid, HasSubstr("--device")));
  EXPECT_THAT(ParseServerFlags({"--metrics_address=nohost"}),
              StatusIs(kInvalid, HasSubstr("--metrics_address is \"nohost\"; must be host:port")));
  EXPECT_THAT(ParseServerFlags({"--metrics_address=0.0.0.0:70000"}),
              StatusIs(kInvalid, HasSubstr("--metrics_address is \"0.0.0.0:70000\"; the port")));
  EXPECT_THAT(ParseServerFlags({"--max_batch_sequences=8", "--max_sequences_per_request=9"}),
              StatusIs(kInvalid, HasSubstr("--max_sequences_per_request is 9; must lie in [1, "
                                           "max_batch_sequences=8]")));
  EXPECT_THAT(ParseServerFlags({"--max_queue_sequences=10"}),
              StatusIs(kInvalid, HasSubstr("--max_queue_sequences is 10")));
  EXPECT_THAT(ParseServerFlags({"--kv_handle_ttl_ms=0"}),
              StatusIs(kInvalid, HasSubstr("--kv_handle_ttl_ms is 0; must be > 0")));
  EXPECT_THAT(ParseServerFlags({"--cpu_threads=0"}), StatusIs(kInvalid, HasSubstr("--cpu_threads is 0")));
  EXPECT_THAT(ParseServerFlags({"--drain_timeout_ms=-1"}),
              StatusIs(kInvalid, HasSubstr("--drain_timeout_ms is -1")));
  EXPECT_THAT(ParseServerFlags({"--max_message_bytes=100"}),
              StatusIs(kInvalid, HasSubstr("--max_message_bytes is 100")));
  // Issue #15: FetchKv chunks of at least 4 KiB (and room for one in a message).
  EXPECT_THAT(ParseServerFlags({"--fetch_chunk_bytes=1"}),
              StatusIs(kInvalid, HasSubstr("--fetch_chunk_bytes is 1; must lie in [4096, "
                                           "max_message_bytes - 4096 = ")));
  EXPECT_THAT(ParseServerFlags({"--max_message_bytes=8191", "--fetch_chunk_bytes=4096"}),
              StatusIs(kInvalid, HasSubstr("--max_message_bytes is 8191; must lie in [8192, ")));
  EXPECT_THAT(ParseServerFlags({"--max_message_bytes=8192", "--fetch_chunk_bytes=4096"}), IsOk());
  EXPECT_THAT(ParseServerFlags({"--cpu_threads"}), StatusIs(kInvalid, HasSubstr("--cpu_threads needs a value")));
  EXPECT_THAT(ParseServerFlags({"--cuda_host_decision_max_rows=-1"}),
              StatusIs(kInvalid, HasSubstr("--cuda_host_decision_max_rows is -1; must lie in "
                                           "[0, 1048576]")));
}

// Greedy chains up to 32768 draft tokens are decided on the host by default;
// 0 sends every one to the device.
TEST(ServerOptionsTest, HostDecisionLimitDefaultsAndAcceptsZero) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->cuda_host_decision_max_rows, 32768);
  o = ParseServerFlags({"--cuda_host_decision_max_rows=0"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->cuda_host_decision_max_rows, 0);
}

// A config file in the test's temporary directory.
std::string WriteConfig(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ServerOptionsTest, ConfigFileAppliesWhereItAppears) {
  const std::string path = WriteConfig(
      "sv_config_ok.conf",
      "# limits\n\nmax_batch_sequences = 32\nmax_sequences_per_request=32\n"
      "--max_queue_delay_us=900\ndevice=noop\n");
  absl::StatusOr<ServerOptions> o =
      ParseServerFlags({"--max_queue_delay_us=5", "--config_file=" + path, "--device=cpu"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->max_batch_sequences, 32);
  EXPECT_EQ(o->max_queue_delay_us, 900);  // the file overrides earlier flags
  EXPECT_EQ(o->device, "cpu");            // later flags override the file
}

TEST(ServerOptionsTest, ConfigFileErrorsNameFileAndLine) {
  const std::string path = WriteConfig("sv_config_bad.conf", "device=cpu\nmax_batch_seqs=3\n");
  EXPECT_THAT(ParseServerFlags({"--config_file", path}),
              StatusIs(kInvalid, HasSubstr(path + ":2: unknown flag --max_batch_seqs")));
  const std::string value = WriteConfig("sv_config_value.conf", "cpu_threads=many\n");
  EXPECT_THAT(ParseServerFlags({"--config_file=" + value}),
              StatusIs(kInvalid, HasSubstr(value + ":1: --cpu_threads is \"many\"; is not an integer")));
  const std::string syntax = WriteConfig("sv_config_syntax.conf", "cpu_threads\n");
  EXPECT_THAT(ParseServerFlags({"--config_file=" + syntax}),
              StatusIs(kInvalid, HasSubstr(":1: \"cpu_threads\" is not name=value")));
  EXPECT_THAT(ParseServerFlags({"--config_file=/nonexistent/sv.conf"}),
              StatusIs(kInvalid, HasSubstr("--config_file is \"/nonexistent/sv.conf\"; cannot be opened")));
}

TEST(ServerOptionsTest, HelpListsEveryFlagWithDefault) {
  const std::string help = FlagsHelp();
  EXPECT_THAT(help, HasSubstr("--metrics_address (default \"0.0.0.0:9401\")"));
  EXPECT_THAT(help, HasSubstr("--max_queue_delay_us (default \"0\")"));
  EXPECT_TRUE(ParseServerFlags({"--help"})->help);
}

TEST(ServerOptionsTest, VersionStopsParsingAndIsListedInHelp) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({"--version", "--no_such_flag=1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->version);
  EXPECT_FALSE(o->help);
  EXPECT_FALSE(ParseServerFlags({})->version);
  EXPECT_THAT(FlagsHelp(), HasSubstr("--help, --version"));
}

TEST(ServerOptionsTest, GrpcArgsParseIntegersAndStringsAndOverrideTheDefaults) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags(
      {"--grpc_args=grpc.http2.bdp_probe=0, grpc.http2.lookahead_bytes=65536,grpc.x=abc"});
  ASSERT_THAT(o, IsOk());
  absl::StatusOr<GrpcArgs> args = ParseGrpcArgs(o->grpc_args);
  ASSERT_THAT(args, IsOk());
  ASSERT_EQ(args->size(), 3u);
  EXPECT_EQ((*args)[0].first, "grpc.http2.bdp_probe");
  EXPECT_EQ(std::get<int>((*args)[0].second), 0);
  EXPECT_EQ(std::get<std::string>((*args)[2].second), "abc");
  const GrpcArgs effective = EffectiveGrpcArgs(*args);
  // The override replaces the server's own window; nothing appears twice.
  int windows = 0;
  for (const auto& [name, value] : effective) {
    if (name == "grpc.http2.lookahead_bytes") {
      ++windows;
      EXPECT_EQ(std::get<int>(value), 65536);
    }
  }
  EXPECT_EQ(windows, 1);
  // The server's defaults stay: SO_REUSEPORT off (server/app/listen_address.h).
  EXPECT_EQ(effective.size(), 4u);
  EXPECT_NE(std::find(effective.begin(), effective.end(),
                      GrpcArgs::value_type{"grpc.so_reuseport", 0}),
            effective.end());
  EXPECT_THAT(ParseServerFlags({"--grpc_args=grpc.http2.bdp_probe"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--grpc_args item \"grpc.http2.bdp_probe\" is not name=value")));
}

TEST(ServerOptionsTest, ListenAddressesAreAListOfHostPortsAndUnixSockets) {
  EXPECT_THAT(ParseServerFlags({"--listen_address=0.0.0.0:50051, unix:/run/specverify/v.sock"}),
              IsOk());
  EXPECT_THAT(ListenAddresses(" 0.0.0.0:50051, unix:/run/v.sock ,"),
              ::testing::ElementsAre("0.0.0.0:50051", "unix:/run/v.sock"));
  EXPECT_THAT(ParseServerFlags({"--listen_address=unix:/tmp/a.sock,unix:/tmp/a.sock"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--listen_address lists \"unix:/tmp/a.sock\" twice")));
  EXPECT_THAT(ParseServerFlags({"--listen_address=0.0.0.0:50051,localhost"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--listen_address is \"localhost\"; must be host:port")));
  EXPECT_THAT(ParseServerFlags({"--listen_address= , "}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--listen_address is empty")));
  // The metrics exporter (CivetWeb) serves TCP only.
  EXPECT_THAT(ParseServerFlags({"--metrics_address=unix:/tmp/m.sock"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--metrics_address is \"unix:/tmp/m.sock\"; serves TCP only")));
}

TEST(ServerOptionsTest, LatencyFirstDefaultsAndPreferredSizeBounds) {
  absl::StatusOr<ServerOptions> o = ParseServerFlags({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->preferred_batch_sequences, 0);
  EXPECT_EQ(o->max_queue_delay_us, 0);
  EXPECT_THAT(ParseServerFlags({"--max_batch_sequences=64", "--preferred_batch_sequences=65"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("preferred_batch_sequences is 65; must lie in [0, "
                                 "max_batch_sequences=64]")));
  EXPECT_THAT(ParseServerFlags({"--cuda_mapped_inputs_max_bytes=-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cuda_mapped_inputs_max_bytes is -1")));
}

TEST(ServerOptionsTest, TlsFlagsGoTogether) {
  EXPECT_THAT(ParseServerFlags({"--tls_cert_file=/x.pem"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_key_file is missing: --tls_cert_file and --tls_key_file "
                                 "go together")));
  EXPECT_THAT(ParseServerFlags({"--tls_key_file=/x.key"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert_file is missing")));
  EXPECT_THAT(ParseServerFlags({"--tls_client_ca_file=/ca.pem"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_client_ca_file needs --tls_cert_file and --tls_key_file")));
  EXPECT_THAT(ParseServerFlags({"--tls_cert_file=/a", "--tls_key_file=/b",
                                "--tls_client_ca_file=/c"}),
              IsOk());
}

}  // namespace
}  // namespace specverify::server
