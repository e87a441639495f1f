// The CUDA executor's launches: per batch kind, the staging copies, the
// kernels on the slot's stream and the copies back (cuda_executor.h says
// the pipeline; cuda_executor.cc has the rest of the class).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/greedy/greedy_planned_pack.h"
#include "kernels/greedy/greedy_reference.h"
#include "kernels/layout/row_copy_cuda.h"
#include "kernels/sampling/rejection_validate.h"
#include "kernels/tree/tree_cuda.h"
#include "kernels/tree/tree_reference.h"
#include "server/backend/accepted_row_copies.h"
#include "server/backend/cuda/cuda_executor.h"
#include "server/backend/cuda/cuda_result_layout.h"

namespace specverify::server {
namespace {

// A sampled batch's per-sequence parameters and distribution rows in the
// slot's device copy of the sampled section: the staged values, or, when the
// rows are read where the worker's regions hold them, the device row tables.
void PointAtDeviceDistributions(const Batch& batch, std::byte* sdev, const StagingLayout& sl,
                                RejectionBatchInput* in) {
  const bool draft = batch.key.has_draft_probs;
  if (batch.key.values_in_regions) {
    in->target_values = nullptr;
    in->draft_values = nullptr;
    in->target_rows = reinterpret_cast<const void* const*>(sdev + sl.target_rows);
    in->draft_rows = draft ? reinterpret_cast<const void* const*>(sdev + sl.draft_rows) : nullptr;
  } else {
    in->target_values = sdev + sl.target_values;
    in->draft_values = draft ? sdev + sl.draft_values : nullptr;
  }
  in->sequences = reinterpret_cast<const SequenceSamplingParams*>(sdev + sl.sequences);
}

// The widest access, up to 16 bytes, that every address allows: the
// alignment the tree pack may assume of rows in the workers' regions.
template <typename Byte>
int32_t CommonAlignment(std::span<Byte* const> addresses) {
  int32_t alignment = 16;
  for (Byte* address : addresses) {
    while (reinterpret_cast<uintptr_t>(address) % alignment != 0) alignment /= 2;
  }
  return alignment;
}

}  // namespace

absl::Status CudaExecutor::Launch(Work& work, bool inject_fault) {
  if (work.batch->key.tree) return LaunchTree(work, inject_fault);
  if (work.batch->key.mode == VerifyMode::kSampled) return LaunchSampled(work, inject_fault);
  return work.batch->inputs.total_draft_rows() <= options_.greedy_host_decision_max_rows
             ? LaunchGreedyDecidedOnHost(work, inject_fault)
             : LaunchGreedyOnDevice(work, inject_fault);
}

absl::Status CudaExecutor::LaunchGreedyDecidedOnHost(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  Batch& batch = *work.batch;
  const GreedyHostInputs& in = batch.inputs;
  const int32_t b = in.num_sequences();
  const int64_t row_bytes = in.row_bytes;
  const StagingLayout il = LayoutStaging(batch.shape);
  std::byte* const pin = slot.pinned_inputs.as<std::byte>();
  work.inputs_in_place = slot.mapped_inputs != nullptr && il.inputs_total <= options_.mapped_inputs_max_bytes;
  std::byte* const dev = work.inputs_in_place ? slot.mapped_inputs : slot.device_inputs.as<std::byte>();
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
  // Inline answers are copied by the batcher from the staged rows (pinned,
  // host memory): no pack and no D2H for them. Rows that stay (handles) or
  // go to regions are still copied on the device.
  batch.inline_rows_from_staging = row_bytes > 0 && batch.wants_host_rows && !batch.shape.kv_from_regions;
  const bool rows_on_device =
      !batch.inline_rows_from_staging || batch.wants_handle_rows || batch.shape.deliveries > 0;
  if ((row_bytes == 0 || packed_rows == 0 || !rows_on_device) && !inject_fault) {
    // No row to copy on the device: the GPU has nothing to do, not even the
    // H2D copy (no kernel would read it). An armed fault still goes through
    // the stream, so the fault contract holds for every batch.
    work.needs_device = false;
    return absl::OkStatus();
  }

  // KV_RETURN_REGION requests take their rows straight from the copy that
  // reads them, not through the arena and a delivery after it.
  const bool direct = row_bytes > 0 && batch.shape.deliveries > 0;
  if (direct) {
    PlanAcceptedRowCopies(
        batch, dev + il.draft_kv,
        {reinterpret_cast<const std::byte**>(pin + il.copy_sources), static_cast<size_t>(b)},
        {reinterpret_cast<std::byte**>(pin + il.copy_destinations), static_cast<size_t>(b)});
  }

  // The staged inputs: offsets, tokens (a few bytes a row; no kernel reads
  // them, but skipping them would cost a second copy), tables, packed
  // offsets and copy plan, and the draft rows unless they are in regions.
  SV_RETURN_IF_ERROR(CopyInputsAndStart(work, dev, il.inputs_host_filled, inject_fault));
  if (row_bytes > 0 && packed_rows > 0) {
    if (direct || batch.shape.kv_from_regions) {
      // One gather of the accepted rows only (its per-sequence row counts
      // are the k's): from the workers' regions straight to their packed
      // place, or, with region returns, from where each sequence's rows are
      // to where they are answered.
      RowGatherParams gather;
      gather.num_sequences = b;
      gather.total_rows = packed_rows;
      gather.max_rows = max_accepted;
      gather.row_bytes = row_bytes;
      gather.draft_offsets = packed_offsets;
      gather.sources = reinterpret_cast<const std::byte* const*>(
          dev + (direct ? il.copy_sources : il.kv_sources));
      if (direct) {
        gather.destinations = reinterpret_cast<std::byte* const*>(dev + il.copy_destinations);
      } else {
        gather.rows = batch.packed_kv;
      }
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
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  return CopyBack(work, il.draft_kv, /*results_bytes=*/0,
                  batch.inline_rows_from_staging ? 0 : packed_rows * row_bytes);
}

absl::Status CudaExecutor::CopyInputsAndStart(Work& work, std::byte* dev, int64_t bytes,
                                              bool inject_fault, int64_t sampled_bytes) {
  Slot& slot = *work.slot;
  if (!work.inputs_in_place) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, slot.pinned_inputs.data(),
                                            static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                            slot.stream));
  }
  if (sampled_bytes > 0) {
    SV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.device_sampled.data(), slot.pinned_sampled.data(),
                                            static_cast<size_t>(sampled_bytes),
                                            cudaMemcpyHostToDevice, slot.stream));
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

absl::Status CudaExecutor::CopyStagedAndStart(Work& work, std::byte* dev, const StagingLayout& il,
                                              int64_t sampled_at, bool inject_fault) {
  if (!work.batch->shape.sampled) {
    return CopyInputsAndStart(work, dev, il.inputs_host_filled, inject_fault);
  }
  // The sampled section right after the inputs (SampledSectionInInputs):
  // one copy of both, one operation fewer before the kernels (each costs
  // the batch's chain a few microseconds at concurrency 1).
  if (sampled_at >= 0) return CopyInputsAndStart(work, dev, sampled_at + il.sampled_total, inject_fault);
  return CopyInputsAndStart(work, dev, il.inputs_host_filled, inject_fault, il.sampled_total);
}

absl::Status CudaExecutor::LaunchGreedyOnDevice(Work& work, bool inject_fault) {
  Slot& slot = *work.slot;
  const GreedyHostInputs& in = work.batch->inputs;
  const int32_t b = in.num_sequences();
  const int64_t rows = in.total_draft_rows();
  const int64_t row_bytes = in.row_bytes;
  const StagingLayout il = LayoutStaging(work.batch->shape);
  const ResultLayout rl = LayoutResults(b);
  work.inputs_in_place = slot.mapped_inputs != nullptr && il.inputs_total <= options_.mapped_inputs_max_bytes;
  std::byte* const dev = work.inputs_in_place ? slot.mapped_inputs : slot.device_inputs.as<std::byte>();
  work.results_in_place = work.inputs_in_place;
  std::byte* const res = work.results_in_place ? slot.mapped_results : slot.device_results.as<std::byte>();

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
  std::byte* const dev = slot.device_inputs.as<std::byte>();
  std::byte* const res = slot.device_results.as<std::byte>();
  work.inputs_in_place = false;  // tree batches always copy (results include the paths)
  const auto i32 = [](std::byte* base, int64_t at) { return reinterpret_cast<int32_t*>(base + at); };
  if (sampled) {
    // The sampled tree kernel needs thread-block clusters. Where the device
    // has none for this build (an A100, or a newer GPU running the build's
    // portable PTX), the batch is refused as the batch's own error: the
    // kernel's refusal, a CUDA error, would take the whole device out.
    bool supported = false;
    SV_CUDA_RETURN_IF_ERROR(TreeSamplingSupported(&supported));
    if (!supported) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sampled token trees need thread-block clusters: an sm_90 or newer GPU running this build's sm_90 code; "
          "CUDA device ",
          options_.device_ordinal, " does not (greedy trees and sampled chains still run here)"));
    }
  }

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
  // KV rows in regions are read where they are, only the accepted path's:
  // the pack reads tree i's rows at kv_sources[i] (the staged table), with
  // the widest access every region address allows, and nothing gathers a
  // tree's other nodes first.
  const std::byte* const* kv_sources = nullptr;
  int32_t kv_source_alignment = 16;
  if (row_bytes > 0 && batch.shape.kv_from_regions) {
    kv_sources = reinterpret_cast<const std::byte* const*>(dev + il.kv_sources);
    kv_source_alignment = CommonAlignment<const std::byte>(batch.regions.kv_sources);
  }
  // KV_RETURN_REGION requests take their rows straight from the pack, into
  // their outputs after their earlier trees' rows, not through the arena
  // and a delivery after it (the other trees' rows go to the arena as ever).
  TreeRowDestinations row_destinations;
  if (TreeAnswersRowsInRegions(batch.shape)) {
    std::byte* const pin = slot.pinned_inputs.as<std::byte>();
    const std::span<std::byte*> destinations{reinterpret_cast<std::byte**>(pin + il.copy_destinations),
                                             static_cast<size_t>(b)};
    const std::span<int32_t> origins{reinterpret_cast<int32_t*>(pin + il.copy_origins), static_cast<size_t>(b)};
    PlanAcceptedRowDestinations(batch, destinations, origins);
    row_destinations.destinations = reinterpret_cast<std::byte* const*>(dev + il.copy_destinations);
    row_destinations.origins = i32(dev, il.copy_origins);
    row_destinations.alignment = CommonAlignment<std::byte>(destinations);
    SV_RETURN_IF_ERROR(ValidateTreeRowDestinations(
        TreeRowDestinations{destinations.data(), origins.data(), row_destinations.alignment}, b,
        /*origins_readable=*/true));
  }

  const int64_t sampled_at = SampledSectionInInputs(batch.shape);
  SV_RETURN_IF_ERROR(CopyStagedAndStart(work, dev, il, sampled_at, inject_fault));
  if (!sampled) {
    SV_RETURN_IF_ERROR(ValidateTreeStructure(b, in.draft_offsets.data(), in.parent_indices.data(),
                                             BackendTreeLimits()));
    TreeGreedyDeviceBatch t;
    t.params.input = greedy_in;
    t.params.parent_indices = parents;
    t.params.output = out;
    t.params.accepted_nodes = accepted_nodes;
    t.params.kv_sources = kv_sources;
    t.params.kv_source_alignment = kv_source_alignment;
    t.params.row_destinations = row_destinations;
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
    std::byte* const sdev = sampled_at >= 0 ? dev + sampled_at : slot.device_sampled.as<std::byte>();
    TreeSampleParams d = host;
    d.input.draft_offsets = greedy_in.draft_offsets;
    d.input.draft_tokens = greedy_in.draft_tokens;
    PointAtDeviceDistributions(batch, sdev, sl, &d.input);
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
    pack.kv_sources = kv_sources;
    pack.kv_source_alignment = kv_source_alignment;
    pack.row_destinations = row_destinations;
    SV_CUDA_RETURN_IF_ERROR(LaunchTreePack(pack, slot.tree_scratch.view, slot.stream));
  }
  // No delivery: the edge takes KV_RETURN_REGION only with KV rows, so a
  // tree batch with such requests always has row destinations.
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
  if (!work.results_in_place && results_bytes > 0) {  // in place: the kernels wrote the pinned results
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

  std::byte* const dev = slot.device_inputs.as<std::byte>();
  const int64_t sampled_at = SampledSectionInInputs(batch.shape);
  std::byte* const sdev = sampled_at >= 0 ? dev + sampled_at : slot.device_sampled.as<std::byte>();

  RejectionSampleParams d;
  d.input = host.input;
  d.input.draft_offsets = reinterpret_cast<const int32_t*>(dev + il.offsets);
  d.input.draft_tokens = reinterpret_cast<const int32_t*>(dev + il.draft_tokens);
  PointAtDeviceDistributions(batch, sdev, sl, &d.input);
  // The race's winners come back in slots the completion folds
  // (FinishRejectionOutcomes): no merge on the device, ~1 us less per batch
  // (bench/sampling/results/2026-11-28-host-merge).
  int32_t race_slots_per_sequence = 0;
  SV_CUDA_RETURN_IF_ERROR(
      RejectionRaceSlotsPerSequence(d.input, slot.rejection_scratch, &race_slots_per_sequence));
  const int64_t race_slots = int64_t{b} * race_slots_per_sequence;
  const ResultLayout rl = LayoutResults(b, 0, race_slots);
  if (rl.total > results_capacity_) {
    return absl::InternalError(absl::StrCat("sampled batch of ", b, " sequences needs ", race_slots,
                                            " race slots: results section ", rl.total,
                                            " bytes > reserved ", results_capacity_));
  }
  work.race_slots_per_sequence = race_slots_per_sequence;
  // The results (outcomes and race slots, a few KB) are stored straight
  // into the slot's pinned memory: the stores cross the bus without
  // waiting, where a D2H copy is one more operation on the batch's chain.
  // The inputs are still copied: the race's decision reads them on its
  // critical path, where each read over the bus would be a round trip; so
  // are the results of a batch with KV rows, whose row copy reads the
  // accepted lengths after the sampler.
  const bool copy_rows = SampledChainCopiesAcceptedRows(batch.shape);
  work.results_in_place =
      slot.mapped_results != nullptr && !copy_rows && rl.total <= options_.mapped_inputs_max_bytes;
  std::byte* const res = work.results_in_place ? slot.mapped_results : slot.device_results.as<std::byte>();
  d.output.accepted_lengths = reinterpret_cast<int32_t*>(res + rl.accepted);
  d.output.next_tokens = reinterpret_cast<int32_t*>(res + rl.next);
  d.output.mismatch = reinterpret_cast<uint8_t*>(res + rl.mismatch);
  d.output.status_codes = reinterpret_cast<int32_t*>(res + rl.status_codes);
  d.output.error_positions = reinterpret_cast<int32_t*>(res + rl.error_positions);
  d.output.greedy_target_tokens = nullptr;
  d.output.race_slots = reinterpret_cast<RejectionRaceSlot*>(res + rl.race_slots);
  d.output.race_slots_per_sequence = race_slots_per_sequence;
  // The accepted lengths exist on the device only. With KV rows, one copy
  // after the sampler reads them there and takes each sequence's first k
  // rows from where they are (a region or the staging) to where they are
  // answered (its request's kv_output, or the arena at its packed offset):
  // no gather of every row before, no pack or delivery after (up to three
  // copies of each accepted row, and a greedy pack re-deriving k from target
  // tokens the sampler wrote for it; device time per batch -6 to -15 us on
  // the H100, bench/server/results/2026-11-27-sampled-copy). Either way the
  // completion computes the packed offsets on the host.
  work.packed_offsets_on_host = true;
  AcceptedRowCopyParams copy;
  if (copy_rows) {
    std::byte* const pin = slot.pinned_inputs.as<std::byte>();
    PlanAcceptedRowCopiesOnDevice(
        batch, dev + il.draft_kv,
        {reinterpret_cast<const std::byte**>(pin + il.copy_sources), static_cast<size_t>(b)},
        {reinterpret_cast<std::byte**>(pin + il.copy_destinations), static_cast<size_t>(b)},
        {reinterpret_cast<int32_t*>(pin + il.copy_origins), static_cast<size_t>(b)});
    copy.num_sequences = b;
    copy.max_rows = in.max_gamma();
    copy.row_bytes = row_bytes;
    copy.accepted_lengths = d.output.accepted_lengths;
    copy.sources = reinterpret_cast<const std::byte* const*>(dev + il.copy_sources);
    copy.destinations = reinterpret_cast<std::byte* const*>(dev + il.copy_destinations);
    copy.origins = reinterpret_cast<const int32_t*>(dev + il.copy_origins);
    SV_RETURN_IF_ERROR(ValidateAcceptedRowCopy(copy));
  }

  // The batch builder wrote both sections into the slot's pinned buffers (the
  // executor the copy plan).
  SV_RETURN_IF_ERROR(CopyStagedAndStart(work, dev, il, sampled_at, inject_fault));
  SV_CUDA_RETURN_IF_ERROR(LaunchRejectionSample(d, slot.rejection_scratch, slot.stream));
  if (copy_rows) SV_CUDA_RETURN_IF_ERROR(LaunchAcceptedRowCopy(copy, slot.stream));
  SV_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.kernel_stop, slot.stream));
  // The packed size is known on the device only: the upper bound comes back.
  return CopyBack(work, il.draft_kv, rl.total, rows * row_bytes);
}

}  // namespace specverify::server
