// The greedy dispatcher: fused verify-and-pack for small batches, the
// two-step path (ballot verify, CUB scan, multi-block pack) for large ones,
// chosen per batch by its estimated pack bytes against a threshold tau
// (seed 000 §5.5 proposed this and left it undone).
//
// tau comes from configuration or from CalibrateGreedyDispatch, which times
// both paths on the actual GPU over a ladder of pack sizes and takes the
// crossover. The server prints GreedyDispatchInfo at start-up and returns its
// two fields in GetServerInfo (dispatch_threshold_bytes,
// dispatch_threshold_source).
#ifndef SPECVERIFY_KERNELS_GREEDY_GREEDY_DISPATCH_H_
#define SPECVERIFY_KERNELS_GREEDY_GREEDY_DISPATCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/greedy/greedy_cuda.h"

namespace specverify {

// tau meaning "the fused path at every size": calibration found no size at
// which the two-step path wins.
inline constexpr int64_t kFusedAlwaysThreshold =
    std::numeric_limits<int64_t>::max();

// One measured shape of the calibration ladder: an all-accept batch (the most
// bytes a batch of that shape can pack), b sequences of fixed gamma. Every
// rung (pack size) is measured in two shapes: deep (b = 32, gamma grows) and
// wide (gamma = 8, b grows); the rung's verdict compares the summed times.
struct GreedyCalibrationPoint {
  int32_t num_sequences = 0;
  int32_t gamma = 0;
  int64_t row_bytes = 0;
  int64_t pack_bytes = 0;       // b * gamma * row_bytes
  double fused_us = 0;          // device time per batch, back-to-back launches
  double two_step_us = 0;
};

struct GreedyCalibrationOptions {
  int64_t row_bytes = 4096;
  // Pack sizes from min to max, doubling (all-accept, so bytes are exact).
  int64_t min_pack_bytes = int64_t{32} << 10;
  int64_t max_pack_bytes = int64_t{64} << 20;
  int launches_per_sample = 20;  // back-to-back launches between two events
  int samples = 5;               // the minimum over samples is kept
};

struct GreedyDispatchInfo {
  int64_t dispatch_threshold_bytes = kFusedAlwaysThreshold;
  // "config", or "calibration" (with the measurements behind it).
  std::string dispatch_threshold_source;
  std::vector<GreedyCalibrationPoint> measurements;
  // One line for logs, e.g. "tau=4194304 bytes (calibration: two_step faster
  // from 4 MiB; 12 points, 35 ms)".
  std::string summary;
};

struct GreedyDispatchConfig {
  // tau from configuration; unset runs the calibration.
  std::optional<int64_t> threshold_bytes;
  // Estimated pack bytes = total_draft_rows * row_bytes * expected_acceptance.
  // 1.0 (the upper bound) is exact for the worst case; a server may pass its
  // running mean acceptance. In [0, 1].
  double expected_acceptance = 1.0;
  GreedyCalibrationOptions calibration;
};

// Times both paths on the current device over the ladder (allocates its own
// buffers, start-up only; synchronizes `stream`). Takes 0.1-0.2 s on an H100.
// tau = geometric mean of the largest rung where fused wins and the smallest
// rung from which two-step wins at every larger rung; kFusedAlwaysThreshold
// when the two-step path never wins.
absl::StatusOr<GreedyDispatchInfo> CalibrateGreedyDispatch(
    const GreedyCalibrationOptions& options, cudaStream_t stream);

class GreedyDispatcher {
 public:
  // From configuration, or by calibration on `stream` when no threshold is
  // configured. kInvalidArgument for a negative threshold or an acceptance
  // outside [0, 1].
  static absl::StatusOr<GreedyDispatcher> Create(
      const GreedyDispatchConfig& config, cudaStream_t stream);

  GreedyDispatcher(GreedyDispatchInfo info, double expected_acceptance);

  int64_t EstimatedPackBytes(const GreedyDeviceBatch& batch) const;
  // kFused iff EstimatedPackBytes(batch) < tau.
  GreedyPath Choose(const GreedyDeviceBatch& batch) const;
  // Chooses, reports the choice in *chosen (may be null), launches.
  cudaError_t Launch(const GreedyDeviceBatch& batch,
                     const GreedyScratch& scratch, cudaStream_t stream,
                     GreedyPath* chosen = nullptr) const;

  const GreedyDispatchInfo& info() const { return info_; }
  int64_t threshold_bytes() const { return info_.dispatch_threshold_bytes; }

 private:
  GreedyDispatchInfo info_;
  double expected_acceptance_;
};

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_GREEDY_GREEDY_DISPATCH_H_
