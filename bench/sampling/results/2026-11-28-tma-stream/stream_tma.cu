// Standalone question for issue #17 item 5 (probabilities B=128 at
// 1.13x its read floor, B=8 at 11.4-11.65 us against 10): the race streams
// its two rows per block through per-thread 16-byte cp.async copies (a ring
// of 5 slots, 4 quads per row and thread in flight) and reaches ~2.65 TB/s
// where the floor kernel reaches ~3.0. Would bulk copies (TMA:
// cp.async.bulk global -> shared, one thread issuing a whole stage of each
// row, mbarrier completion) stream the same static layout faster, or cost
// the consumer fewer instructions?
// Streams the bytes the race reads at B (one target and one draft row per
// sequence, V=151,936 fp32; three row sets rotated; CUDA events, median of
// 200) with the race's layout (G blocks per sequence, equal shares, thread t
// consuming quads t, t+256, ... of its share) and a synthetic consumer of
// `work` dependent FMAs per value (0: a pure stream), five ways:
//   floor     : many short blocks, register loads (the benchmark's floor)
//   regs      : the race's layout, register loads, 4 quads per row in flight
//   cpasync   : the race's ring as built (5 slots, lookahead 4, 16-byte copies)
//   tma S x Q : S stages of Q quads per row, bulk copies, full/empty mbarriers
// Not part of the build: nvcc -O3 -arch=sm_90 -std=c++17 -o stream_tma stream_tma.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct Rows {
  const float4* const* target;  // [B]
  const float4* const* draft;   // [B]
  int quads;
};

__device__ __forceinline__ float Consume(float acc, float4 a, float4 b, int work) {
  float x = a.x + a.y + a.z + a.w - b.x - b.y - b.z - b.w;
  for (int i = 0; i < work; ++i) x = fmaf(x, 1.0001f, a.x);
  return acc + x;
}

__global__ void __launch_bounds__(kThreads) RegsKernel(Rows r, int g_per_seq, int per_block, int work, float* sink,
                          unsigned long long* total) {
  constexpr int kInFlight = 4;
  const int s = blockIdx.x / g_per_seq, g = blockIdx.x % g_per_seq;
  const int b = g * per_block, e = min(r.quads, b + per_block);
  const float4 *t = r.target[s], *d = r.draft[s];
  float acc = 0.0f;
  for (int q0 = b + threadIdx.x; q0 < e; q0 += kThreads * kInFlight) {
    float4 x[kInFlight], y[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = q0 + u * kThreads;
      x[u] = q < e ? __ldcg(t + q) : make_float4(0, 0, 0, 0);
      y[u] = q < e ? __ldcg(d + q) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc = Consume(acc, x[u], y[u], work);
  }
  if (total != nullptr) atomicAdd(total, static_cast<unsigned long long>(static_cast<long long>(acc)));
  if (acc == 123.456f) sink[blockIdx.x] = acc;
}

// The race's ring (rejection_race_sweep.cuh SweepShare, staged branch).
__global__ void __launch_bounds__(kThreads) CpAsyncKernel(Rows r, int g_per_seq, int per_block, int work,
                                                          float* sink, unsigned long long* total) {
  constexpr int kLookahead = 4, kSlots = 5, kSlotBytes = kThreads * 16, kRingBytes = kSlots * kSlotBytes;
  extern __shared__ __align__(16) unsigned char stage[];
  const int s = blockIdx.x / g_per_seq, g = blockIdx.x % g_per_seq;
  const int b = g * per_block, e = min(r.quads, b + per_block);
  const float4 *t = r.target[s], *d = r.draft[s];
  const unsigned t_addr = static_cast<unsigned>(__cvta_generic_to_shared(stage + threadIdx.x * 16));
  const unsigned d_addr = t_addr + kRingBytes;
  const int iterations = (e - b + kThreads - 1) / kThreads;
  int write = 0, read = 0, q_issue = b + threadIdx.x;
  auto issue = [&]() {
    if (q_issue < e) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(t_addr + write), "l"(t + q_issue) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d_addr + write), "l"(d + q_issue) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    q_issue += kThreads;
    write = write + kSlotBytes == kRingBytes ? 0 : write + kSlotBytes;
  };
#pragma unroll
  for (int j = 0; j < kLookahead; ++j) issue();
  float acc = 0.0f;
  for (int j = 0, q = b + threadIdx.x; j < iterations; ++j, q += kThreads) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kLookahead - 1) : "memory");
    float4 x = make_float4(0, 0, 0, 0), y = x;
    if (q < e) {
      x = *reinterpret_cast<const float4*>(stage + threadIdx.x * 16 + read);
      y = *reinterpret_cast<const float4*>(stage + threadIdx.x * 16 + kRingBytes + read);
    }
    read = read + kSlotBytes == kRingBytes ? 0 : read + kSlotBytes;
    issue();
    acc = Consume(acc, x, y, work);
  }
  if (total != nullptr) atomicAdd(total, static_cast<unsigned long long>(static_cast<long long>(acc)));
  if (acc == 123.456f) sink[blockIdx.x] = acc;
}

__device__ __forceinline__ unsigned SmemAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddress(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void BarrierExpect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddress(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddress(bar)) : "memory");
}
__device__ __forceinline__ void BarrierWait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SmemAddress(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          SmemAddress(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddress(bar))
      : "memory");
}

// S stages of Q quads per row; thread 0 issues both rows' bulk copies of a
// stage; a stage is refilled one iteration after it was read (as the ring),
// once every warp has arrived on its empty barrier.
template <int S, int Q>
__global__ void __launch_bounds__(kThreads) TmaKernel(Rows r, int g_per_seq, int per_block, int work, float* sink,
                          unsigned long long* total) {
  extern __shared__ __align__(128) float4 ring[];  // [S][2][Q]
  __shared__ __align__(8) uint64_t full[S], empty[S];
  const int s = blockIdx.x / g_per_seq, g = blockIdx.x % g_per_seq;
  const int b = g * per_block, e = min(r.quads, b + per_block);
  const float4 *t = r.target[s], *d = r.draft[s];
  const int n = max(0, e - b);
  const int stages = (n + Q - 1) / Q;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      BarrierInit(&full[i], 1);
      BarrierInit(&empty[i], kWarps);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int j) {
    const int slot = j % S;
    const int count = min(Q, n - j * Q);
    const unsigned bytes = static_cast<unsigned>(count) * 16u;
    BarrierExpect(&full[slot], 2 * bytes);
    BulkCopy(ring + (slot * 2) * Q, t + b + j * Q, bytes, &full[slot]);
    BulkCopy(ring + (slot * 2 + 1) * Q, d + b + j * Q, bytes, &full[slot]);
  };
  if (threadIdx.x == 0) {
    for (int j = 0; j < min(S - 1, stages); ++j) issue(j);
  }
  float acc = 0.0f;
  for (int j = 0; j < stages; ++j) {
    if (threadIdx.x == 0 && j + S - 1 < stages) {
      // Refill the slot read at j - 1 (free once every warp arrived).
      if (j >= 1) BarrierWait(&empty[(j - 1) % S], static_cast<unsigned>(((j - 1) / S) & 1));
      issue(j + S - 1);
    }
    const int slot = j % S;
    BarrierWait(&full[slot], static_cast<unsigned>((j / S) & 1));
    const int count = min(Q, n - j * Q);
    for (int q = threadIdx.x; q < count; q += kThreads) {
      acc = Consume(acc, ring[(slot * 2) * Q + q], ring[(slot * 2 + 1) * Q + q], work);
    }
    __syncwarp();
    if (threadIdx.x % 32 == 0) BarrierArrive(&empty[slot]);
  }
  if (total != nullptr) atomicAdd(total, static_cast<unsigned long long>(static_cast<long long>(acc)));
  if (acc == 123.456f) sink[blockIdx.x] = acc;
}

// Row values for the check: element e of every target row is e % 7, of
// every draft row e % 3 (small integers: every partial sum is exact).
__global__ void FillRows(float* rows, size_t count, int row_values, int modulus) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    rows[i] = static_cast<float>(static_cast<int>(i % row_values) % modulus);
  }
}

__global__ void __launch_bounds__(kThreads) FloorKernel(const float4* const* rows, int quads, int blocks_per_row,
                                                        float* sink) {
  constexpr int kLoads = 8;
  const int row = blockIdx.x / blocks_per_row, part = blockIdx.x % blocks_per_row;
  const float4* p = rows[row];
  const int per = (quads + blocks_per_row - 1) / blocks_per_row;
  const int end = min(quads, (part + 1) * per);
  float acc = 0.0f;
  for (int q0 = part * per + threadIdx.x; q0 < end; q0 += kThreads * kLoads) {
    float4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int q = q0 + u * kThreads;
      v[u] = q < end ? __ldg(p + q) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (acc == 123.456f) sink[blockIdx.x] = acc;
}

template <typename F>
float Median(F&& launch, int runs, int sets, cudaStream_t stream) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int w = 0; w < 20; ++w) launch(w % sets);
  std::vector<float> t;
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventRecord(a, stream));
    launch(i % sets);
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0f);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 128;
  const int V = 151936, gamma = 8, quads = V / 4, runs = 200, sets = 3;
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t row_bytes = size_t{4} * V;
  std::vector<const float4*> t_ptrs, d_ptrs, floor_ptrs;
  for (int set = 0; set < sets; ++set) {
    char *tgt, *drf;
    CHECK(cudaMalloc(&tgt, row_bytes * B * (gamma + 1)));
    CHECK(cudaMalloc(&drf, row_bytes * B * gamma));
    CHECK(cudaMemset(tgt, 0, row_bytes * B * (gamma + 1)));
    CHECK(cudaMemset(drf, 0, row_bytes * B * gamma));
    if (set == 0) {
      FillRows<<<1024, 256>>>(reinterpret_cast<float*>(tgt), size_t{V} * B * (gamma + 1), V, 7);
      FillRows<<<1024, 256>>>(reinterpret_cast<float*>(drf), size_t{V} * B * gamma, V, 3);
      CHECK(cudaGetLastError());
    }
    for (int s = 0; s < B; ++s) {
      const int k = (s + set) % gamma;
      t_ptrs.push_back(reinterpret_cast<const float4*>(tgt + row_bytes * (size_t(s) * (gamma + 1) + k)));
      d_ptrs.push_back(reinterpret_cast<const float4*>(drf + row_bytes * (size_t(s) * gamma + k)));
    }
    for (int s = 0; s < B; ++s) {
      floor_ptrs.push_back(t_ptrs[set * B + s]);
      floor_ptrs.push_back(d_ptrs[set * B + s]);
    }
  }
  const float4 **dt, **dd, **df;
  CHECK(cudaMalloc(&dt, sizeof(void*) * t_ptrs.size()));
  CHECK(cudaMalloc(&dd, sizeof(void*) * d_ptrs.size()));
  CHECK(cudaMalloc(&df, sizeof(void*) * floor_ptrs.size()));
  CHECK(cudaMemcpy(dt, t_ptrs.data(), sizeof(void*) * t_ptrs.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dd, d_ptrs.data(), sizeof(void*) * d_ptrs.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(df, floor_ptrs.data(), sizeof(void*) * floor_ptrs.size(), cudaMemcpyHostToDevice));
  float* sink;
  CHECK(cudaMalloc(&sink, 1 << 20));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  auto rows = [&](int set) { return Rows{dt + set * B, dd + set * B, quads}; };
  const double mb = 2.0 * B * row_bytes / 1e6;
  std::printf("B=%d, %d SMs, %.1f MB per launch (2 rows per sequence)\n", B, sms, mb);
  auto report = [&](const char* what, int work, float us) {
    std::printf("%-34s work %2d %8.2f us  %6.3f TB/s\n", what, work, us, mb / us);
  };
  const int floor_bpr = (quads + kThreads * 8 - 1) / (kThreads * 8);
  report("floor (short blocks)", 0, Median([&](int set) {
           FloorKernel<<<2 * B * floor_bpr, kThreads, 0, stream>>>(df + set * 2 * B, quads, floor_bpr, sink);
         }, runs, sets, stream));
  CHECK(cudaFuncSetAttribute(CpAsyncKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 40960));
  CHECK(cudaFuncSetAttribute(TmaKernel<5, 256>, cudaFuncAttributeMaxDynamicSharedMemorySize, 5 * 2 * 256 * 16));
  CHECK(cudaFuncSetAttribute(TmaKernel<4, 512>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 2 * 512 * 16));
  CHECK(cudaFuncSetAttribute(TmaKernel<8, 256>, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * 2 * 256 * 16));
  CHECK(cudaFuncSetAttribute(TmaKernel<3, 1024>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 2 * 1024 * 16));
  // The check: every layout sums set 0's rows (work 0) to the same total.
  unsigned long long* check_total;
  CHECK(cudaMalloc(&check_total, sizeof(unsigned long long)));
  long long expected = 0;
  for (int e = 0; e < V; ++e) expected += e % 7 - e % 3;
  expected *= B;
  unsigned long long* total = nullptr;
  int failures = 0;
  for (int bps : {2, 3}) {
    const int g = std::max(1, bps * sms / B);
    const int per = (quads + g * 32 - 1) / (g * 32) * 32;
    const int grid = B * g;
    for (int variant = 0; variant < 6; ++variant) {
      CHECK(cudaMemset(check_total, 0, sizeof(unsigned long long)));
      const Rows r0 = rows(0);
      switch (variant) {
        case 0: RegsKernel<<<grid, kThreads>>>(r0, g, per, 0, sink, check_total); break;
        case 1: CpAsyncKernel<<<grid, kThreads, 40960>>>(r0, g, per, 0, sink, check_total); break;
        case 2: TmaKernel<5, 256><<<grid, kThreads, 5 * 2 * 256 * 16>>>(r0, g, per, 0, sink, check_total); break;
        case 3: TmaKernel<8, 256><<<grid, kThreads, 8 * 2 * 256 * 16>>>(r0, g, per, 0, sink, check_total); break;
        case 4: TmaKernel<4, 512><<<grid, kThreads, 4 * 2 * 512 * 16>>>(r0, g, per, 0, sink, check_total); break;
        case 5: TmaKernel<3, 1024><<<grid, kThreads, 3 * 2 * 1024 * 16>>>(r0, g, per, 0, sink, check_total); break;
      }
      CHECK(cudaDeviceSynchronize());
      unsigned long long got = 0;
      CHECK(cudaMemcpy(&got, check_total, sizeof got, cudaMemcpyDeviceToHost));
      if (static_cast<long long>(got) != expected) {
        std::printf("CHECK FAILED: variant %d at %d/SM: %lld, expected %lld\n", variant, bps,
                    static_cast<long long>(got), expected);
        ++failures;
      }
    }
  }
  std::printf("check: %s (expected total %lld)\n", failures == 0 ? "every layout sums the rows exactly" : "FAILED",
              expected);
  for (int work : {0, 16}) {
    for (int bps : {2, 3}) {
      const int g = std::max(1, bps * sms / B);
      const int per = (quads + g * 32 - 1) / (g * 32) * 32;
      const int grid = B * g;
      char name[64];
      auto run = [&](const char* what, auto launch) {
        std::snprintf(name, sizeof name, "%s %d/SM G=%d", what, bps, g);
        report(name, work, Median(launch, runs, sets, stream));
      };
      run("regs", [&](int set) { RegsKernel<<<grid, kThreads, 0, stream>>>(rows(set), g, per, work, sink, total); });
      run("cpasync", [&](int set) {
        CpAsyncKernel<<<grid, kThreads, 40960, stream>>>(rows(set), g, per, work, sink, total);
      });
      run("tma 5x256", [&](int set) {
        TmaKernel<5, 256><<<grid, kThreads, 5 * 2 * 256 * 16, stream>>>(rows(set), g, per, work, sink, total);
      });
      run("tma 8x256", [&](int set) {
        TmaKernel<8, 256><<<grid, kThreads, 8 * 2 * 256 * 16, stream>>>(rows(set), g, per, work, sink, total);
      });
      run("tma 4x512", [&](int set) {
        TmaKernel<4, 512><<<grid, kThreads, 4 * 2 * 512 * 16, stream>>>(rows(set), g, per, work, sink, total);
      });
      if (bps == 2) {
        run("tma 3x1024", [&](int set) {
          TmaKernel<3, 1024><<<grid, kThreads, 3 * 2 * 1024 * 16, stream>>>(rows(set), g, per, work, sink, total);
        });
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
