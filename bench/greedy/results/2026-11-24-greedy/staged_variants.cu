// Experiment for issue #17 item 4 (not part of the build): variants of the
// prefix-first verify-and-pack at the stress point (b=32, gamma=128,
// alpha=0.9, 4 KiB rows), each timed like greedy_bench (event pairs behind
// a spin kernel, and back to back; 200+ samples; inputs rotated over > 2x L2)
// beside cudaMemcpyAsync of the packed bytes and of all draft bytes, and an
// empty kernel. Every variant's packed bytes and offsets are checked.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I<repo> staged_variants.cu -o staged_variants
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#ifdef WITH_LIB
// The library's kernels in this translation unit (anonymous namespace), so
// each half of the committed path can be paired with the variants below.
#include "kernels/greedy/greedy_cuda.cu"
#endif

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1);} } while (0)

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kStage = 64 * 1024;

struct P {
  int b, total_rows; int64_t rb;
  const int* off; const int* draft; const int* target; const unsigned char* kv;
  int* k; int* packed_off; unsigned char* out;
};

__device__ __forceinline__ uint32_t Smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void Trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void WaitPrimary() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// trigger: 0 none, 1 after token loads issued, 2 at start
template <int kTrigger>
__global__ void __launch_bounds__(256) VerifyK(P p) {
  if (kTrigger == 2) Trigger();
  const int lane = threadIdx.x % 32;
  const int seq = blockIdx.x * 8 + threadIdx.x / 32;
  if (seq >= p.b) return;
  const int first = p.off[seq];
  const int gamma = p.off[seq + 1] - first;
  const int* d = p.draft + first; const int* t = p.target + first + seq;
  constexpr int kC = 9;
  bool mm[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) { const int j = c * 32 + lane; mm[c] = j < gamma && d[j] != t[j]; }
  if (kTrigger == 1) Trigger();
  int k = gamma; bool found = false;
#pragma unroll
  for (int c = 0; c < kC; ++c) { unsigned m = __ballot_sync(~0u, mm[c]); if (!found && m) { found = true; k = c * 32 + __ffs(m) - 1; } }
  if (lane == 0) p.k[seq] = k;
}

struct Seqs {
  int all_offsets[kThreads]; int offsets[129]; int first_in[128]; int acc_in[128]; int dest_in[128]; int prefix;
  union { cub::BlockScan<int, kThreads>::TempStorage scan; cub::BlockReduce<int, kThreads>::TempStorage red; };
};

// Tile's overlapping sequences (inputs only). Returns n_seq; s_first out.
__device__ __forceinline__ int FindSeqs(const P& p, Seqs& s, int tile_start, int tile_end, int tile_rows, int* s_first_out) {
  const int tid = threadIdx.x, b = p.b;
  const int stride = (b + kThreads) / kThreads;
  const int sample = tid * stride;
  const int sv = sample <= b ? p.off[sample] : INT_MAX;
  if (stride == 1) s.all_offsets[tid] = sv;
  const int bucket = __syncthreads_count(sv <= tile_start) - 1;
  int s_first = bucket * stride;
  if (stride > 1) { const int probe = s_first + 1 + tid; s_first += __syncthreads_count(tid < stride - 1 && probe <= b && p.off[probe] <= tile_start); }
  const int avail = min(tile_rows + 1, b - s_first + 1);
  int my = INT_MAX;
  if (tid < avail) { my = stride == 1 ? s.all_offsets[s_first + tid] : p.off[s_first + tid]; s.offsets[tid] = my; }
  *s_first_out = s_first;
  return __syncthreads_count(s_first + tid < b && my < tile_end);
}

// After k is visible: prefix, per-sequence runs, packed offsets. Returns prefix.
__device__ __forceinline__ int Prefix(const P& p, Seqs& s, int s_first, int n_seq, int tile_start, int tile_end) {
  const int tid = threadIdx.x;
  int before = 0;
  for (int q = tid; q < s_first; q += kThreads) before += p.k[q];
  int in_tile = 0;
  if (tid < n_seq) {
    const int first = s.offsets[tid]; const int k = p.k[s_first + tid];
    const int lo = max(first, tile_start);
    if (tid == 0) before += min(k, tile_start - first);
    in_tile = max(0, min(first + k, tile_end) - lo);
    s.first_in[tid] = lo; s.acc_in[tid] = in_tile;
  }
  const int pre = cub::BlockReduce<int, kThreads>(s.red).Sum(before);
  if (tid == 0) s.prefix = pre;
  __syncthreads();
  int dest = 0, agg = 0;
  cub::BlockScan<int, kThreads>(s.scan).ExclusiveSum(in_tile, dest, agg);
  if (tid < n_seq) s.dest_in[tid] = dest;
  __syncthreads();
  const int prefix = s.prefix;
  if (tid < n_seq && s.offsets[tid] >= tile_start) p.packed_off[s_first + tid] = prefix + dest;
  if (blockIdx.x == gridDim.x - 1 && tid == 0) p.packed_off[p.b] = prefix + agg;
  return prefix;
}

// B: TMA tile to smem in kChunks chunks before the wait; chunk-wise bulk stores.
template <int kChunks>
__global__ void __launch_bounds__(256) PackStaged(P p, int tile_rows) {
  __shared__ Seqs s;
  __shared__ uint64_t bar[kChunks];
  extern __shared__ __align__(128) unsigned char stage[];
  constexpr int kCB = kStage / kChunks;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int tile_start = blockIdx.x * tile_rows, tile_end = min(tile_start + tile_rows, p.total_rows);
  const uint32_t tb = (uint32_t)((tile_end - tile_start) * p.rb);
  const int chunks = (tb + kCB - 1) / kCB;
  if (tid == 0) {
    for (int c = 0; c < chunks; ++c) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(Smem(&bar[c])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const unsigned char* from = p.kv + (int64_t)tile_start * p.rb;
    for (int c = 0; c < chunks; ++c) {
      const uint32_t o = c * kCB, n = min((uint32_t)kCB, tb - o);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(&bar[c])), "r"(n) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   ::"r"(Smem(stage + o)), "l"(from + o), "r"(n), "r"(Smem(&bar[c])) : "memory");
    }
  }
  int s_first; const int n_seq = FindSeqs(p, s, tile_start, tile_end, tile_rows, &s_first);
  WaitPrimary();
  const int prefix = Prefix(p, s, s_first, n_seq, tile_start, tile_end);
  for (int c = warp; c < chunks; c += 8) {
    if (lane != 0) continue;
    const uint32_t clo = c * kCB, chi = min(clo + kCB, tb);
    uint32_t done = 0;
    do { asm volatile("{\n\t.reg .pred q;\n\tmbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0;\n\tselp.u32 %0, 1, 0, q;\n\t}" : "=r"(done) : "r"(Smem(&bar[c])) : "memory"); } while (!done);
    for (int q = 0; q < n_seq; ++q) {
      const int rows = s.acc_in[q]; if (!rows) continue;
      const uint32_t rlo = (uint32_t)((s.first_in[q] - tile_start) * p.rb), rhi = rlo + (uint32_t)(rows * p.rb);
      const uint32_t lo = max(rlo, clo), hi = min(rhi, chi);
      if (lo >= hi) continue;
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(p.out + (int64_t)(prefix + s.dest_in[q]) * p.rb + (lo - rlo)), "r"(Smem(stage + lo)), "r"(hi - lo) : "memory");
    }
  }
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// C: register streaming copy of accepted rows only, after the wait.
// kPrefetch: bulk-prefetch the whole tile into L2 before the wait.
template <bool kPrefetch>
__global__ void __launch_bounds__(256) PackRegs(P p, int tile_rows) {
  __shared__ Seqs s;
  const int tid = threadIdx.x;
  const int tile_start = blockIdx.x * tile_rows, tile_end = min(tile_start + tile_rows, p.total_rows);
  if (kPrefetch && tid == 0) {
    const uint32_t tb = (uint32_t)((tile_end - tile_start) * p.rb);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.kv + (int64_t)tile_start * p.rb), "r"(tb) : "memory");
  }
  int s_first; const int n_seq = FindSeqs(p, s, tile_start, tile_end, tile_rows, &s_first);
  WaitPrimary();
  const int prefix = Prefix(p, s, s_first, n_seq, tile_start, tile_end);
  // accepted rows of the tile: runs; copy all runs as one index space.
  const int units_row = (int)(p.rb / 16);
  for (int q = 0; q < n_seq; ++q) {
    const int rows = s.acc_in[q]; if (!rows) continue;
    const uint4* src = reinterpret_cast<const uint4*>(p.kv + (int64_t)s.first_in[q] * p.rb);
    uint4* dst = reinterpret_cast<uint4*>(p.out + (int64_t)(prefix + s.dest_in[q]) * p.rb);
    const int units = rows * units_row;
    for (int base = tid; base < units; base += 256 * 8) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) { const int i = base + u * 256; if (i < units) v[u] = __ldcs(src + i); }
#pragma unroll
      for (int u = 0; u < 8; ++u) { const int i = base + u * 256; if (i < units) dst[i] = v[u]; }
    }
  }
}


// A1: one block verifies the whole batch with one DRAM round trip: offsets,
// draft and target tokens all loaded at once into shared memory; writes k
// and the packed offsets (exclusive scan). REQUIRES b <= 1024.
template <int kTrigger>
__global__ void __launch_bounds__(1024) VerifyOneBlock(P p) {
  if (kTrigger == 2) Trigger();
  extern __shared__ int sh[];
  __shared__ int ksh[1024];
  __shared__ cub::BlockScan<int, 1024>::TempStorage scan;
  const int tid = threadIdx.x, b = p.b, total = p.total_rows;
  int* offs = sh; int* dr = offs + b + 1; int* tg = dr + total;
  for (int i = tid; i <= b; i += 1024) offs[i] = p.off[i];
  for (int i = tid; i < total; i += 1024) dr[i] = p.draft[i];
  for (int i = tid; i < total + b; i += 1024) tg[i] = p.target[i];
  if (kTrigger == 1) Trigger();
  __syncthreads();
  if (tid < b) ksh[tid] = offs[tid + 1] - offs[tid];
  __syncthreads();
  for (int j = tid; j < total; j += 1024) {
    int lo = 0, hi = b - 1;
    while (lo < hi) { const int mid = (lo + hi + 1) / 2; if (offs[mid] <= j) lo = mid; else hi = mid - 1; }
    if (dr[j] != tg[j + lo]) atomicMin(&ksh[lo], j - offs[lo]);
  }
  __syncthreads();
  const int k = tid < b ? ksh[tid] : 0;
  int dest = 0, agg = 0;
  cub::BlockScan<int, 1024>(scan).ExclusiveSum(k, dest, agg);
  if (tid < b) { p.k[tid] = k; p.packed_off[tid] = dest; }
  if (tid == 0) p.packed_off[b] = agg;
}

// B2: after the wait, one L2 round trip (k and packed offsets of the
// overlapping sequences), then a register copy of the accepted rows.
// kSpec: the whole tile (<= 16 KiB: 4 vectors per thread) is loaded into
// registers before the wait; only accepted rows are stored.
template <bool kSpec>
__global__ void __launch_bounds__(256) PackB2(P p, int tile_rows) {
  __shared__ Seqs s;
  __shared__ int row_dest[64];
  const int tid = threadIdx.x;
  const int tile_start = blockIdx.x * tile_rows, tile_end = min(tile_start + tile_rows, p.total_rows);
  const int units_row = (int)(p.rb / 16);
  const int tile_units = (tile_end - tile_start) * units_row;
  const uint4* tsrc = reinterpret_cast<const uint4*>(p.kv + (int64_t)tile_start * p.rb);
  uint4 v[4];
  if (kSpec) {
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int i = tid + u * 256; if (i < tile_units) v[u] = __ldcs(tsrc + i); }
  }
  int s_first; const int n_seq = FindSeqs(p, s, tile_start, tile_end, tile_rows, &s_first);
  WaitPrimary();
  if (tid < n_seq) {
    const int first = s.offsets[tid]; const int k = p.k[s_first + tid]; const int po = p.packed_off[s_first + tid];
    const int lo = max(first, tile_start);
    s.first_in[tid] = lo; s.acc_in[tid] = max(0, min(first + k, tile_end) - lo); s.dest_in[tid] = po + (lo - first);
    if (kSpec) {
      const int hi = min(first + (s.offsets[tid + 1] - first), tile_end);
      for (int r = lo; r < hi; ++r) row_dest[r - tile_start] = r < first + k ? po + (r - first) : -1;
    }
  }
  __syncthreads();
  if (kSpec) {
    uint4* dst = reinterpret_cast<uint4*>(p.out);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = tid + u * 256;
      if (i < tile_units) { const int row = i / units_row; const int d = row_dest[row];
        if (d >= 0) dst[(int64_t)d * units_row + (i - row * units_row)] = v[u]; }
    }
    return;
  }
  for (int q = 0; q < n_seq; ++q) {
    const int rows = s.acc_in[q]; if (!rows) continue;
    const uint4* src = reinterpret_cast<const uint4*>(p.kv + (int64_t)s.first_in[q] * p.rb);
    uint4* dst = reinterpret_cast<uint4*>(p.out + (int64_t)s.dest_in[q] * p.rb);
    const int units = rows * units_row;
    for (int base = tid; base < units; base += 256 * 8) {
      uint4 w[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) { const int i = base + u * 256; if (i < units) w[u] = __ldcs(src + i); }
#pragma unroll
      for (int u = 0; u < 8; ++u) { const int i = base + u * 256; if (i < units) dst[i] = w[u]; }
    }
  }
}

// Plain SM copy, grid-stride, 4 vectors in flight per thread.
__global__ void __launch_bounds__(256) PlainCopy(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  for (int64_t base = blockIdx.x * 256 * 4 + threadIdx.x; base < n; base += (int64_t)gridDim.x * 256 * 4) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int64_t i = base + u * 256; if (i < n) v[u] = __ldcs(src + i); }
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int64_t i = base + u * 256; if (i < n) dst[i] = v[u]; }
  }
}
__global__ void Empty() {}
__global__ void Spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
__global__ void Fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n / 4; i += (size_t)gridDim.x * blockDim.x)
    reinterpret_cast<uint32_t*>(p)[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

template <typename K, typename... A>
cudaError_t LaunchPdl(K kernel, int grid, int smem, cudaStream_t st, bool pdl, A... args) {
  cudaLaunchAttribute at{}; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c{}; c.gridDim = dim3(grid); c.blockDim = dim3(256); c.dynamicSmemBytes = smem; c.stream = st;
  c.attrs = pdl ? &at : nullptr; c.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&c, kernel, args...);
}

int main(int argc, char** argv) {
  const int b = argc > 1 ? atoi(argv[1]) : 32, gamma = argc > 2 ? atoi(argv[2]) : 128;
  const double alpha = argc > 3 ? atof(argv[3]) : 0.9;
  const int64_t rb = 4096; const int runs = 400;
  const int rows = b * gamma;
  std::mt19937 rng(4000 + b * 7 + gamma);
  std::vector<int> off(b + 1), draft(rows), target(rows + b), k(b);
  for (int i = 0; i <= b; ++i) off[i] = i * gamma;
  std::binomial_distribution<int> bin(gamma, alpha);
  int total = 0; std::vector<int> pref(b + 1);
  for (int i = 0; i < b; ++i) {
    k[i] = bin(rng); pref[i] = total; total += k[i];
    for (int j = 0; j < gamma; ++j) draft[off[i] + j] = 1000 + (int)(rng() % 1000);
    for (int j = 0; j <= gamma; ++j) target[off[i] + i + j] = j < gamma ? draft[off[i] + j] : 7;
    if (k[i] < gamma) target[off[i] + i + k[i]] = draft[off[i] + k[i]] + 1;
  }
  pref[b] = total;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t kv_bytes = rows * rb, packed = (int64_t)total * rb;
  const int copies = (int)std::clamp<int64_t>((2 * (int64_t)prop.l2CacheSize + kv_bytes - 1) / kv_bytes, 2, 64);
  std::printf("device %s; b=%d gamma=%d alpha=%.2f rows=%d packed=%ld bytes (%.2f MiB) draft=%.2f MiB copies=%d\n",
              prop.name, b, gamma, alpha, rows, (long)packed, packed / 1048576.0, kv_bytes / 1048576.0, copies);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<P> ps(copies);
  int *kd, *pod; unsigned char* out;
  CK(cudaMalloc(&kd, 4 * b)); CK(cudaMalloc(&pod, 4 * (b + 1))); CK(cudaMalloc(&out, kv_bytes));
  for (int c = 0; c < copies; ++c) {
    int *o, *d, *t; unsigned char* kv;
    CK(cudaMalloc(&o, 4 * (b + 1))); CK(cudaMalloc(&d, 4 * rows)); CK(cudaMalloc(&t, 4 * (rows + b))); CK(cudaMalloc(&kv, kv_bytes));
    CK(cudaMemcpy(o, off.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d, draft.data(), 4 * rows, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(t, target.data(), 4 * (rows + b), cudaMemcpyHostToDevice));
    Fill<<<1024, 256, 0, st>>>(kv, kv_bytes, 77u + c);
    ps[c] = P{b, rows, rb, o, d, t, kv, kd, pod, out};
  }
  CK(cudaStreamSynchronize(st));
  int tile_rows = 16;  // 64 KiB tiles, as FusedTileRows picks at 16 MiB
  const int tiles64 = (rows + 15) / 16, tiles16 = (rows + 3) / 4;
  CK(cudaFuncSetAttribute(PackStaged<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStage));
  CK(cudaFuncSetAttribute(PackStaged<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStage));
  CK(cudaFuncSetAttribute(PackStaged<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, kStage));
  const int vgrid = (b + 7) / 8;
  const int a1smem = 4 * (b + 1 + rows + rows + b);
  CK(cudaFuncSetAttribute(VerifyOneBlock<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, a1smem));
  CK(cudaFuncSetAttribute(VerifyOneBlock<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, a1smem));
  CK(cudaFuncSetAttribute(VerifyOneBlock<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, a1smem));
  using Fn = std::function<cudaError_t(int)>;
  struct V { std::string name; Fn fn; bool checks; };
  std::vector<V> vs = {
    {"memcpy_packed", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, packed, cudaMemcpyDeviceToDevice, st); }, false},
    {"memcpy_all_draft", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, kv_bytes, cudaMemcpyDeviceToDevice, st); }, false},
    {"empty", [&](int) { Empty<<<1, 32, 0, st>>>(); return cudaGetLastError(); }, false},
    {"verify_only", [&](int c) { VerifyK<0><<<vgrid, 256, 0, st>>>(ps[c]); return cudaGetLastError(); }, false},
    {"staged8_alone", [&](int c) { return LaunchPdl(PackStaged<8>, tiles64, kStage, st, false, ps[c], tile_rows); }, true},
    {"V+staged8_pdl_trig_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackStaged<8>, tiles64, kStage, st, true, ps[c], tile_rows); }, true},
    {"V+staged8_pdl_trig_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackStaged<8>, tiles64, kStage, st, true, ps[c], tile_rows); }, true},
    {"V+staged8_nopdl", [&](int c) { VerifyK<0><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackStaged<8>, tiles64, kStage, st, false, ps[c], tile_rows); }, true},
    {"V+staged4_pdl_trig_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackStaged<4>, tiles64, kStage, st, true, ps[c], tile_rows); }, true},
    {"V+staged16_pdl_trig_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackStaged<16>, tiles64, kStage, st, true, ps[c], tile_rows); }, true},
    {"regs64_alone", [&](int c) { return LaunchPdl(PackRegs<false>, tiles64, 0, st, false, ps[c], 16); }, true},
    {"regs16_alone", [&](int c) { return LaunchPdl(PackRegs<false>, tiles16, 0, st, false, ps[c], 4); }, true},
    {"V+regs16_pdl_trig_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackRegs<false>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"V+regs16_pdl_trig_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackRegs<false>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"V+regs16_prefetch_pdl_trig_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackRegs<true>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"V+regs16_prefetch_pdl_trig_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackRegs<true>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"V+regs64_prefetch_pdl_trig_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackRegs<true>, tiles64, 0, st, true, ps[c], 16); }, true},
    {"plaincopy_packed", [&](int c) { PlainCopy<<<(int)std::min<int64_t>(packed / 16384 + 1, 132 * 8), 256, 0, st>>>((const uint4*)ps[c].kv, (uint4*)out, packed / 16); return cudaGetLastError(); }, false},
    {"A1_only", [&](int c) { VerifyOneBlock<0><<<1, 1024, a1smem, st>>>(ps[c]); return cudaGetLastError(); }, false},
    {"b2_16_alone", [&](int c) { return LaunchPdl(PackB2<false>, tiles16, 0, st, false, ps[c], 4); }, true},
    {"b2spec_16_alone", [&](int c) { return LaunchPdl(PackB2<true>, tiles16, 0, st, false, ps[c], 4); }, true},
    {"A1+b2_16_pdl_start", [&](int c) { VerifyOneBlock<2><<<1, 1024, a1smem, st>>>(ps[c]); return LaunchPdl(PackB2<false>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"A1+b2_16_pdl_issue", [&](int c) { VerifyOneBlock<1><<<1, 1024, a1smem, st>>>(ps[c]); return LaunchPdl(PackB2<false>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"A1+b2spec_16_pdl_start", [&](int c) { VerifyOneBlock<2><<<1, 1024, a1smem, st>>>(ps[c]); return LaunchPdl(PackB2<true>, tiles16, 0, st, true, ps[c], 4); }, true},
    {"A1+b2_64_pdl_start", [&](int c) { VerifyOneBlock<2><<<1, 1024, a1smem, st>>>(ps[c]); return LaunchPdl(PackB2<false>, tiles64, 0, st, true, ps[c], 16); }, true},
    {"V+b2_16_pdl_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackB2<false>, tiles16, 0, st, true, ps[c], 4); }, false},
    {"V1+b2spec_16_pdl_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackB2<true>, tiles16, 0, st, true, ps[c], 4); }, false},
    {"V2+b2spec_16_pdl_start", [&](int c) { VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackB2<true>, tiles16, 0, st, true, ps[c], 4); }, false},
    {"V1+b2_16_pdl_issue", [&](int c) { VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); return LaunchPdl(PackB2<false>, tiles16, 0, st, true, ps[c], 4); }, false},
    {"A1+staged8_pdl_start", [&](int c) { VerifyOneBlock<2><<<1, 1024, a1smem, st>>>(ps[c]); return LaunchPdl(PackStaged<8>, tiles64, kStage, st, true, ps[c], tile_rows); }, true},
  };
#ifdef WITH_LIB
  std::vector<specverify::GreedyDeviceBatch> lb(copies);
  std::vector<int> nextd_h(b);
  int* nextd; uint8_t* mmd; CK(cudaMalloc(&nextd, 4 * b)); CK(cudaMalloc(&mmd, b));
  for (int c = 0; c < copies; ++c) {
    specverify::GreedyDeviceBatch& g = lb[c];
    g.params.input = {b, ps[c].off, ps[c].draft, ps[c].target, reinterpret_cast<const std::byte*>(ps[c].kv), rb};
    g.params.output = {kd, nextd, mmd, pod, reinterpret_cast<std::byte*>(out)};
    g.total_draft_rows = rows; g.max_gamma = gamma;
  }
  auto scratch = specverify::AllocateGreedyScratch(specverify::GreedyScratchLimits{}, st);
  if (!scratch.ok()) { std::fprintf(stderr, "scratch\n"); return 1; }
  const specverify::GreedyScratch sv = scratch->view;
  vs.push_back({"lib_fused", [&](int c) { return specverify::LaunchGreedyVerifyPack(lb[c], specverify::GreedyPath::kFused, sv, st); }, true});
  vs.push_back({"lib_prefix_first", [&](int c) { return specverify::LaunchPrefixFirst(lb[c], 16, st); }, true});
  vs.push_back({"libV+b2spec", [&](int c) {
    specverify::BallotGreedyVerifyKernel<true><<<vgrid, 256, 0, st>>>(lb[c].params);
    return LaunchPdl(PackB2<true>, tiles16, 0, st, true, ps[c], 4); }, false});
  vs.push_back({"V2+libB", [&](int c) {
    VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]);
    return LaunchPdl(specverify::SpeculativePackKernel, tiles16, 0, st, true, lb[c].params, 4, rows); }, true});
  vs.push_back({"libB_alone", [&](int c) {
    return LaunchPdl(specverify::SpeculativePackKernel, tiles16, 0, st, false, lb[c].params, 4, rows); }, true});
  vs.push_back({"libV_alone", [&](int c) {
    specverify::BallotGreedyVerifyKernel<true><<<vgrid, 256, 0, st>>>(lb[c].params); return cudaGetLastError(); }, false});
#endif
  // Residency caps of the speculative pack (blocks per SM, by padding dynamic
  // shared memory): fewer resident blocks = fewer bytes of speculative reads
  // queued ahead of the verify grid's token loads.
  CK(cudaFuncSetAttribute(PackB2<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 110 * 1024));
  for (int cap : {2, 3, 4, 6}) {
    const int pad = cap == 2 ? 100 * 1024 : cap == 3 ? 66 * 1024 : cap == 4 ? 48 * 1024 : 32 * 1024;
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PackB2<true>, 256, pad));
    for (int trig : {1, 2}) {
      std::string name = "V" + std::to_string(trig) + "+b2spec_16_cap" + std::to_string(per_sm);
      vs.push_back({name, [&, pad, trig](int c) {
        if (trig == 1) VerifyK<1><<<vgrid, 256, 0, st>>>(ps[c]); else VerifyK<2><<<vgrid, 256, 0, st>>>(ps[c]);
        return LaunchPdl(PackB2<true>, tiles16, pad, st, true, ps[c], 4); }, false});
    }
    vs.push_back({"b2spec_16_alone_cap" + std::to_string(per_sm), [&, pad](int c) { return LaunchPdl(PackB2<true>, tiles16, pad, st, false, ps[c], 4); }, true});
  }
  // reference packed bytes of copy 0
  std::vector<unsigned char> kv0(kv_bytes), want(packed), got(packed);
  CK(cudaMemcpy(kv0.data(), ps[0].kv, kv_bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < b; ++i) std::memcpy(want.data() + (int64_t)pref[i] * rb, kv0.data() + (int64_t)off[i] * rb, (size_t)k[i] * rb);
  // k for the "alone" variants
  cudaEvent_t ev[26]; for (auto& e : ev) CK(cudaEventCreate(&e));
  std::printf("%-36s %9s %9s %9s %7s\n", "variant", "pair_med", "pair_p95", "b2b_med", "check");
  for (auto& v : vs) {
    VerifyOneBlock<0><<<1, 1024, a1smem, st>>>(ps[0]); CK(cudaStreamSynchronize(st));  // k, packed offsets for *_alone
    for (int i = 0; i < 20; ++i) CK(v.fn(i % copies));
    std::vector<float> pair, b2b; int it = 0;
    while ((int)pair.size() < runs) {
      Spin<<<1, 1, 0, st>>>(2000000); CK(cudaEventRecord(ev[0], st));
      for (int i = 0; i < 25; ++i) { CK(v.fn(it++ % copies)); CK(cudaEventRecord(ev[i + 1], st)); }
      CK(cudaStreamSynchronize(st));
      for (int i = 0; i < 25; ++i) { float ms; CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1])); pair.push_back(ms * 1000); }
    }
    for (int c = 0; c < 16; ++c) {
      Spin<<<1, 1, 0, st>>>(2000000); CK(cudaEventRecord(ev[0], st));
      for (int i = 0; i < 25; ++i) CK(v.fn(it++ % copies));
      CK(cudaEventRecord(ev[1], st)); CK(cudaStreamSynchronize(st));
      float ms; CK(cudaEventElapsedTime(&ms, ev[0], ev[1])); b2b.push_back(ms * 1000 / 25);
    }
    std::sort(pair.begin(), pair.end()); std::sort(b2b.begin(), b2b.end());
    const char* check = "-";
    if (v.checks) {
      CK(cudaMemset(out, 0xAB, kv_bytes)); CK(cudaMemset(pod, 0xFF, 4 * (b + 1))); CK(cudaMemset(kd, 0xFF, 4 * b));
      if (v.name.find("alone") != std::string::npos) VerifyOneBlock<0><<<1, 1024, a1smem, st>>>(ps[0]);
      CK(v.fn(0)); CK(cudaStreamSynchronize(st));
      std::vector<int> po(b + 1);
      CK(cudaMemcpy(po.data(), pod, 4 * (b + 1), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(got.data(), out, packed, cudaMemcpyDeviceToHost));
      check = (po == pref && got == want) ? "ok" : "FAIL";
    }
    std::printf("%-36s %9.2f %9.2f %9.2f %7s\n", v.name.c_str(), pair[pair.size() / 2], pair[pair.size() * 95 / 100], b2b[b2b.size() / 2], check);
  }
  return 0;
}
