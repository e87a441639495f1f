// The worker's side of the data plane (docs/DATA_PLANE.md): memory a worker
// owns and registers with the server, and requests rewritten to reference it.
//
// SharedMemoryRegion creates a POSIX shared-memory object (/dev/shm/<name>)
// and maps it; the server maps the same object when it is registered. The
// object is unlinked when the region is destroyed (the server's own mapping
// stays valid until it unregisters).
//
// RegionWriter lays tensors out inside a region (16-byte aligned, as the
// server requires for distribution rows) and rewrites a request's inline
// tensors into TensorRefs: the bytes are copied into the region once, the
// request then carries only references.
#ifndef SPECVERIFY_CLIENT_REGION_H_
#define SPECVERIFY_CLIENT_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::client {

// Bytes of one row of `ref` (product of shape[1:] times the element size).
int64_t TensorRefRowBytes(const v1::TensorRef& ref);

class SharedMemoryRegion {
 public:
  // Creates /dev/shm/<shm_name> of `bytes` bytes (ALREADY_EXISTS if taken).
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(const std::string& shm_name,
                                                                    int64_t bytes);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  std::byte* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& shm_name() const { return shm_name_; }
  // The RegisterRegion request for this memory under `region_name`.
  v1::RegisterRegionRequest Registration(const std::string& region_name) const;

 private:
  SharedMemoryRegion(std::string shm_name, std::byte* data, int64_t size)
      : shm_name_(std::move(shm_name)), data_(data), size_(size) {}
  std::string shm_name_;
  std::byte* data_;
  int64_t size_;
};

// Bump allocation of tensors inside one registered region of host memory.
class RegionWriter {
 public:
  RegionWriter(std::string region_name, std::byte* base, int64_t size)
      : region_name_(std::move(region_name)), base_(base), size_(size) {}

  // Starts over at offset 0 (the previous request has been answered).
  void Reset() { used_ = 0; }
  int64_t used() const { return used_; }
  // Room for `bytes` (16-byte aligned): its offset, or RESOURCE_EXHAUSTED.
  absl::StatusOr<int64_t> Allocate(int64_t bytes);

  // Moves every inline input tensor of `request` (draft_kv, target and draft
  // distributions) into the region and replaces it by a TensorRef. With
  // `return_into_region`, also reserves room for the packed rows and sets
  // kv_return = KV_RETURN_REGION with kv_output pointing there.
  absl::Status MoveInputsToRegion(v1::VerifyRequest* request, bool return_into_region);
  // The packed rows of a KV_RETURN_REGION answer, as they lie in the region.
  const std::byte* At(int64_t offset) const { return base_ + offset; }

 private:
  absl::StatusOr<v1::TensorRef> Place(const v1::Tensor& tensor);
  std::string region_name_;
  std::byte* base_;
  int64_t size_;
  int64_t used_ = 0;
};

}  // namespace specverify::client

#endif  // SPECVERIFY_CLIENT_REGION_H_
