// CPU reference of rejection sampling (the CPU backend's sampler and the GPU
// kernels' oracle): wall time of ReferenceRejectionSample on one thread, per
// batch, for the workload generator's rows. Prints a digest of the outputs so
// two builds can be compared on the same inputs (same digest: same tokens).
//
// Usage: reference_bench [--runs N] [--only KIND,B,GAMMA,V] [--dtype fp32|bf16|fp16]
// KIND is logits, probabilities or logprobs. Without --only: the headline
// shape (B=8, gamma=8, V=151,936) of every kind, logits also in bf16, and
// logits at B=1.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/sampling/rejection_reference.h"
#include "kernels/workload/sampling_workload.h"

namespace specverify {
namespace {

struct Shape {
  SampleValueKind kind;
  SampleDtype dtype;
  int32_t b, gamma, vocab;
};

const char* KindName(SampleValueKind k) {
  return k == SampleValueKind::kLogits ? "logits" : k == SampleValueKind::kProbabilities ? "probabilities" : "logprobs";
}
const char* DtypeName(SampleDtype d) {
  return d == SampleDtype::kFloat32 ? "fp32" : d == SampleDtype::kBFloat16 ? "bf16" : "fp16";
}

int Run(const Shape& shape, int runs) {
  SamplingWorkloadOptions o;
  o.num_sequences = shape.b;
  o.gamma_min = o.gamma_max = shape.gamma;
  o.vocab_size = shape.vocab;
  o.kind = shape.kind;
  o.dtype = shape.dtype;
  const absl::StatusOr<SamplingWorkload> w = GenerateSamplingWorkload(o);
  if (!w.ok()) {
    std::fprintf(stderr, "workload: %s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  std::vector<double> ms;
  uint64_t digest = 1469598103934665603ull;
  for (int run = 0; run < runs; ++run) {
    RejectionHostOutputs out(shape.b, 0xab);
    const RejectionSampleParams params{w->input(), out.view()};
    const auto start = std::chrono::steady_clock::now();
    ReferenceRejectionSample(params);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (run == 0) {
      for (int32_t i = 0; i < shape.b; ++i) {
        for (const int64_t v : {int64_t{out.accepted_lengths[i]}, int64_t{out.next_tokens[i]},
                                int64_t{out.status_codes[i]}}) {
          digest = (digest ^ static_cast<uint64_t>(v)) * 1099511628211ull;
        }
      }
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-13s %-4s B=%-3d gamma=%-2d V=%-6d  median %9.2f ms  min %9.2f ms  per sequence %8.2f ms"
              "  digest %016llx\n",
              KindName(shape.kind), DtypeName(shape.dtype), shape.b, shape.gamma, shape.vocab, ms[ms.size() / 2],
              ms.front(), ms[ms.size() / 2] / shape.b, static_cast<unsigned long long>(digest));
  std::fflush(stdout);
  return 0;
}

int Main(int argc, char** argv) {
  int runs = 5;
  std::vector<Shape> shapes;
  SampleDtype dtype = SampleDtype::kFloat32;
  bool dtype_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      dtype_given = true;
      if (d == "fp32") {
        dtype = SampleDtype::kFloat32;
      } else if (d == "bf16") {
        dtype = SampleDtype::kBFloat16;
      } else if (d == "fp16") {
        dtype = SampleDtype::kFloat16;
      } else {
        std::fprintf(stderr, "--dtype fp32|bf16|fp16\n");
        return 2;
      }
    } else if (a == "--only" && i + 1 < argc) {
      char kind[32] = {};
      Shape s{SampleValueKind::kLogits, SampleDtype::kFloat32, 0, 0, 0};
      if (std::sscanf(argv[++i], "%31[a-z],%d,%d,%d", kind, &s.b, &s.gamma, &s.vocab) != 4 || s.b < 1 ||
          s.gamma < 1 || s.vocab < 2) {
        std::fprintf(stderr, "--only KIND,B,GAMMA,V (B, GAMMA >= 1, V >= 2)\n");
        return 2;
      }
      const std::string k = kind;
      if (k == "logits") {
        s.kind = SampleValueKind::kLogits;
      } else if (k == "probabilities") {
        s.kind = SampleValueKind::kProbabilities;
      } else if (k == "logprobs") {
        s.kind = SampleValueKind::kLogProbabilities;
      } else {
        std::fprintf(stderr, "KIND: logits, probabilities or logprobs\n");
        return 2;
      }
      shapes.push_back(s);
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--only KIND,B,GAMMA,V] [--dtype fp32|bf16|fp16]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1) {
    std::fprintf(stderr, "--runs N: N >= 1\n");
    return 2;
  }
  if (shapes.empty()) {
    constexpr int32_t kV = 151936;
    shapes = {{SampleValueKind::kLogits, SampleDtype::kFloat32, 8, 8, kV},
              {SampleValueKind::kLogits, SampleDtype::kBFloat16, 8, 8, kV},
              {SampleValueKind::kLogits, SampleDtype::kFloat32, 1, 8, kV},
              {SampleValueKind::kProbabilities, SampleDtype::kFloat32, 8, 8, kV},
              {SampleValueKind::kLogProbabilities, SampleDtype::kFloat32, 8, 8, kV}};
  }
  for (Shape& s : shapes) {
    if (dtype_given) s.dtype = dtype;
    if (const int rc = Run(s, runs); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace specverify

int main(int argc, char** argv) { return specverify::Main(argc, argv); }
