#ifndef SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_

// Private to rejection_sample.cu: the per-sequence race result as one 64-bit
// word, so that the G race blocks of a sequence agree on the winner with one
// atomicMax each instead of partials and a merging pass; the ticket whose
// last taker writes the outcome; and the programmatic-dependent-launch hooks
// of the logits chain (row pass, combine, filter, race).

#include <cstdint>

#include "kernels/sampling/rejection_core.h"

namespace specverify::race_result {

// 0: no entrant (the value the scratch is cleared to).
constexpr unsigned long long kNoWord = 0;

// The word is the bitwise NOT of a rank where smaller is better:
//   bit 63      0 residual race, 1 target race (any residual entrant beats
//               every target entrant: the target race only decides when the
//               row has no residual entrant)
//   bits 20..51 the key's float bits (keys are >= 0 or +inf, never NaN, so
//               their bits order as the floats do)
//   bits 0..19  the token (V <= 2^20, so the token fits)
// so the largest word is the smallest key and, on equal keys, the lower token
// -- RaceBeats exactly. A real entrant's word is >= ~(2^63 + 2^52) > 0.
__device__ __forceinline__ unsigned long long Word(const rejection::RaceCandidate& c, bool target_race) {
  if (c.token < 0) return kNoWord;
  const unsigned long long rank = (static_cast<unsigned long long>(target_race) << 63) |
                                  (static_cast<unsigned long long>(__float_as_uint(c.key)) << 20) |
                                  static_cast<unsigned long long>(static_cast<uint32_t>(c.token));
  return ~rank;
}

__device__ __forceinline__ unsigned long long Better(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}

__device__ __forceinline__ int32_t Token(unsigned long long word) {
  return static_cast<int32_t>(~word & 0xfffffu);
}

// One ticket of a sequence's race blocks, taken after the block's atomics on
// the word and flags. acq_rel at device scope: those atomics happen before
// the ticket, and the block that takes the last ticket sees every other
// block's. Returns the tickets taken before this one.
__device__ __forceinline__ uint32_t TakeTicket(uint32_t* ticket) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  uint32_t before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(ticket) : "memory");
  return before;
#else
  __threadfence();
  const uint32_t before = atomicAdd(ticket, 1u);
  __threadfence();
  return before;
#endif
}

// sm_90: let the dependent grid be scheduled now. Below sm_90 dependents are
// launched in plain stream order and this is nothing.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// sm_90: wait until the primary grid has completed and its writes are
// visible. Without the launch attribute (devices below 9.0) the kernel only
// starts after the primary grid anyway, and on them this compiles to nothing.
__device__ __forceinline__ void WaitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace specverify::race_result

#endif  // SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_
