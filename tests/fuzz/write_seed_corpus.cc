// Writes the fuzz target's seed corpus: small valid VerifyRequests of every
// shape the server takes (greedy with and without KV rows, inline and handle
// returns; sampled fp32 probabilities with draft rows, bf16 logits without,
// fp16 logits with top-k/top-p, the sigmoid approximation, log-probabilities;
// greedy and sampled token trees), built by the same client helpers the tests
// and the load generator use. Generated at test time rather than committed,
// so they follow the proto.
//
//   write_seed_corpus <dir>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/greedy_requests.h"
#include "client/region.h"
#include "client/sampled_requests.h"
#include "client/tree_requests.h"
#include "kernels/workload/greedy_workload.h"
#include "kernels/workload/sampling_workload.h"
#include "kernels/workload/tree_workload.h"

namespace {

bool Write(const std::string& dir, const std::string& name,
           const specverify::v1::VerifyRequest& request) {
  const std::string path = absl::StrCat(dir, "/", name);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const std::string bytes = request.SerializeAsString();
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace specverify;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  int written = 0;
  for (int64_t row_bytes : {0, 16}) {
    GreedyWorkloadOptions w;
    w.num_sequences = 6;
    w.gamma_min = 1;
    w.gamma_max = 6;
    w.row_bytes = row_bytes;
    w.vocab_size = 100;
    w.seed = 3 + row_bytes;
    const GreedyWorkload workload = *GenerateGreedyWorkload(w);
    for (auto kv : {v1::KV_RETURN_UNSPECIFIED, v1::KV_RETURN_INLINE, v1::KV_RETURN_HANDLE}) {
      client::GreedyRequestOptions r;
      r.num_sequences = 3;
      r.kv_return = kv;
      written += Write(dir, absl::StrCat("greedy-row", row_bytes, "-kv", kv),
                       *client::BuildGreedyRequest(workload, r));
    }
    if (row_bytes > 0) {
      // The data plane: rows in the fuzz target's region "fuzz" (1 MiB),
      // returned into it (client/region.h lays them out as a worker would).
      std::vector<std::byte> image(1 << 20);
      client::RegionWriter writer("fuzz", image.data(), static_cast<int64_t>(image.size()));
      client::GreedyRequestOptions r;
      r.num_sequences = 3;
      r.kv_return = v1::KV_RETURN_INLINE;
      v1::VerifyRequest request = *client::BuildGreedyRequest(workload, r);
      if (writer.MoveInputsToRegion(&request, /*return_into_region=*/true).ok()) {
        written += Write(dir, "greedy-region", request);
      }
    }
  }
  struct Sampled {
    const char* name;
    SampleDtype dtype;
    SampleValueKind kind;
    bool draft_probs;
    int32_t top_k;
    float top_p;
    SampleMethod method;
  };
  for (const Sampled& s :
       {Sampled{"fp32-probs-draft", SampleDtype::kFloat32, SampleValueKind::kProbabilities, true,
                0, 1.0f, SampleMethod::kExact},
        Sampled{"bf16-logits", SampleDtype::kBFloat16, SampleValueKind::kLogits, false, 0, 1.0f,
                SampleMethod::kExact},
        Sampled{"fp16-logits-topk-topp", SampleDtype::kFloat16, SampleValueKind::kLogits, true, 5,
                0.9f, SampleMethod::kExact},
        Sampled{"fp32-logits-sigmoid", SampleDtype::kFloat32, SampleValueKind::kLogits, false, 0,
                1.0f, SampleMethod::kSigmoid},
        Sampled{"bf16-logprobs-draft", SampleDtype::kBFloat16, SampleValueKind::kLogProbabilities,
                true, 0, 1.0f, SampleMethod::kExact}}) {
    SamplingWorkloadOptions o;
    o.num_sequences = 2;
    o.gamma_min = 1;
    o.gamma_max = 3;
    o.vocab_size = 32;
    o.dtype = s.dtype;
    o.kind = s.kind;
    o.has_draft_probs = s.draft_probs;
    o.top_k = s.top_k;
    o.top_p = s.top_p;
    o.sequences_per_request = 2;
    const SamplingWorkload workload = *GenerateSamplingWorkload(o);
    client::SampledRequestSettings settings;
    settings.method = s.method;
    settings.kv_row_bytes = 8;
    settings.kv_return = v1::KV_RETURN_INLINE;
    written += Write(dir, absl::StrCat("sampled-", s.name),
                     *client::BuildSampledRequest(workload, 0, settings));
    if (s.method == SampleMethod::kExact && s.draft_probs) {
      std::vector<std::byte> image(1 << 20);
      client::RegionWriter writer("fuzz", image.data(), static_cast<int64_t>(image.size()));
      v1::VerifyRequest request = *client::BuildSampledRequest(workload, 0, settings);
      if (writer.MoveInputsToRegion(&request, /*return_into_region=*/true).ok()) {
        written += Write(dir, absl::StrCat("sampled-region-", s.name), request);
      }
    }
  }
  // Token trees (docs/TREES.md): greedy trees with duplicate sibling tokens,
  // with and without KV rows; sampled trees with and without draft rows,
  // one with KV rows returned inline.
  const std::pair<int64_t, v1::KvReturn> tree_rows[] = {
      {0, v1::KV_RETURN_NONE}, {16, v1::KV_RETURN_INLINE}, {16, v1::KV_RETURN_HANDLE}};
  for (const auto& [row_bytes, kv] : tree_rows) {
    TreeWorkloadOptions w;
    w.num_trees = 4;
    w.num_nodes = 7;
    w.max_children = 3;
    w.duplicate_sibling_rate = 0.3;
    w.row_bytes = row_bytes;
    w.vocab_size = 64;
    w.seed = 5 + row_bytes;
    const TreeGreedyWorkload workload = *GenerateTreeGreedyWorkload(w);
    written += Write(dir, absl::StrCat("tree-greedy-row", row_bytes, "-kv", kv),
                     *client::BuildTreeGreedyRequest(workload, 0, 3, kv));
  }
  for (bool draft_probs : {true, false}) {
    TreeSampledWorkloadOptions w;
    w.num_trees = 2;
    w.num_nodes = 6;
    w.max_children = 3;
    w.vocab_size = 32;
    w.dtype = draft_probs ? SampleDtype::kFloat32 : SampleDtype::kBFloat16;
    w.has_draft_probs = draft_probs;
    w.sequences_per_request = 2;
    w.seed = 9;
    const TreeSampledWorkload workload = *GenerateTreeSampledWorkload(w);
    const v1::VerifyRequest request =
        draft_probs ? *client::BuildTreeSampledRequest(workload, 0, "", 8, v1::KV_RETURN_INLINE)
                    : *client::BuildTreeSampledRequest(workload, 0);
    written += Write(dir, absl::StrCat("tree-sampled-", draft_probs ? "fp32-draft-kv" : "bf16"),
                     request);
  }
  std::printf("wrote %d seed requests to %s\n", written, dir.c_str());
  return written == 20 ? 0 : 1;
}
