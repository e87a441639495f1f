#include "kernels/greedy/greedy_dispatch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_status.h"
#include "kernels/common/status_macros.h"

namespace specverify {
namespace {

// The two shapes of every rung of the ladder (same pack bytes):
//  deep: b = 32 and gamma grows from 8 to kMaxDraftTokens, then b grows
//        (seed 000's stress axis);
//  wide: gamma = 8 (the production regime) and b grows, up to
//        kMaxBatchSequences.
// The fused path's cost depends on the shape at equal bytes (tiles per
// sequence, search depth), so a rung's verdict uses both.
std::pair<int32_t, int32_t> DeepShape(int64_t rows) {
  const int64_t gamma = std::clamp<int64_t>(rows / 32, 8, kMaxDraftTokens);
  const int64_t b = std::max<int64_t>(1, rows / gamma);
  return {static_cast<int32_t>(b), static_cast<int32_t>(gamma)};
}

std::pair<int32_t, int32_t> WideShape(int64_t rows) {
  const int64_t b = std::clamp<int64_t>(rows / 8, 1, kMaxBatchSequences);
  const int64_t gamma = std::clamp<int64_t>(rows / b, 1, kMaxDraftTokens);
  return {static_cast<int32_t>(b), static_cast<int32_t>(gamma)};
}

// Events released on every return path.
class EventPair {
 public:
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  absl::Status Init() {
    SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
    SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
    return absl::OkStatus();
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Minimum over samples of the mean device time per launch of back-to-back
// launches (what a stream of batches sees), in microseconds.
absl::StatusOr<double> TimePath(const GreedyDeviceBatch& batch,
                                GreedyPath path, const GreedyScratch& scratch,
                                const GreedyCalibrationOptions& options,
                                const EventPair& events, cudaStream_t stream) {
  for (int i = 0; i < 2; ++i) {  // warm-up: module load, first-touch
    SV_CUDA_RETURN_IF_ERROR(
        LaunchGreedyVerifyPack(batch, path, scratch, stream));
  }
  double best_us = 0;
  for (int s = 0; s < options.samples; ++s) {
    SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.start(), stream));
    for (int i = 0; i < options.launches_per_sample; ++i) {
      SV_CUDA_RETURN_IF_ERROR(
          LaunchGreedyVerifyPack(batch, path, scratch, stream));
    }
    SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.stop(), stream));
    SV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events.stop()));
    float ms = 0;
    SV_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&ms, events.start(), events.stop()));
    const double us = 1000.0 * ms / options.launches_per_sample;
    best_us = s == 0 ? us : std::min(best_us, us);
  }
  return best_us;
}

}  // namespace

absl::StatusOr<GreedyDispatchInfo> CalibrateGreedyDispatch(
    const GreedyCalibrationOptions& options, cudaStream_t stream) {
  if (options.row_bytes < 1 || options.min_pack_bytes < options.row_bytes ||
      options.max_pack_bytes < options.min_pack_bytes ||
      options.launches_per_sample < 1 || options.samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration options: row_bytes ", options.row_bytes,
        " must be >= 1, min_pack_bytes ", options.min_pack_bytes,
        " >= row_bytes, max_pack_bytes ", options.max_pack_bytes,
        " >= min_pack_bytes, launches_per_sample and samples >= 1"));
  }
  const auto started = std::chrono::steady_clock::now();
  const int64_t max_rows = options.max_pack_bytes / options.row_bytes;
  const auto [deep_b, deep_gamma] = DeepShape(max_rows);
  const auto [wide_b, wide_gamma] = WideShape(max_rows);
  const int32_t max_b = std::max(deep_b, wide_b);
  if (max_b > kMaxBatchSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration options: max_pack_bytes ", options.max_pack_bytes,
        " needs ", max_b, " sequences; at most ", kMaxBatchSequences));
  }
  const int64_t rows_cap = std::max(int64_t{deep_b} * deep_gamma,
                                    int64_t{wide_b} * wide_gamma);

  // Buffers for the largest rung. Equal draft and target tokens (all zero)
  // make every row accepted, so each rung packs exactly its capacity; the KV
  // bytes are a non-zero pattern.
  SV_ASSIGN_OR_RETURN(DeviceBuffer offsets,
                      DeviceBuffer::Create(sizeof(int32_t) * (max_b + 1)));
  SV_ASSIGN_OR_RETURN(DeviceBuffer draft,
                      DeviceBuffer::Create(sizeof(int32_t) * rows_cap));
  SV_ASSIGN_OR_RETURN(DeviceBuffer target,
                      DeviceBuffer::Create(sizeof(int32_t) * (rows_cap + max_b)));
  SV_ASSIGN_OR_RETURN(DeviceBuffer kv,
                      DeviceBuffer::Create(rows_cap * options.row_bytes));
  SV_ASSIGN_OR_RETURN(DeviceBuffer packed,
                      DeviceBuffer::Create(rows_cap * options.row_bytes));
  SV_ASSIGN_OR_RETURN(DeviceBuffer results,
                      DeviceBuffer::Create(sizeof(int32_t) * (4 * max_b + 1)));
  SV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(draft.data(), 0, draft.size(), stream));
  SV_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(target.data(), 0, target.size(), stream));
  SV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(kv.data(), 0x5A, kv.size(), stream));
  GreedyScratchLimits limits;
  limits.max_sequences = max_b;
  limits.max_total_draft_rows = rows_cap;
  SV_ASSIGN_OR_RETURN(GreedyScratchBuffer scratch,
                      AllocateGreedyScratch(limits, stream));
  EventPair events;
  SV_RETURN_IF_ERROR(events.Init());

  GreedyDispatchInfo info;
  info.dispatch_threshold_source = "calibration";
  std::vector<int32_t> host_offsets;
  // Per rung: summed fused and two-step times over its two shapes.
  std::vector<std::pair<int64_t, std::pair<double, double>>> rungs;
  for (int64_t bytes = options.min_pack_bytes; bytes <= options.max_pack_bytes;
       bytes *= 2) {
    double fused_sum = 0;
    double two_step_sum = 0;
    const int64_t rows = bytes / options.row_bytes;
    for (const auto& [b, gamma] : {DeepShape(rows), WideShape(rows)}) {
      host_offsets.resize(b + 1);
      for (int32_t i = 0; i <= b; ++i) host_offsets[i] = i * gamma;
      SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          offsets.data(), host_offsets.data(), sizeof(int32_t) * (b + 1),
          cudaMemcpyHostToDevice, stream));
      // host_offsets is reused by the next shape: wait for the copy.
      SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      GreedyDeviceBatch batch;
      GreedyBatchInput& in = batch.params.input;
      in.num_sequences = b;
      in.draft_offsets = offsets.as<int32_t>();
      in.draft_tokens = draft.as<int32_t>();
      in.target_tokens = target.as<int32_t>();
      in.draft_kv = kv.as<std::byte>();
      in.row_bytes = options.row_bytes;
      GreedyBatchOutput& out = batch.params.output;
      out.accepted_lengths = results.as<int32_t>();
      out.next_tokens = out.accepted_lengths + max_b;
      out.packed_row_offsets = out.next_tokens + max_b;
      out.mismatch =
          reinterpret_cast<uint8_t*>(out.packed_row_offsets + max_b + 1);
      out.packed_kv = packed.as<std::byte>();
      batch.total_draft_rows = int64_t{b} * gamma;
      batch.max_gamma = gamma;
      SV_RETURN_IF_ERROR(ValidateGreedyDeviceBatch(batch, scratch.view));

      GreedyCalibrationPoint point;
      point.num_sequences = b;
      point.gamma = gamma;
      point.row_bytes = options.row_bytes;
      point.pack_bytes = batch.total_draft_rows * options.row_bytes;
      SV_ASSIGN_OR_RETURN(point.fused_us,
                          TimePath(batch, GreedyPath::kFused, scratch.view,
                                   options, events, stream));
      SV_ASSIGN_OR_RETURN(point.two_step_us,
                          TimePath(batch, GreedyPath::kTwoStep, scratch.view,
                                   options, events, stream));
      fused_sum += point.fused_us;
      two_step_sum += point.two_step_us;
      info.measurements.push_back(point);
    }
    rungs.push_back({bytes, {fused_sum, two_step_sum}});
  }
  SV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));

  // Smallest rung from which two-step wins at every larger rung.
  size_t first_two_step = rungs.size();
  while (first_two_step > 0 && rungs[first_two_step - 1].second.second <
                                   rungs[first_two_step - 1].second.first) {
    --first_two_step;
  }
  std::string why;
  if (first_two_step == rungs.size()) {
    info.dispatch_threshold_bytes = kFusedAlwaysThreshold;
    why = absl::StrCat("fused faster at every rung up to ",
                       rungs.empty() ? 0 : rungs.back().first, " bytes");
  } else if (first_two_step == 0) {
    info.dispatch_threshold_bytes = 0;
    why = "two_step faster at every rung";
  } else {
    info.dispatch_threshold_bytes = static_cast<int64_t>(
        std::sqrt(static_cast<double>(rungs[first_two_step - 1].first) *
                  static_cast<double>(rungs[first_two_step].first)));
    why = absl::StrCat("two_step faster from ", rungs[first_two_step].first,
                       " bytes, fused up to ", rungs[first_two_step - 1].first);
  }
  const std::vector<GreedyCalibrationPoint>& m = info.measurements;
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - started)
          .count();
  info.summary = absl::StrCat("tau=", info.dispatch_threshold_bytes,
                              " bytes (calibration: ", why, "; ", m.size(),
                              " points, ", static_cast<int>(elapsed_ms), " ms)");
  return info;
}

absl::StatusOr<GreedyDispatcher> GreedyDispatcher::Create(
    const GreedyDispatchConfig& config, cudaStream_t stream) {
  if (!(config.expected_acceptance >= 0.0 &&
        config.expected_acceptance <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected_acceptance is ", config.expected_acceptance,
                     "; must lie in [0, 1]"));
  }
  if (config.threshold_bytes.has_value()) {
    if (*config.threshold_bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dispatch threshold_bytes is ", *config.threshold_bytes,
                       "; must be >= 0"));
    }
    GreedyDispatchInfo info;
    info.dispatch_threshold_bytes = *config.threshold_bytes;
    info.dispatch_threshold_source = "config";
    info.summary = absl::StrCat("tau=", info.dispatch_threshold_bytes,
                                " bytes (config)");
    return GreedyDispatcher(std::move(info), config.expected_acceptance);
  }
  SV_ASSIGN_OR_RETURN(GreedyDispatchInfo info,
                      CalibrateGreedyDispatch(config.calibration, stream));
  return GreedyDispatcher(std::move(info), config.expected_acceptance);
}

GreedyDispatcher::GreedyDispatcher(GreedyDispatchInfo info,
                                   double expected_acceptance)
    : info_(std::move(info)), expected_acceptance_(expected_acceptance) {}

int64_t GreedyDispatcher::EstimatedPackBytes(
    const GreedyDeviceBatch& batch) const {
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(GreedyPackBytesUpperBound(batch)) *
                expected_acceptance_));
}

GreedyPath GreedyDispatcher::Choose(const GreedyDeviceBatch& batch) const {
  return EstimatedPackBytes(batch) < info_.dispatch_threshold_bytes
             ? GreedyPath::kFused
             : GreedyPath::kTwoStep;
}

cudaError_t GreedyDispatcher::Launch(const GreedyDeviceBatch& batch,
                                     const GreedyScratch& scratch,
                                     cudaStream_t stream,
                                     GreedyPath* chosen) const {
  const GreedyPath path = Choose(batch);
  if (chosen != nullptr) *chosen = path;
  return LaunchGreedyVerifyPack(batch, path, scratch, stream);
}

}  // namespace specverify
