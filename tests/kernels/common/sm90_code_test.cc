// KernelRunsSm90Code decides whether the launchers use programmatic dependent
// launches and clusters. On an sm_90 device it must say yes for a build with
// compute_90 code (or every sampled batch loses its overlapped launches) and
// no for a build of older code alone, whose JIT-compiled kernels have no
// griddepcontrol.wait (or every sampled result is wrong:
// bench/sampling/results/2026-11-29-portable-ptx).
#include "kernels/common/sm90_code.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"
#include "kernels/common/cuda_status.h"
#include "tests/kernels/common/sm90_probe_kernel.h"

namespace specverify {
namespace {

TEST(Sm90CodeTest, SaysWhetherTheDeviceRunsThisBuildsSm90Code) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: the sm_90 code probe skipped";
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  const std::vector<int> archs = testing::BuildCudaArchitectures();
  ASSERT_FALSE(archs.empty()) << "nvcc did not define __CUDA_ARCH_LIST__";
  const int newest = *std::max_element(archs.begin(), archs.end());
  bool yes = false;
  ASSERT_EQ(KernelRunsSm90Code(testing::Sm90ProbeKernelAddress(), &yes), cudaSuccess);
  const std::string built = absl::StrJoin(archs, ",");
  if (major < 9 || newest < 900) {
    EXPECT_FALSE(yes) << "device major " << major << ", build " << built;
  } else if (major == 9 && std::find(archs.begin(), archs.end(), 900) != archs.end()) {
    // sm_90 machine code or compute_90 PTX: either is what an sm_90 device runs.
    EXPECT_TRUE(yes) << "build " << built;
  } else {
    GTEST_SKIP() << "device major " << major << " with build " << built
                 << ": which image the driver picks depends on real vs virtual architectures";
  }
}

}  // namespace
}  // namespace specverify
