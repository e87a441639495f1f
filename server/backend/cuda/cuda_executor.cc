#include "server/backend/cuda/cuda_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "kernels/greedy/greedy_planned_pack.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/layout/row_copy_cuda.h"
#include "kernels/tree/tree_cuda.h"
#include "kernels/tree/tree_reference.h"
#include "server/backend/cuda/cuda_arena_memory.h"
#include "server/backend/cuda/cuda_region.h"

namespace specverify::server {
namespace {


// status_codes / error_positions are the rejection-sampling outcome codes;
// greedy_next takes the greedy pack's next tokens of a sampled batch (the
// sampled ones are kept). Greedy batches copy them back too (2-3 KiB at most).
// Tree batches add accepted_nodes (the paths' CSR, copied back) and
// path_nodes (the sampled kernel's per-tree slots, device only), [rows] each.
struct ResultLayout {
  int64_t accepted = 0, next = 0, packed_offsets = 0, status_codes = 0, error_positions = 0,
          greedy_next = 0, mismatch = 0, accepted_nodes = 0, path_nodes = 0, total = 0;
};
ResultLayout LayoutResults(int64_t b, int64_t tree_rows = 0) {
  ResultLayout l;
  l.next = StagingAlignUp(4 * b);
  l.packed_offsets = l.next + StagingAlignUp(4 * b);
  l.status_codes = l.packed_offsets + StagingAlignUp(4 * (b + 1));
  l.error_positions = l.status_codes + StagingAlignUp(4 * b);
  l.greedy_next = l.error_positions + StagingAlignUp(4 * b);
  l.mismatch = l.greedy_next + StagingAlignUp(4 * b);
  l.accepted_nodes = l.mismatch + StagingAlignUp(b);
  l.path_nodes = l.accepted_nodes + StagingAlignUp(4 * tree_rows);
  l.total = tree_rows > 0 ? l.path_nodes + 4 * tree_rows : l.mismatch + b;
  return l;
}

// A polite spin: lets the sibling hyperthread run while this one polls.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

absl::Status ReserveError(int ordinal, const char* what, int64_t bytes, int slot,
                          const absl::Status& cause) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot reserve ", bytes, " bytes of ", what, " for batch slot ", slot, " on cuda:",
      ordinal, " (", cause.message(),
      "); lower --max_batch_bytes/--max_message_bytes (draft KV per batch), "
      "--max_batch_sequences, --max_draft_tokens or --cuda_slots"));
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    return 0;
  }
  SV_CUDA_RETURN_IF_ERROR(e);
  return count;
}

absl::StatusOr<std::string> CudaDeviceName(int device_ordinal) {
  cudaDeviceProp prop;
  SV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_ordinal));
  return std::string(prop.name);
}

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(
    const CudaExecutorOptions& options) {
  if (options.slots < 1 || options.slots > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda_slots is ", options.slots, "; must lie in [1, 16]"));
  }
  if (options.max_batch_sequences < 1 || options.max_batch_sequences > kMaxBatchSequences ||
      options.max_draft_tokens < 1 || options.max_draft_tokens > kMaxDraftTokens ||
      options.max_batch_kv_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA executor limits out of range: max_batch_sequences=", options.max_batch_sequences,
        " max_draft_tokens=", options.max_draft_tokens,
        " max_batch_kv_bytes=", options.max_batch_kv_bytes));
  }
  if (options.dispatch_threshold_bytes < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dispatch_threshold_bytes is ", options.dispatch_threshold_bytes,
        "; must be >= 0 (or -1 to calibrate)"));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (options.device_ordinal < 0 || options.device_ordinal >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=cuda:", options.device_ordinal, ": ", count, " CUDA device(s) visible"));
  }
  std::unique_ptr<CudaExecutor> executor(new CudaExecutor(options));
  SV_RETURN_IF_ERROR(executor->Reserve());
  return executor;
}

CudaExecutor::CudaExecutor(const CudaExecutorOptions& options) : options_(options) {}

absl::Status CudaExecutor::Reserve() {
  SV_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device_ordinal));
  SV_ASSIGN_OR_RETURN(device_name_, CudaDeviceName(options_.device_ordinal));
  max_total_rows_ = int64_t{options_.max_batch_sequences} * options_.max_draft_tokens;
  StagingShape largest;
  largest.sequences = options_.max_batch_sequences;
  largest.draft_rows = max_total_rows_;
  largest.kv_bytes = options_.max_batch_kv_bytes;
  // Room for the data plane's tables too: every sequence's KV in a region,
  // every request (at most one per sequence) returning into one.
  largest.kv_from_regions = true;
  largest.deliveries = options_.max_batch_sequences;
  inputs_capacity_ = LayoutStaging(largest).inputs_total;
  results_capacity_ = LayoutResults(options_.max_batch_sequences, max_total_rows_).total;
  // A batch's distribution rows are part of its payload, which the batcher
  // bounds by max(--max_batch_bytes, one request <= --max_message_bytes).
  sampled_capacity_ =
      StagingAlignUp(int64_t{sizeof(SequenceSamplingParams)} * options_.max_batch_sequences) +
      options_.max_batch_kv_bytes + kStagingAlign +
      // Row tables of distribution rows read in place from regions.
      2 * StagingAlignUp(int64_t{sizeof(void*)} * (max_total_rows_ + options_.max_batch_sequences));
  for (int i = 0; i < options_.slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->index = i;
    SV_RETURN_IF_ERROR(ReserveSlot(*slot));
    slots_.push_back(std::move(slot));
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) free_slots_.push_back(it->get());
  }

  GreedyDispatchConfig config;
  if (options_.dispatch_threshold_bytes >= 0) {
    config.threshold_bytes = options_.dispatch_threshold_bytes;
  }
  SV_ASSIGN_OR_RETURN(GreedyDispatcher dispatcher,
                      GreedyDispatcher::Create(config, slots_[0]->stream));
  dispatcher_ = std::make_unique<GreedyDispatcher>(std::move(dispatcher));

  completion_thread_ = std::thread([this] { CompletionLoop(); });
  return absl::OkStatus();
}

absl::Status CudaExecutor::ReserveSlot(Slot& slot) {
  const int ordinal = options_.device_ordinal;
  SV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking));
  SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.kernel_start));
  SV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.kernel_stop));
  SV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&slot.completed, cudaEventDisableTiming));

  const auto device = [&](const char* what, int64_t bytes, DeviceBuffer* out) -> absl::Status {
    absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Create(static_cast<size_t>(bytes));
    if (!buffer.ok()) {
      (void)cudaGetLastError();
      return ReserveError(ordinal, what, bytes, slot.index, buffer.status());
    }
    reserved_device_bytes_ += bytes;
    *out = *std::move(buffer);
    return absl::OkStatus();
  };
  const auto pinned = [&](const char* what, int64_t bytes, PinnedBuffer* out) -> absl::Status {
    absl::StatusOr<PinnedBuffer> buffer = PinnedBuffer::Create(static_cast<size_t>(bytes));
    if (!buffer.ok()) {
      (void)cudaGetLastError();
      return ReserveError(ordinal, what, bytes, slot.index, buffer.status());
    }
    *out = *std::move(buffer);
    return absl::OkStatus();
  };
  SV_RETURN_IF_ERROR(device("device memory (inputs)", inputs_capacity_, &slot.device_inputs));
  SV_RETURN_IF_ERROR(pinned("pinned host memory (inputs)", inputs_capacity_, &slot.pinned_inputs));
  SV_RETURN_IF_ERROR(device("device memory (results)", results_capacity_, &slot.device_results));
  SV_RETURN_IF_ERROR(
      pinned("pinned host memory (results)", results_capacity_, &slot.pinned_results));
  if (options_.mapped_inputs_max_bytes > 0) {
    void* inputs = nullptr;
    void* results = nullptr;
    if (cudaHostGetDevicePointer(&inputs, slot.pinned_inputs.data(), 0) == cudaSuccess &&
        cudaHostGetDevicePointer(&results, slot.pinned_results.data(), 0) == cudaSuccess) {
      slot.mapped_inputs = static_cast<std::byte*>(inputs);
      slot.mapped_results = static_cast<std::byte*>(results);
    } else {
      (void)cudaGetLastError();  // not mappable here: every batch copies
    }
  }

  GreedyScratchLimits limits;
  limits.max_sequences = options_.max_batch_sequences;
  limits.max_total_draft_rows = max_total_rows_;
  absl::StatusOr<GreedyScratchBuffer> scratch = AllocateGreedyScratch(limits, slot.stream);
  if (!scratch.ok()) {
    (void)cudaGetLastError();
    return ReserveError(ordinal, "device memory (kernel scratch)", 0, slot.index, scratch.status());
  }
  reserved_device_bytes_ += static_cast<int64_t>(scratch->view.bytes);
  slot.scratch = *std::move(scratch);
  absl::StatusOr<TreeScratchBuffer> tree = AllocateTreeScratch(options_.max_batch_sequences, slot.stream);
  if (!tree.ok()) {
    (void)cudaGetLastError();
    return ReserveError(ordinal, "device memory (tree scratch)", 0, slot.index, tree.status());
  }
  reserved_device_bytes_ += static_cast<int64_t>(tree->view.bytes);
  slot.tree_scratch = *std::move(tree);

  SV_RETURN_IF_ERROR(device("device memory (sampled inputs)", sampled_capacity_,
                            &slot.device_sampled));
  SV_RETURN_IF_ERROR(pinned("pinned host memory (sampled inputs)", sampled_capacity_,
                            &slot.pinned_sampled));
  RejectionScratchLimits rejection;
  rejection.max_sequences = options_.max_batch_sequences;
  rejection.max_total_draft_tokens = static_cast<int32_t>(max_total_rows_);
  rejection.max_vocab_size = kMaxSampledVocabSize;
  const int64_t rejection_bytes = static_cast<int64_t>(RejectionScratchBytes(rejection));
  SV_RETURN_IF_ERROR(device("device memory (rejection-sampling scratch)", rejection_bytes,
                            &slot.rejection_scratch_memory));
  SV_CUDA_RETURN_IF_ERROR(InitRejectionScratch(slot.rejection_scratch_memory.data(),
                                               static_cast<size_t>(rejection_bytes), rejection,
                                               slot.stream, &slot.rejection_scratch));
  return absl::OkStatus();
}

CudaExecutor::~CudaExecutor() {
  Shutdown();
  (void)cudaSetDevice(options_.device_ordinal);
  for (auto& slot : slots_) {
    if (slot->stream != nullptr) (void)cudaStreamSynchronize(slot->stream);
    if (slot->kernel_start != nullptr) (void)cudaEventDestroy(slot->kernel_start);
    if (slot->kernel_stop != nullptr) (void)cudaEventDestroy(slot->kernel_stop);
    if (slot->completed != nullptr) (void)cudaEventDestroy(slot->completed);
    if (slot->stream != nullptr) (void)cudaStreamDestroy(slot->stream);
  }
}

BackendDescription CudaExecutor::Describe() const {
  BackendDescription d;
  d.name = "cuda";
  d.device_name = device_name_;
  d.dispatch_threshold_bytes = dispatcher_->threshold_bytes();
  d.region_kinds = {"system", "cuda"};
  d.dispatch_threshold_source = dispatcher_->info().dispatch_threshold_source;
  d.verifies = true;
  return d;
}

absl::StatusOr<std::unique_ptr<ArenaMemory>> CudaExecutor::AllocateArenaMemory(int64_t bytes) {
  absl::StatusOr<std::unique_ptr<CudaArenaMemory>> memory =
      CudaArenaMemory::Create(options_.device_ordinal, bytes);
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<ArenaMemory>(*std::move(memory));
}

// Gives its slot back when the batcher destroys the batch.
class CudaExecutor::SlotLease final : public StagingLease {
 public:
  SlotLease(CudaExecutor* executor, Slot* slot) : executor_(executor), slot_(slot) {}
  ~SlotLease() override { executor_->ReleaseSlot(slot_); }
  CudaExecutor* executor() const { return executor_; }
  Slot* slot() const { return slot_; }

 private:
  CudaExecutor* const executor_;
  Slot* const slot_;
};

absl::StatusOr<std::unique_ptr<StagingLease>> CudaExecutor::AcquireStaging(
    const StagingShape& shape, Batch* batch) {
  const StagingLayout l = LayoutStaging(shape);
  if (shape.sequences < 1 || shape.sequences > options_.max_batch_sequences ||
      shape.draft_rows > max_total_rows_ || shape.kv_bytes > options_.max_batch_kv_bytes ||
      l.inputs_total > inputs_capacity_ || l.sampled_total > sampled_capacity_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch of ", shape.sequences, " sequences, ", shape.draft_rows, " draft rows, ",
        shape.kv_bytes, " KV bytes and ", shape.target_value_bytes + shape.draft_value_bytes,
        " distribution bytes exceeds the CUDA executor's slot (",
        options_.max_batch_sequences, " sequences, ", max_total_rows_, " rows, ",
        options_.max_batch_kv_bytes, " KV bytes, ", sampled_capacity_,
        " staged distribution bytes = max(--max_batch_bytes, --max_message_bytes))"));
  }
  Slot* slot = AcquireSlot();
  ViewStagedBatch(shape, slot->pinned_inputs.as<std::byte>(),
                  slot->pinned_sampled.as<std::byte>(), batch);
  return std::unique_ptr<StagingLease>(new SlotLease(this, slot));
}

void CudaExecutor::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  Work work;
  work.batch = std::move(batch);
  work.done = std::move(done);
  bool inject = false;
  bool stopping;
  absl::Status fault;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
    ++batches_staged_;
    inject = inject_fault_ || batches_staged_ == options_.fail_batch_number_for_testing;
    inject_fault_ = false;
    fault = fault_;
  }
  if (stopping) {
    work.done(std::move(work.batch), absl::UnavailableError("the CUDA executor has shut down"));
    return;
  }
  const auto* lease = dynamic_cast<const SlotLease*>(work.batch->staging.get());
  if (lease == nullptr || lease->executor() != this) {
    work.status = absl::FailedPreconditionError(
        "the batch was not staged by this CUDA executor (Backend::AcquireStaging)");
  } else if (!fault.ok()) {
    work.status = fault;  // a failed device never runs another batch
  } else if (cudaError_t e = cudaSetDevice(options_.device_ordinal); e != cudaSuccess) {
    work.status = Fail(CudaStatus(e, "cudaSetDevice (submitting thread)"));
  } else {
    work.slot = lease->slot();
    if (absl::Status s = Launch(work, inject); !s.ok()) {
      // Shape errors are the batch's own; any CUDA error takes the device out.
      work.status = s.code() == absl::StatusCode::kInternal ? Fail(s) : s;
      // The launch ran on the caller's (gRPC or batcher) thread: leave no
      // error in its thread-local CUDA state for the next launch there to
      // mistake for its own.
      (void)cudaGetLastError();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (!completion_done_) {
      launched_.push_back(std::move(work));
      launched_total_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  // Shut down while launching: nobody will wait on the slot's event.
  if (work.slot != nullptr) (void)cudaStreamSynchronize(work.slot->stream);
  work.done(std::move(work.batch), absl::UnavailableError("the CUDA executor has shut down"));
}

absl::Status CudaExecutor::health() const {
  absl::MutexLock lock(&mu_);
  return fault_;
}

void CudaExecutor::InjectFaultForTesting() {
  absl::MutexLock lock(&mu_);
  inject_fault_ = true;
}

void CudaExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (completion_thread_.joinable()) completion_thread_.join();
}

absl::Status CudaExecutor::Fail(const absl::Status& cause) {
  absl::MutexLock lock(&mu_);
  if (fault_.ok()) {
    fault_ = absl::InternalError(absl::StrCat("cuda:", options_.device_ordinal,
                                              " out of service after a CUDA error: ",
                                              cause.message()));
    std::fprintf(stderr, "specverify-server: %s\n", fault_.ToString().c_str());
  }
  return fault_;
}

CudaExecutor::Slot* CudaExecutor::AcquireSlot() {
  absl::MutexLock lock(&mu_);
  const auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_slots_.empty(); };
  mu_.Await(absl::Condition(&free));
  Slot* slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void CudaExecutor::ReleaseSlot(Slot* slot) {
  absl::MutexLock lock(&mu_);
  free_slots_.push_back(slot);
}

absl::Status CudaExecutor::Launch(Work& work, bool inject_fault) {
  if (work.batch->key.tree) return LaunchTree(work, inject_fault);
  if (work.batch->key.mode == VerifyMode::kSampled) return LaunchSampled(work, inject_fault);
  return work.batch->inputs.total_draft_rows() <= options_.greedy_host_decision_max_rows
             ? LaunchGreedyChains(work, inject_fault)
             : LaunchGreedyOnDevice(work, inject_fault);
}

absl::Status CudaExecutor::LaunchGreedyChains(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  Batch& batch = *work.batch;
  const GreedyHostInputs& in = batch.inputs;
  const int32_t b = in.num_sequences();
  const int64_t row_bytes = in.row_bytes;
  const StagingLayout il = LayoutStaging(batch.shape);
  std::byte* const pin = slot.pinned_inputs.as<std::byte>();
  work.mapped = slot.mapped_inputs != nullptr && il.inputs_total <= options_.mapped_inputs_max_bytes;
  std::byte* const dev = work.mapped ? slot.mapped_inputs : slot.device_inputs.as<std::byte>();
  work.host_decided = true;

  // The decision, on the staged tokens, straight into the batch's results
  // (nothing comes back from the device); the packed offsets also into the
  // staged inputs, where the device copies read them.
  batch.results.Resize(b);
  GreedyVerifyParams decision;
  decision.input = in.view();
  decision.output.accepted_lengths = batch.results.accepted_lengths.data();
  decision.output.next_tokens = batch.results.next_tokens.data();
  decision.output.mismatch = batch.results.mismatch.data();
  decision.output.packed_row_offsets = batch.results.packed_row_offsets.data();
  ReferenceGreedyVerifyRange(decision, 0, b);
  ReferencePackedRowOffsets(decision);
  std::memcpy(pin + il.packed_offsets, batch.results.packed_row_offsets.data(),
              sizeof(int32_t) * static_cast<size_t>(b + 1));
  const int32_t* const packed_offsets = reinterpret_cast<const int32_t*>(dev + il.packed_offsets);
  const int64_t packed_rows = batch.results.packed_row_offsets[b];
  const int32_t max_accepted =
      *std::max_element(batch.results.accepted_lengths.begin(), batch.results.accepted_lengths.end());

  // The staged inputs: offsets, tokens (a few bytes a row; no kernel reads
  // them, but skipping them would cost a second copy), tables and packed
  // offsets, and the draft rows unless they are in regions.
  SV_RETURN_IF_ERROR(CopyInputsAndStart(work, dev, il.inputs_host_filled, inject_fault));
  if (row_bytes > 0 && packed_rows > 0) {
    if (batch.shape.kv_from_regions) {
      // Accepted rows only, from the workers' regions straight to their
      // packed place: the gather's per-sequence row counts are the k's.
      RowGatherParams gather;
      gather.num_sequences = b;
      gather.total_rows = packed_rows;
      gather.max_rows = max_accepted;
      gather.row_bytes = row_bytes;
      gather.draft_offsets = packed_offsets;
      gather.sources = reinterpret_cast<const std::byte* const*>(dev + il.kv_sources);
      gather.rows = batch.packed_kv;
      SV_CUDA_RETURN_IF_ERROR(LaunchRowGather(gather, slot.stream));
    } else {
      GreedyPlannedPack pack;
      pack.num_sequences = b;
      pack.draft_offsets = reinterpret_cast<const int32_t*>(dev + il.offsets);
      pack.packed_row_offsets = packed_offsets;
      pack.draft_kv = dev + il.draft_kv;
      pack.row_bytes = row_bytes;
      pack.packed_kv = batch.packed_kv;
      pack.max_accepted = max_accepted;
      SV_RETURN_IF_ERROR(ValidateGreedyPlannedPack(pack));
      SV_CUDA_RETURN_IF_ERROR(LaunchGreedyPlannedPack(pack, slot.stream));
    }
  }
  SV_RETURN_IF_ERROR(DeliverRegionRows(work, dev, packed_offsets));
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  return CopyBack(work, il.draft_kv, /*results_bytes=*/0, packed_rows * row_bytes);
}

absl::Status CudaExecutor::CopyInputsAndStart(Work& work, std::byte* dev, int64_t bytes,
                                              bool inject_fault) {
  Slot& slot = *work.slot;
  if (!work.mapped) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, slot.pinned_inputs.data(),
                                            static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                            slot.stream));
  }
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_start, slot.stream));
  if (inject_fault) {
    // A real runtime error from an invalid call on the slot's stream: the
    // executor must treat it exactly like a failed launch.
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, dev, 1, static_cast<cudaMemcpyKind>(77),
                                            slot.stream));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::LaunchGreedyOnDevice(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  const GreedyHostInputs& in = work.batch->inputs;
  const int32_t b = in.num_sequences();
  const int64_t rows = in.total_draft_rows();
  const int64_t row_bytes = in.row_bytes;
  const StagingLayout il = LayoutStaging(work.batch->shape);
  const ResultLayout rl = LayoutResults(b);
  work.mapped = slot.mapped_inputs != nullptr && il.inputs_total <= options_.mapped_inputs_max_bytes;
  std::byte* const dev = work.mapped ? slot.mapped_inputs : slot.device_inputs.as<std::byte>();
  std::byte* const res = work.mapped ? slot.mapped_results : slot.device_results.as<std::byte>();

  GreedyDeviceBatch d;
  d.params.input.num_sequences = b;
  d.params.input.draft_offsets = reinterpret_cast<const int32_t*>(dev + il.offsets);
  d.params.input.draft_tokens = reinterpret_cast<const int32_t*>(dev + il.draft_tokens);
  d.params.input.target_tokens = reinterpret_cast<const int32_t*>(dev + il.target_tokens);
  // Region rows are gathered into device memory even when the rest is read
  // in place from pinned memory: the kernels then read them at HBM speed.
  std::byte* const draft_kv =
      work.batch->shape.kv_from_regions ? slot.device_inputs.as<std::byte>() + il.draft_kv
                                        : dev + il.draft_kv;
  d.params.input.draft_kv = row_bytes > 0 ? draft_kv : nullptr;
  d.params.input.row_bytes = row_bytes;
  d.params.output.accepted_lengths = reinterpret_cast<int32_t*>(res + rl.accepted);
  d.params.output.next_tokens = reinterpret_cast<int32_t*>(res + rl.next);
  d.params.output.packed_row_offsets = reinterpret_cast<int32_t*>(res + rl.packed_offsets);
  d.params.output.mismatch = reinterpret_cast<uint8_t*>(res + rl.mismatch);
  d.params.output.packed_kv = row_bytes > 0 ? work.batch->packed_kv : nullptr;
  d.total_draft_rows = rows;
  d.max_gamma = in.max_gamma();
  SV_RETURN_IF_ERROR(ValidateGreedyDeviceBatch(d, slot.scratch.view));

  SV_RETURN_IF_ERROR(CopyInputsAndStart(work, dev, il.inputs_host_filled, inject_fault));
  SV_RETURN_IF_ERROR(GatherRegionRows(work, dev, draft_kv));
  SV_CUDA_RETURN_IF_ERROR(
      dispatcher_->Launch(d, slot.scratch.view, slot.stream, &work.path));
  SV_RETURN_IF_ERROR(DeliverRegionRows(work, dev, d.params.output.packed_row_offsets));
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  // The packed size is known on the device only: the upper bound comes back.
  return CopyBack(work, il.draft_kv, rl.total, rows * row_bytes);
}

absl::Status CudaExecutor::LaunchTree(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  Batch& batch = *work.batch;
  const GreedyHostInputs& in = batch.inputs;
  const int32_t b = in.num_sequences();
  const int64_t rows = in.total_draft_rows();
  const int64_t row_bytes = in.row_bytes;
  const bool sampled = batch.key.mode == VerifyMode::kSampled;
  const StagingLayout il = LayoutStaging(batch.shape);
  const ResultLayout rl = LayoutResults(b, rows);
  std::byte* const pin = slot.pinned_inputs.as<std::byte>();
  std::byte* const dev = slot.device_inputs.as<std::byte>();
  std::byte* const res = slot.device_results.as<std::byte>();
  work.mapped = false;  // tree batches always copy (results include the paths)
  const auto i32 = [](std::byte* base, int64_t at) { return reinterpret_cast<int32_t*>(base + at); };

  // Host views first: the checks the kernels rely on, on the staged bytes.
  GreedyBatchInput greedy_in;
  greedy_in.num_sequences = b;
  greedy_in.draft_offsets = i32(dev, il.offsets);
  greedy_in.draft_tokens = i32(dev, il.draft_tokens);
  greedy_in.target_tokens = i32(dev, il.target_tokens);
  greedy_in.draft_kv = row_bytes > 0 ? dev + il.draft_kv : nullptr;
  greedy_in.row_bytes = row_bytes;
  GreedyBatchOutput out;
  out.accepted_lengths = i32(res, rl.accepted);
  out.next_tokens = i32(res, rl.next);
  out.mismatch = reinterpret_cast<uint8_t*>(res + rl.mismatch);
  out.packed_row_offsets = i32(res, rl.packed_offsets);
  out.packed_kv = row_bytes > 0 ? batch.packed_kv : nullptr;
  int32_t* const parents = i32(dev, il.parent_indices);
  int32_t* const accepted_nodes = i32(res, rl.accepted_nodes);

  SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, pin, static_cast<size_t>(il.inputs_host_filled),
                                          cudaMemcpyHostToDevice, slot.stream));
  if (sampled) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.device_sampled.data(), slot.pinned_sampled.data(),
                                            static_cast<size_t>(il.sampled_total),
                                            cudaMemcpyHostToDevice, slot.stream));
  }
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_start, slot.stream));
  if (inject_fault) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(res, res, 1, static_cast<cudaMemcpyKind>(77),
                                            slot.stream));
  }
  SV_RETURN_IF_ERROR(GatherRegionRows(work, dev, dev + il.draft_kv));
  if (!sampled) {
    SV_RETURN_IF_ERROR(ValidateTreeStructure(b, in.draft_offsets.data(), in.parent_indices.data(),
                                             BackendTreeLimits()));
    TreeGreedyDeviceBatch t;
    t.params.input = greedy_in;
    t.params.parent_indices = parents;
    t.params.output = out;
    t.params.accepted_nodes = accepted_nodes;
    t.total_nodes = rows;
    SV_RETURN_IF_ERROR(ValidateTreeGreedyDeviceBatch(t, slot.tree_scratch.view));
    SV_CUDA_RETURN_IF_ERROR(LaunchTreeGreedyVerifyPack(t, slot.tree_scratch.view, slot.stream));
    work.path = GreedyPath::kFused;
  } else {
    const RejectionSampleParams sampled_host = SampledHostParams(batch);
    TreeSampleParams host;
    host.input = sampled_host.input;
    host.parent_indices = in.parent_indices.data();
    host.output = sampled_host.output;
    host.output.greedy_target_tokens = nullptr;
    std::vector<int32_t> unused_paths(static_cast<size_t>(rows));
    host.path_nodes = unused_paths.data();
    SV_RETURN_IF_ERROR(ValidateTreeSampleBatch(host, BackendTreeLimits()));
    const StagingLayout& sl = il;
    std::byte* const sdev = slot.device_sampled.as<std::byte>();
    TreeSampleParams d = host;
    d.input.draft_offsets = greedy_in.draft_offsets;
    d.input.draft_tokens = greedy_in.draft_tokens;
    d.input.target_values = sdev + sl.target_values;
    d.input.draft_values = batch.key.has_draft_probs ? sdev + sl.draft_values : nullptr;
    d.input.sequences = reinterpret_cast<const SequenceSamplingParams*>(sdev + sl.sequences);
    d.parent_indices = parents;
    d.output.accepted_lengths = out.accepted_lengths;
    d.output.next_tokens = out.next_tokens;
    d.output.mismatch = out.mismatch;
    d.output.status_codes = i32(res, rl.status_codes);
    d.output.error_positions = i32(res, rl.error_positions);
    d.output.greedy_target_tokens = nullptr;
    d.path_nodes = i32(res, rl.path_nodes);
    d.row_reads = nullptr;
    SV_CUDA_RETURN_IF_ERROR(LaunchTreeSample(d, slot.stream));
    TreePackParams pack;
    pack.num_trees = b;
    pack.node_offsets = greedy_in.draft_offsets;
    pack.accepted_lengths = out.accepted_lengths;
    pack.path_nodes = d.path_nodes;
    pack.draft_kv = greedy_in.draft_kv;
    pack.row_bytes = row_bytes;
    pack.packed_row_offsets = out.packed_row_offsets;
    pack.accepted_nodes = accepted_nodes;
    pack.packed_kv = out.packed_kv;
    SV_CUDA_RETURN_IF_ERROR(LaunchTreePack(pack, slot.tree_scratch.view, slot.stream));
  }
  SV_RETURN_IF_ERROR(DeliverRegionRows(work, dev, out.packed_row_offsets));
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  // The packed size is known on the device only: the upper bound comes back.
  return CopyBack(work, il.draft_kv, rl.total, rows * row_bytes);
}

absl::Status CudaExecutor::GatherRegionRows(const Work& work, const std::byte* tables,
                                            std::byte* draft_kv) {
  const Batch& batch = *work.batch;
  if (!batch.shape.kv_from_regions || batch.inputs.row_bytes == 0) return absl::OkStatus();
  const StagingLayout il = LayoutStaging(batch.shape);
  RowGatherParams p;
  p.num_sequences = batch.inputs.num_sequences();
  p.total_rows = batch.inputs.total_draft_rows();
  p.max_rows = batch.inputs.max_gamma();
  p.row_bytes = batch.inputs.row_bytes;
  p.draft_offsets = reinterpret_cast<const int32_t*>(tables + il.offsets);
  p.sources = reinterpret_cast<const std::byte* const*>(tables + il.kv_sources);
  p.rows = draft_kv;
  SV_CUDA_RETURN_IF_ERROR(LaunchRowGather(p, work.slot->stream));
  return absl::OkStatus();
}

absl::Status CudaExecutor::DeliverRegionRows(const Work& work, const std::byte* tables,
                                             const int32_t* packed_row_offsets) {
  const Batch& batch = *work.batch;
  if (batch.shape.deliveries == 0 || batch.packed_kv == nullptr) return absl::OkStatus();
  const StagingLayout il = LayoutStaging(batch.shape);
  PackedDeliveryParams p;
  p.num_deliveries = batch.shape.deliveries;
  for (const PackedDelivery& d : batch.regions.deliveries) p.max_rows = std::max(p.max_rows, d.max_rows);
  p.row_bytes = batch.key.row_bytes;
  p.deliveries = reinterpret_cast<const PackedDelivery*>(tables + il.deliveries);
  p.packed_row_offsets = packed_row_offsets;
  p.packed_kv = batch.packed_kv;
  SV_CUDA_RETURN_IF_ERROR(LaunchPackedDelivery(p, work.slot->stream));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RegionMapping>> CudaExecutor::MapRegion(const RegionSpec& spec) {
  return MapCudaExecutorRegion(spec, options_.device_ordinal);
}

absl::Status CudaExecutor::CopyBack(Work& work, int64_t kv_section_offset,
                                    int64_t results_bytes, int64_t packed_bytes) {
  Slot& slot = *work.slot;
  Batch& batch = *work.batch;
  if (batch.wants_host_rows && packed_bytes > 0) {
    // The packed rows of inline answers, into the pinned draft-KV section
    // the H2D copy above has finished reading (same stream): the batcher
    // copies each request's rows from there into its response, the one host
    // copy on the way out.
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.pinned_inputs.as<std::byte>() + kv_section_offset,
                                            batch.packed_kv, static_cast<size_t>(packed_bytes),
                                            cudaMemcpyDeviceToHost, slot.stream));
  }
  work.results_bytes = results_bytes;
  if (!work.mapped && results_bytes > 0) {  // mapped: the kernels wrote the pinned results already
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.pinned_results.data(),
                                            slot.device_results.data(),
                                            static_cast<size_t>(results_bytes),
                                            cudaMemcpyDeviceToHost, slot.stream));
  }
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.completed, slot.stream));
  return absl::OkStatus();
}

absl::Status CudaExecutor::LaunchSampled(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  Batch& batch = *work.batch;
  const GreedyHostInputs& in = batch.inputs;
  const int32_t b = in.num_sequences();
  const int64_t rows = in.total_draft_rows();
  const int64_t row_bytes = in.row_bytes;
  const StagingLayout il = LayoutStaging(batch.shape);
  const StagingLayout& sl = il;
  if (batch.key.vocab_size > kMaxSampledVocabSize) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sampled batch with vocab ", batch.key.vocab_size,
        " exceeds the CUDA executor's rejection-sampling scratch (vocab ",
        kMaxSampledVocabSize, ")"));
  }
  // The host view (outputs into the batch's host results) for the checks the
  // kernels rely on; the edge already enforced them per request.
  const RejectionSampleParams host = SampledHostParams(batch);
  SV_RETURN_IF_ERROR(ValidateRejectionBatch(host));

  const ResultLayout rl = LayoutResults(b);
  std::byte* const pin = slot.pinned_inputs.as<std::byte>();
  std::byte* const dev = slot.device_inputs.as<std::byte>();
  std::byte* const res = slot.device_results.as<std::byte>();
  std::byte* const spin = slot.pinned_sampled.as<std::byte>();
  std::byte* const sdev = slot.device_sampled.as<std::byte>();
  int32_t* const greedy_targets = reinterpret_cast<int32_t*>(dev + il.target_tokens);

  RejectionSampleParams d;
  d.input = host.input;
  d.input.draft_offsets = reinterpret_cast<const int32_t*>(dev + il.offsets);
  d.input.draft_tokens = reinterpret_cast<const int32_t*>(dev + il.draft_tokens);
  if (batch.key.values_in_regions) {
    // Rows read where the worker's regions hold them, through device row tables.
    d.input.target_values = nullptr;
    d.input.draft_values = nullptr;
    d.input.target_rows = reinterpret_cast<const void* const*>(sdev + sl.target_rows);
    d.input.draft_rows = batch.key.has_draft_probs
                             ? reinterpret_cast<const void* const*>(sdev + sl.draft_rows)
                             : nullptr;
  } else {
    d.input.target_values = sdev + sl.target_values;
    d.input.draft_values = batch.key.has_draft_probs ? sdev + sl.draft_values : nullptr;
  }
  d.input.sequences = reinterpret_cast<const SequenceSamplingParams*>(sdev + sl.sequences);
  d.output.accepted_lengths = reinterpret_cast<int32_t*>(res + rl.accepted);
  d.output.next_tokens = reinterpret_cast<int32_t*>(res + rl.next);
  d.output.mismatch = reinterpret_cast<uint8_t*>(res + rl.mismatch);
  d.output.status_codes = reinterpret_cast<int32_t*>(res + rl.status_codes);
  d.output.error_positions = reinterpret_cast<int32_t*>(res + rl.error_positions);
  d.output.greedy_target_tokens = greedy_targets;

  // The greedy pack over the outcome's target tokens reproduces k exactly;
  // its next tokens go aside (the sampled ones are the answer).
  GreedyDeviceBatch g;
  g.params.input.num_sequences = b;
  g.params.input.draft_offsets = d.input.draft_offsets;
  g.params.input.draft_tokens = d.input.draft_tokens;
  g.params.input.target_tokens = greedy_targets;
  g.params.input.draft_kv = row_bytes > 0 ? dev + il.draft_kv : nullptr;
  g.params.input.row_bytes = row_bytes;
  g.params.output.accepted_lengths = d.output.accepted_lengths;
  g.params.output.next_tokens = reinterpret_cast<int32_t*>(res + rl.greedy_next);
  g.params.output.packed_row_offsets = reinterpret_cast<int32_t*>(res + rl.packed_offsets);
  g.params.output.mismatch = d.output.mismatch;
  g.params.output.packed_kv = row_bytes > 0 ? batch.packed_kv : nullptr;
  g.total_draft_rows = rows;
  g.max_gamma = in.max_gamma();
  SV_RETURN_IF_ERROR(ValidateGreedyDeviceBatch(g, slot.scratch.view));

  // The batch builder wrote both sections into the slot's pinned buffers:
  // two H2D copies (the target-token section of the inputs is written by the
  // sampling kernel; it travels uninitialized and is overwritten).
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, pin, static_cast<size_t>(il.inputs_host_filled),
                                          cudaMemcpyHostToDevice, slot.stream));
  SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sdev, spin, static_cast<size_t>(sl.sampled_total),
                                          cudaMemcpyHostToDevice, slot.stream));

  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_start, slot.stream));
  if (inject_fault) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(res, res, 1, static_cast<cudaMemcpyKind>(77),
                                            slot.stream));
  }
  SV_RETURN_IF_ERROR(GatherRegionRows(work, dev, dev + il.draft_kv));
  SV_CUDA_RETURN_IF_ERROR(LaunchRejectionSample(d, slot.rejection_scratch, slot.stream));
  SV_CUDA_RETURN_IF_ERROR(dispatcher_->Launch(g, slot.scratch.view, slot.stream, &work.path));
  SV_RETURN_IF_ERROR(DeliverRegionRows(work, dev, g.params.output.packed_row_offsets));
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  // The packed size is known on the device only: the upper bound comes back.
  return CopyBack(work, il.draft_kv, rl.total, rows * row_bytes);
}

absl::Status CudaExecutor::Finish(Work& work) {
  Slot& slot = *work.slot;
  // The one host-device synchronization of a batch; it also surfaces any
  // asynchronous (sticky) error of the kernels.
  SV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.completed));
  SV_CUDA_RETURN_IF_ERROR(cudaStreamQuery(slot.stream));
  float ms = 0;
  SV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, slot.kernel_start, slot.kernel_stop));

  Batch& batch = *work.batch;
  const int32_t b = batch.inputs.num_sequences();
  const int64_t tree_rows = batch.key.tree ? batch.inputs.total_draft_rows() : 0;
  const ResultLayout rl = LayoutResults(b, tree_rows);
  const std::byte* pin = slot.pinned_results.as<std::byte>();
  if (work.host_decided) {
    batch.path = ExecutionPathLabel::kHostDecided;  // results written at launch
  } else {
    batch.results.Resize(b);
    std::memcpy(batch.results.accepted_lengths.data(), pin + rl.accepted, sizeof(int32_t) * b);
    std::memcpy(batch.results.next_tokens.data(), pin + rl.next, sizeof(int32_t) * b);
    std::memcpy(batch.results.packed_row_offsets.data(), pin + rl.packed_offsets,
                sizeof(int32_t) * (b + 1));
    std::memcpy(batch.results.mismatch.data(), pin + rl.mismatch, b);
    batch.path = work.path == GreedyPath::kFused ? ExecutionPathLabel::kFused
                                                 : ExecutionPathLabel::kTwoStep;
  }
  if (batch.key.mode == VerifyMode::kSampled) {
    SampledHostResults& sr = batch.sampled_results;
    sr.status_codes.resize(b);
    sr.error_positions.resize(b);
    std::memcpy(sr.status_codes.data(), pin + rl.status_codes, sizeof(int32_t) * b);
    std::memcpy(sr.error_positions.data(), pin + rl.error_positions, sizeof(int32_t) * b);
    batch.path = ExecutionPathLabel::kSampling;
    batch.exact = IsExactMethod(batch.key.method);
  }
  if (batch.key.tree) {
    const int32_t accepted = batch.results.packed_row_offsets[b];
    batch.results.accepted_nodes.resize(static_cast<size_t>(accepted));
    std::memcpy(batch.results.accepted_nodes.data(), pin + rl.accepted_nodes,
                sizeof(int32_t) * static_cast<size_t>(accepted));
    batch.path = batch.key.mode == VerifyMode::kSampled ? ExecutionPathLabel::kSampling
                                                        : ExecutionPathLabel::kFused;
  }
  batch.device_time = absl::Microseconds(static_cast<double>(ms) * 1000.0);
  batch.verified = true;
  if (batch.wants_host_rows && batch.inputs.row_bytes > 0) {
    // Where CopyBack put them: the staged layout's draft-KV section (after
    // the data plane's tables when the batch has them).
    batch.packed_kv_host = slot.pinned_inputs.as<std::byte>() + LayoutStaging(batch.shape).draft_kv;
  }
  return absl::OkStatus();
}

void CudaExecutor::CompletionLoop() {
  if (cudaSetDevice(options_.device_ordinal) != cudaSuccess) {
    (void)Fail(CudaStatus(cudaGetLastError(), "cudaSetDevice (completion thread)"));
  }
  const absl::Duration spin = absl::Microseconds(options_.completion_spin_us);
  int64_t taken = 0;
  absl::Time last_batch = absl::InfinitePast();
  for (;;) {
    Work work;
    // Latency first: poll for the next batch for a while instead of sleeping
    // (a futex wake-up costs more than the batch). Shutdown waits out at
    // most one spin window.
    if (spin > absl::ZeroDuration()) {
      while (launched_total_.load(std::memory_order_acquire) == taken &&
             absl::Now() - last_batch < spin) {
        CpuRelax();
      }
    }
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !launched_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (launched_.empty()) {
        completion_done_ = true;
        return;
      }
      work = std::move(launched_.front());
      launched_.pop_front();
    }
    ++taken;
    absl::Status status = work.status;
    if (work.slot != nullptr) {
      if (status.ok()) {
        if (absl::Status s = Finish(work); !s.ok()) status = Fail(s);
      }
      // Another batch may have faulted the device meanwhile: its results
      // cannot be trusted either.
      if (status.ok()) status = health();
    }
    // The slot goes back with the batch's staging lease, once the batcher
    // has read the results (and inline rows) out of it.
    work.done(std::move(work.batch), std::move(status));
    last_batch = absl::Now();
  }
}

}  // namespace specverify::server
