// The load generator as a co-located worker (--transport=shm|cuda,
// --kv-return=region; docs/DATA_PLANE.md): it creates one region, lays every
// pool request's tensors out in it once (as a worker's tensors already sit
// in its memory), registers it with every server of the run, and reads the
// packed rows of region answers back to check them.
#ifndef SPECVERIFY_CLIENT_LOADGEN_REGION_TRANSPORT_H_
#define SPECVERIFY_CLIENT_LOADGEN_REGION_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/loadgen/config.h"
#include "client/region.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::loadgen {

class RegionTransport {
 public:
  // A region of `kind` (kShm or kCuda; kCuda needs a loadgen built with CUDA
  // and a GPU on cuda:`device`) made of `copies` stretches of at least
  // `stretch_bytes` each (rounded up to whole pages). The writer lays out
  // the first stretch; Publish copies it into the others, so requests can
  // read the same bytes from `copies` different addresses (as the requests
  // in flight of a real worker read different memory).
  static absl::StatusOr<std::unique_ptr<RegionTransport>> Create(Transport kind,
                                                                 int64_t stretch_bytes,
                                                                 int32_t copies, int device);
  virtual ~RegionTransport() = default;

  // Where requests are laid out (host memory: the region itself for shm, an
  // image that Publish copies to the device for cuda); it spans one stretch.
  client::RegionWriter& writer() { return *writer_; }
  // Makes what the writer laid out visible to the servers, in every stretch.
  virtual absl::Status Publish() = 0;
  // Offset of stretch k is k * stretch_bytes().
  int64_t stretch_bytes() const { return stretch_bytes_; }
  int32_t copies() const { return copies_; }
  virtual v1::RegisterRegionRequest Registration() const = 0;
  // `bytes` at `offset` as the servers see them now.
  virtual absl::Status Read(int64_t offset, int64_t bytes, std::string* out) const = 0;

  // "loadgen-<pid>": several loadgens may drive one server at once (one per
  // GPU of a multi-GPU server, each with its rows on its own device).
  static const std::string& RegionName();

 protected:
  RegionTransport(int64_t stretch_bytes, int32_t copies)
      : stretch_bytes_(stretch_bytes), copies_(copies) {}
  std::unique_ptr<client::RegionWriter> writer_;
  const int64_t stretch_bytes_;
  const int32_t copies_;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_REGION_TRANSPORT_H_
