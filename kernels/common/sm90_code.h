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

#include <atomic>

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

// KernelRunsSm90Code for one kernel, remembered per device ordinal (the
// answer depends only on the device and the build): the launchers ask
// before every batch. A function-local static per kernel.
class Sm90CodeCache {
 public:
  explicit Sm90CodeCache(const void* kernel) : kernel_(kernel) {}

  cudaError_t Ask(bool* yes) {
    int device = 0;
    if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
    std::atomic<int>* const slot = device >= 0 && device < kDevices ? &known_[device] : nullptr;
    if (slot != nullptr) {
      if (const int known = slot->load(std::memory_order_relaxed); known != 0) {
        *yes = known == 2;
        return cudaSuccess;
      }
    }
    if (cudaError_t e = KernelRunsSm90Code(kernel_, yes); e != cudaSuccess) return e;
    if (slot != nullptr) slot->store(*yes ? 2 : 1, std::memory_order_relaxed);
    return cudaSuccess;
  }

 private:
  static constexpr int kDevices = 64;
  const void* const kernel_;
  std::atomic<int> known_[kDevices] = {};  // 0 unknown, 1 no, 2 yes
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_COMMON_SM90_CODE_H_
