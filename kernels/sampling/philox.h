// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based generator of rejection sampling. Implemented once
// for host and device so the CPU reference and the CUDA kernels draw the very
// same numbers; known-answer vectors from Random123's tests/kat_vectors are
// checked in tests/kernels/sampling/philox_test.cc.
//
// Keying (docs/SAMPLING.md): key = the request seed (64 bits); counter =
// (sequence index within its request, position, token block, stream). A number
// therefore depends only on what it decides, never on batch composition, on
// which block or thread computes it, or on the backend.
#ifndef SPECVERIFY_KERNELS_SAMPLING_PHILOX_H_
#define SPECVERIFY_KERNELS_SAMPLING_PHILOX_H_

#include <cstdint>

#include "kernels/sampling/det_math.h"

namespace specverify {

struct Philox4x32 {
  uint32_t v[4];
};

SV_HD void MulHiLo32(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  hi = __umulhi(a, b);
  lo = a * b;
#else
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
#endif
}

SV_HD Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo32(kM0, c0, hi0, lo0);
    MulHiLo32(kM1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ key0;
    const uint32_t n2 = hi0 ^ c3 ^ key1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    key0 += kW0;
    key1 += kW1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// Streams: which decision a number serves. Part of the counter so the two
// never share numbers.
inline constexpr uint32_t kStreamAcceptCoin = 0;  // one per (sequence, position)
inline constexpr uint32_t kStreamRace = 1;        // one per (sequence, position, token)

// A float strictly inside (0, 1): odd multiples of 2^-24, from 2^-24 to
// 1 - 2^-24 (23 random bits). Never 0 (so -log u is finite and a coin of 0
// cannot accept a token of zero probability) and never 1.
SV_HD float UniformOpenFloat(uint32_t bits) {
  return detmath::Mul(static_cast<float>((bits >> 9) * 2u + 1u), 5.9604644775390625e-8f);
}

// A double strictly inside (0, 1): odd multiples of 2^-53 (52 random bits;
// 2 * bits + 1 < 2^53 converts exactly).
SV_HD double UniformOpenDouble(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32 | lo) >> 12;  // 52 bits
  return static_cast<double>(bits * 2u + 1u) * 1.1102230246251565e-16;  // * 2^-53
}

// The acceptance coin u_j of sequence `sequence_index` at draft position j.
SV_HD double AcceptCoin(uint64_t seed, uint32_t sequence_index, uint32_t position) {
  const Philox4x32 r = Philox4x32_10(Philox4x32{{sequence_index, position, 0u, kStreamAcceptCoin}},
                                     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return UniformOpenDouble(r.v[0], r.v[1]);
}

// Four race uniforms for tokens 4*block .. 4*block+3 at `position`: one Philox
// call serves four consecutive tokens (token t uses word t % 4).
SV_HD Philox4x32 RaceBits(uint64_t seed, uint32_t sequence_index, uint32_t position,
                          uint32_t token_block) {
  return Philox4x32_10(Philox4x32{{sequence_index, position, token_block, kStreamRace}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The Exp(1) variate E_x = -log(u_x) of the exponential race for one token.
SV_HD float RaceExponential(uint32_t bits) { return -detmath::LogDet(UniformOpenFloat(bits)); }

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_PHILOX_H_
