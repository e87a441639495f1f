// CUDA launchers of the row copies (row_copy.h): every pointer is device
// memory or host memory the device maps; asynchronous on `stream`, no sync.
#ifndef SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_CUDA_H_
#define SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_CUDA_H_

#include <cuda_runtime_api.h>

#include "kernels/layout/row_copy.h"

namespace specverify {

cudaError_t LaunchRowGather(const RowGatherParams& p, cudaStream_t stream);
cudaError_t LaunchPackedDelivery(const PackedDeliveryParams& p, cudaStream_t stream);
cudaError_t LaunchAcceptedRowCopy(const AcceptedRowCopyParams& p, cudaStream_t stream);

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_LAYOUT_ROW_COPY_CUDA_H_
