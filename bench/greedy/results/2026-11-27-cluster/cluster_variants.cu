// Experiment for issue #17 item 4 (not part of the build): one launch, no
// verify grid, no look-back. Each thread-block cluster (8 blocks) computes
// every sequence's accepted length itself (one warp per sequence, tokens
// loaded before the tile's KV bytes), shares the lengths through distributed
// shared memory, and every block takes its prefix from them. Timed beside
// cudaMemcpyAsync of the packed bytes, the 2026-11-24 experiment's
// b2spec_16_alone (prefix handed over) and the library's committed path
// (lib_prefix_first), like greedy_bench: event pairs behind a spin kernel and
// back to back, inputs rotated over > 2x L2. Packed bytes and offsets checked.
//   nvcc -O3 -std=c++17 -arch=sm_90 -DWITH_LIB -I<repo> cluster_variants.cu ...
#include <cooperative_groups.h>
#include <cuda_runtime.h>

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
#include "kernels/greedy/greedy_cuda.cu"
#endif

namespace cg = cooperative_groups;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1);} } while (0)

constexpr int kCluster = 8;
constexpr int kMaxSeq = 64;   // experiment: b <= 64 (8 warps x 8 blocks)
constexpr int kMaxGamma = 128;  // experiment: 4 tokens per lane

struct P {
  int b, total_rows; int64_t rb;
  const int* off; const int* draft; const int* target; const unsigned char* kv;
  int* k; int* packed_off; int* next; unsigned char* out;
};

// kOrder 0: token loads, then the speculative tile; 1: tile first.
// kSpec false: only accepted rows are loaded, after the lengths are known.
template <bool kSpec, int kOrder>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(256) PackCluster(P p, int tile_rows, int gamma_guess) {
  __shared__ int ks[kMaxSeq + 1];
  __shared__ int dest[kMaxSeq + 1];
  __shared__ int row_dest[64];
  cg::cluster_group cl = cg::this_cluster();
  const int rank = static_cast<int>(cl.block_rank());
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int units_row = static_cast<int>(p.rb / 16);
  const int tile_start = blockIdx.x * tile_rows;
  const int tile_end = min(tile_start + tile_rows, p.total_rows);
  const int tile_units = max(0, tile_end - tile_start) * units_row;
  const uint4* tsrc = reinterpret_cast<const uint4*>(p.kv + static_cast<int64_t>(tile_start) * p.rb);
  uint4 v[4];
  if (kSpec && kOrder == 1) {
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int i = tid + u * 256; if (i < tile_units) v[u] = __ldcs(tsrc + i); }
  }
  // One warp per sequence, offsets guessed uniform (checked below).
  const int s = rank * 8 + warp;
  const bool has_seq = s < p.b;
  const int g = gamma_guess;
  const int first = s * g;
  int d[4] = {0, 0, 0, 0}, t[4] = {0, 0, 0, 0};
  int off_lo = 0, off_hi = 0, bonus = 0;
  if (has_seq) {
    if (4 * lane < g) {
      const int4 d4 = *reinterpret_cast<const int4*>(p.draft + first + 4 * lane);
      d[0] = d4.x; d[1] = d4.y; d[2] = d4.z; d[3] = d4.w;
#pragma unroll
      for (int u = 0; u < 4; ++u) t[u] = p.target[first + s + 4 * lane + u];
    }
    if (lane == 0) { off_lo = p.off[s]; off_hi = p.off[s + 1]; bonus = p.target[first + s + g]; }
  }
  if (kSpec && kOrder == 0) {
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int i = tid + u * 256; if (i < tile_units) v[u] = __ldcs(tsrc + i); }
  }
  if (has_seq) {
    int fm = 4;
#pragma unroll
    for (int u = 3; u >= 0; --u) if (4 * lane + u < g && d[u] != t[u]) fm = u;
    const unsigned m = __ballot_sync(~0u, fm < 4);
    int k = g, next = __shfl_sync(~0u, bonus, 0);
    if (m) {
      const int src = __ffs(m) - 1;
      const int f = __shfl_sync(~0u, fm, src);
      k = 4 * src + f;
      const int tt = f == 0 ? t[0] : f == 1 ? t[1] : f == 2 ? t[2] : t[3];
      next = __shfl_sync(~0u, tt, src);
    }
    const bool uniform = __shfl_sync(~0u, off_lo == first && off_hi == first + g, 0);
    const int value = uniform ? k : INT_MIN;  // the library would reload here
    if (lane < kCluster) cl.map_shared_rank(ks, lane)[s] = value;
    if (blockIdx.x < kCluster && lane == 0) { p.k[s] = k; p.next[s] = next; }
  }
  cl.sync();
  // Exclusive scan of ks over b <= 64 by warp 0 (two per lane).
  if (warp == 0) {
    const int a0 = 2 * lane < p.b ? ks[2 * lane] : 0, a1 = 2 * lane + 1 < p.b ? ks[2 * lane + 1] : 0;
    int sum = a0 + a1, incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) { const int n = __shfl_up_sync(~0u, incl, o); if (lane >= o) incl += n; }
    const int excl = incl - sum;
    dest[2 * lane] = excl; dest[2 * lane + 1] = excl + a0;
    if (lane == 31) dest[kMaxSeq] = incl;
  }
  __syncthreads();
  for (int r = tid; r < tile_end - tile_start; r += 256) {
    const int j = tile_start + r, sq = j / g, jr = j - sq * g;
    row_dest[r] = jr < ks[sq] ? dest[sq] + jr : -1;
  }
  if (blockIdx.x == 0) {
    for (int q = tid; q < p.b; q += 256) p.packed_off[q] = dest[q];
    if (tid == 0) p.packed_off[p.b] = dest[p.b - 1] + ks[p.b - 1];
  }
  __syncthreads();
  if (!kSpec) {
#pragma unroll
    for (int u = 0; u < 4; ++u) { const int i = tid + u * 256; if (i < tile_units && row_dest[i / units_row] >= 0) v[u] = __ldcs(tsrc + i); }
  }
  uint4* dst = reinterpret_cast<uint4*>(p.out);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int i = tid + u * 256;
    if (i < tile_units) {
      const int row = i / units_row, dr = row_dest[row];
      if (dr >= 0) dst[static_cast<int64_t>(dr) * units_row + (i - row * units_row)] = v[u];
    }
  }
}

// The 2026-11-24 experiment's PackB2<true>: tile in registers, then k and
// packed offsets handed over in memory (one L2 round trip), then stores.
__global__ void __launch_bounds__(256) PackGiven(P p, int tile_rows, int g) {
  __shared__ int row_dest[64];
  const int tid = threadIdx.x;
  const int tile_start = blockIdx.x * tile_rows, tile_end = min(tile_start + tile_rows, p.total_rows);
  const int units_row = static_cast<int>(p.rb / 16);
  const int tile_units = (tile_end - tile_start) * units_row;
  const uint4* tsrc = reinterpret_cast<const uint4*>(p.kv + static_cast<int64_t>(tile_start) * p.rb);
  uint4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) { const int i = tid + u * 256; if (i < tile_units) v[u] = __ldcs(tsrc + i); }
  if (tid < tile_end - tile_start) {
    const int j = tile_start + tid, sq = j / g, jr = j - sq * g;
    row_dest[tid] = jr < p.k[sq] ? p.packed_off[sq] + jr : -1;
  }
  __syncthreads();
  uint4* dst = reinterpret_cast<uint4*>(p.out);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int i = tid + u * 256;
    if (i < tile_units) { const int row = i / units_row, dr = row_dest[row];
      if (dr >= 0) dst[static_cast<int64_t>(dr) * units_row + (i - row * units_row)] = v[u]; }
  }
}

__global__ void Empty() {}
__global__ void Spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
__global__ void Fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n / 4; i += (size_t)gridDim.x * blockDim.x)
    reinterpret_cast<uint32_t*>(p)[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

int main(int argc, char** argv) {
  const int b = argc > 1 ? atoi(argv[1]) : 32, gamma = argc > 2 ? atoi(argv[2]) : 128;
  const double alpha = argc > 3 ? atof(argv[3]) : 0.9;
  const int64_t rb = 4096; const int runs = 400;
  const int rows = b * gamma;
  if (b > kMaxSeq || gamma > kMaxGamma || gamma % 4 != 0) { std::fprintf(stderr, "shape outside the experiment\n"); return 2; }
  std::mt19937 rng(4000 + b * 7 + gamma);
  std::vector<int> off(b + 1), draft(rows), target(rows + b), k(b), next(b);
  for (int i = 0; i <= b; ++i) off[i] = i * gamma;
  std::binomial_distribution<int> bin(gamma, alpha);
  int total = 0; std::vector<int> pref(b + 1);
  for (int i = 0; i < b; ++i) {
    k[i] = bin(rng); pref[i] = total; total += k[i];
    for (int j = 0; j < gamma; ++j) draft[off[i] + j] = 1000 + (int)(rng() % 1000);
    for (int j = 0; j <= gamma; ++j) target[off[i] + i + j] = j < gamma ? draft[off[i] + j] : 7;
    if (k[i] < gamma) target[off[i] + i + k[i]] = draft[off[i] + k[i]] + 1;
    next[i] = target[off[i] + i + k[i]];
  }
  pref[b] = total;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t kv_bytes = rows * rb, packed = (int64_t)total * rb;
  const int copies = (int)std::clamp<int64_t>((2 * (int64_t)prop.l2CacheSize + kv_bytes - 1) / kv_bytes, 2, 64);
  std::printf("device %s; b=%d gamma=%d alpha=%.2f rows=%d packed=%ld bytes (%.2f MiB) draft=%.2f MiB copies=%d\n",
              prop.name, b, gamma, alpha, rows, (long)packed, packed / 1048576.0, kv_bytes / 1048576.0, copies);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<P> ps(copies);
  int *kd, *pod, *nd; unsigned char* out;
  CK(cudaMalloc(&kd, 4 * b)); CK(cudaMalloc(&pod, 4 * (b + 1))); CK(cudaMalloc(&nd, 4 * b)); CK(cudaMalloc(&out, kv_bytes));
  for (int c = 0; c < copies; ++c) {
    int *o, *d, *t; unsigned char* kv;
    CK(cudaMalloc(&o, 4 * (b + 1))); CK(cudaMalloc(&d, 4 * rows)); CK(cudaMalloc(&t, 4 * (rows + b))); CK(cudaMalloc(&kv, kv_bytes));
    CK(cudaMemcpy(o, off.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d, draft.data(), 4 * rows, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(t, target.data(), 4 * (rows + b), cudaMemcpyHostToDevice));
    Fill<<<1024, 256, 0, st>>>(kv, kv_bytes, 77u + c);
    ps[c] = P{b, rows, rb, o, d, t, kv, kd, pod, nd, out};
  }
  CK(cudaStreamSynchronize(st));
  const int tile_rows = 4;  // 16 KiB register tiles at 4 KiB rows
  const int tiles16 = (rows + tile_rows - 1) / tile_rows;
  const int cgrid = (tiles16 + kCluster - 1) / kCluster * kCluster;
  for (auto* f : {PackCluster<true, 0>, PackCluster<true, 1>, PackCluster<false, 0>}) {
    int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 256, 0));
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, f));
    std::printf("cluster kernel: %d regs, %d blocks per SM\n", fa.numRegs, per_sm);
  }
  using Fn = std::function<cudaError_t(int)>;
  struct V { std::string name; Fn fn; bool checks; };
  std::vector<V> vs = {
    {"memcpy_packed", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, packed, cudaMemcpyDeviceToDevice, st); }, false},
    {"memcpy_all_draft", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, kv_bytes, cudaMemcpyDeviceToDevice, st); }, false},
    {"empty", [&](int) { Empty<<<1, 32, 0, st>>>(); return cudaGetLastError(); }, false},
    {"given_spec16 (prefix handed over)", [&](int c) { PackGiven<<<tiles16, 256, 0, st>>>(ps[c], tile_rows, gamma); return cudaGetLastError(); }, false},
    {"cluster_spec16_tokens_first", [&](int c) { PackCluster<true, 0><<<cgrid, 256, 0, st>>>(ps[c], tile_rows, gamma); return cudaGetLastError(); }, true},
    {"cluster_spec16_tile_first", [&](int c) { PackCluster<true, 1><<<cgrid, 256, 0, st>>>(ps[c], tile_rows, gamma); return cudaGetLastError(); }, true},
    {"cluster_accepted16", [&](int c) { PackCluster<false, 0><<<cgrid, 256, 0, st>>>(ps[c], tile_rows, gamma); return cudaGetLastError(); }, true},
  };
#ifdef WITH_LIB
  std::vector<specverify::GreedyDeviceBatch> lb(copies);
  uint8_t* mmd; CK(cudaMalloc(&mmd, b));
  for (int c = 0; c < copies; ++c) {
    specverify::GreedyDeviceBatch& g = lb[c];
    g.params.input = {b, ps[c].off, ps[c].draft, ps[c].target, reinterpret_cast<const std::byte*>(ps[c].kv), rb};
    g.params.output = {kd, nd, mmd, pod, reinterpret_cast<std::byte*>(out)};
    g.total_draft_rows = rows; g.max_gamma = gamma;
  }
  vs.push_back({"lib_prefix_first (committed)", [&](int c) { return specverify::LaunchPrefixFirst(lb[c], 16, st); }, true});
#endif
  std::vector<unsigned char> kv0(kv_bytes), want(packed), got(packed);
  CK(cudaMemcpy(kv0.data(), ps[0].kv, kv_bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < b; ++i) std::memcpy(want.data() + (int64_t)pref[i] * rb, kv0.data() + (int64_t)off[i] * rb, (size_t)k[i] * rb);
  // k and packed offsets in memory for the handed-over variant.
  CK(cudaMemcpy(kd, k.data(), 4 * b, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(pod, pref.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
  cudaEvent_t ev[26]; for (auto& e : ev) CK(cudaEventCreate(&e));
  const int rounds = argc > 4 ? atoi(argv[4]) : 2;
  std::printf("%-36s %9s %9s %9s %7s\n", "variant", "pair_med", "pair_p95", "b2b_med", "check");
  for (int round = 0; round < rounds; ++round) for (auto& v : vs) {
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
      CK(cudaMemset(out, 0xAB, kv_bytes)); CK(cudaMemset(pod, 0xFF, 4 * (b + 1))); CK(cudaMemset(kd, 0xFF, 4 * b)); CK(cudaMemset(nd, 0xFF, 4 * b));
      CK(v.fn(0)); CK(cudaStreamSynchronize(st));
      std::vector<int> po(b + 1), kk(b), nn(b);
      CK(cudaMemcpy(po.data(), pod, 4 * (b + 1), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(kk.data(), kd, 4 * b, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(nn.data(), nd, 4 * b, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(got.data(), out, packed, cudaMemcpyDeviceToHost));
      check = (po == pref && kk == k && nn == next && got == want) ? "ok" : "FAIL";
      // restore for the handed-over variant
      CK(cudaMemcpy(kd, k.data(), 4 * b, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(pod, pref.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
    }
    std::printf("%-36s %9.2f %9.2f %9.2f %7s\n", v.name.c_str(), pair[pair.size() / 2], pair[pair.size() * 95 / 100], b2b[b2b.size() / 2], check);
  }
  return 0;
}
