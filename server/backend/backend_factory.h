// The one place that turns --device into a Backend. The CUDA executor plugs
// in here (and only here) when it is built.
#ifndef SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_
#define SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/backend/backend.h"
#include "server/backend/cpu_backend.h"
#include "server/backend/cuda/cuda_executor_options.h"

namespace specverify::server {

struct DeviceSpec {
  enum class Kind { kAuto, kCpu, kCuda, kNoop };
  Kind kind = Kind::kAuto;
  int cuda_ordinal = 0;
};

// "auto" | "cpu" | "cuda:N" | "noop"; INVALID_ARGUMENT naming the value.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

struct BackendChoice {
  std::unique_ptr<Backend> backend;
  // Why this backend, e.g. "auto: no GPU visible; using cpu" (logged at start-up).
  std::string reason;
};

// Creates the backend for `spec`. `auto` picks CUDA when a GPU is visible and
// the CUDA executor is built, else the CPU. `cuda:N` fails UNAVAILABLE in a
// build without the CUDA executor. `cuda_options` sizes the executor (its
// device_ordinal is taken from `spec`).
absl::StatusOr<BackendChoice> CreateBackend(const DeviceSpec& spec,
                                            const CpuBackendOptions& cpu_options,
                                            const CudaExecutorOptions& cuda_options = {});

// True when the NVIDIA driver exposes at least one GPU to this process.
bool GpuVisible();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_BACKEND_FACTORY_H_
