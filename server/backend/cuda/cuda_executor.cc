#include "server/backend/cuda/cuda_executor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "kernels/sampling/rejection_finish.h"
#include "server/backend/cuda/cuda_arena_memory.h"
#include "server/backend/cuda/cuda_region.h"
#include "server/backend/cuda/cuda_result_layout.h"

namespace specverify::server {
namespace {

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

RejectionScratchLimits CudaExecutor::SampledScratchLimits() const {
  RejectionScratchLimits limits;
  limits.max_sequences = options_.max_batch_sequences;
  limits.max_total_draft_tokens = static_cast<int32_t>(max_total_rows_);
  limits.max_vocab_size = kMaxSampledVocabSize;
  return limits;
}

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
  // Greedy and sampled chains and trees stage different tables and plans
  // (trees: parent indices and the row destinations instead of the chains'
  // packed offsets and copy sources).
  StagingShape largest_sampled = largest;
  largest_sampled.sampled = true;
  StagingShape largest_tree = largest;
  largest_tree.tree = true;
  inputs_capacity_ = std::max({LayoutStaging(largest).inputs_total, LayoutStaging(largest_sampled).inputs_total,
                               LayoutStaging(largest_tree).inputs_total});
  int sms = 0;
  SV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, options_.device_ordinal));
  results_capacity_ =
      LayoutResults(options_.max_batch_sequences, max_total_rows_,
                    RejectionRaceSlotsBound(SampledScratchLimits(), sms))
          .total;
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
  const RejectionScratchLimits rejection = SampledScratchLimits();
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

int64_t CudaExecutor::SampledSectionInInputs(const StagingShape& shape) const {
  if (!shape.sampled) return -1;
  const StagingLayout l = LayoutStaging(shape);
  // Region KV rows leave the inputs' tail to the device (a gather writes
  // it): a copy of everything up to the sampled section would carry it.
  if (l.inputs_host_filled != l.inputs_total) return -1;
  const int64_t at = StagingAlignUp(l.inputs_total);
  return at + l.sampled_total <= inputs_capacity_ ? at : -1;
}

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
  const int64_t sampled_at = SampledSectionInInputs(shape);
  ViewStagedBatch(shape, slot->pinned_inputs.as<std::byte>(),
                  sampled_at >= 0 ? slot->pinned_inputs.as<std::byte>() + sampled_at
                                  : slot->pinned_sampled.as<std::byte>(),
                  batch);
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

absl::StatusOr<std::unique_ptr<RegionMapping>> CudaExecutor::MapRegion(const RegionSpec& spec) {
  return MapCudaExecutorRegion(spec, options_.device_ordinal);
}

absl::Status CudaExecutor::Finish(Work& work) {
  Slot& slot = *work.slot;
  if (!work.needs_device) {
    // Decided on the host, nothing enqueued: no event to wait for.
    Batch& batch = *work.batch;
    batch.path = ExecutionPathLabel::kHostDecided;
    batch.device_time = absl::ZeroDuration();
    batch.verified = true;
    return absl::OkStatus();
  }
  // The one host-device synchronization of a batch; it also surfaces any
  // asynchronous (sticky) error of the kernels.
  SV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(slot.completed));
  SV_CUDA_RETURN_IF_ERROR(cudaStreamQuery(slot.stream));
  float ms = 0;
  SV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, slot.kernel_start, slot.kernel_stop));

  Batch& batch = *work.batch;
  const int32_t b = batch.inputs.num_sequences();
  const int64_t tree_rows = batch.key.tree ? batch.inputs.total_draft_rows() : 0;
  const ResultLayout rl =
      LayoutResults(b, tree_rows, int64_t{b} * work.race_slots_per_sequence);
  const std::byte* pin = slot.pinned_results.as<std::byte>();
  if (work.host_decided) {
    batch.path = ExecutionPathLabel::kHostDecided;  // results written at launch
  } else {
    batch.results.Resize(b);
    std::memcpy(batch.results.accepted_lengths.data(), pin + rl.accepted, sizeof(int32_t) * b);
    std::memcpy(batch.results.next_tokens.data(), pin + rl.next, sizeof(int32_t) * b);
    if (work.packed_offsets_on_host) {
      std::vector<int32_t>& offsets = batch.results.packed_row_offsets;
      offsets[0] = 0;
      for (int32_t i = 0; i < b; ++i) offsets[i + 1] = offsets[i] + batch.results.accepted_lengths[i];
    } else {
      std::memcpy(batch.results.packed_row_offsets.data(), pin + rl.packed_offsets,
                  sizeof(int32_t) * (b + 1));
    }
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
    if (work.race_slots_per_sequence > 0) {
      // The race's merge, taken off the device. The packed offsets above
      // were made from the device's k (the rows the copy wrote): a sequence
      // the fold fails keeps its rows' room in the packed buffer, so the
      // sequences after it still find theirs.
      RejectionBatchOutput finished;
      finished.accepted_lengths = batch.results.accepted_lengths.data();
      finished.next_tokens = batch.results.next_tokens.data();
      finished.mismatch = batch.results.mismatch.data();
      finished.status_codes = sr.status_codes.data();
      finished.error_positions = sr.error_positions.data();
      FinishRejectionOutcomes(b, reinterpret_cast<const RejectionRaceSlot*>(pin + rl.race_slots),
                              work.race_slots_per_sequence, finished);
    }
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
  if (batch.wants_host_rows && batch.inputs.row_bytes > 0 && !batch.inline_rows_from_staging) {
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
