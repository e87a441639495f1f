// Helper kernels of the greedy benchmark: the launch floor (an empty kernel),
// a spin that holds the stream while the host queues timed work, and a KV
// fill with a non-zero pattern (never time on zeros).
#ifndef SPECVERIFY_BENCH_GREEDY_BENCH_KERNELS_CUH_
#define SPECVERIFY_BENCH_GREEDY_BENCH_KERNELS_CUH_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace specverify::bench {

cudaError_t LaunchEmptyKernel(cudaStream_t stream);
// Busy-waits about `cycles` SM clock cycles on one thread.
cudaError_t LaunchSpinKernel(int64_t cycles, cudaStream_t stream);
cudaError_t LaunchFillPattern(std::byte* dst, int64_t bytes, uint32_t seed,
                              cudaStream_t stream);

}  // namespace specverify::bench

#endif  // SPECVERIFY_BENCH_GREEDY_BENCH_KERNELS_CUH_
