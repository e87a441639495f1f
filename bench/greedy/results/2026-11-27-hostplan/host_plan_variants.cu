// Experiment for issue #17 item 4 (not part of the build): the host decides.
// Served greedy tokens always arrive on the host (proto: repeated int32), so
// the accepted lengths and packed offsets can be computed there while the
// batch is staged, and the GPU only copies the accepted rows: no verify grid,
// no prefix, no dependence of any store on another block. Timed beside
// cudaMemcpyAsync of the packed bytes, the 2026-11-24 given_spec16 and the
// library's committed path (lib_prefix_first), in the harness of
// ../2026-11-27-cluster (event pairs behind a spin kernel and back to back,
// inputs rotated over > 2x L2). Packed bytes checked. Also times the host's
// decision (acceptance + offsets) for the same batch. Run 2 adds the
// library's GreedyPlannedPack (compiled into this file with -DWITH_LIB).
//   nvcc -O3 -std=c++17 -arch=sm_90 -DWITH_LIB -I<repo> host_plan_variants.cu ...
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
#include "kernels/greedy/greedy_planned_pack.cu"
#endif

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1);} } while (0)

constexpr int kMaxSeq = 64;

struct P {
  int b, total_rows; int64_t rb;
  const int* off; const int* draft; const int* target; const unsigned char* kv;
  int* k; int* packed_off; int* next; unsigned char* out;
};

// The plan by value: per sequence the first draft row and the first packed
// row (dst_row[b] = accepted total).
struct PlanParams {
  int b; int64_t rb;
  const unsigned char* kv; unsigned char* out;
  int src_row[kMaxSeq]; int dst_row[kMaxSeq + 1];
};

// grid (chunks, b): block (c, s) copies units [c * 256 * kU, ...) of sequence
// s's accepted rows (contiguous source, contiguous destination).
template <int kU, bool kStream>
__global__ void __launch_bounds__(256) PlanSeqParams(const __grid_constant__ PlanParams p) {
  const int s = blockIdx.y;
  const int64_t units_row = p.rb / 16;
  const int64_t n_units = int64_t(p.dst_row[s + 1] - p.dst_row[s]) * units_row;
  const int64_t start = int64_t(blockIdx.x) * 256 * kU;
  if (start >= n_units) return;
  const uint4* src = reinterpret_cast<const uint4*>(p.kv + int64_t(p.src_row[s]) * p.rb) + start;
  uint4* dst = reinterpret_cast<uint4*>(p.out + int64_t(p.dst_row[s]) * p.rb) + start;
  const int64_t left = n_units - start;
  uint4 v[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) { const int i = threadIdx.x + u * 256; if (i < left) v[u] = kStream ? __ldcs(src + i) : src[i]; }
#pragma unroll
  for (int u = 0; u < kU; ++u) { const int i = threadIdx.x + u * 256; if (i < left) { if (kStream) __stcs(dst + i, v[u]); else dst[i] = v[u]; } }
}

// The same with the plan in device memory (one L2 round trip before the loads).
template <int kU>
__global__ void __launch_bounds__(256) PlanSeqMemory(const int* src_row, const int* dst_row, int64_t rb,
                                                     const unsigned char* kv, unsigned char* out) {
  const int s = blockIdx.y;
  const int64_t units_row = rb / 16;
  const int d0 = dst_row[s], d1 = dst_row[s + 1], s0 = src_row[s];
  const int64_t n_units = int64_t(d1 - d0) * units_row;
  const int64_t start = int64_t(blockIdx.x) * 256 * kU;
  if (start >= n_units) return;
  const uint4* src = reinterpret_cast<const uint4*>(kv + int64_t(s0) * rb) + start;
  uint4* dst = reinterpret_cast<uint4*>(out + int64_t(d0) * rb) + start;
  const int64_t left = n_units - start;
  uint4 v[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) { const int i = threadIdx.x + u * 256; if (i < left) v[u] = __ldcs(src + i); }
#pragma unroll
  for (int u = 0; u < kU; ++u) { const int i = threadIdx.x + u * 256; if (i < left) dst[i] = v[u]; }
}

// 1-D grid over the packed output, kU * 4 KiB = kU rows a block (rb = 4096
// only): each block's first kU threads find their row's sequence by binary
// search of the plan (balanced blocks, no idle ones).
template <int kU>
__global__ void __launch_bounds__(256) PlanOutParams(const __grid_constant__ PlanParams p) {
  __shared__ int src_of[kU];
  const int total = p.dst_row[p.b];
  const int row0 = blockIdx.x * kU;
  if (threadIdx.x < kU && row0 + int(threadIdx.x) < total) {
    const int r = row0 + threadIdx.x;
    int lo = 0, hi = p.b - 1;
    while (lo < hi) { const int mid = (lo + hi + 1) >> 1; if (p.dst_row[mid] <= r) lo = mid; else hi = mid - 1; }
    src_of[threadIdx.x] = p.src_row[lo] + (r - p.dst_row[lo]);
  }
  __syncthreads();
  const uint4* kv = reinterpret_cast<const uint4*>(p.kv);
  uint4* out = reinterpret_cast<uint4*>(p.out) + int64_t(row0) * 256;
  uint4 v[kU];
#pragma unroll
  for (int u = 0; u < kU; ++u) if (row0 + u < total) v[u] = __ldcs(kv + int64_t(src_of[u]) * 256 + threadIdx.x);
#pragma unroll
  for (int u = 0; u < kU; ++u) if (row0 + u < total) out[u * 256 + threadIdx.x] = v[u];
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

// The host's decision: k, next and the packed offsets from the tokens.
void HostDecide(int b, const int* off, const int* draft, const int* target, int* k, int* next, int* pref) {
  int total = 0;
  for (int s = 0; s < b; ++s) {
    const int g = off[s + 1] - off[s];
    const int* d = draft + off[s];
    const int* t = target + off[s] + s;
    int j = 0;
    while (j < g && d[j] == t[j]) ++j;
    k[s] = j; next[s] = t[j]; pref[s] = total; total += j;
  }
  pref[b] = total;
}

int main(int argc, char** argv) {
  const int b = argc > 1 ? atoi(argv[1]) : 32, gamma = argc > 2 ? atoi(argv[2]) : 128;
  const double alpha = argc > 3 ? atof(argv[3]) : 0.9;
  const int64_t rb = 4096; const int runs = 400;
  const int rows = b * gamma;
  if (b > kMaxSeq || gamma % 4 != 0) { std::fprintf(stderr, "shape outside the experiment\n"); return 2; }
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
  {  // the host decision, timed (median of 201 batches of 1000)
    std::vector<int> hk(b), hn(b), hp(b + 1);
    std::vector<double> ns;
    for (int rep = 0; rep < 201; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 1000; ++i) { HostDecide(b, off.data(), draft.data(), target.data(), hk.data(), hn.data(), hp.data()); asm volatile("" ::: "memory"); }
      ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 1000);
    }
    std::sort(ns.begin(), ns.end());
    std::printf("host decision: %.0f ns per batch (median of 201 x 1000), %s\n", ns[100],
                (hk == k && hn == next && hp == pref) ? "ok" : "FAIL");
  }
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const int64_t kv_bytes = rows * rb, packed = (int64_t)total * rb;
  const int copies = (int)std::clamp<int64_t>((2 * (int64_t)prop.l2CacheSize + kv_bytes - 1) / kv_bytes, 2, 64);
  std::printf("device %s; b=%d gamma=%d alpha=%.2f rows=%d packed=%ld bytes (%.2f MiB) draft=%.2f MiB copies=%d\n",
              prop.name, b, gamma, alpha, rows, (long)packed, packed / 1048576.0, kv_bytes / 1048576.0, copies);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<P> ps(copies);
  std::vector<PlanParams> plans(copies);
  int *kd, *pod, *nd, *srcd; unsigned char* out;
  CK(cudaMalloc(&kd, 4 * b)); CK(cudaMalloc(&pod, 4 * (b + 1))); CK(cudaMalloc(&nd, 4 * b)); CK(cudaMalloc(&out, kv_bytes));
  CK(cudaMalloc(&srcd, 4 * (b + 1)));
  for (int c = 0; c < copies; ++c) {
    int *o, *d, *t; unsigned char* kv;
    CK(cudaMalloc(&o, 4 * (b + 1))); CK(cudaMalloc(&d, 4 * rows)); CK(cudaMalloc(&t, 4 * (rows + b))); CK(cudaMalloc(&kv, kv_bytes));
    CK(cudaMemcpy(o, off.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d, draft.data(), 4 * rows, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(t, target.data(), 4 * (rows + b), cudaMemcpyHostToDevice));
    Fill<<<1024, 256, 0, st>>>(kv, kv_bytes, 77u + c);
    ps[c] = P{b, rows, rb, o, d, t, kv, kd, pod, nd, out};
    PlanParams& pl = plans[c];
    pl.b = b; pl.rb = rb; pl.kv = kv; pl.out = out;
    for (int s = 0; s < b; ++s) { pl.src_row[s] = off[s]; pl.dst_row[s] = pref[s]; }
    pl.dst_row[b] = pref[b];
  }
  CK(cudaMemcpy(srcd, off.data(), 4 * (b + 1), cudaMemcpyHostToDevice));
  CK(cudaStreamSynchronize(st));
  const int tile_rows = 4;  // 16 KiB register tiles at 4 KiB rows
  const int tiles16 = (rows + tile_rows - 1) / tile_rows;
  const int64_t units_seq = int64_t(gamma) * rb / 16;
  const dim3 g4((unsigned)((units_seq + 1023) / 1024), b), g8((unsigned)((units_seq + 2047) / 2048), b),
      g2((unsigned)((units_seq + 511) / 512), b);
  using Fn = std::function<cudaError_t(int)>;
  struct V { std::string name; Fn fn; bool checks; };
  std::vector<V> vs = {
    {"memcpy_packed", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, packed, cudaMemcpyDeviceToDevice, st); }, false},
    {"memcpy_all_draft", [&](int c) { return cudaMemcpyAsync(out, ps[c].kv, kv_bytes, cudaMemcpyDeviceToDevice, st); }, false},
    {"empty", [&](int) { Empty<<<1, 32, 0, st>>>(); return cudaGetLastError(); }, false},
    {"given_spec16 (prefix handed over)", [&](int c) { PackGiven<<<tiles16, 256, 0, st>>>(ps[c], tile_rows, gamma); return cudaGetLastError(); }, true},
    {"plan_seq_params8k", [&](int c) { PlanSeqParams<2, true><<<g2, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
    {"plan_seq_params16k", [&](int c) { PlanSeqParams<4, true><<<g4, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
    {"plan_seq_params16k_ld", [&](int c) { PlanSeqParams<4, false><<<g4, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
    {"plan_seq_params32k", [&](int c) { PlanSeqParams<8, true><<<g8, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
    {"plan_seq_memory8k", [&](int c) { PlanSeqMemory<2><<<g2, 256, 0, st>>>(srcd, pod, rb, ps[c].kv, out); return cudaGetLastError(); }, true},
    {"plan_seq_memory16k", [&](int c) { PlanSeqMemory<4><<<g4, 256, 0, st>>>(srcd, pod, rb, ps[c].kv, out); return cudaGetLastError(); }, true},
    {"plan_seq_memory32k", [&](int c) { PlanSeqMemory<8><<<g8, 256, 0, st>>>(srcd, pod, rb, ps[c].kv, out); return cudaGetLastError(); }, true},
    {"plan_out_params16k", [&](int c) { PlanOutParams<4><<<(total + 3) / 4, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
    {"plan_out_params32k", [&](int c) { PlanOutParams<8><<<(total + 7) / 8, 256, 0, st>>>(plans[c]); return cudaGetLastError(); }, true},
  };
#ifdef WITH_LIB
  std::vector<specverify::GreedyDeviceBatch> lb(copies);
  uint8_t* mmd; CK(cudaMalloc(&mmd, b));
  int *kd2, *pod2, *nd2; CK(cudaMalloc(&kd2, 4 * b)); CK(cudaMalloc(&pod2, 4 * (b + 1))); CK(cudaMalloc(&nd2, 4 * b));
  for (int c = 0; c < copies; ++c) {
    specverify::GreedyDeviceBatch& g = lb[c];
    g.params.input = {b, ps[c].off, ps[c].draft, ps[c].target, reinterpret_cast<const std::byte*>(ps[c].kv), rb};
    g.params.output = {kd2, nd2, mmd, pod2, reinterpret_cast<std::byte*>(out)};
    g.total_draft_rows = rows; g.max_gamma = gamma;
  }
  const int max_k = *std::max_element(k.begin(), k.end());
  vs.push_back({"lib_planned (GreedyPlannedPack)", [&](int c) {
    specverify::GreedyPlannedPack pk;
    pk.num_sequences = b; pk.draft_offsets = ps[c].off; pk.packed_row_offsets = pod;
    pk.draft_kv = reinterpret_cast<const std::byte*>(ps[c].kv); pk.row_bytes = rb;
    pk.packed_kv = reinterpret_cast<std::byte*>(out); pk.max_accepted = max_k;
    return specverify::LaunchGreedyPlannedPack(pk, st); }, true});
  vs.push_back({"lib_prefix_first (committed)", [&](int c) { return specverify::LaunchPrefixFirst(lb[c], 16, st); }, true});
#endif
  std::vector<unsigned char> kv0(kv_bytes), want(packed), got(packed);
  CK(cudaMemcpy(kv0.data(), ps[0].kv, kv_bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < b; ++i) std::memcpy(want.data() + (int64_t)pref[i] * rb, kv0.data() + (int64_t)off[i] * rb, (size_t)k[i] * rb);
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
      CK(cudaMemset(out, 0xAB, kv_bytes));
      CK(v.fn(0)); CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(got.data(), out, packed, cudaMemcpyDeviceToHost));
      check = got == want ? "ok" : "FAIL";
    }
    std::printf("%-36s %9.2f %9.2f %9.2f %7s\n", v.name.c_str(), pair[pair.size() / 2], pair[pair.size() * 95 / 100], b2b[b2b.size() / 2], check);
  }
  return 0;
}
