// Standalone question for issue #17 item 5 (probabilities B=128 at 1.16x its
// read floor): does the race's static split (G blocks per sequence, one wave,
// each block streaming its share of two rows) lose to the floor kernel's many
// short blocks because SMs finish their equal shares at different times?
// Streams the bytes the B=128 race reads (a target and a draft row per
// sequence, V=151,936 fp32) four ways, same process, CUDA events, medians:
//   floor    : the benchmark's floor layout (short blocks, hardware-scheduled)
//   static   : the race's layout (B*G blocks, G per sequence, equal shares)
//   dynamic  : one wave of blocks taking fixed pieces from an atomic counter
//   hybrid   : the static shares shortened to a fraction, the rest as pieces
// Not part of the build: nvcc -O3 -arch=sm_90 -o stream_balance stream_balance.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e = (x);                                                                 \
    if (e != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

constexpr int kThreads = 256;
constexpr int kInFlight = 4;  // quads per row and thread, as the race's ring

struct Rows {
  const float4* const* target;  // [B]
  const float4* const* draft;   // [B]
  int quads;
};

__device__ __forceinline__ float StreamSpan(const float4* t, const float4* d, int q_begin, int q_end) {
  float acc = 0.0f;
  for (int q0 = q_begin + threadIdx.x; q0 < q_end; q0 += kThreads * kInFlight) {
    float4 a[kInFlight], b[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = q0 + u * kThreads;
      a[u] = q < q_end ? __ldcg(t + q) : make_float4(0, 0, 0, 0);
      b[u] = q < q_end ? __ldcg(d + q) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc += a[u].x + a[u].y + a[u].z + a[u].w - b[u].x - b[u].y - b[u].z - b[u].w;
  }
  return acc;
}

__global__ void __launch_bounds__(kThreads) StaticKernel(Rows r, int g_per_seq, int per_block, float* sink) {
  const int s = blockIdx.x / g_per_seq, g = blockIdx.x % g_per_seq;
  const int b = g * per_block, e = min(r.quads, b + per_block);
  const float acc = StreamSpan(r.target[s], r.draft[s], b, e);
  if (acc == 123.456f) sink[blockIdx.x] = acc;
}

// Home share [g*home, (g+1)*home) of each sequence statically, then pieces of
// the remainder [G*home, quads) from a counter (home = 0: all pieces).
__global__ void __launch_bounds__(kThreads) PieceKernel(Rows r, int num_seq, int g_per_seq, int home,
                                                        int piece, int pieces_per_seq, unsigned* counter,
                                                        unsigned base, float* sink) {
  __shared__ int grabbed;
  float acc = 0.0f;
  if (home > 0 && blockIdx.x < num_seq * g_per_seq) {
    const int s = blockIdx.x / g_per_seq, g = blockIdx.x % g_per_seq;
    acc += StreamSpan(r.target[s], r.draft[s], g * home, (g + 1) * home);
  }
  const int rest_begin = g_per_seq * home;
  const int total = num_seq * pieces_per_seq;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) grabbed = static_cast<int>(atomicAdd(counter, 1u) - base);
    __syncthreads();
    const int p = grabbed;
    if (p >= total) break;  // every block's last grab also counts: base advances by total + gridDim.x
    const int s = p / pieces_per_seq, k = p % pieces_per_seq;
    const int b = rest_begin + k * piece, e = min(r.quads, b + piece);
    acc += StreamSpan(r.target[s], r.draft[s], b, e);
  }
  if (acc == 123.456f) sink[blockIdx.x] = acc;
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
  // Every set: B sequences of gamma+1 target and gamma draft rows; the race
  // reads one target and one draft row per sequence (k = (s + set) % gamma).
  std::vector<const float4*> t_ptrs, d_ptrs, floor_ptrs;
  for (int set = 0; set < sets; ++set) {
    char *tgt, *drf;
    CHECK(cudaMalloc(&tgt, row_bytes * B * (gamma + 1)));
    CHECK(cudaMalloc(&drf, row_bytes * B * gamma));
    CHECK(cudaMemset(tgt, 0, row_bytes * B * (gamma + 1)));
    CHECK(cudaMemset(drf, 0, row_bytes * B * gamma));
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
  unsigned* counters;
  CHECK(cudaMalloc(&sink, 1 << 20));
  CHECK(cudaMalloc(&counters, sizeof(unsigned) * 1024));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  auto rows = [&](int set) { return Rows{dt + set * B, dd + set * B, quads}; };
  const double mb = 2.0 * B * row_bytes / 1e6;
  std::printf("B=%d, %d SMs, %.1f MB per launch (2 rows per sequence)\n", B, sms, mb);
  auto report = [&](const char* what, float us) {
    std::printf("%-40s %8.2f us  %6.3f TB/s\n", what, us, mb / us);
  };

  const int floor_bpr = (quads + kThreads * 8 - 1) / (kThreads * 8);
  report("floor (short blocks)", Median([&](int set) {
           FloorKernel<<<2 * B * floor_bpr, kThreads, 0, stream>>>(df + set * 2 * B, quads, floor_bpr, sink);
         }, runs, sets, stream));
  for (int bps : {1, 2, 3}) {
    // The race's G: one wave of bps blocks per SM, whole multiples of 32 quads.
    const int g = std::max(1, bps * sms / B);
    const int per = (quads + g * 32 - 1) / (g * 32) * 32;
    char name[64];
    std::snprintf(name, sizeof name, "static, %d/SM (G=%d, %d blocks)", bps, g, B * g);
    report(name, Median([&](int set) { StaticKernel<<<B * g, kThreads, 0, stream>>>(rows(set), g, per, sink); },
                        runs, sets, stream));
  }
  for (int bps : {2, 3}) {
    for (int piece : {512, 1024, 2048, 4096}) {
      const int pieces = (quads + piece - 1) / piece;
      char name[64];
      std::snprintf(name, sizeof name, "dynamic, %d/SM, pieces of %d quads", bps, piece);
      CHECK(cudaMemset(counters, 0, sizeof(unsigned)));
      unsigned base = 0;
      report(name, Median([&](int set) {
               PieceKernel<<<bps * sms, kThreads, 0, stream>>>(rows(set), B, 1, 0, piece, pieces, counters, base, sink);
               base += B * pieces + bps * sms;
             }, runs, sets, stream));
    }
  }
  for (int pct : {50, 75, 90}) {
    for (int piece : {512, 1024}) {
      const int g = std::max(1, 2 * sms / B);
      const int home = quads * pct / 100 / g / 32 * 32;
      const int rest = quads - g * home;
      const int pieces = (rest + piece - 1) / piece;
      char name[64];
      std::snprintf(name, sizeof name, "hybrid, 2/SM, %d%% home, pieces of %d", pct, piece);
      const int grid = std::max(B * g, 2 * sms);
      CHECK(cudaMemset(counters, 0, sizeof(unsigned)));
      unsigned base = 0;
      report(name, Median([&](int set) {
               PieceKernel<<<grid, kThreads, 0, stream>>>(rows(set), B, g, home, piece, pieces, counters, base, sink);
               base += B * pieces + grid;
             }, runs, sets, stream));
    }
  }
  return 0;
}
