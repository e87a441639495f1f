// libFuzzer target over the request path a client controls: the bytes of a
// VerifyRequest are parsed, validated at the edge (server/rpc/validation.h),
// and, when valid, staged through the CPU backend's staging by the batch
// builder and verified by the CPU references (greedy or rejection sampling)
// with their pack. Invariants a user relies on are checked for every valid
// input; ASan/UBSan catch the rest. Built only in the sanitizer build
// (-DSPECVERIFY_FUZZ=ON with clang; scripts/sanitize.sh), run by CTest for a
// bounded time over the seed corpus in tests/fuzz/corpus/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "server/arena/arena_memory.h"
#include "server/backend/cpu_backend.h"
#include "server/batcher/batch_builder.h"
#include "server/batcher/pending_request.h"
#include "server/rpc/protobuf_log.h"
#include "server/regions/region_refs.h"
#include "server/regions/region_registry.h"
#include "server/rpc/validation.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {
namespace {

constexpr int64_t kArenaBytes = int64_t{64} << 20;

// A violated invariant is a finding: print it and abort so libFuzzer keeps
// the input.
void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "invariant violated: %s\n", what);
  std::abort();
}

struct Harness {
  Harness() {
    // Invalid UTF-8 in string fields is every other input: one log line per
    // 10 s, as in the server, not one per execution.
    InstallRateLimitedProtobufLogging();
    CpuBackendOptions options;
    options.threads = 1;
    backend = *CpuBackend::Create(options);
    arena = *backend->AllocateArenaMemory(kArenaBytes);
    // One registered shared-memory region, "fuzz", that TensorRefs of the
    // inputs may name (the data plane's resolution, gather and delivery).
    shm_name = "specverify-fuzz-" + std::to_string(getpid());
    const int fd = shm_open(("/" + shm_name).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    Require(fd >= 0 && ftruncate(fd, kRegionBytes) == 0, "the fuzz region exists");
    close(fd);
    regions = std::make_unique<RegionRegistry>(
        RegionLimits{}, [this](const RegionSpec& spec) { return backend->MapRegion(spec); },
        &metrics);
    RegionSpec spec;
    spec.name = "fuzz";
    spec.byte_size = kRegionBytes;
    spec.shm_name = shm_name;
    Require(regions->Register("", spec).ok(), "the fuzz region registers");
    shm_unlink(("/" + shm_name).c_str());  // the mapping keeps it
  }
  static constexpr int64_t kRegionBytes = int64_t{1} << 20;
  NoopServerMetrics metrics;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<ArenaMemory> arena;
  std::string shm_name;
  std::unique_ptr<RegionRegistry> regions;
};

// A tree's answer (docs/TREES.md): the accepted nodes are a path from the
// root (the first a child of the root, each next a child of the one before),
// k of them at the tree's packed offset, and mismatch says the path's last
// node (or the root) has children; a failed sampled tree has depth 0 and
// mismatch 1.
void CheckTreePath(const Batch& batch, int32_t i, bool failed) {
  const GreedyHostResults& r = batch.results;
  const int32_t first = batch.inputs.draft_offsets[i];
  const int32_t nodes = batch.inputs.draft_offsets[i + 1] - first;
  const int32_t k = r.accepted_lengths[i];
  if (failed) {
    Require(k == 0 && r.mismatch[i] != 0, "a failed tree has depth 0 and mismatch 1");
    return;
  }
  Require(r.accepted_nodes.size() >= static_cast<size_t>(r.packed_row_offsets[i] + k),
          "accepted nodes cover every accepted path");
  int32_t last = -1;  // the root
  for (int32_t d = 0; d < k; ++d) {
    const int32_t node = r.accepted_nodes[r.packed_row_offsets[i] + d];
    Require(node >= 0 && node < nodes, "an accepted node is a node of its tree");
    Require(batch.inputs.parent_indices[first + node] == last,
            "each accepted node is a child of the one before (the first of the root)");
    last = node;
  }
  bool has_children = false;
  for (int32_t j = 0; j < nodes; ++j) {
    has_children = has_children || batch.inputs.parent_indices[first + j] == last;
  }
  Require((r.mismatch[i] != 0) == has_children, "mismatch iff the path's last node has children");
}

int RunOne(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness;
  v1::VerifyRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  RequestLimits limits;
  limits.max_sequences_per_request = 64;
  limits.max_draft_tokens = 64;
  limits.max_sampled_request_bytes = int64_t{4} << 20;
  absl::StatusOr<ValidatedRequest> shape = ValidateVerifyRequest(request, limits);
  if (!shape.ok()) {
    Require(shape.status().code() == absl::StatusCode::kInvalidArgument,
            "a refused request is INVALID_ARGUMENT");
    Require(!shape.status().message().empty(), "a refusal says why");
    return 0;
  }
  auto pending = std::make_unique<PendingRequest>();
  pending->request = &request;
  pending->shape = *shape;
  if (UsesRegions(request)) {
    absl::StatusOr<ResolvedRegions> resolved = ResolveRegionRefs(request, *harness->regions, "");
    if (!resolved.ok()) {
      const absl::StatusCode c = resolved.status().code();
      Require(c == absl::StatusCode::kNotFound || c == absl::StatusCode::kOutOfRange ||
                  c == absl::StatusCode::kInvalidArgument,
              "a bad reference is NOT_FOUND, OUT_OF_RANGE or INVALID_ARGUMENT");
      return 0;
    }
    pending->regions = *std::move(resolved);
  }
  std::vector<std::unique_ptr<PendingRequest>> requests;
  requests.push_back(std::move(pending));
  const BatchKey& key = shape->key;

  auto batch = std::make_unique<Batch>();
  batch->key = key;
  const StagingShape staging = StagingShapeOf(requests, key);
  Require(staging.sequences == shape->num_sequences, "staging sequences = request sequences");
  if (staging.kv_bytes > kArenaBytes) return 0;  // larger than this harness's arena
  absl::StatusOr<std::unique_ptr<StagingLease>> lease =
      harness->backend->AcquireStaging(staging, batch.get());
  Require(lease.ok(), "CPU staging is always available");
  batch->staging = *std::move(lease);
  BuildBatchInputs(requests, key, batch.get());
  Require(requests[0]->host_copy_in_bytes <= shape->payload_bytes,
          "the host copies no more than the payload");
  if (key.row_bytes > 0) batch->packed_kv = harness->arena->base();

  absl::Notification done;
  absl::Status status;
  std::unique_ptr<Batch> result;
  harness->backend->Submit(std::move(batch), [&](std::unique_ptr<Batch> b, absl::Status s) {
    result = std::move(b);
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  Require(status.ok(), "a validated batch executes");
  const GreedyHostResults& r = result->results;
  const int32_t b = result->inputs.num_sequences();
  Require(static_cast<int32_t>(r.accepted_lengths.size()) == b, "one result per sequence");
  Require(r.packed_row_offsets[0] == 0, "packed offsets start at 0");
  for (int32_t i = 0; i < b; ++i) {
    const int32_t gamma = result->inputs.draft_offsets[i + 1] - result->inputs.draft_offsets[i];
    const bool failed =
        key.mode == VerifyMode::kSampled && result->sampled_results.status_codes[i] != 0;
    Require(r.accepted_lengths[i] >= 0 && r.accepted_lengths[i] <= gamma, "0 <= k <= gamma");
    Require(r.packed_row_offsets[i + 1] == r.packed_row_offsets[i] + r.accepted_lengths[i],
            "packed offsets are the prefix sum of k");
    if (key.tree) {
      CheckTreePath(*result, i, failed);
    } else {
      Require((r.mismatch[i] != 0) == (r.accepted_lengths[i] < gamma) || failed,
              "mismatch iff k < gamma");
    }
  }
  (void)RequestOutcomeStatus(*result, 0, b);
  return 0;
}

}  // namespace
}  // namespace specverify::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return specverify::server::RunOne(data, size);
}
