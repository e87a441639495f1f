// What the CUDA executor is sized and configured by. Plain C++ with no CUDA
// header, so the backend factory (built with or without CUDA) can carry it
// from the server's flags.
#ifndef SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_OPTIONS_H_
#define SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_OPTIONS_H_

#include <cstdint>

namespace specverify::server {

struct CudaExecutorOptions {
  int device_ordinal = 0;
  // The largest batch the batcher forms; every slot's device and pinned
  // buffers are sized for it once, at start-up.
  int32_t max_batch_sequences = 256;
  int32_t max_draft_tokens = 256;
  // Largest draft-KV payload of one batch. The batcher may exceed
  // --max_batch_bytes with a single request, so the server passes
  // max(--max_batch_bytes, --max_message_bytes).
  int64_t max_batch_kv_bytes = int64_t{64} << 20;
  // Batches staged or executing at once (>= 2 so that staging of batch N+1
  // overlaps execution of batch N); each slot has its own stream and buffers.
  int slots = 2;
  // A greedy batch whose staged inputs (tokens, offsets, KV rows) are at
  // most this many bytes skips both copies: the kernel reads the slot's
  // pinned inputs in place over the bus and writes its results straight
  // into pinned memory. At this size launches, not bytes, cost the time
  // (seed 002): two copies fewer is two operations fewer. A sampled batch
  // without KV rows whose results are at most this many bytes stores them
  // in place the same way (its inputs are still copied: the race's decision
  // reads them on its critical path). 0 disables.
  int64_t mapped_inputs_max_bytes = 0;
  // After its last batch the completion thread polls for the next one this
  // long before it sleeps. A sleeping thread's wake-up cost 60-80 us on the
  // H100 host (docs/PERFORMANCE.md), several times the batch's GPU time; the
  // price is one core busy while batches arrive closer than this. 0: sleep
  // at once.
  int64_t completion_spin_us = 2000;
  // Greedy chain batches of at most this many draft tokens are decided on
  // the host from the staged tokens, the device only copying the accepted
  // rows (one launch, nothing copied back; kernels/greedy/greedy_planned_pack.h).
  // Larger ones are verified and packed on the device by the dispatcher's
  // path, as sampled batches are: the host decision costs ~0.5 ns a token on
  // the H100 host (2 us at b=32 x gamma=128, 70 us at b=1024 x gamma=128,
  // where the device's fused path takes 40 us). 0: always on the device.
  int64_t greedy_host_decision_max_rows = 32768;
  // Fused-vs-two-step threshold tau in bytes; -1 calibrates at start-up.
  int64_t dispatch_threshold_bytes = -1;
  // Testing: the N-th batch (1-based) launches an invalid configuration, a
  // real CUDA error the executor must treat as a device fault. 0: never.
  int64_t fail_batch_number_for_testing = 0;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_BACKEND_CUDA_CUDA_EXECUTOR_OPTIONS_H_
