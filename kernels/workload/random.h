// Deterministic, platform-independent pseudo-random numbers for synthetic
// workloads. std:: distributions are implementation-defined, and a workload
// must be identical wherever it is regenerated (test machine, GPU machine,
// load generator checking a server's answers), so this header fixes the
// algorithms: SplitMix64 (Steele et al. 2014) for streams and key mixing.
#ifndef SPECVERIFY_KERNELS_WORKLOAD_RANDOM_H_
#define SPECVERIFY_KERNELS_WORKLOAD_RANDOM_H_

#include <cstdint>

namespace specverify {

// One SplitMix64 finalizer step: a bijective 64-bit mix.
constexpr uint64_t MixBits(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Key for an independent stream derived from a parent seed and an index
// (a request number, a sequence number, ...).
constexpr uint64_t DeriveSeed(uint64_t seed, uint64_t index) {
  return MixBits(seed ^ MixBits(index + 0x9e3779b97f4a7c15ULL));
}

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}

  constexpr uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return MixBits(state_);
  }
  // Uniform in [0, 1) with 53 bits of precision.
  constexpr double NextDouble() { return (Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, bound), bound > 0 (Lemire's multiply-shift; the
  // bias for bound << 2^64 is far below anything a test could observe).
  constexpr uint64_t NextBelow(uint64_t bound) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }
  // Number of successes in `trials` Bernoulli(p) draws.
  constexpr int32_t NextBinomial(int32_t trials, double p) {
    int32_t successes = 0;
    for (int32_t t = 0; t < trials; ++t) successes += NextDouble() < p ? 1 : 0;
    return successes;
  }

 private:
  uint64_t state_;
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_WORKLOAD_RANDOM_H_
