// A greedy workload uploaded to device memory, with poisoning and download
// helpers for parity tests.
#ifndef SPECVERIFY_TESTS_KERNELS_GREEDY_GREEDY_CUDA_TEST_UTIL_H_
#define SPECVERIFY_TESTS_KERNELS_GREEDY_GREEDY_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/common/cuda_status.h"
#include "kernels/common/status_macros.h"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/workload/greedy_workload.h"

namespace specverify {

// Every device output byte is set to this before a run; it is neither 0 nor
// a value the kernels write by accident (0xC3C3C3C3 is a negative int32).
inline constexpr std::byte kDevicePoison{0xC3};

class DeviceGreedyBatch {
 public:
  static absl::StatusOr<DeviceGreedyBatch> Upload(const GreedyWorkload& w) {
    DeviceGreedyBatch d;
    const int32_t b = w.num_sequences();
    const int64_t rows = w.total_draft_rows();
    d.host_input_ = w.input();
    SV_ASSIGN_OR_RETURN(d.offsets_, Copy(w.draft_offsets.data(),
                                         sizeof(int32_t) * (b + 1)));
    SV_ASSIGN_OR_RETURN(d.draft_, Copy(w.draft_tokens.data(), sizeof(int32_t) * rows));
    SV_ASSIGN_OR_RETURN(d.target_, Copy(w.target_tokens.data(),
                                        sizeof(int32_t) * (rows + b)));
    SV_ASSIGN_OR_RETURN(d.kv_, Copy(w.draft_kv.data(), w.draft_kv.size()));
    SV_ASSIGN_OR_RETURN(d.accepted_, DeviceBuffer::Create(sizeof(int32_t) * b));
    SV_ASSIGN_OR_RETURN(d.next_, DeviceBuffer::Create(sizeof(int32_t) * b));
    SV_ASSIGN_OR_RETURN(d.mismatch_, DeviceBuffer::Create(b));
    SV_ASSIGN_OR_RETURN(d.packed_offsets_,
                        DeviceBuffer::Create(sizeof(int32_t) * (b + 1)));
    SV_ASSIGN_OR_RETURN(d.packed_, DeviceBuffer::Create(w.draft_kv.size()));

    GreedyDeviceBatch& v = d.view_;
    v.params.input.num_sequences = b;
    v.params.input.draft_offsets = d.offsets_.as<int32_t>();
    v.params.input.draft_tokens = d.draft_.as<int32_t>();
    v.params.input.target_tokens = d.target_.as<int32_t>();
    v.params.input.draft_kv = d.kv_.as<std::byte>();
    v.params.input.row_bytes = w.row_bytes();
    v.params.output.accepted_lengths = d.accepted_.as<int32_t>();
    v.params.output.next_tokens = d.next_.as<int32_t>();
    v.params.output.mismatch = d.mismatch_.as<uint8_t>();
    v.params.output.packed_row_offsets = d.packed_offsets_.as<int32_t>();
    v.params.output.packed_kv = d.packed_.as<std::byte>();
    v.total_draft_rows = rows;
    v.max_gamma = 0;
    for (int32_t i = 0; i < b; ++i) v.max_gamma = std::max(v.max_gamma, w.gamma(i));
    return d;
  }

  const GreedyDeviceBatch& view() const { return view_; }

  // Sets every output byte to kDevicePoison and waits for it.
  absl::Status Poison() const {
    for (const DeviceBuffer* buf :
         {&accepted_, &next_, &mismatch_, &packed_offsets_, &packed_}) {
      if (buf->size() == 0) continue;
      SV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          buf->data(), static_cast<int>(kDevicePoison), buf->size(), nullptr));
    }
    SV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return absl::OkStatus();
  }

  // Waits for the device and copies every output back.
  absl::StatusOr<GreedyHostOutputs> Download() const {
    SV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    GreedyHostOutputs out(host_input_, std::byte{0});
    SV_RETURN_IF_ERROR(Back(out.accepted_lengths.data(), accepted_));
    SV_RETURN_IF_ERROR(Back(out.next_tokens.data(), next_));
    SV_RETURN_IF_ERROR(Back(out.mismatch.data(), mismatch_));
    SV_RETURN_IF_ERROR(Back(out.packed_row_offsets.data(), packed_offsets_));
    SV_RETURN_IF_ERROR(Back(out.packed_kv.data(), packed_));
    return out;
  }

 private:
  static absl::StatusOr<DeviceBuffer> Copy(const void* src, size_t bytes) {
    SV_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Create(bytes));
    if (bytes > 0) {
      SV_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(buf.data(), src, bytes, cudaMemcpyHostToDevice));
    }
    return buf;
  }
  static absl::Status Back(void* dst, const DeviceBuffer& src) {
    if (src.size() == 0) return absl::OkStatus();
    SV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

  GreedyBatchInput host_input_;  // host view, for sizing the downloads
  DeviceBuffer offsets_, draft_, target_, kv_;
  DeviceBuffer accepted_, next_, mismatch_, packed_offsets_, packed_;
  GreedyDeviceBatch view_;
};

}  // namespace specverify

#endif  // SPECVERIFY_TESTS_KERNELS_GREEDY_GREEDY_CUDA_TEST_UTIL_H_
