// Digest of the CPU reference's outputs over 270 workloads (every dtype, kind,
// shape; temperatures, top-k/top-p, no draft rows; planted NaN/+inf/-inf;
// full-row checks). Link against an old and a new libspecverify_sampling_*.a
// and compare the printed digests (README.md). -DLARGE_VOCAB: the same set at
// V = 32,000 / 36,864 / 50,257.
#include <cstdio>
#include <cstring>
#include <string>
#include "kernels/sampling/rejection_reference.h"
#include "kernels/workload/sampling_workload.h"
using namespace specverify;
int main() {
  uint64_t total = 1469598103934665603ull;
  int configs = 0, errors = 0;
  auto mix = [&](uint64_t v) { total = (total ^ v) * 1099511628211ull; };
  for (int dt = 0; dt < 3; ++dt)
  for (int kind = 0; kind < 3; ++kind)
  for (int shape = 0; shape < 5; ++shape)
  for (int variant = 0; variant < 6; ++variant) {
    SamplingWorkloadOptions o;
    o.num_sequences = 6; o.gamma_min = 1; o.gamma_max = 6;
#ifdef LARGE_VOCAB
    o.vocab_size = variant % 3 == 0 ? 32000 : variant % 3 == 1 ? 4096 * 9 : 50257;
#else
    o.vocab_size = variant % 3 == 0 ? 5000 : variant % 3 == 1 ? 4096 * 3 : 777;
#endif
    o.dtype = dt == 0 ? SampleDtype::kFloat32 : dt == 1 ? SampleDtype::kBFloat16 : SampleDtype::kFloat16;
    o.kind = kind == 0 ? SampleValueKind::kLogits : kind == 1 ? SampleValueKind::kProbabilities : SampleValueKind::kLogProbabilities;
    o.shape = static_cast<DistributionShape>(shape);
    o.has_draft_probs = variant != 5;
    if (kind == 0) {
      o.temperature = variant == 1 ? 0.7f : variant == 2 ? 0.0f : variant == 4 ? 1e-3f : 1.0f;
      if (variant == 3) { o.top_k = 20; o.top_p = 0.9f; }
    }
    o.seed = 1000 + configs;
    auto w = GenerateSamplingWorkload(o);
    if (!w.ok()) { std::printf("skip %d: %s\n", configs, std::string(w.status().message()).c_str()); ++configs; continue; }
    if (configs % 5 < 3) {
      // Poison one element: NaN, +inf or -inf, in a target or a draft row.
      auto& bytes = (configs % 2 == 0 || w->draft_values.empty()) ? w->target_values : w->draft_values;
      const int64_t esz = o.dtype == SampleDtype::kFloat32 ? 4 : 2;
      const int64_t at = (static_cast<int64_t>(configs) * 7919) % (static_cast<int64_t>(bytes.size()) / esz);
      const int which = configs % 5;
      if (esz == 4) { uint32_t b = which == 0 ? 0x7fc00000u : which == 1 ? 0x7f800000u : 0xff800000u; std::memcpy(&bytes[at * 4], &b, 4); }
      else if (o.dtype == SampleDtype::kBFloat16) { uint16_t b = which == 0 ? 0x7fc0 : which == 1 ? 0x7f80 : 0xff80; std::memcpy(&bytes[at * 2], &b, 2); }
      else { uint16_t b = which == 0 ? 0x7e00 : which == 1 ? 0x7c00 : 0xfc00; std::memcpy(&bytes[at * 2], &b, 2); }
    }
    RejectionHostOutputs out(o.num_sequences, 0xab);
    RejectionSampleParams p{w->input(), out.view()};
    p.input.validate_full_rows = configs % 3 == 0;
    ReferenceRejectionSample(p);
    for (int i = 0; i < o.num_sequences; ++i) {
      errors += out.status_codes[i] != 0; mix(out.accepted_lengths[i]); mix(out.next_tokens[i]); mix(out.status_codes[i]); mix(out.error_positions[i]);
    }
    ++configs;
  }
  std::printf("errors %d configs %d hash %016llx\n", errors, configs, (unsigned long long)total);
}
