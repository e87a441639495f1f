// Programmatic dependent launch hooks (sm_90) for the greedy prefix-first
// path. Private to kernels/greedy/greedy_cuda.cu.
//
// Below sm_90 both are nothing; the host launches the dependent grid with
// cudaLaunchAttributeProgrammaticStreamSerialization only where the device
// runs this file's sm_90 code (kernels/common/sm90_code.h), so elsewhere
// stream order alone applies.
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_PDL_CUH_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_PDL_CUH_

namespace specverify::greedy_pdl {

// Primary grid: its dependents may be scheduled once every block of this grid
// has executed this or exited. It publishes nothing: the dependent reads the
// primary's outputs only after WaitForPrimaryGrid.
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

}  // namespace specverify::greedy_pdl

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_PDL_CUH_
