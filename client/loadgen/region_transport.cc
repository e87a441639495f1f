#include "client/loadgen/region_transport.h"

#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

#if defined(SPECVERIFY_LOADGEN_CUDA)
#include "client/cuda_region.h"
#endif

namespace specverify::loadgen {

const std::string& RegionTransport::RegionName() {
  static const std::string* name = new std::string(absl::StrCat("loadgen-", getpid()));
  return *name;
}

namespace {

class ShmTransport final : public RegionTransport {
 public:
  ShmTransport(std::unique_ptr<client::SharedMemoryRegion> shm, int64_t stretch_bytes,
               int32_t copies)
      : RegionTransport(stretch_bytes, copies), shm_(std::move(shm)) {
    writer_ = std::make_unique<client::RegionWriter>(RegionName(), shm_->data(), stretch_bytes);
  }
  // The servers map the memory as it is; only the copies need writing.
  absl::Status Publish() override {
    for (int32_t k = 1; k < copies_; ++k) {
      std::memcpy(shm_->data() + k * stretch_bytes_, shm_->data(),
                  static_cast<size_t>(writer_->used()));
    }
    return absl::OkStatus();
  }
  v1::RegisterRegionRequest Registration() const override {
    return shm_->Registration(RegionName());
  }
  absl::Status Read(int64_t offset, int64_t bytes, std::string* out) const override {
    out->assign(reinterpret_cast<const char*>(shm_->data() + offset), static_cast<size_t>(bytes));
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<client::SharedMemoryRegion> shm_;
};

#if defined(SPECVERIFY_LOADGEN_CUDA)
class CudaTransport final : public RegionTransport {
 public:
  CudaTransport(std::unique_ptr<client::CudaDeviceRegion> device, int64_t stretch_bytes,
                int32_t copies)
      : RegionTransport(stretch_bytes, copies),
        device_(std::move(device)),
        image_(static_cast<size_t>(stretch_bytes)) {
    writer_ = std::make_unique<client::RegionWriter>(RegionName(), image_.data(), stretch_bytes);
  }
  // One copy over the bus, the others on the device.
  absl::Status Publish() override {
    if (absl::Status s = device_->CopyIn(0, image_.data(), writer_->used()); !s.ok()) return s;
    for (int32_t k = 1; k < copies_; ++k) {
      if (absl::Status s = device_->CopyWithin(0, k * stretch_bytes_, writer_->used()); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  v1::RegisterRegionRequest Registration() const override {
    return device_->Registration(RegionName());
  }
  absl::Status Read(int64_t offset, int64_t bytes, std::string* out) const override {
    out->resize(static_cast<size_t>(bytes));
    return device_->CopyOut(offset, out->data(), bytes);
  }

 private:
  std::unique_ptr<client::CudaDeviceRegion> device_;
  std::vector<std::byte> image_;
};
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<RegionTransport>> RegionTransport::Create(Transport kind,
                                                                         int64_t stretch_bytes,
                                                                         int32_t copies,
                                                                         int device) {
  constexpr int64_t kPage = 4096;
  if (stretch_bytes < 1 || copies < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a loadgen region needs >= 1 copies of >= 1 byte; got ",
                                                   copies, " copies of ", stretch_bytes, " bytes"));
  }
  const int64_t stretch = (stretch_bytes + kPage - 1) / kPage * kPage;
  const int64_t bytes = stretch * copies;
  if (kind == Transport::kShm) {
    absl::StatusOr<std::unique_ptr<client::SharedMemoryRegion>> shm =
        client::SharedMemoryRegion::Create(absl::StrCat("specverify-loadgen-", getpid()), bytes);
    if (!shm.ok()) return shm.status();
    return std::unique_ptr<RegionTransport>(new ShmTransport(*std::move(shm), stretch, copies));
  }
  if (kind == Transport::kCuda) {
#if defined(SPECVERIFY_LOADGEN_CUDA)
    absl::StatusOr<std::unique_ptr<client::CudaDeviceRegion>> region =
        client::CudaDeviceRegion::Create(device, bytes);
    if (!region.ok()) return region.status();
    return std::unique_ptr<RegionTransport>(new CudaTransport(*std::move(region), stretch, copies));
#else
    (void)device;
    return absl::FailedPreconditionError(
        "--transport=cuda needs a loadgen built with the CUDA toolkit");
#endif
  }
  return absl::InvalidArgumentError("inline transport has no region");
}

}  // namespace specverify::loadgen
