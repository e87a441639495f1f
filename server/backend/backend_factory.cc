#include "server/backend/backend_factory.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/backend/noop_backend.h"
#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
#include "server/backend/cuda/cuda_executor.h"
#endif

namespace specverify::server {

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  DeviceSpec spec;
  if (text == "auto") {
    spec.kind = DeviceSpec::Kind::kAuto;
  } else if (text == "cpu") {
    spec.kind = DeviceSpec::Kind::kCpu;
  } else if (text == "noop") {
    spec.kind = DeviceSpec::Kind::kNoop;
  } else if (absl::ConsumePrefix(&text, "cuda:") &&
             absl::SimpleAtoi(text, &spec.cuda_ordinal) && spec.cuda_ordinal >= 0) {
    spec.kind = DeviceSpec::Kind::kCuda;
  } else {
    return absl::InvalidArgumentError(
        "must be one of auto, cpu, cuda:N (N >= 0), noop");
  }
  return spec;
}

bool GpuVisible() {
  return access("/dev/nvidia0", F_OK) == 0 ||
         access("/proc/driver/nvidia/gpus", F_OK) == 0;
}

#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
namespace {
absl::StatusOr<BackendChoice> CreateCudaBackend(int ordinal, const CudaExecutorOptions& options,
                                                absl::string_view why) {
  CudaExecutorOptions o = options;
  o.device_ordinal = ordinal;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(o);
  if (!executor.ok()) return executor.status();
  BackendChoice choice;
  choice.reason = absl::StrCat(why, "; ", o.slots, " slots; dispatch ",
                               (*executor)->dispatch_info().summary);
  choice.backend = *std::move(executor);
  return choice;
}
}  // namespace
#endif

absl::StatusOr<BackendChoice> CreateBackend(const DeviceSpec& spec,
                                            const CpuBackendOptions& cpu_options,
                                            const CudaExecutorOptions& cuda_options) {
  BackendChoice choice;
#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
  if (spec.kind == DeviceSpec::Kind::kCuda) {
    return CreateCudaBackend(spec.cuda_ordinal, cuda_options,
                             absl::StrCat("cuda:", spec.cuda_ordinal, ": requested"));
  }
  if (spec.kind == DeviceSpec::Kind::kAuto && GpuVisible()) {
    absl::StatusOr<BackendChoice> cuda =
        CreateCudaBackend(0, cuda_options, "auto: a GPU is visible; using cuda:0");
    // Only "no usable device" falls back to the CPU; a device that is there
    // but cannot hold the configured limits is a start-up error to fix.
    if (cuda.ok() || cuda.status().code() != absl::StatusCode::kFailedPrecondition) return cuda;
  }
#else
  (void)cuda_options;
#endif
  switch (spec.kind) {
    case DeviceSpec::Kind::kNoop:
      choice.backend = std::make_unique<NoopBackend>();
      choice.reason = "noop: requested (transport ceiling, nothing verified)";
      return choice;
    case DeviceSpec::Kind::kCuda:
      return absl::UnavailableError(absl::StrCat(
          "--device=cuda:", spec.cuda_ordinal,
          ": CUDA backend not built yet (this server has the cpu and noop "
          "backends only)"));
    case DeviceSpec::Kind::kCpu:
    case DeviceSpec::Kind::kAuto: {
      absl::StatusOr<std::unique_ptr<CpuBackend>> cpu = CpuBackend::Create(cpu_options);
      if (!cpu.ok()) return cpu.status();
      choice.backend = *std::move(cpu);
      if (spec.kind == DeviceSpec::Kind::kCpu) {
        choice.reason = "cpu: requested";
      } else if (GpuVisible()) {
        choice.reason = "auto: a GPU is visible but the CUDA executor is not built or sees no device; using cpu";
      } else {
        choice.reason = "auto: no GPU visible; using cpu";
      }
      return choice;
    }
  }
  return absl::InternalError("unhandled device kind");
}

}  // namespace specverify::server
