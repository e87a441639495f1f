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
  // A region of `bytes` of `kind` (kShm or kCuda; kCuda needs a loadgen
  // built with CUDA and a GPU on cuda:`device`).
  static absl::StatusOr<std::unique_ptr<RegionTransport>> Create(Transport kind, int64_t bytes,
                                                                 int device);
  virtual ~RegionTransport() = default;

  // Where requests are laid out (host memory: the region itself for shm, an
  // image that Publish copies to the device for cuda).
  client::RegionWriter& writer() { return *writer_; }
  // Makes what the writer laid out visible to the servers.
  virtual absl::Status Publish() = 0;
  virtual v1::RegisterRegionRequest Registration() const = 0;
  // `bytes` at `offset` as the servers see them now.
  virtual absl::Status Read(int64_t offset, int64_t bytes, std::string* out) const = 0;

  // "loadgen-<pid>": several loadgens may drive one server at once (one per
  // GPU of a multi-GPU server, each with its rows on its own device).
  static const std::string& RegionName();

 protected:
  std::unique_ptr<client::RegionWriter> writer_;
};

}  // namespace specverify::loadgen

#endif  // SPECVERIFY_CLIENT_LOADGEN_REGION_TRANSPORT_H_
