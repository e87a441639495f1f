#include "kernels/sampling/rejection_sample.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>

#include "kernels/common/sm90_code.h"
#include "kernels/sampling/fast_divisor.h"
#include "kernels/sampling/philox.h"
#include "kernels/sampling/race_result.cuh"
#include "kernels/sampling/rejection_core.h"

namespace specverify {
namespace {

#include "kernels/sampling/rejection_kernel_layout.cuh"
#include "kernels/sampling/rejection_device_helpers.cuh"
#include "kernels/sampling/rejection_row_pass.cuh"
#include "kernels/sampling/rejection_filter.cuh"
#include "kernels/sampling/rejection_filter_search.cuh"
#include "kernels/sampling/rejection_decision.cuh"
#include "kernels/sampling/rejection_race_sweep.cuh"
#include "kernels/sampling/rejection_race_kernel.cuh"

// Whether the current device takes programmatic dependent launches of this
// file's kernels: sm_90+ running their sm_90 code (sm90_code.h).
cudaError_t DeviceTakesDependentLaunch(bool* yes) {
  static Sm90CodeCache cache(reinterpret_cast<const void*>(&CombineRowsKernel));
  return cache.Ask(yes);
}

// Resident blocks per SM of a race kernel on the current device, queried once
// per kernel (the answer depends only on the compiled kernel and the device
// architecture; the process drives one kind of device). Also asks, once, for
// the shared-memory carveout that holds 3 blocks' staging rings.
cudaError_t RaceBlocksThatFit(void (*race)(RaceArgs), int32_t* fit) {
  struct Entry {
    void (*kernel)(RaceArgs);
    int32_t blocks;
  };
  static constexpr int kEntries = 12;  // 3 dtypes x 4 modes
  static Entry cache[kEntries] = {};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache) {
    if (e.kernel == race) {
      *fit = e.blocks;
      return cudaSuccess;
    }
  }
  if (cudaError_t e = cudaFuncSetAttribute(race, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared);
      e != cudaSuccess) {
    return e;
  }
  int blocks = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, race, kThreads, kRaceStageBytes);
      e != cudaSuccess) {
    return e;
  }
  *fit = std::max(1, blocks);
  for (Entry& e : cache) {
    if (e.kernel == nullptr) {
      e = Entry{race, *fit};
      break;
    }
  }
  return cudaSuccess;
}

// Whether the filter kernel the current device runs has clusters: sm_90
// code, not the portable PTX compiled for an older architecture
// (sm90_code.h). Asked once per kernel.
template <SampleDtype D>
cudaError_t FilterHasClusters(bool* yes) {
  static std::atomic<int> known{0};  // 0 unknown, 1 no, 2 yes
  if (const int k = known.load(std::memory_order_relaxed); k != 0) {
    *yes = k == 2;
    return cudaSuccess;
  }
  if (cudaError_t e = KernelRunsSm90Code(reinterpret_cast<const void*>(&FilterKernel<D>), yes); e != cudaSuccess) {
    return e;
  }
  known.store(*yes ? 2 : 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// Clusters of `slices` filter blocks that the device holds at once, asked
// once per kernel and size (a host query: safe inside stream capture).
template <SampleDtype D>
cudaError_t FilterClustersThatFit(int32_t slices, int32_t* clusters) {
  static std::atomic<int32_t> known[kFilterMaxSlices + 1] = {};  // 0 unknown, else clusters + 1
  if (const int32_t k = known[slices].load(std::memory_order_relaxed); k != 0) {
    *clusters = k - 1;
    return cudaSuccess;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(slices));
  config.blockDim = dim3(kFilterThreads);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(slices);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int n = 0;
  if (cudaError_t e = cudaOccupancyMaxActiveClusters(&n, FilterKernel<D>, &config); e != cudaSuccess) return e;
  *clusters = n;
  known[slices].store(n + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// The most slices per row (<= kFilterMaxSlices) whose clusters all run at
// once: more would leave some rows to a second wave.
template <SampleDtype D>
cudaError_t FilterSlicesThatFit(int64_t rows, int32_t* slices) {
  *slices = 1;
  bool clusters_available = false;
  if (cudaError_t e = FilterHasClusters<D>(&clusters_available); e != cudaSuccess || !clusters_available) return e;
  for (int32_t s = kFilterMaxSlices; s >= 2; --s) {
    int32_t fit = 0;
    if (cudaError_t e = FilterClustersThatFit<D>(s, &fit); e != cudaSuccess) return e;
    if (rows <= fit) {
      *slices = s;
      break;
    }
  }
  return cudaSuccess;
}

template <SampleDtype D>
cudaError_t LaunchFilter(const RejectionBatchInput& in, const ScratchLayout& layout, int64_t num_target_rows,
                         int32_t requested_slices, const cudaLaunchAttribute* dependent, cudaStream_t stream) {
  int32_t slices = 1;
  bool clusters_available = false;
  if (cudaError_t e = FilterHasClusters<D>(&clusters_available); e != cudaSuccess) return e;
  if (requested_slices > 0) {
    slices = clusters_available ? std::min(requested_slices, kFilterMaxSlices) : 1;
  } else if (cudaError_t e = FilterSlicesThatFit<D>(num_target_rows, &slices); e != cudaSuccess) {
    return e;
  }
  cudaLaunchAttribute attributes[2];
  int n = 0;
  if (dependent != nullptr) attributes[n++] = *dependent;
  if (slices > 1) {
    attributes[n].id = cudaLaunchAttributeClusterDimension;
    attributes[n].val.clusterDim.x = static_cast<unsigned>(slices);
    attributes[n].val.clusterDim.y = 1;
    attributes[n].val.clusterDim.z = 1;
    ++n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(num_target_rows * slices));
  config.blockDim = dim3(kFilterThreads);
  config.stream = stream;
  config.attrs = n > 0 ? attributes : nullptr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, FilterKernel<D>, FilterArgs{in, layout, slices});
}

// The race launch a batch gets: its kernel (by value kind, method and the
// blocks per SM it is compiled for) and its blocks per sequence. Host
// queries only, cached: safe inside stream capture.
struct RacePlan {
  void (*kernel)(RaceArgs) = nullptr;
  int32_t blocks_per_sequence = 0;
};

template <SampleDtype D>
cudaError_t PlanRace(const RejectionBatchInput& in, const RejectionScratch& scratch, RacePlan* plan) {
  const bool logits_exact = in.kind == SampleValueKind::kLogits && in.method == SampleMethod::kExact;
  // Log-probabilities need no row pass (unless validate_full_rows): the race
  // kernel converts the two scalars per position and the sampled row(s) as it
  // reads them.
  void (*race)(RaceArgs) = logits_exact ? AcceptRaceKernel<D, RaceMode::kLogitsExact>
                            : in.method == SampleMethod::kSigmoid ? AcceptRaceKernel<D, RaceMode::kSigmoid>
                            : in.kind == SampleValueKind::kLogProbabilities
                                ? AcceptRaceKernel<D, RaceMode::kLogProbabilities>
                                : AcceptRaceKernel<D, RaceMode::kProbabilities>;
  // Never plan for more blocks per SM than fit (registers: 128 per thread,
  // kRaceBlocksPerSm; shared memory: 40 KB of staging a block): a plan
  // beyond that is a second wave. Never more than kRaceBlocksPerSm either,
  // which bounds the race slots a batch needs (RejectionRaceSlotsBound).
  int32_t fit = 0;
  if (cudaError_t e = RaceBlocksThatFit(race, &fit); e != cudaSuccess) return e;
  const int32_t planned =
      scratch.race_blocks_per_sm > 0 ? scratch.race_blocks_per_sm : RejectionRaceBlocksPerSm(in.num_sequences);
  const int32_t blocks_per_sm = std::min({planned, fit, kRaceBlocksPerSm});
  plan->kernel = race;
  plan->blocks_per_sequence =
      RejectionRaceBlocksPerSequence(in.num_sequences, in.vocab_size, scratch.num_sms, blocks_per_sm);
  return cudaSuccess;
}

template <SampleDtype D>
cudaError_t LaunchTyped(const RejectionSampleParams& params, const RejectionScratch& scratch, cudaStream_t stream) {
  const RejectionBatchInput& in = params.input;
  const ScratchLayout layout = Carve(scratch.device, scratch.limits);
  const int64_t num_target_rows = static_cast<int64_t>(in.total_draft_tokens) + in.num_sequences;
  const int64_t num_draft_rows = in.has_draft_probs ? in.total_draft_tokens : 0;
  const bool logits_exact = in.kind == SampleValueKind::kLogits && in.method == SampleMethod::kExact;
  const bool row_pass = logits_exact || in.validate_full_rows;
  const int32_t num_chunks = rejection::NumChunks(in.vocab_size);
  RacePlan race;
  if (cudaError_t e = PlanRace<D>(in, scratch, &race); e != cudaSuccess) return e;
  // Host-finished races: the caller sized the slots for this plan, and no
  // outcome that needs the token on the device was asked for.
  if (params.output.race_slots != nullptr &&
      (params.output.race_slots_per_sequence != race.blocks_per_sequence ||
       params.output.greedy_target_tokens != nullptr)) {
    return cudaErrorInvalidValue;
  }
  bool dependent = false;
  if (cudaError_t e = DeviceTakesDependentLaunch(&dependent); e != cudaSuccess) return e;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (row_pass) {
    RowPassArgs args{in,
                     layout,
                     num_target_rows,
                     num_draft_rows,
                     num_chunks,
                     logits_exact ? RowPassMode::kNormalize : RowPassMode::kCheck,
                     logits_exact && in.any_top_k_top_p,
                     0,
                     0,
                     FastDivisor{}};
    const int64_t rows = num_target_rows + num_draft_rows;
    // Runs were measured on the normalizer pass only: the full-row check of
    // probability rows keeps one chunk per block unless a test asks.
    args.chunks_per_block = scratch.row_pass_chunks_per_block > 0
                                ? std::min(scratch.row_pass_chunks_per_block, num_chunks)
                            : logits_exact ? RejectionRowPassChunksPerBlock(D, rows, num_chunks, scratch.num_sms)
                                           : 1;
    args.blocks_per_row = (num_chunks + args.chunks_per_block - 1) / args.chunks_per_block;
    args.row_of_block = FastDivisor::For(static_cast<uint32_t>(args.blocks_per_row));
    const int64_t blocks = rows * args.blocks_per_row;
    if (args.chunks_per_block == 1 && args.mode == RowPassMode::kCheck) {
      RowCheckKernel<D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    } else if (args.chunks_per_block == 1) {
      RowPassKernel<D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    } else {
      RowPassRunKernel<D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    }
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>((num_target_rows + num_draft_rows + kCombineThreads / 32 - 1) /
                                                (kCombineThreads / 32)));
    config.blockDim = dim3(kCombineThreads);
    config.stream = stream;
    config.attrs = dependent ? &attribute : nullptr;
    config.numAttrs = dependent ? 1 : 0;
    if (cudaError_t e = cudaLaunchKernelEx(&config, CombineRowsKernel, args); e != cudaSuccess) return e;
  }
  if (logits_exact && in.any_top_k_top_p) {
    if (cudaError_t e = LaunchFilter<D>(in, layout, num_target_rows, scratch.filter_slices,
                                        dependent ? &attribute : nullptr, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  RaceArgs args{in, params.output, layout, num_target_rows, race.blocks_per_sequence, logits_exact,
                !logits_exact && in.validate_full_rows};
  const int64_t blocks = static_cast<int64_t>(args.blocks_per_sequence) * in.num_sequences;
  // After a row pass the race is a programmatic dependent of the combine
  // (or filter) grid: it waits for it before its decision reads the
  // normalizers, and its launch overlaps that grid.
  cudaLaunchConfig_t race_config{};
  race_config.gridDim = dim3(static_cast<unsigned>(blocks));
  race_config.blockDim = dim3(kThreads);
  race_config.dynamicSmemBytes = kRaceStageBytes;
  race_config.stream = stream;
  race_config.attrs = (dependent && row_pass) ? &attribute : nullptr;
  race_config.numAttrs = (dependent && row_pass) ? 1 : 0;
  return cudaLaunchKernelEx(&race_config, race.kernel, args);
}

}  // namespace

int32_t RejectionRowPassChunksPerBlock(SampleDtype dtype, int64_t rows, int32_t num_chunks, int32_t num_sms) {
  // Measured on the H100 (bench/sampling/results/2026-11-26-rowpass): runs
  // of 8 pay where the pass is issue-bound and many waves long, i.e. 16-bit
  // rows from B = 32 on (bf16 B = 128: 475.5 -> 417.0 us, B = 32: 131.7 ->
  // 126.3); fp32 rows, which read twice the bytes per instruction, lose at
  // every B (B = 128: 496.7 -> 540.6), as does a short pass (bf16 B = 8,
  // 6.5 waves: 51.5 -> 55.8), where the runs leave SMs idle at the tail.
  // Waves are counted at 6 one-chunk blocks per SM, the occupancy the
  // crossover was first measured at. Since the one-chunk blocks leave the
  // temperature lookup to warp 0 (2026-11-29), they beat the runs at B = 32
  // (gamma = 8, 26 waves on 132 SMs) and tie at B = 64 (52): H200, bf16 B=32
  // 104.2-104.5 against 109.4-109.5 us, B=64 196.2-196.4 against 195.6-196.2
  // (bench/sampling/results/2026-11-29-rowpass-barriers, run 3), so runs
  // started at 48 waves (at 16 before: bf16 B=24 one-chunk 97.7 against
  // runs 97.0 us, run 5 of 2026-11-27-rowpass-occupancy, H100). Since runs
  // reduce two chunks at a time (2026-11-29), runs of 8 beat one-chunk
  // blocks at bf16 B=48 (39 waves: 147.4-147.7 against 152.9-153.1 us) and
  // trail them by 0.3 at B=32 (26 waves: 105.2 against 104.9; H200, run 2
  // of bench/sampling/results/2026-11-29-chunk-pairs), so they start at 32
  // waves, B >= 40 at gamma = 8 on 132 SMs. Since the 16-bit runs keep
  // their values packed and run 6 blocks per SM (2026-11-29), runs of 4 beat
  // one-chunk blocks in unfiltered batches from 6 waves on (H200, bf16,
  // gamma = 8: B=8 39.3-39.5 -> 39.0-39.1 us, fp16 39.6 -> 39.2, B=12 50.0-50.1
  // -> 48.9, B=16 61.3-61.5 -> 59.9, B=24 82.7 -> 80.0-80.1 (runs of 8 80.9-81.0),
  // B=32 104.3-104.4 -> 103.0-103.1 (runs of 8 102.6-103.0); B=4, 3 waves,
  // lost 1.5-1.8 us in runs of 2). Filtered batches (whose pass takes the
  // target rows last and copies their warp maxima for the filter) lost with
  // runs then (B=8 57.5-57.6 -> 58.2-58.6 us; runs 3 and 4 of
  // bench/sampling/results/2026-11-29-unpack-late) and gain since a chunk
  // pair's maxima travel as one 16-bit pair: bf16 B=8 58.0-58.1 -> 57.6-57.9,
  // B=16 87.0-87.2 -> 83.7-83.8, B=32 151.3-151.7 -> 148.0-148.2 (B=4, below
  // 6 waves, 45.2-45.3 -> 46.0-46.2: lost; run 2 of
  // bench/sampling/results/2026-11-29-pair-max), so they take the same plan.
  if (dtype == SampleDtype::kFloat32) return 1;
  const int64_t single_chunk_waves = rows * num_chunks / (int64_t{kRowPassBlocksPerSm} * std::max(1, num_sms));
  if (single_chunk_waves >= kRowPassRunMinWaves) return std::min(kRowPassMaxChunksPerBlock, num_chunks);
  if (single_chunk_waves >= kRowPassShortRunMinWaves) return std::min(kRowPassShortRunChunks, num_chunks);
  return 1;
}

int32_t RejectionRaceBlocksPerSm(int32_t num_sequences) {
  // Two at every batch size. Below 32 sequences a block's share is a few
  // quads per thread and the sweep's per-block fixed costs (decision,
  // seeding the bounds, the merge) dominate, so fewer, larger shares win
  // (H200, 2026-11-21: b=8 13.7 vs 14.6 us). From 32 on a third block per SM
  // won on the H200 that day (b=128: 60.8 vs 63.0 us), but the race then
  // streams at what DRAM gives this pattern whatever the plan (H100,
  // 2026-11-26, probabilities b=128: 65.5 / 63.5 / 64.9 us at 1 / 2 / 3
  // blocks per SM), and the kernel compiled for 2 runs its sweep without
  // spills (b=32 21.2 vs 21.6 us, b=64 37.6 vs 38.8). Past 264 sequences
  // (G=1, several waves) 3 blocks leave a short last wave: b=512 218 vs 274
  // us (bench/sampling/results/2026-11-26-item5).
  (void)num_sequences;
  return 2;
}

int32_t RejectionRaceBlocksPerSequence(int32_t num_sequences, int32_t vocab_size, int32_t num_sms,
                                       int32_t blocks_per_sm) {
  if (blocks_per_sm <= 0) blocks_per_sm = RejectionRaceBlocksPerSm(num_sequences);
  // Rounded down: b * G must not exceed the blocks that fit in one wave, or a
  // handful of blocks run alone in a second one (the H100 run at b=8 with G=50,
  // 400 blocks for 396 slots, cost 24.3 us against 19.2 us in one wave).
  const int32_t wanted = std::max(1, blocks_per_sm) * std::max(1, num_sms) / std::max(1, num_sequences);
  return std::clamp(wanted, 1, MaxRaceBlocks(vocab_size));
}

cudaError_t RejectionRaceSlotsPerSequence(const RejectionBatchInput& in, const RejectionScratch& scratch,
                                          int32_t* slots) {
  if (slots == nullptr) return cudaErrorInvalidValue;
  RacePlan plan;
  cudaError_t e = cudaErrorInvalidValue;
  switch (in.dtype) {
    case SampleDtype::kFloat32: e = PlanRace<SampleDtype::kFloat32>(in, scratch, &plan); break;
    case SampleDtype::kFloat16: e = PlanRace<SampleDtype::kFloat16>(in, scratch, &plan); break;
    case SampleDtype::kBFloat16: e = PlanRace<SampleDtype::kBFloat16>(in, scratch, &plan); break;
  }
  if (e == cudaSuccess) *slots = plan.blocks_per_sequence;
  return e;
}

int64_t RejectionRaceSlotsBound(const RejectionScratchLimits& limits, int32_t num_sms) {
  // G = clamp(blocks_per_sm * SMs / b, 1, ...) with blocks_per_sm <=
  // kRaceBlocksPerSm: b * G is at most b, or blocks_per_sm * SMs.
  return std::max<int64_t>(limits.max_sequences, int64_t{kRaceBlocksPerSm} * num_sms);
}

cudaError_t RejectionFilterSlices(SampleDtype dtype, int64_t num_target_rows, int32_t* slices) {
  switch (dtype) {
    case SampleDtype::kFloat32: return FilterSlicesThatFit<SampleDtype::kFloat32>(num_target_rows, slices);
    case SampleDtype::kFloat16: return FilterSlicesThatFit<SampleDtype::kFloat16>(num_target_rows, slices);
    case SampleDtype::kBFloat16: return FilterSlicesThatFit<SampleDtype::kBFloat16>(num_target_rows, slices);
  }
  return cudaErrorInvalidValue;
}

size_t RejectionScratchBytes(const RejectionScratchLimits& limits) { return Carve(nullptr, limits).bytes; }

cudaError_t InitRejectionScratch(void* device_memory, size_t bytes, const RejectionScratchLimits& limits,
                                 cudaStream_t stream, RejectionScratch* scratch) {
  if (scratch == nullptr || device_memory == nullptr || limits.max_sequences < 1 || limits.max_vocab_size < 1 ||
      limits.max_vocab_size > (1 << 20) || limits.max_total_draft_tokens < limits.max_sequences ||
      bytes < RejectionScratchBytes(limits)) {
    return cudaErrorInvalidValue;
  }
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  int sms = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
    return e;
  }
  // Race words and flags start at zero; every launch leaves them at zero again.
  if (cudaError_t e = cudaMemsetAsync(device_memory, 0, Carve(nullptr, limits).zeroed_bytes, stream);
      e != cudaSuccess) {
    return e;
  }
  *scratch = RejectionScratch{device_memory, bytes, limits, sms, 0};
  return cudaSuccess;
}

cudaError_t LaunchRejectionSample(const RejectionSampleParams& params, const RejectionScratch& scratch,
                                  cudaStream_t stream) {
  const RejectionBatchInput& in = params.input;
  if (in.num_sequences == 0) return cudaSuccess;
  if (scratch.device == nullptr || in.num_sequences > scratch.limits.max_sequences ||
      in.total_draft_tokens > scratch.limits.max_total_draft_tokens ||
      in.vocab_size > scratch.limits.max_vocab_size || in.vocab_size < 1) {
    return cudaErrorInvalidValue;
  }
  switch (in.dtype) {
    case SampleDtype::kFloat32: return LaunchTyped<SampleDtype::kFloat32>(params, scratch, stream);
    case SampleDtype::kFloat16: return LaunchTyped<SampleDtype::kFloat16>(params, scratch, stream);
    case SampleDtype::kBFloat16: return LaunchTyped<SampleDtype::kBFloat16>(params, scratch, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace specverify
