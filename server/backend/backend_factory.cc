#include "server/backend/backend_factory.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/backend/noop_backend.h"
#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
#include "server/backend/cuda/cuda_executor.h"
#endif

namespace specverify::server {

namespace {

// "N[,M...]" into `ordinals`; false on anything else.
bool ParseOrdinalList(absl::string_view list, std::vector<int>* ordinals) {
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int ordinal = -1;
    if (!absl::SimpleAtoi(item, &ordinal) || ordinal < 0) return false;
    ordinals->push_back(ordinal);
  }
  return !ordinals->empty();
}

}  // namespace

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  DeviceSpec spec;
  constexpr absl::string_view kForms =
      "must be one of auto, cpu, cpu:N[,M...], cuda:N[,M...] (N >= 0), cuda:all, noop";
  if (text == "auto") {
    spec.kind = DeviceSpec::Kind::kAuto;
  } else if (text == "cpu") {
    spec.kind = DeviceSpec::Kind::kCpu;
  } else if (text == "noop") {
    spec.kind = DeviceSpec::Kind::kNoop;
  } else if (text == "cuda:all") {
    spec.kind = DeviceSpec::Kind::kCuda;
    spec.all_cuda = true;
  } else if (absl::StartsWith(text, "cuda:") &&
             ParseOrdinalList(text.substr(5), &spec.ordinals)) {
    spec.kind = DeviceSpec::Kind::kCuda;
  } else if (absl::StartsWith(text, "cpu:") &&
             ParseOrdinalList(text.substr(4), &spec.ordinals)) {
    spec.kind = DeviceSpec::Kind::kCpu;
  } else {
    return absl::InvalidArgumentError(kForms);
  }
  if (static_cast<int>(spec.ordinals.size()) > kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat("names ", spec.ordinals.size(),
                                                   " executors; at most ", kMaxDevices));
  }
  return spec;
}

std::vector<std::string> ExecutorNames(absl::string_view kind_prefix,
                                       const std::vector<int>& ordinals) {
  std::vector<std::string> names;
  std::vector<int> seen;
  for (int ordinal : ordinals) {
    const int before = static_cast<int>(std::count(seen.begin(), seen.end(), ordinal));
    seen.push_back(ordinal);
    names.push_back(before == 0 ? absl::StrCat(kind_prefix, ":", ordinal)
                                : absl::StrCat(kind_prefix, ":", ordinal, "#", before));
  }
  return names;
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
  const int first_ordinal = spec.ordinals.empty() ? 0 : spec.ordinals.front();
#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
  if (spec.kind == DeviceSpec::Kind::kCuda) {
    return CreateCudaBackend(first_ordinal, cuda_options,
                             absl::StrCat("cuda:", first_ordinal, ": requested"));
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
          "--device=cuda:", first_ordinal,
          ": the CUDA executor is not built into this server (it has the cpu and noop "
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

namespace specverify::server {

absl::StatusOr<DeviceBackends> CreateBackends(const DeviceSpec& spec,
                                              const CpuBackendOptions& cpu_options,
                                              const CudaExecutorOptions& cuda_options) {
  DeviceBackends out;
  std::vector<int> ordinals = spec.ordinals;
  const bool several = ordinals.size() > 1 || spec.all_cuda;
  if (!several) {
    // One executor: the single-device path, named as before.
    absl::StatusOr<BackendChoice> choice = CreateBackend(spec, cpu_options, cuda_options);
    if (!choice.ok()) return choice.status();
    DeviceBackend device;
    const std::string backend = choice->backend->Describe().name;
    if (backend == "cuda") {
      device.cuda_ordinal = ordinals.empty() ? 0 : ordinals.front();
      device.name = absl::StrCat("cuda:", device.cuda_ordinal);
    } else if (backend == "cpu" && !ordinals.empty()) {
      device.name = absl::StrCat("cpu:", ordinals.front());
    } else {
      device.name = backend;
    }
    device.backend = std::move(choice->backend);
    out.devices.push_back(std::move(device));
    out.reason = std::move(choice->reason);
    return out;
  }
  if (spec.kind == DeviceSpec::Kind::kCpu) {
    const std::vector<std::string> names = ExecutorNames("cpu", ordinals);
    for (const std::string& name : names) {
      absl::StatusOr<std::unique_ptr<CpuBackend>> cpu = CpuBackend::Create(cpu_options);
      if (!cpu.ok()) return cpu.status();
      out.devices.push_back(DeviceBackend{*std::move(cpu), name, -1});
    }
    out.reason = absl::StrCat("cpu: ", names.size(), " executors requested (",
                              absl::StrJoin(names, ", "), ")");
    return out;
  }
#ifdef SPECVERIFY_HAVE_CUDA_EXECUTOR
  if (spec.all_cuda) {
    absl::StatusOr<int> count = CudaDeviceCount();
    if (!count.ok()) return count.status();
    if (*count == 0) {
      return absl::FailedPreconditionError("--device=cuda:all: this process sees no GPU");
    }
    for (int i = 0; i < std::min(*count, kMaxDevices); ++i) ordinals.push_back(i);
  }
  const std::vector<std::string> names = ExecutorNames("cuda", ordinals);
  std::vector<std::string> summaries;
  for (size_t i = 0; i < ordinals.size(); ++i) {
    absl::StatusOr<BackendChoice> cuda =
        CreateCudaBackend(ordinals[i], cuda_options, names[i]);
    if (!cuda.ok()) {
      return absl::Status(cuda.status().code(),
                          absl::StrCat(names[i], ": ", cuda.status().message()));
    }
    summaries.push_back(cuda->reason);
    out.devices.push_back(DeviceBackend{std::move(cuda->backend), names[i], ordinals[i]});
  }
  out.reason = absl::StrCat(spec.all_cuda ? "cuda:all" : "cuda", ": ", names.size(),
                            " executors (", absl::StrJoin(summaries, "; "), ")");
  return out;
#else
  (void)cuda_options;
  return absl::UnavailableError(absl::StrCat(
      "--device=cuda:", spec.all_cuda ? "all" : absl::StrJoin(ordinals, ","),
      ": the CUDA executor is not built into this server (it has the cpu and noop backends "
      "only)"));
#endif
}

}  // namespace specverify::server
