// Element sizes of the wire's DataType, for every layer that sizes tensors
// (validation at the edge, TensorRef resolution in the regions).
#ifndef SPECVERIFY_SERVER_COMMON_DATA_TYPE_H_
#define SPECVERIFY_SERVER_COMMON_DATA_TYPE_H_

#include <cstdint>

#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

// Bytes per element of `dtype`, or 0 for UNSPECIFIED and unknown values.
inline int64_t DataTypeSize(int dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FLOAT32:
      return 4;
    case v1::DATA_TYPE_FLOAT16:
    case v1::DATA_TYPE_BFLOAT16:
      return 2;
    case v1::DATA_TYPE_UINT8:
    case v1::DATA_TYPE_INT8:
    case v1::DATA_TYPE_FP8_E4M3:
      return 1;
    default:
      return 0;
  }
}

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_COMMON_DATA_TYPE_H_
