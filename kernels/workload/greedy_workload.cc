#include "kernels/workload/greedy_workload.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/workload/random.h"

namespace specverify {
namespace {

absl::Status ValidateOptions(const GreedyWorkloadOptions& o) {
  if (o.num_sequences < 1 || o.num_sequences > kMaxGreedyWorkloadSequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_sequences is ", o.num_sequences, "; must lie in [1, ",
        kMaxGreedyWorkloadSequences, "]"));
  }
  if (o.gamma_min < 1 || o.gamma_max > kMaxDraftTokens ||
      o.gamma_min > o.gamma_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gamma range is [", o.gamma_min, ", ", o.gamma_max,
        "]; must be a non-empty range within [1, ", kMaxDraftTokens, "]"));
  }
  // Target tokens take gamma + 1 per sequence, all indexed by int32.
  const int64_t max_target_tokens = int64_t{o.num_sequences} * (o.gamma_max + 1);
  if (max_target_tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_sequences ", o.num_sequences, " x (gamma_max ", o.gamma_max, " + 1) is ",
        max_target_tokens, " tokens; must be at most ", std::numeric_limits<int32_t>::max()));
  }
  if (!(o.alpha >= 0.0 && o.alpha <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha is ", o.alpha, "; must lie in [0, 1]"));
  }
  if (o.row_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_bytes is ", o.row_bytes, "; must be >= 0"));
  }
  if (o.vocab_size < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab_size is ", o.vocab_size,
        "; must be >= 2 so a mismatching target token exists"));
  }
  return absl::OkStatus();
}

void FillRandomBytes(SplitMix64& rng, std::byte* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t word = rng.Next();
    std::memcpy(dst + i, &word, 8);
  }
  if (i < n) {
    const uint64_t word = rng.Next();
    std::memcpy(dst + i, &word, static_cast<size_t>(n - i));
  }
}

}  // namespace

std::span<const int32_t> GreedyWorkload::draft_tokens_of(int32_t i) const {
  return {draft_tokens.data() + draft_offsets[i], static_cast<size_t>(gamma(i))};
}

std::span<const int32_t> GreedyWorkload::target_tokens_of(int32_t i) const {
  return {target_tokens.data() + draft_offsets[i] + i,
          static_cast<size_t>(gamma(i) + 1)};
}

std::span<const std::byte> GreedyWorkload::draft_kv_of(int32_t i) const {
  const int64_t rb = row_bytes();
  return {draft_kv.data() + int64_t{draft_offsets[i]} * rb,
          static_cast<size_t>(gamma(i) * rb)};
}

GreedyBatchInput GreedyWorkload::input() const {
  GreedyBatchInput in;
  in.num_sequences = num_sequences();
  in.draft_offsets = draft_offsets.data();
  in.draft_tokens = draft_tokens.data();
  in.target_tokens = target_tokens.data();
  in.draft_kv = row_bytes() > 0 ? draft_kv.data() : nullptr;
  in.row_bytes = row_bytes();
  return in;
}

absl::StatusOr<GreedyWorkload> GenerateGreedyWorkload(
    const GreedyWorkloadOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  const int32_t b = options.num_sequences;
  GreedyWorkload w;
  w.options = options;

  // Gammas first, from their own stream, so the sizes are known up front.
  SplitMix64 gamma_rng(DeriveSeed(options.seed, 0x67616d6d61ULL));
  w.draft_offsets.resize(b + 1);
  w.draft_offsets[0] = 0;
  const uint64_t gamma_span = options.gamma_max - options.gamma_min + 1;
  for (int32_t i = 0; i < b; ++i) {
    const int32_t gamma =
        options.gamma_min + static_cast<int32_t>(gamma_rng.NextBelow(gamma_span));
    w.draft_offsets[i + 1] = w.draft_offsets[i] + gamma;
  }
  const int64_t rows = w.draft_offsets[b];
  const int64_t rb = options.row_bytes;
  w.draft_tokens.resize(rows);
  w.target_tokens.resize(rows + b);
  w.draft_kv.resize(rows * rb);

  GreedyExpected& e = w.expected;
  e.accepted_lengths.resize(b);
  e.next_tokens.resize(b);
  e.mismatch.resize(b);
  e.packed_row_offsets.resize(b + 1);

  const uint64_t vocab = static_cast<uint64_t>(options.vocab_size);
  int32_t packed_rows = 0;
  for (int32_t i = 0; i < b; ++i) {
    SplitMix64 rng(DeriveSeed(options.seed, static_cast<uint64_t>(i) + 1));
    const int32_t first = w.draft_offsets[i];
    const int32_t gamma = w.draft_offsets[i + 1] - first;
    const int32_t k = rng.NextBinomial(gamma, options.alpha);
    int32_t* draft = w.draft_tokens.data() + first;
    int32_t* target = w.target_tokens.data() + first + i;
    for (int32_t j = 0; j < gamma; ++j) {
      draft[j] = static_cast<int32_t>(rng.NextBelow(vocab));
    }
    for (int32_t j = 0; j <= gamma; ++j) {
      if (j < k) {
        target[j] = draft[j];
      } else if (j == k && k < gamma) {
        // Any token but the draft's: shift by 1..vocab-1 around the vocabulary.
        target[j] = static_cast<int32_t>(
            (static_cast<uint64_t>(draft[j]) + 1 + rng.NextBelow(vocab - 1)) % vocab);
      } else {
        target[j] = static_cast<int32_t>(rng.NextBelow(vocab));
      }
    }
    FillRandomBytes(rng, w.draft_kv.data() + int64_t{first} * rb, gamma * rb);

    e.accepted_lengths[i] = k;
    e.next_tokens[i] = target[k];
    e.mismatch[i] = k < gamma ? 1 : 0;
    e.packed_row_offsets[i] = packed_rows;
    packed_rows += k;
  }
  e.packed_row_offsets[b] = packed_rows;
  e.packed_kv.resize(int64_t{packed_rows} * rb);
  for (int32_t i = 0; i < b && rb > 0; ++i) {
    // k == 0 copies nothing; packed_kv may be empty (data() null) then.
    if (e.accepted_lengths[i] == 0) continue;
    std::memcpy(e.packed_kv.data() + int64_t{e.packed_row_offsets[i]} * rb,
                w.draft_kv.data() + int64_t{w.draft_offsets[i]} * rb,
                static_cast<size_t>(e.accepted_lengths[i] * rb));
  }
  return w;
}

GreedyHostOutputs::GreedyHostOutputs(const GreedyBatchInput& input,
                                     std::byte poison) {
  const int32_t b = input.num_sequences;
  const auto fill = [poison](auto& v, size_t n) {
    v.resize(n);
    if (n > 0) std::memset(v.data(), static_cast<int>(poison), n * sizeof(v[0]));
  };
  fill(accepted_lengths, b);
  fill(next_tokens, b);
  fill(mismatch, b);
  fill(packed_row_offsets, b + 1);
  fill(packed_kv, static_cast<size_t>(PackedKvCapacityBytes(input)));
}

GreedyBatchOutput GreedyHostOutputs::view() {
  GreedyBatchOutput out;
  out.accepted_lengths = accepted_lengths.data();
  out.next_tokens = next_tokens.data();
  out.mismatch = mismatch.data();
  out.packed_row_offsets = packed_row_offsets.data();
  out.packed_kv = packed_kv.empty() ? nullptr : packed_kv.data();
  return out;
}

}  // namespace specverify
