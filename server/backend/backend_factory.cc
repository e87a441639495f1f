#include "server/backend/backend_factory.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/backend/noop_backend.h"

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

absl::StatusOr<BackendChoice> CreateBackend(const DeviceSpec& spec,
                                            const CpuBackendOptions& cpu_options) {
  BackendChoice choice;
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
        choice.reason = "auto: a GPU is visible but the CUDA backend is not built yet; using cpu";
      } else {
        choice.reason = "auto: no GPU visible; using cpu";
      }
      return choice;
    }
  }
  return absl::InternalError("unhandled device kind");
}

}  // namespace specverify::server
