#include "client/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace specverify::client {
namespace {

constexpr int64_t kAlign = 16;  // the server's alignment for rows read in place

int64_t ElementBytes(int dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FLOAT32:
      return 4;
    case v1::DATA_TYPE_FLOAT16:
    case v1::DATA_TYPE_BFLOAT16:
      return 2;
    default:
      return 1;
  }
}

}  // namespace

int64_t TensorRefRowBytes(const v1::TensorRef& ref) {
  int64_t row_bytes = ElementBytes(ref.dtype());
  for (int d = 1; d < ref.shape_size(); ++d) row_bytes *= ref.shape(d);
  return row_bytes;
}

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    const std::string& shm_name, int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError("shared memory of 0 bytes");
  const std::string path = "/" + shm_name;
  const int fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat("shm_open(", path, "): ", std::strerror(err));
    return err == EEXIST ? absl::AlreadyExistsError(what) : absl::InternalError(what);
  }
  if (ftruncate(fd, bytes) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(path.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("ftruncate(", path, ", ", bytes, "): ", std::strerror(err)));
  }
  void* base = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(path.c_str());
    return absl::InternalError(absl::StrCat("mmap(", path, "): ", std::strerror(err)));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(shm_name, static_cast<std::byte*>(base), bytes));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(data_, static_cast<size_t>(size_));
  shm_unlink(("/" + shm_name_).c_str());
}

v1::RegisterRegionRequest SharedMemoryRegion::Registration(const std::string& region_name) const {
  v1::RegisterRegionRequest r;
  r.set_name(region_name);
  r.set_byte_size(size_);
  r.mutable_system()->set_shm_name(shm_name_);
  return r;
}

absl::StatusOr<int64_t> RegionWriter::Allocate(int64_t bytes) {
  const int64_t offset = (used_ + kAlign - 1) / kAlign * kAlign;
  if (bytes < 0 || offset > size_ || bytes > size_ - offset) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "region ", region_name_, " has ", size_ - used_, " bytes left; ", bytes, " needed"));
  }
  used_ = offset + bytes;
  return offset;
}

absl::StatusOr<v1::TensorRef> RegionWriter::Place(const v1::Tensor& tensor) {
  absl::StatusOr<int64_t> offset = Allocate(static_cast<int64_t>(tensor.data().size()));
  if (!offset.ok()) return offset.status();
  if (!tensor.data().empty()) {
    std::memcpy(base_ + *offset, tensor.data().data(), tensor.data().size());
  }
  v1::TensorRef ref;
  ref.set_region(region_name_);
  ref.set_offset_bytes(*offset);
  ref.set_dtype(tensor.dtype());
  *ref.mutable_shape() = tensor.shape();
  return ref;
}

absl::Status RegionWriter::MoveInputsToRegion(v1::VerifyRequest* request,
                                              bool return_into_region) {
  int64_t total_rows = 0;
  for (v1::SequenceDraft& seq : *request->mutable_sequences()) {
    total_rows += seq.draft_tokens_size();
    if (seq.has_draft_kv()) {
      absl::StatusOr<v1::TensorRef> ref = Place(seq.draft_kv());
      if (!ref.ok()) return ref.status();
      v1::Tensor shape_only = seq.draft_kv();
      shape_only.clear_data();
      *seq.mutable_draft_kv_ref() = *std::move(ref);  // clears draft_kv (oneof)
      if (return_into_region && !request->has_kv_output()) {
        v1::TensorRef* out = request->mutable_kv_output();
        out->set_dtype(shape_only.dtype());
        *out->mutable_shape() = shape_only.shape();
      }
    }
    if (seq.has_sampled()) {
      v1::SampledTarget* st = seq.mutable_sampled();
      for (v1::Distribution* d : {st->mutable_target(), st->has_draft() ? st->mutable_draft()
                                                                        : nullptr}) {
        if (d == nullptr || !d->has_values()) continue;
        absl::StatusOr<v1::TensorRef> ref = Place(d->values());
        if (!ref.ok()) return ref.status();
        *d->mutable_values_ref() = *std::move(ref);
      }
    }
  }
  if (return_into_region) {
    if (!request->has_kv_output()) {
      return absl::InvalidArgumentError("return into a region needs draft KV rows");
    }
    v1::TensorRef* out = request->mutable_kv_output();
    const int64_t row_bytes = TensorRefRowBytes(*out);
    out->set_shape(0, total_rows);
    absl::StatusOr<int64_t> offset = Allocate(total_rows * row_bytes);
    if (!offset.ok()) return offset.status();
    out->set_region(region_name_);
    out->set_offset_bytes(*offset);
    request->set_kv_return(v1::KV_RETURN_REGION);
  }
  return absl::OkStatus();
}

}  // namespace specverify::client
