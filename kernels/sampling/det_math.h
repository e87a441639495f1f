// Bit-reproducible float math shared by the CPU reference and the CUDA kernels.
//
// Why: a sampled token depends on a handful of float values (a race key, an
// acceptance probability, a softmax normalizer). glibc's expf/logf and CUDA's
// differ by an ulp now and then, and nvcc contracts a*b+c into an FMA where the
// host compiler does not, so "the same formula" computes different bits on the
// two sides and, rarely, a different token. Everything here is built only from
// IEEE-754 correctly rounded operations (add, mul, div, conversions, bit
// manipulation) written so neither compiler can fuse or reorder them: on the
// device through the __fadd_rn/__fmul_rn intrinsics (never contracted), on the
// host through plain operators (the project builds with -std=c++20, i.e.
// -ffp-contract=off, and x86-64 float math is SSE). Same inputs, same bits.
//
// Accuracy: ExpDet and LogDet are the Cephes single-precision polynomials
// evaluated without FMA, within 2 ulp of the true value over the ranges used.
#ifndef SPECVERIFY_KERNELS_SAMPLING_DET_MATH_H_
#define SPECVERIFY_KERNELS_SAMPLING_DET_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SV_HD __host__ __device__ __forceinline__
#else
#define SV_HD inline
#endif

namespace specverify::detmath {

SV_HD float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

SV_HD uint32_t FloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

// Correctly rounded, never fused.
SV_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SV_HD float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SV_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SV_HD float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
// a * b + c rounded once (IEEE-754 fusedMultiplyAdd): the same bits from the
// GPU's FFMA and the host's std::fma (correctly rounded by the C standard;
// glibc dispatches to the FMA instruction where the CPU has one).
SV_HD float Fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
SV_HD double AddD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SV_HD double MulD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

SV_HD bool IsFinite(float f) { return (FloatToBits(f) & 0x7f800000u) != 0x7f800000u; }

// 2^n for n in [-126, 127] as an exact float.
SV_HD float Pow2(int32_t n) { return BitsToFloat(static_cast<uint32_t>(n + 127) << 23); }

// e^x = y * 2^n before ExpDet's scaling: the Cephes range reduction and
// polynomial, shared by ExpDet and ExpDetBranchFree so their bits agree.
struct ExpDetSplit {
  float y;
  int32_t n;
};
SV_HD ExpDetSplit ExpDetReduce(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f;     // ln 2, high part (exact in 9 bits)
  constexpr float kC2 = -2.12194440e-4f;  // ln 2 - kC1
  // n = round-half-even(x / ln 2) with the 1.5 * 2^23 trick: two exact adds
  // and a bit subtraction, no float<->int conversion (those issue at 1/8 of
  // the FMA rate on sm_90, and this runs once per vocabulary element).
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
  const float shifted = Add(Mul(x, kLog2e), kRoundMagic);
  const float nf = Sub(shifted, kRoundMagic);
  const int32_t n = static_cast<int32_t>(FloatToBits(shifted) - FloatToBits(kRoundMagic));
  float r = Sub(x, Mul(nf, kC1));
  r = Sub(r, Mul(nf, kC2));
  const float z = Mul(r, r);
  float y = 1.9875691500e-4f;
  y = Add(Mul(y, r), 1.3981999507e-3f);
  y = Add(Mul(y, r), 8.3334519073e-3f);
  y = Add(Mul(y, r), 4.1665795894e-2f);
  y = Add(Mul(y, r), 1.6666665459e-1f);
  y = Add(Mul(y, r), 5.0000001201e-1f);
  y = Add(Add(Mul(y, z), r), 1.0f);
  return ExpDetSplit{y, n};
}

// e^x. x <= -103.5 gives 0 (below the smallest subnormal), x >= 88.72 gives +inf.
SV_HD float ExpDet(float x) {
  if (!(x > -103.5f)) return 0.0f;  // also maps NaN to 0; callers validate first
  if (x >= 88.72f) return BitsToFloat(0x7f800000u);
  const ExpDetSplit e = ExpDetReduce(x);
  // Scale by 2^n in two exact steps so results in the subnormal range work.
  if (e.n < -126) return Mul(Mul(e.y, Pow2(e.n + 64)), Pow2(-64));
  if (e.n > 127) return Mul(Mul(e.y, Pow2(e.n - 1)), 2.0f);
  return Mul(e.y, Pow2(e.n));
}

// ExpDet bit for bit without branches: the same operations, the special
// cases as selects (multiplying by 1 is exact). The race's exact
// log-probability weights evaluate two of these and a LogDet on one chain,
// and ExpDet's early returns and scaling branches split it into blocks the
// compiler could not interleave.
SV_HD float ExpDetBranchFree(float x) {
  const ExpDetSplit reduced = ExpDetReduce(x);
  const int32_t n = reduced.n;
  const bool low = n < -126, high = n > 127;
  // Clamped so the bits are a float's whatever x is (the selects below
  // discard the result for x outside (-103.5, 88.72)).
  const int32_t e = low ? n + 64 : (high ? n - 1 : n);
  const float first = Pow2(e < -126 ? -126 : (e > 127 ? 127 : e));
  const float second = low ? Pow2(-64) : (high ? 2.0f : 1.0f);
  const float scaled = Mul(Mul(reduced.y, first), second);
  return !(x > -103.5f) ? 0.0f : (x >= 88.72f ? BitsToFloat(0x7f800000u) : scaled);
}

// min / max as fminf / fmaxf (a NaN operand yields the other one), the same on
// both sides.
SV_HD float MinF(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fminf(a, b);
#else
  return std::fmin(a, b);
#endif
}
SV_HD float MaxF(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// 2^t, within 1 ulp of the true value for normal results (subnormal ones
// within 2^-149): 0 below about -150 (and for NaN), +inf from 128. Branch-free,
// about 20 instructions on the GPU (FMA Horner polynomial, no select): the
// softmax normalizer evaluates it once per vocabulary element
// (LogitWeight), where ExpDet's FMA-free polynomial and branches made the
// pass compute-bound.
// 2^t = p * 2^n for t in [-152, 129]: n = round-half-even(t), p = 2^(t - n)
// in [0.70, 1.42] (Exp2Det's reduction and polynomial).
struct Exp2Split {
  float p;
  int32_t n;
};
SV_HD Exp2Split Exp2Reduce(float t) {
  // n = round-half-even(t) with the 1.5 * 2^23 trick; r = t - n is exact, in [-0.5, 0.5].
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
  const float shifted = Add(t, kRoundMagic);
  const float nf = Sub(shifted, kRoundMagic);
  const int32_t n = static_cast<int32_t>(FloatToBits(shifted) - FloatToBits(kRoundMagic));
  const float r = Sub(t, nf);
  // 2^r = 1 + r * Q(r), Q a degree-5 fit of (2^r - 1) / r on [-0.5, 0.5]
  // (relative error of the fit 2e-9).
  float q = 1.535320480e-4f;
  q = Fma(q, r, 1.339883078e-3f);
  q = Fma(q, r, 9.618437849e-3f);
  q = Fma(q, r, 5.550332740e-2f);
  q = Fma(q, r, 2.402264774e-1f);
  q = Fma(q, r, 6.931471825e-1f);
  return Exp2Split{Fma(q, r, 1.0f), n};
}

SV_HD float Exp2Det(float t) {
  // Clamping keeps every step below exact and in range; -152 (also NaN's
  // image) still rounds to 0 and 129 overflows to +inf in the final multiply.
  t = MinF(MaxF(t, -152.0f), 129.0f);
  const Exp2Split e = Exp2Reduce(t);
  // p * 2^n in two steps: an exact exponent add of n1 = clamp(n, -125, 127)
  // (the result stays normal), then one rounding multiply by 2^(n - n1), n - n1
  // in [-27, 2] (1 unless the result is subnormal or overflows).
  const int32_t n1 = e.n < -125 ? -125 : (e.n > 127 ? 127 : e.n);
  return Mul(BitsToFloat(FloatToBits(e.p) + (static_cast<uint32_t>(n1) << 23)), Pow2(e.n - n1));
}

// Exp2Det(t) for t in [-125, 0], bit for bit, in about 14 instructions
// instead of 21: there the clamps change nothing, n lies in [-125, 0], and
// p * 2^n is the exact exponent add alone (the multiply by 2^0 is exact). The
// softmax normalizer's row pass, issue-bound on this exp, takes it when a
// thread's smallest exponent is in range (sampling_math_test compares the two
// over the whole range).
SV_HD float Exp2DetNonPositive(float t) {
  const Exp2Split e = Exp2Reduce(t);
  return BitsToFloat(FloatToBits(e.p) + (static_cast<uint32_t>(e.n) << 23));
}

// Natural log of a positive normal float (the uniforms here are >= 2^-24).
SV_HD float LogDet(float x) {
  uint32_t bits = FloatToBits(x);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 126;
  float m = BitsToFloat((bits & 0x007fffffu) | 0x3f000000u);  // m in [0.5, 1)
  constexpr float kSqrtHalf = 0.707106781186547524f;
  if (m < kSqrtHalf) {
    e -= 1;
    m = Sub(Add(m, m), 1.0f);
  } else {
    m = Sub(m, 1.0f);
  }
  const float z = Mul(m, m);
  float y = 7.0376836292e-2f;
  y = Sub(Mul(y, m), 1.1514610310e-1f);
  y = Add(Mul(y, m), 1.1676998740e-1f);
  y = Sub(Mul(y, m), 1.2420140846e-1f);
  y = Add(Mul(y, m), 1.4249322787e-1f);
  y = Sub(Mul(y, m), 1.6668057665e-1f);
  y = Add(Mul(y, m), 2.0000714765e-1f);
  y = Sub(Mul(y, m), 2.4999993993e-1f);
  y = Add(Mul(y, m), 3.3333331174e-1f);
  y = Mul(Mul(y, m), z);
  // e as a float without an int->float conversion (|e| < 2^22: exact).
  const float ef = Sub(BitsToFloat(FloatToBits(12582912.0f) + static_cast<uint32_t>(e)), 12582912.0f);
  y = Add(y, Mul(-2.12194440e-4f, ef));
  y = Sub(y, Mul(0.5f, z));
  float result = Add(m, y);
  result = Add(result, Mul(0.693359375f, ef));
  return result;
}

// Half-precision storage formats, converted exactly (every fp16 and bf16 value
// is a float).
SV_HD float BFloat16BitsToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

SV_HD float Float16BitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = Mul(static_cast<float>(mantissa), 5.9604644775390625e-8f);
  return sign ? -magnitude : magnitude;
}

// Round-to-nearest-even float -> storage format, for workload generation.
inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t bits = FloatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline uint16_t FloatToFloat16Bits(float f) {
  const uint32_t bits = FloatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
  if (abs_bits < 0x33000001u) return sign;              // below half the smallest subnormal
  int32_t exponent = static_cast<int32_t>(abs_bits >> 23) - 127;
  uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
  int32_t shift = 13;
  if (exponent < -14) shift += -14 - exponent;  // subnormal half
  const uint32_t half_ulp = 1u << (shift - 1);
  uint32_t rounded = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  if (rest > half_ulp || (rest == half_ulp && (rounded & 1u))) ++rounded;
  if (exponent < -14) return sign | static_cast<uint16_t>(rounded);
  // rounded includes the implicit bit; a carry into bit 11 bumps the exponent.
  return sign | static_cast<uint16_t>(((exponent + 15) << 10) + (rounded - 0x400u));
}

}  // namespace specverify::detmath

#endif  // SPECVERIFY_KERNELS_SAMPLING_DET_MATH_H_
