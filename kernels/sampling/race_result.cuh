#ifndef SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_

// Private to rejection_sample.cu: the per-sequence race result as one 64-bit
// word, so that the G race blocks of a sequence agree on the winner with one
// atomicMax each instead of partials and a merging pass; the ticket whose
// last taker writes the outcome; and the programmatic-dependent-launch hooks
// of the logits chain (row pass, combine, filter, race).

#include <cstdint>

#include "kernels/sampling/rejection_core.h"
#include "kernels/sampling/rejection_params.h"

namespace specverify::race_result {

// 0: no entrant (the value the scratch is cleared to; rejection_params.h's
// kRaceNoEntrant, which the host fold of race slots also reads).
constexpr unsigned long long kNoWord = kRaceNoEntrant;

// The word (RaceWord in rejection_params.h) of a block's winner, or no entrant.
__device__ __forceinline__ unsigned long long Word(const rejection::RaceCandidate& c, bool target_race) {
  if (c.token < 0) return kNoWord;
  return RaceWord(c.key, c.token, target_race);
}

__device__ __forceinline__ unsigned long long Better(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
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
// visible. Code compiled below sm_90 has no wait, so the launcher sets the
// launch attribute only where the device runs sm_90 code
// (kernels/common/sm90_code.h); without it the kernel only starts after the
// primary grid anyway.
__device__ __forceinline__ void WaitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace specverify::race_result

#endif  // SPECVERIFY_KERNELS_SAMPLING_RACE_RESULT_CUH_
