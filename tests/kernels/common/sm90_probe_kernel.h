// A kernel compiled like the project's kernels, for sm90_code_test.cc.
#ifndef SPECVERIFY_TESTS_KERNELS_COMMON_SM90_PROBE_KERNEL_H_
#define SPECVERIFY_TESTS_KERNELS_COMMON_SM90_PROBE_KERNEL_H_

#include <vector>

namespace specverify::testing {

// A kernel of this build, for cudaFuncGetAttributes.
const void* Sm90ProbeKernelAddress();

// The architectures nvcc compiled device code for (__CUDA_ARCH_LIST__, e.g.
// {750, 900}), real and virtual alike; empty if the compiler does not say.
std::vector<int> BuildCudaArchitectures();

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_KERNELS_COMMON_SM90_PROBE_KERNEL_H_
