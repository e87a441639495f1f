// Division by a divisor known only at launch, without the ~25 instructions
// of a 32-bit unsigned division: the host derives a multiplier once per
// launch and every block divides its index by one multiply-high, an add and
// a shift (the round-up method of Granlund and Montgomery, "Division by
// invariant integers using multiplication", 1994). The runs-of-chunks and
// full-row-check kernels, issue-bound on 16-bit rows, split their block
// index into row and chunk with it (the one-chunk pass measured slower with
// it and keeps its division: bench/sampling/results/2026-11-29-pass-overhead).
#ifndef SPECVERIFY_KERNELS_SAMPLING_FAST_DIVISOR_H_
#define SPECVERIFY_KERNELS_SAMPLING_FAST_DIVISOR_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SV_FD_HD __host__ __device__ __forceinline__
#else
#define SV_FD_HD inline
#endif

namespace specverify {

// n / d for every n < 2^31 and every d in [1, 2^31).
struct FastDivisor {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  // With l = ceil(log2 d): m = floor(2^32 (2^l - d) / d) + 1 < 2^32, and
  // n / d = (mulhi(n, m) + n) >> l; mulhi(n, m) <= n, so the sum stays below
  // 2^32 for n < 2^31.
  static FastDivisor For(uint32_t d) {
    FastDivisor f;
    f.divisor = d;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    f.shift = l;
    f.multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << l) - d)) / d + 1);
    return f;
  }

  SV_FD_HD uint32_t Quotient(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
  SV_FD_HD uint32_t Remainder(uint32_t n, uint32_t quotient) const { return n - quotient * divisor; }
};

}  // namespace specverify

#undef SV_FD_HD

#endif  // SPECVERIFY_KERNELS_SAMPLING_FAST_DIVISOR_H_
