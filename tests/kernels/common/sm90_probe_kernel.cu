// A kernel compiled with the build's CUDA architectures, and the list of
// those architectures, for sm90_code_test.cc.
#include "tests/kernels/common/sm90_probe_kernel.h"

#include <cuda_runtime.h>

namespace specverify::testing {
namespace {

__global__ void Sm90ProbeKernel(int* out) {
  if (out != nullptr) *out = 1;
}

}  // namespace

const void* Sm90ProbeKernelAddress() { return reinterpret_cast<const void*>(&Sm90ProbeKernel); }

std::vector<int> BuildCudaArchitectures() {
#ifdef __CUDA_ARCH_LIST__
  return {__CUDA_ARCH_LIST__};
#else
  return {};
#endif
}

}  // namespace specverify::testing
