#include "kernels/greedy/greedy_reference.h"

#include <cstring>

namespace specverify {

void ReferenceGreedyVerifyRange(const GreedyVerifyParams& params,
                                int32_t begin, int32_t end) {
  const GreedyBatchInput& in = params.input;
  const GreedyBatchOutput& out = params.output;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t first = in.draft_offsets[i];
    const int32_t gamma = in.draft_offsets[i + 1] - first;
    const int32_t* draft = in.draft_tokens + first;
    const int32_t* target = in.target_tokens + first + i;
    int32_t k = 0;
    while (k < gamma && draft[k] == target[k]) ++k;
    out.accepted_lengths[i] = k;
    out.next_tokens[i] = target[k];  // the correction, or the bonus when k == gamma
    out.mismatch[i] = k < gamma ? 1 : 0;
  }
}

void ReferencePackedRowOffsets(const GreedyVerifyParams& params) {
  int32_t running = 0;
  for (int32_t i = 0; i < params.input.num_sequences; ++i) {
    params.output.packed_row_offsets[i] = running;
    running += params.output.accepted_lengths[i];
  }
  params.output.packed_row_offsets[params.input.num_sequences] = running;
}

void ReferencePackRange(const GreedyVerifyParams& params, int32_t begin,
                        int32_t end) {
  const GreedyBatchInput& in = params.input;
  const GreedyBatchOutput& out = params.output;
  if (in.row_bytes == 0) return;
  for (int32_t i = begin; i < end; ++i) {
    const int64_t rows = out.accepted_lengths[i];
    if (rows == 0) continue;
    std::memcpy(out.packed_kv + int64_t{out.packed_row_offsets[i]} * in.row_bytes,
                in.draft_kv + int64_t{in.draft_offsets[i]} * in.row_bytes,
                static_cast<size_t>(rows * in.row_bytes));
  }
}

void ReferenceGreedyVerifyPack(const GreedyVerifyParams& params) {
  const int32_t b = params.input.num_sequences;
  ReferenceGreedyVerifyRange(params, 0, b);
  ReferencePackedRowOffsets(params);
  ReferencePackRange(params, 0, b);
}

}  // namespace specverify
