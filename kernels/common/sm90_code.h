// Whether a kernel, as the current device runs it, is sm_90 code: what the
// launchers ask before they use programmatic dependent launches or
// thread-block clusters. Plain C++ (cuda_runtime_api.h only).
//
// The device's compute capability alone does not say it. A build carries
// machine code for some architectures and portable compute_75 PTX for the
// rest (CMakeLists.txt: 90-real 75-virtual); on a device it has no machine
// code for (an sm_100 device for that build, or any sm_90 device for a build
// of 80-real;75-virtual) the driver JIT-compiles the PTX, whose kernels were
// compiled without griddepcontrol.wait and clusters. Launched as programmatic
// dependents they read their primary grid's outputs before it has written
// them (every rejection-sampling result wrong, seen on an H200 on
// 2026-11-29: bench/sampling/results/2026-11-29-portable-ptx); a cluster
// kernel traps.
#ifndef SPECVERIFY_KERNELS_COMMON_SM90_CODE_H_
#define SPECVERIFY_KERNELS_COMMON_SM90_CODE_H_

#include <cuda_runtime_api.h>

namespace specverify {

// *yes: the current device is sm_90 or newer and runs `kernel` from code
// compiled for compute_90 or newer (machine code or PTX). All kernels of one
// CUDA translation unit come from the same image, so one kernel answers for
// its file.
inline cudaError_t KernelRunsSm90Code(const void* kernel, bool* yes) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  int major = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); e != cudaSuccess) {
    return e;
  }
  cudaFuncAttributes attributes{};
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  *yes = major >= 9 && attributes.ptxVersion >= 90;
  return cudaSuccess;
}

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_COMMON_SM90_CODE_H_
