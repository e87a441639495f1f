// Hopper bulk copies (TMA, non-tensor form), the mbarriers that complete
// them, and the programmatic-dependent-launch hooks, for the greedy
// prefix-first path's staged tiles. Private to kernels/greedy/greedy_cuda.cu.
//
// Only meaningful when compiled for sm_90 or later: every function is a no-op
// below that (the host launches the staged kernel only on compute capability
// >= 9; the staged kernel compiled for older targets is never launched).
//
// Contracts (PTX ISA, cp.async.bulk): sizes are multiples of 16 bytes, both
// addresses 16-byte aligned; the mbarrier counts at most 2^20 - 1 bytes of
// pending transactions per phase.
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_TMA_CUH_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_TMA_CUH_

#include <cstdint>

namespace specverify::greedy_tma {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
inline constexpr bool kAvailable = true;
#else
inline constexpr bool kAvailable = false;
#endif

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread: arms `barrier` (arrival count 1) and makes the initialization
// visible to the async proxy. The block must pass a barrier before any other
// thread waits on it.
__device__ __forceinline__ void InitBarrier(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
                   SharedAddress(barrier))
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// One thread: as InitBarrier for barriers[0 .. n), one fence for all.
__device__ __forceinline__ void InitBarriers(uint64_t* barriers, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int i = 0; i < n; ++i) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
                     SharedAddress(barriers + i))
                 : "memory");
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The initializing thread: the one arrival of phase 0, expecting `bytes` of
// bulk-copy transactions.
__device__ __forceinline__ void ArriveExpectBytes(uint64_t* barrier,
                                                  uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
          SharedAddress(barrier)),
      "r"(bytes)
      : "memory");
#endif
}

// Global -> shared bulk copy completing on `barrier`.
__device__ __forceinline__ void LoadToShared(void* dst_shared,
                                             const void* src_global,
                                             uint32_t bytes,
                                             uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];" ::"r"(SharedAddress(dst_shared)),
      "l"(src_global), "r"(bytes), "r"(SharedAddress(barrier))
      : "memory");
#endif
}

// Blocks until phase 0 of `barrier` completed (every expected byte landed).
__device__ __forceinline__ void WaitPhaseZero(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(SharedAddress(barrier))
        : "memory");
  } while (done == 0);
#endif
}

// Shared -> global bulk copy in the calling thread's bulk group.
__device__ __forceinline__ void StoreFromShared(void* dst_global,
                                                const void* src_shared,
                                                uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
          dst_global),
      "r"(SharedAddress(src_shared)), "r"(bytes)
      : "memory");
#endif
}

// Programmatic dependent launch (sm_90; nothing below it, where the host
// launches the dependent grid in plain stream order).
// Primary grid: its dependents may be scheduled once every block of this grid
// has executed this or exited. Memory clobber: no access moves across it.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Dependent grid: blocks until the primary grid has completed and its writes
// are visible. Nothing the primary writes may be read before this.
__device__ __forceinline__ void WaitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Commits the calling thread's bulk stores and waits until they are complete
// (written to global memory, the shared source free to go).
__device__ __forceinline__ void CommitAndWaitStores() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

}  // namespace specverify::greedy_tma

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_TMA_CUH_
