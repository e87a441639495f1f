// The executors one server drives (issue #16): one per GPU of --device
// (cuda:0,1 or cuda:all), or several on one device (cuda:0,0; cpu:0,1 runs
// the same paths without a GPU). Each has its own backend (streams, staging,
// scratch, calibration) and KV arena; this set names them, knows which are in
// service, and answers the questions that pick one:
//   * which device may run a batch (its CUDA regions pin it to one GPU),
//   * which arena holds a handle (the id's first byte names the device),
//   * which backend maps a region (a CUDA region: one on its GPU; system
//     memory: any, mapped once and usable by all, see MapRegion).
// A device fault takes only that device out of service (sticky); the batcher
// decides whether the server stops (no device left, or by flag).
//
// The set does not own the backends or arenas (VerifierServer does).
//
// Thread safety: every method is thread-safe; the device list is immutable.
#ifndef SPECVERIFY_SERVER_DEVICES_DEVICE_SET_H_
#define SPECVERIFY_SERVER_DEVICES_DEVICE_SET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/arena/kv_arena.h"
#include "server/backend/backend.h"
#include "server/regions/region.h"

namespace specverify::server {

struct Device {
  std::string name;           // "cuda:1", "cuda:0#1", "cpu", "noop"
  int32_t cuda_ordinal = -1;  // the GPU it runs on; -1 off CUDA
  Backend* backend = nullptr;
  KvArena* arena = nullptr;   // arena->device_index() is this device's index
};

class DeviceSet {
 public:
  // REQUIRES: 1 <= devices.size() <= kMaxHandleDevices; device i's arena
  // publishes handles with device_index i.
  explicit DeviceSet(std::vector<Device> devices);

  int size() const { return static_cast<int>(devices_.size()); }
  const Device& at(int index) const { return devices_[index]; }
  // "cuda:0, cuda:1"
  std::string names() const;

  bool in_service(int index) const {
    return in_service_[index].load(std::memory_order_acquire);
  }
  // OK while the device takes batches, else why it was taken out.
  absl::Status status(int index) const;
  // Takes the device out of service for good; true on the first call for it.
  bool TakeOutOfService(int index, const absl::Status& why);
  int in_service_count() const;

  // True when device `index` may run a batch whose CUDA buffers live on
  // `cuda_ordinal` (-1: any device may).
  bool Serves(int index, int32_t cuda_ordinal) const {
    return cuda_ordinal < 0 || devices_[index].cuda_ordinal == cuda_ordinal;
  }
  // OK when a device in service can run batches pinned to `cuda_ordinal`;
  // else FAILED_PRECONDITION naming the GPU and why its executors are out.
  absl::Status CheckServable(int32_t cuda_ordinal) const;

  // The arena holding `handle` (a well-formed id). NOT_FOUND, worded like an
  // unknown handle, when the id names no device of this server;
  // FAILED_PRECONDITION naming the device when it is out of service (its
  // rows are lost with it).
  absl::StatusOr<KvArena*> ArenaForHandle(absl::string_view handle) const;

  // Maps a region on the device that will use it: a CUDA region on an
  // executor of its GPU (INVALID_ARGUMENT naming cuda.device_ordinal when
  // this server drives no executor there); system memory on the first device
  // in service. Both kinds are registered portable (CUDA) or are plain host
  // memory (CPU), so one mapping serves every executor of the process.
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) const;

 private:
  const std::vector<Device> devices_;
  const std::unique_ptr<std::atomic<bool>[]> in_service_;
  mutable absl::Mutex mu_;
  std::vector<absl::Status> out_of_service_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_DEVICES_DEVICE_SET_H_
