// The one place that turns --device into backends, one per executor (issue
// #16: several GPUs, or several executors on one). The CUDA executor plugs in
// here (and only here) when it is built.
#ifndef SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_
#define SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/backend/backend.h"
#include "server/backend/cpu_backend.h"
#include "server/backend/cuda/cuda_executor_options.h"

namespace specverify::server {

// Executors one server drives at most.
inline constexpr int kMaxDevices = 16;

struct DeviceSpec {
  enum class Kind { kAuto, kCpu, kCuda, kNoop };
  Kind kind = Kind::kAuto;
  // kCuda: one executor per entry, in order; an ordinal may repeat (two
  // executors on one GPU share it). Empty with all_cuda.
  // kCpu: empty for the one executor "cpu"; else one per entry ("cpu:N"),
  // which lets the multi-device paths run on a machine without a GPU.
  std::vector<int> ordinals;
  bool all_cuda = false;  // "cuda:all": every GPU the process sees
};

// "auto" | "cpu" | "cpu:N[,M...]" | "cuda:N[,M...]" | "cuda:all" | "noop",
// at most kMaxDevices executors; INVALID_ARGUMENT naming the value.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

// One executor and how the server names it: "cuda:1", "cpu", "cpu:0",
// "noop"; a second executor on the same GPU is "cuda:0#1". The name is the
// metrics' `device` label and ServerInfo.devices[].name.
struct DeviceBackend {
  std::unique_ptr<Backend> backend;
  std::string name;
  int32_t cuda_ordinal = -1;  // -1 off CUDA
};

struct DeviceBackends {
  std::vector<DeviceBackend> devices;
  // Why these backends, e.g. "auto: no GPU visible; using cpu" (logged at start-up).
  std::string reason;
};

// Creates every executor of `spec`, like CreateBackend; cuda:all finds the
// GPUs (FAILED_PRECONDITION when there are none). A failure to create any
// executor fails the whole call (nothing half-started is served).
absl::StatusOr<DeviceBackends> CreateBackends(const DeviceSpec& spec,
                                              const CpuBackendOptions& cpu_options,
                                              const CudaExecutorOptions& cuda_options = {});

// The names CreateBackends gives to executors of `kind_prefix` ("cuda",
// "cpu") at `ordinals`, in order: "cuda:0", "cuda:1", "cuda:0#1", ...
std::vector<std::string> ExecutorNames(absl::string_view kind_prefix,
                                       const std::vector<int>& ordinals);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  // Why this backend, e.g. "auto: no GPU visible; using cpu" (logged at start-up).
  std::string reason;
};

// Creates the backend for a single-executor `spec` (its first ordinal).
// `auto` picks CUDA when a GPU is visible and the CUDA executor is built,
// else the CPU. `cuda:N` fails UNAVAILABLE in a build without the CUDA
// executor. `cuda_options` sizes the executor (its device_ordinal is taken
// from `spec`).
absl::StatusOr<BackendChoice> CreateBackend(const DeviceSpec& spec,
                                            const CpuBackendOptions& cpu_options,
                                            const CudaExecutorOptions& cuda_options = {});

// True when the NVIDIA driver exposes at least one GPU to this process.
bool GpuVisible();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_
