// Exact rejection-sampling verification (Leviathan et al. 2023, "Fast
// Inference from Transformers via Speculative Decoding", Algorithm 1; seeds
// 001, 003, 004) on a ragged batch. Semantics, RNG keying and edge cases are
// specified in docs/SAMPLING.md; this header is the contract of the data.
//
// Layout (the ragged layout of kernels/layout/ragged_batch.h, with rows of V
// values instead of token ids):
//
//   draft_offsets  [b + 1]              offsets[0] == 0, gamma_i = offsets[i+1] - offsets[i]
//   draft_tokens   [offsets[b]]         x_ij, sampled by the drafter from q_ij
//   target_values  [(offsets[b] + b) * V]  row of (i, j) at offsets[i] + i + j, j in [0, gamma_i]
//   draft_values   [offsets[b] * V]     row of (i, j) at offsets[i] + j, j in [0, gamma_i);
//                                       null iff !has_draft_probs (q one-hot on x_ij)
//   sequences      [b]                  per-sequence seed, sequence index, temperature, top-k/p
//
// Per sequence, with u_j the acceptance coin of position j (philox.h):
//   accept x_j  iff  p_j(x_j) > 0  and  u_j * q_j(x_j) <= p_j(x_j)
//   k = first rejected position, else gamma
//   next ~ normalize(max(0, p_k - q_k)) if k < gamma   (falls back to p_k if that is all zero)
//   next ~ p_gamma                       if k == gamma (the bonus token)
//
// The structs are plain views and own nothing. LaunchRejectionSample requires
// device pointers, ReferenceRejectionSample host pointers.
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_PARAMS_H_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_PARAMS_H_

#include <cstdint>

#include "kernels/sampling/det_math.h"  // SV_HD

namespace specverify {

// Element type of target_values / draft_values (both share it).
enum class SampleDtype : uint8_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// What the rows hold (target and draft share it).
enum class SampleValueKind : uint8_t {
  // Finite, >= 0, used as given: acceptance reads two raw scalars, so rows are
  // expected to sum to 1; sampling normalizes implicitly. temperature, top_k
  // and top_p must be neutral (the caller applied them).
  kProbabilities = 0,
  // Finite logits z: p = softmax(z / T) restricted to top-k then top-p, as
  // inference engines do; T == 0 means greedy (argmax, lowest index on ties).
  // Draft logits give q = softmax(z_q / T) (no top-k/top-p: a drafter that
  // filtered sends probabilities).
  kLogits = 1,
  // Normalized log-probabilities (seed 004): p = exp(v) with det_math's
  // ExpDet, the same bits on the CPU and the GPU. -inf is allowed (p = 0);
  // NaN and +inf are invalid. As for probabilities, temperature is ignored
  // and top_k / top_p must be neutral (the caller applied them), and no
  // normalizer pass runs: acceptance reads two scalars per position.
  kLogProbabilities = 2,
};

enum class SampleMethod : uint8_t {
  kExact = 0,
  // Seed 001's approximation: p^(x) = sigmoid((z / T - alpha) / (beta - alpha))
  // (likewise q^), unnormalized, in place of softmax. NOT exact: the emitted
  // distribution deviates from the target's (docs/SAMPLING.md measures how
  // much). Logits only, T > 0, no top-k/top-p.
  kSigmoid = 1,
};

inline constexpr bool IsExactMethod(SampleMethod m) { return m == SampleMethod::kExact; }

// Per-sequence parameters, 24 bytes, one array [b] in the memory space of the
// batch (a single copy to stage).
struct SequenceSamplingParams {
  uint64_t seed = 0;           // the request's seed (VerifyRequest.seed)
  int32_t sequence_index = 0;  // index of this sequence within its request, >= 0
  float temperature = 1.0f;    // logits: finite, >= 0 (0 = greedy); ignored for (log-)probabilities
  int32_t top_k = 0;           // logits: >= 0, 0 = keep all
  float top_p = 1.0f;          // logits: in (0, 1], 1 = keep all
};
static_assert(sizeof(SequenceSamplingParams) == 24);

// Per-sequence outcome codes written by every implementation; the host turns
// a non-zero code into INVALID_ARGUMENT (RejectionCodeToStatus).
enum RejectionCode : int32_t {
  kRejectionOk = 0,
  kRejectionDraftTokenOutOfRange = 1,  // a draft id outside [0, V)
  kRejectionBadTargetValue = 2,        // NaN, Inf, a negative probability, or a NaN/+inf log-probability read
  kRejectionBadDraftValue = 3,         // the same in a draft row read
  kRejectionEmptyTargetRow = 4,        // the row sampled from has no positive mass
  kRejectionBadSequenceParams = 5,     // temperature / top_k / top_p out of range
  kRejectionBadRowSum = 6,             // full-row check: a (log-)probability row's mass is 0 or not finite
  // Only between a launch with RejectionBatchOutput::race_slots and
  // FinishRejectionOutcomes: the sequence's token is still in its race slots.
  kRejectionRacePending = 7,
};

struct RejectionBatchInput {
  int32_t num_sequences = 0;  // b, >= 0
  int32_t vocab_size = 0;     // V, >= 1
  // Host-known offsets[b] (total draft positions). The GPU launcher sizes its
  // grids from it without reading device memory; must equal draft_offsets[b].
  int32_t total_draft_tokens = 0;
  SampleDtype dtype = SampleDtype::kFloat32;
  SampleValueKind kind = SampleValueKind::kProbabilities;
  SampleMethod method = SampleMethod::kExact;
  bool has_draft_probs = false;
  // Check every element of every row (and, for probabilities and
  // log-probabilities, that each row's mass, sum of p or of ExpDet(v), is
  // positive and finite) instead of only the elements the verification
  // reads. Costs one extra pass over all rows.
  bool validate_full_rows = false;
  // Host-known: some sequence has top_k > 0 or top_p < 1. The GPU path needs
  // it to schedule the filtering pass without reading device memory.
  bool any_top_k_top_p = false;
  float sigmoid_alpha = -1e3f;  // kSigmoid only: alpha < beta
  float sigmoid_beta = 1e3f;

  const int32_t* draft_offsets = nullptr;              // [b + 1], read-only
  const int32_t* draft_tokens = nullptr;               // [offsets[b]], read-only
  const void* target_values = nullptr;                 // [(offsets[b] + b) * V] of dtype, read-only
  const void* draft_values = nullptr;                  // [offsets[b] * V] of dtype, or null
  const SequenceSamplingParams* sequences = nullptr;   // [b], read-only
  // Optional row tables (the zero-copy data plane: rows read where the
  // worker's registered region holds them, docs/DATA_PLANE.md). When set,
  // row r of the target (draft) rows is target_rows[r] (draft_rows[r]) and
  // target_values (draft_values) is not read. Same row numbering as above.
  // Every row address must be aligned to 16 bytes (the kernels' vector loads).
  const void* const* target_rows = nullptr;            // [offsets[b] + b], read-only
  const void* const* draft_rows = nullptr;             // [offsets[b]] when has_draft_probs, or null
};


// What a race block read that makes the sequence's outcome an error (the
// flags of RejectionRaceSlot and of the device merge).
inline constexpr uint32_t kRaceReadBadTarget = 1u;  // an invalid target value
inline constexpr uint32_t kRaceReadBadDraft = 2u;   // an invalid draft value

// One race block's winner, left for the host to fold
// (RejectionBatchOutput::race_slots). `word` packs the winner so that the
// larger word wins (the smaller key; on equal keys the lower token), 0 when
// the block's share had no entrant; `flags` the kRaceRead* bits.
struct alignas(16) RejectionRaceSlot {
  uint64_t word = 0;
  uint32_t flags = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(RejectionRaceSlot) == 16);

// The packed word of a race entrant: the bitwise NOT of a rank where smaller
// is better,
//   bit 63      0 residual race, 1 target race (any residual entrant beats
//               every target entrant: the target race only decides when the
//               row has no residual entrant)
//   bits 20..51 the key's float bits (keys are >= 0 or +inf, never NaN, so
//               their bits order as the floats do)
//   bits 0..19  the token (V <= 2^20, so the token fits)
// so the largest word is the smallest key and, on equal keys, the lower
// token. A real entrant's word is >= ~(2^63 + 2^52) > 0 = no entrant.
inline constexpr uint64_t kRaceNoEntrant = 0;
SV_HD uint64_t RaceWord(float key, int32_t token, bool target_race) {
  const uint64_t rank = (static_cast<uint64_t>(target_race) << 63) |
                        (static_cast<uint64_t>(detmath::FloatToBits(key)) << 20) |
                        static_cast<uint64_t>(static_cast<uint32_t>(token));
  return ~rank;
}
// The winner's token: the word's low 20 bits, inverted.
SV_HD int32_t RaceWordToken(uint64_t word) { return static_cast<int32_t>(~word & 0xfffffu); }
// A raced sequence's outcome from its blocks' folded word and flags, for
// the device merge and FinishRejectionOutcomes alike: an invalid target
// value read by any block, else an invalid draft value, else no entrant in
// any share (kRejectionEmptyTargetRow), else kRejectionOk (the word's token).
SV_HD int32_t RaceOutcomeCode(uint64_t word, uint32_t flags) {
  if (flags & kRaceReadBadTarget) return kRejectionBadTargetValue;
  if (flags & kRaceReadBadDraft) return kRejectionBadDraftValue;
  if (word == kRaceNoEntrant) return kRejectionEmptyTargetRow;
  return kRejectionOk;
}

struct RejectionBatchOutput {
  int32_t* accepted_lengths = nullptr;  // [b] k_i (0 on error): feeds the greedy pack
  int32_t* next_tokens = nullptr;       // [b] the correction or bonus token (-1 on error)
  uint8_t* mismatch = nullptr;          // [b] 1 iff k_i < gamma_i (as greedy; 1 on error)
  int32_t* status_codes = nullptr;      // [b] RejectionCode
  int32_t* error_positions = nullptr;   // [b] row j of the offending value/token, -1 if none
  // Optional, [offsets[b] + b] (null: not written). Target tokens in the
  // greedy layout (kernels/layout/ragged_batch.h) that make greedy
  // verification reproduce this outcome's accepted lengths, so the KV pack of
  // the greedy path (LaunchGreedyVerifyPack / ReferenceGreedyVerifyPack) can
  // pack the accepted rows of a sampled batch unchanged. See
  // GreedyTargetForOutcome; take next tokens from next_tokens, not from greedy.
  int32_t* greedy_target_tokens = nullptr;
  // Optional (null: the device finishes every outcome). With race slots, the
  // blocks that race sequence i's recovery or bonus row each leave their
  // winner in race_slots[i * race_slots_per_sequence + g] instead of merging
  // on the device (a ticket and a read-back after the last block's sweep:
  // ~1 us of every launch on the H100), and the sequence's outcome is written
  // as kRejectionRacePending with accepted_lengths[i] = k and
  // error_positions[i] = k; FinishRejectionOutcomes (rejection_finish.h)
  // completes it on the host from a copy of the slots. accepted_lengths is
  // then the decision's k on the device even for a sequence whose swept row
  // turns out to hold an invalid value (the host reports the error and k 0):
  // a row copy after the launch copies its k rows. race_slots_per_sequence
  // must equal RejectionRaceSlotsPerSequence for the batch; not combinable
  // with greedy_target_tokens, which need the token on the device. The CPU
  // reference ignores both and finishes every outcome.
  RejectionRaceSlot* race_slots = nullptr;
  int32_t race_slots_per_sequence = 0;
};

// Sequence i's greedy target token at position j (0 <= j <= gamma) for an
// outcome with k accepted (0 on error, next = -1): the draft token before k,
// at k the sampled token when it differs from the draft token (always, except
// in the zero-residual fallback or on error) and otherwise another valid id
// (needs V >= 2), and 0 after k.
// Greedy verification over these tokens stops exactly at k.
inline constexpr int32_t GreedyTargetForOutcome(int32_t j, int32_t k, int32_t gamma, int32_t draft_j,
                                                int32_t next) {
  if (j < k) return draft_j;
  if (j > k) return 0;
  if (k == gamma) return next;  // the bonus position: no draft token to differ from
  return (next >= 0 && next != draft_j) ? next : (draft_j == 0 ? 1 : 0);
}

struct RejectionSampleParams {
  RejectionBatchInput input;
  RejectionBatchOutput output;
};

// Bytes per element of a dtype.
inline constexpr int64_t SampleDtypeBytes(SampleDtype d) { return d == SampleDtype::kFloat32 ? 4 : 2; }

// Address of target row `row` (draft row for is_draft): through the row table
// when the batch has one, else inside the contiguous values.
SV_HD const void* SampledRowAddress(const RejectionBatchInput& in, bool is_draft, int64_t row) {
  const void* const* table = is_draft ? in.draft_rows : in.target_rows;
  if (table != nullptr) return table[row];
  const void* base = is_draft ? in.draft_values : in.target_values;
  return static_cast<const char*>(base) + row * in.vocab_size * SampleDtypeBytes(in.dtype);
}

}  // namespace specverify

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_PARAMS_H_
