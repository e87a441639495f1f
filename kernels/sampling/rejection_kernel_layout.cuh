// Fragment of kernels/sampling/rejection_sample.cu: the kernels' tuning
// constants (threads, occupancies, staging) and the scratch layout every
// launch carves.
// Included once, inside that file's anonymous namespace, first;
// not a standalone header: it uses the names of the fragments before it and
// of the includes at the top of rejection_sample.cu. Split out of that single
// file on 2026-11-27 without changing its code (byte-identical cubin).
#ifndef SPECVERIFY_KERNELS_SAMPLING_REJECTION_KERNEL_LAYOUT_CUH_
#define SPECVERIFY_KERNELS_SAMPLING_REJECTION_KERNEL_LAYOUT_CUH_

using rejection::ChunkStats;
using rejection::RaceCandidate;
using rejection::RowNormalizer;
using rejection::RowProbability;

// One thread per lane of the fixed chunk order (rejection_core.h).
constexpr int kThreads = rejection::kChunkLanes;
constexpr int kWarps = kThreads / 32;
constexpr int kRounds = rejection::kNormalizerChunk / (kThreads * rejection::kLaneWidth);
// The occupancy the race kernel is compiled for (__launch_bounds__ min
// blocks): 2 blocks of 256 threads leave 128 registers per thread, and the
// sweep runs without spills. A second instantiation for 3 blocks (80
// registers) won once (H200, 2026-11-21, B=128) but lost in every later
// measurement (H100, B=8: log-probabilities 14.97 vs 14.72 us, logits 56.8
// vs 56.3, bench/sampling/results/2026-11-25-race-floors; probabilities
// B=128 64.9 vs 63.5, B=512 274 vs 218, 2026-11-26-item5), had not been
// planned since, spilled 4-68 bytes since the two-phase sweep,
// and took 40 of rejection_sample.cu's 110 s of compile: removed
// 2026-11-28. The launcher plans 2 blocks per SM (RejectionRaceBlocksPerSm);
// RejectionScratch::race_blocks_per_sm can ask for 1.
constexpr int kRaceBlocksPerSm = 2;
// The row pass holds a chunk's 16 values per thread in registers between its
// maximum and its weights. fp32 rows: 6 blocks of 256 threads per SM (<= 40
// registers; 4, 5, 7 and 8 were all slower at B=8 and B=32). A block is a
// latency chain (its loads, two block reductions), so 16-bit rows, whose
// chunk is half the bytes, take 8 (<= 32 registers; neither format spills
// now that the values stay packed until used): H100, bf16 logits B=8 49.0
// -> 48.1 us, fp16 49.1 -> 48.4, bf16 B=16 75.7 -> 74.2
// (bench/sampling/results/2026-11-27-rowpass-occupancy).
constexpr int kRowPassBlocksPerSm = 6;
constexpr int kRowPassBlocksPerSm16Bit = 8;
template <SampleDtype D>
constexpr int RowPassBlocksPerSm() {
  return D == SampleDtype::kFloat32 ? kRowPassBlocksPerSm : kRowPassBlocksPerSm16Bit;
}
// RowPassRunKernel: blocks per SM, and the most consecutive chunks of a row
// one block takes. fp32 rows take 5 (at 6 the loop spilled 32-44 bytes:
// H200, runs of 8, B=128 487.1 vs 424.6 us); 16-bit rows 6, since their
// values stay packed until used (bf16 fits 40 registers, fp16 spills 48
// bytes and still gains): H200, B=128 bf16 343.1-343.3 -> 338.3-338.6 us,
// fp16 342.1-342.2 -> 338.1; B=64 -1.3 to -1.9
// (bench/sampling/results/2026-11-29-unpack-late, run 2).
constexpr int kRowPassRunBlocksPerSm = 5;
constexpr int kRowPassRunBlocksPerSm16Bit = 6;
template <SampleDtype D>
constexpr int RowPassRunBlocksPerSm() {
  return D == SampleDtype::kFloat32 ? kRowPassRunBlocksPerSm : kRowPassRunBlocksPerSm16Bit;
}
constexpr int32_t kRowPassMaxChunksPerBlock = 8;
// Single-chunk waves from which the launcher takes runs of 8 chunks, and
// (16-bit rows) runs of 4 below that
// (RejectionRowPassChunksPerBlock).
constexpr int64_t kRowPassRunMinWaves = 32;
constexpr int32_t kRowPassShortRunChunks = 4;
constexpr int64_t kRowPassShortRunMinWaves = 6;
// The filter: 512 threads, two blocks per SM, and up to kFilterMaxSlices
// blocks per row (a thread-block cluster on sm_90) so that B=8's 72 target
// rows keep every SM reading instead of half of them.
constexpr int kFilterThreads = 512;
constexpr int kFilterBlocksPerSm = 2;
constexpr int kFilterMaxSlices = 8;
// The race sweep streams its row share through shared memory with
// asynchronous copies (sm_80+), kStageLookahead quads per thread in flight,
// without holding registers for them: 4 quads of two rows is 32 KB per block
// in flight. Against the register-staged loop it replaced (H200, two runs
// of one session): b=128 79.6 -> 74.7 us, b=32 29.4 -> 28.2 us; no gain at
// b=8, where the sweep is instruction-bound. A ring of
// kStageLookahead + 1 slots lets a slot be refilled one iteration after it
// was read, when its values have certainly left shared memory.
constexpr int kStageLookahead = 4;
constexpr int kStageSlots = kStageLookahead + 1;
// A race share's length is a multiple of this many quads (see AcceptRaceKernel).
constexpr int32_t kShareQuads = 32;
constexpr int kStageBytesPerRow = kStageSlots * kThreads * 16;  // 16 B: a quad of fp32
constexpr int kRaceStageBytes = 2 * kStageBytesPerRow;         // target and draft rows: 40 KB
constexpr int kMaxChunks = (1 << 20) / rejection::kNormalizerChunk;  // V <= 2^20
constexpr uint32_t kFullMask = 0xffffffffu;
__device__ constexpr float kInfinity = __builtin_huge_valf();
__device__ constexpr float kFloatMinNormal = 1.17549435e-38f;  // 2^-126

constexpr int32_t kRowBadElement = 1;
constexpr int32_t kRowBadSum = 2;

struct DeviceRowNorm {
  RowNormalizer norm;
  int32_t flags;  // kRowBadElement | kRowBadSum
};

// Per-sequence race result: one word that every race block folds its
// winners into with one atomicMax (race_result.cuh), the OR of the value
// flags, and a ticket counter whose last taker writes the outcome. All three
// start at zero, and that block leaves them at zero.
struct ScratchLayout {
  unsigned long long* race_words = nullptr;  // [max_sequences]
  uint32_t* race_flags = nullptr;            // [max_sequences]: 1 invalid target element, 2 invalid draft element
  uint32_t* race_tickets = nullptr;          // [max_sequences]
  ChunkStats* chunks = nullptr;              // [max_rows * max_chunks]; argmax -1 marks an invalid element
  DeviceRowNorm* norms = nullptr;            // [max_rows]: target rows, then draft rows
  // [max_target_rows * max_chunks * kWarps]: each warp's maximum in the row
  // pass of a filtered batch's target rows (NaN where a chunk took the
  // general path), from which the filter bounds its candidates and picks
  // the groups of 512 values that can hold them.
  float* warp_max = nullptr;
  // [max_rows]: each row's 1/T (0 for greedy rows), written by the row pass
  // where it looked the sequence up, so the combine needs no offsets search
  // and temperature read on its chain.
  float* row_inv_t = nullptr;
  size_t zeroed_bytes = 0;                   // prefix cleared once by InitRejectionScratch
  size_t bytes = 0;
};

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

int64_t MaxRows(const RejectionScratchLimits& l) {
  return 2 * static_cast<int64_t>(l.max_total_draft_tokens) + l.max_sequences;
}
int32_t MaxRaceBlocks(int32_t vocab) {
  const int32_t quads = (vocab + 3) / 4;
  return std::max(1, (quads + kThreads - 1) / kThreads);
}

ScratchLayout Carve(void* base, const RejectionScratchLimits& l) {
  ScratchLayout s;
  auto* p = static_cast<char*>(base);
  size_t off = 0;
  const auto take = [&](size_t n) {
    char* at = p == nullptr ? nullptr : p + off;
    off += AlignUp(n);
    return at;
  };
  const int64_t rows = MaxRows(l);
  const int32_t chunks = rejection::NumChunks(l.max_vocab_size);
  s.race_words = reinterpret_cast<unsigned long long*>(take(sizeof(unsigned long long) * l.max_sequences));
  s.race_flags = reinterpret_cast<uint32_t*>(take(sizeof(uint32_t) * l.max_sequences));
  s.race_tickets = reinterpret_cast<uint32_t*>(take(sizeof(uint32_t) * l.max_sequences));
  s.zeroed_bytes = off;
  s.chunks = reinterpret_cast<ChunkStats*>(take(sizeof(ChunkStats) * rows * chunks));
  s.norms = reinterpret_cast<DeviceRowNorm*>(take(sizeof(DeviceRowNorm) * rows));
  const int64_t target_rows = static_cast<int64_t>(l.max_total_draft_tokens) + l.max_sequences;
  s.warp_max = reinterpret_cast<float*>(take(sizeof(float) * target_rows * chunks * kWarps));
  s.row_inv_t = reinterpret_cast<float*>(take(sizeof(float) * rows));
  s.bytes = off;
  return s;
}

#endif  // SPECVERIFY_KERNELS_SAMPLING_REJECTION_KERNEL_LAYOUT_CUH_
