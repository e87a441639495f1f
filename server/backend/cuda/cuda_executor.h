// The CUDA backend, behind the same Backend interface as the CPU reference.
// Greedy chain batches are decided on the host, where their tokens arrive,
// and the GPU copies the accepted rows (kernels/greedy/greedy_planned_pack.h:
// one launch, or one gather from the workers' regions, and no results to
// copy back); batches with more draft tokens than
// CudaExecutorOptions::greedy_host_decision_max_rows are verified on the
// device instead (fused or two-step, chosen per batch by the
// GreedyDispatcher). Sampled batches run the rejection-sampling kernels
// (kernels/sampling), then, with KV rows, one copy of each sequence's
// accepted rows to where they are answered (kernels/layout/row_copy.h,
// AcceptedRowCopyParams). The launches are in cuda_executor_launch.cc.
//
// Pipeline. Every device buffer, pinned buffer, stream, event and kernel
// scratch is reserved at start-up for the configured limits; nothing is
// allocated per batch. A batch goes through:
//   AcquireStaging (batcher) -> takes a free slot; the batch's arrays view
//                               the slot's pinned buffers, and the batch
//                               builder copies the requests' payload into
//                               them (the one host copy)
//   Submit (same thread)     -> a greedy chain batch is decided on the host
//                               here; then on the slot's stream, all
//                               asynchronous: one H2D copy of the inputs
//                               (a sampled batch's section rides along when
//                               it fits after them, else a second copy),
//                               event, the kernel(s), event, one D2H copy of
//                               the results (none when the host decided; and
//                               of the packed rows into the slot's pinned
//                               buffer when a request takes them inline),
//                               completion event; returns at once
//   completion thread        -> waits on the completion event (the one sync
//                               of a batch), checks the stream's error, copies
//                               the pinned results into the Batch (unless the
//                               host decided them), calls `done`; the slot
//                               goes back when the batcher destroys the batch
//                               (its StagingLease)
// With two or more slots (each its own stream, pinned staging, device inputs
// and results, events and GreedyScratch) the staging of batch N+1 and the
// completion work of batch N-1 overlap the execution of batch N.
//
// The two-step path runs as plain stream launches (ballot verify, CUB scan,
// pack), not as a CUDA graph: its grid depends on each batch's shape, and
// the fused path (one launch; two with programmatic dependent launch for
// mid-size batches, kernels/greedy/greedy_pdl.cuh) serves the small batches
// where launch overhead would matter.
//
// Faults. Any CUDA error (a launch, a copy, or a sticky device error seen at
// the batch's completion) fails that batch and every later one with
// INTERNAL naming the error; health() returns it from then on. The batcher
// sees health() fail, answers INTERNAL, and the server stops serving and
// exits non-zero. Results of a failed device are never returned.
//
// Thread safety: Submit from any thread; the accessors are thread-safe.
#ifndef SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_H_
#define SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/common/cuda_status.h"
#include "kernels/greedy/greedy_cuda.h"
#include "kernels/greedy/greedy_dispatch.h"
#include "kernels/sampling/rejection_sample.h"
#include "kernels/tree/tree_cuda.h"
#include "server/backend/backend.h"
#include "server/backend/cuda/cuda_executor_options.h"

namespace specverify::server {

class CudaExecutor final : public Backend {
 public:
  // Reserves everything, then calibrates the dispatcher unless a threshold
  // is configured. RESOURCE_EXHAUSTED naming the flags to lower when the
  // device cannot hold the slots; FAILED_PRECONDITION when the ordinal does
  // not exist; INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(
      const CudaExecutorOptions& options);
  ~CudaExecutor() override;

  BackendDescription Describe() const override;
  absl::StatusOr<std::unique_ptr<ArenaMemory>> AllocateArenaMemory(int64_t bytes) override;
  int max_batches_in_flight() const override { return options_.slots; }
  // A free slot's pinned buffers. RESOURCE_EXHAUSTED naming the slot limits
  // when the shape exceeds them.
  absl::StatusOr<std::unique_ptr<StagingLease>> AcquireStaging(const StagingShape& shape,
                                                                Batch* batch) override;
  // Where a sampled batch of this shape stages its sampled section: at this
  // offset of the slot's inputs buffers, right after the inputs, when both
  // fit there and the inputs are all staged by the host (one H2D copy
  // carries both); else -1, in the slot's sampled buffers (two copies).
  int64_t SampledSectionInInputs(const StagingShape& shape) const;
  // Launches on the calling thread (asynchronous CUDA calls only).
  // REQUIRES: batch->staging came from this executor's AcquireStaging.
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;
  // CUDA memory of this device (CUDA IPC) or system shared memory mapped for
  // the device (server/backend/cuda/cuda_region.h).
  absl::StatusOr<std::unique_ptr<RegionMapping>> MapRegion(const RegionSpec& spec) override;
  absl::Status health() const override;
  void Shutdown() override;

  const GreedyDispatchInfo& dispatch_info() const { return dispatcher_->info(); }
  // Device bytes reserved for the slots (inputs, results, scratch).
  int64_t reserved_device_bytes() const { return reserved_device_bytes_; }
  // Testing: the next batch launches an invalid configuration.
  void InjectFaultForTesting();

 private:
  // One batch's worth of everything, reused batch after batch.
  struct Slot {
    int index = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t kernel_start = nullptr;
    cudaEvent_t kernel_stop = nullptr;
    cudaEvent_t completed = nullptr;
    // offsets | draft tokens | target tokens | draft KV (staging.h); after
    // the H2D copy the draft-KV section takes the packed rows back for
    // inline answers (Batch::packed_kv_host).
    PinnedBuffer pinned_inputs;
    DeviceBuffer device_inputs;   // same layout
    DeviceBuffer device_results;  // accepted | next | packed offsets | mismatch
    PinnedBuffer pinned_results;  // same layout
    // Device views of the two pinned buffers above (cudaHostGetDevicePointer)
    // for batches small enough to skip the copies; null when unavailable.
    std::byte* mapped_inputs = nullptr;
    std::byte* mapped_results = nullptr;
    GreedyScratchBuffer scratch;
    // Sampled batches (issue #8): per-sequence parameters | target rows |
    // draft rows, staged like the inputs above, and the rejection-sampling
    // scratch (one per stream).
    PinnedBuffer pinned_sampled;
    DeviceBuffer device_sampled;
    DeviceBuffer rejection_scratch_memory;
    RejectionScratch rejection_scratch;
    // Token trees (docs/TREES.md): the look-back state of the tree launches.
    TreeScratchBuffer tree_scratch;
  };
  class SlotLease;
  // A batch on its way through the pipeline.
  struct Work {
    std::unique_ptr<Batch> batch;
    BatchDone done;
    Slot* slot = nullptr;         // null: never launched
    absl::Status status;          // set when it failed before or at launch
    GreedyPath path = GreedyPath::kFused;
    // Greedy chains: results decided on the host at launch, none copied back.
    bool host_decided = false;
    // False when the host's decision left the device nothing to do (no KV
    // rows, or none accepted): nothing was enqueued, and the completion
    // thread answers the batch without waiting on the slot's events.
    bool needs_device = true;
    // Sampled chains without KV rows: no pack ran, so the completion makes
    // the packed offsets from the accepted lengths.
    bool packed_offsets_on_host = false;
    // Sampled chains: the race's blocks per sequence whose winners came back
    // in the results' race slots for the completion to fold (0: none).
    int32_t race_slots_per_sequence = 0;
    int64_t results_bytes = 0;
    // The kernels read the staged inputs / write the results through the
    // pinned buffers' device mapping: no H2D / D2H copy of them.
    bool inputs_in_place = false;
    bool results_in_place = false;
  };

  explicit CudaExecutor(const CudaExecutorOptions& options);
  // The rejection-sampling scratch of every slot: the largest batch.
  RejectionScratchLimits SampledScratchLimits() const;
  absl::Status Reserve();
  absl::Status ReserveSlot(Slot& slot);
  void CompletionLoop();
  // Stages and launches `work` on its slot; an error status is a device fault.
  absl::Status Launch(Work& work, bool inject_fault);
  // A greedy chain batch: the host's decision into the batch's results and
  // the staged packed offsets, one H2D copy, then the accepted rows only
  // (GreedyPlannedPack, or one LaunchRowGather from regions and/or straight
  // into KV_RETURN_REGION outputs); nothing at all when no row is accepted
  // or the batch has none.
  absl::Status LaunchGreedyDecidedOnHost(Work& work, bool inject_fault);
  // The same batch verified and packed on the device (more draft tokens than
  // greedy_host_decision_max_rows): the dispatcher's fused or two-step path,
  // results copied back.
  absl::Status LaunchGreedyOnDevice(Work& work, bool inject_fault);
  // A sampled batch: LaunchRejectionSample with race slots, then, when it has
  // KV rows, one copy of each sequence's accepted rows; one D2H of results
  // and slots, which the completion folds (FinishRejectionOutcomes).
  absl::Status LaunchSampled(Work& work, bool inject_fault);
  // A tree batch (greedy: one verify-and-pack launch; sampled: the tree
  // sampling launch, then the pack of its paths), results and paths back.
  absl::Status LaunchTree(Work& work, bool inject_fault);
  // The batch builder wrote the inputs into the slot's pinned buffer: one H2D
  // copy of `bytes` moves them to `dev` (none when the kernels read them in
  // place), one of `sampled_bytes` of the distribution section when a
  // sampled batch has one, then the start event, then the armed fault, if
  // any.
  absl::Status CopyInputsAndStart(Work& work, std::byte* dev, int64_t bytes, bool inject_fault,
                                  int64_t sampled_bytes = 0);
  // CopyInputsAndStart for a tree or sampled batch of layout `il` whose
  // sampled section (if any) is at `sampled_at` of the inputs
  // (SampledSectionInInputs) or, at -1, in the slot's sampled buffers.
  absl::Status CopyStagedAndStart(Work& work, std::byte* dev, const StagingLayout& il,
                                  int64_t sampled_at, bool inject_fault);
  // Queues the D2H copies of the results (none when results_bytes is 0) and
  // of packed_bytes of packed rows for inline answers (the exact size when
  // the host decided, else the upper bound), then the completion event.
  absl::Status CopyBack(Work& work, int64_t kv_section_offset, int64_t results_bytes,
                        int64_t packed_bytes);
  // The data plane's copies on the batch's stream: region KV rows into the
  // device draft-KV section before the kernels, packed rows into output
  // regions after them (kernels/layout/row_copy.h).
  absl::Status GatherRegionRows(const Work& work, const std::byte* tables, std::byte* draft_kv);
  absl::Status DeliverRegionRows(const Work& work, const std::byte* tables,
                                 const int32_t* packed_row_offsets);
  // Copies results out of the slot after the batch's completion event.
  absl::Status Finish(Work& work);
  // Records the first device fault; returns the sticky status.
  absl::Status Fail(const absl::Status& cause);
  Slot* AcquireSlot();
  void ReleaseSlot(Slot* slot);

  const CudaExecutorOptions options_;
  std::string device_name_;
  int64_t max_total_rows_ = 0;
  int64_t inputs_capacity_ = 0;
  int64_t results_capacity_ = 0;
  int64_t sampled_capacity_ = 0;  // bytes of a slot's sampled staging
  int64_t reserved_device_bytes_ = 0;
  std::unique_ptr<GreedyDispatcher> dispatcher_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable absl::Mutex mu_;
  std::deque<Work> launched_ ABSL_GUARDED_BY(mu_);
  // Batches ever pushed to launched_: the completion thread polls it without
  // the lock while it spins (completion_spin_us).
  std::atomic<int64_t> launched_total_{0};
  std::vector<Slot*> free_slots_ ABSL_GUARDED_BY(mu_);
  absl::Status fault_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool completion_done_ ABSL_GUARDED_BY(mu_) = false;
  int64_t batches_staged_ ABSL_GUARDED_BY(mu_) = 0;
  bool inject_fault_ ABSL_GUARDED_BY(mu_) = false;

  std::thread completion_thread_;
};

// GPUs this process sees (cudaGetDeviceCount; 0 when there is no driver or
// no device).
absl::StatusOr<int> CudaDeviceCount();

// The CUDA device's name, e.g. "NVIDIA H100 80GB HBM3".
absl::StatusOr<std::string> CudaDeviceName(int device_ordinal);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_H_
