// Where a graph replay's ~1 us comes from: back-to-back event pairs (the
// rejection_bench method: a spin kernel holds the stream while 25 launches
// are queued, each between two events) around kernels that do nothing, on
// the stream and replayed from a graph captured from the same launches.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 launch_probe.cu -o launch_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(expr)                                                                         \
  do {                                                                                      \
    cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

struct Big {
  unsigned char bytes[256];
};

__global__ void Empty() {}
__global__ void EmptyBig(Big b) {
  if (b.bytes[threadIdx.x % 256] == 7 && blockIdx.x == 100000) printf("x");
}
__global__ void EmptyWaits() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

double Median(const std::function<void()>& run, cudaStream_t stream) {
  constexpr int kChunk = 25;
  for (int i = 0; i < 20; ++i) run();
  std::vector<cudaEvent_t> ev(kChunk + 1);
  for (auto& e : ev) CHECK(cudaEventCreate(&e));
  std::vector<float> ms;
  while (ms.size() < 400) {
    Spin<<<1, 1, 0, stream>>>(2000000);
    CHECK(cudaEventRecord(ev[0], stream));
    for (int i = 0; i < kChunk; ++i) {
      run();
      CHECK(cudaEventRecord(ev[i + 1], stream));
    }
    CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < kChunk; ++i) {
      float t;
      CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
      ms.push_back(t);
    }
  }
  for (auto e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2];
}

void Case(const char* name, const std::function<void(cudaStream_t)>& launch, cudaStream_t stream) {
  const double direct = Median([&] { launch(stream); }, stream);
  cudaGraph_t g;
  cudaGraphExec_t x;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch(stream);
  CHECK(cudaStreamEndCapture(stream, &g));
  CHECK(cudaGraphInstantiate(&x, g, 0));
  const double graph = Median([&] { CHECK(cudaGraphLaunch(x, stream)); }, stream);
  std::printf("%-58s stream %6.2f us  graph %6.2f us  (%+.2f)\n", name, direct, graph, graph - direct);
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
}

// Host time per batch of the server's sequence (two H2D copies from pinned
// memory, an event, a kernel, an event, a D2H copy into pinned memory):
// issued on the stream, and captured + updated in place + launched.
void ServerLikeSequence(cudaStream_t s) {
  static void* pinned = nullptr;
  static void* device = nullptr;
  static cudaEvent_t start, stop;
  if (pinned == nullptr) {
    CHECK(cudaMallocHost(&pinned, 1 << 20));
    CHECK(cudaMalloc(&device, 1 << 20));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  const auto enqueue = [&](bool capturing) {
    CHECK(cudaMemcpyAsync(device, pinned, 4096, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(static_cast<char*>(device) + 65536, static_cast<char*>(pinned) + 65536, 1024,
                          cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecordWithFlags(start, s, capturing ? cudaEventRecordExternal : 0));
    Empty<<<264, 256, 40960, s>>>();
    CHECK(cudaEventRecordWithFlags(stop, s, capturing ? cudaEventRecordExternal : 0));
    CHECK(cudaMemcpyAsync(static_cast<char*>(pinned) + 131072, static_cast<char*>(device) + 131072, 2048,
                          cudaMemcpyDeviceToHost, s));
  };
  cudaGraphExec_t exec = nullptr;
  const auto captured = [&] {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    enqueue(true);
    CHECK(cudaStreamEndCapture(s, &g));
    if (exec == nullptr) {
      CHECK(cudaGraphInstantiate(&exec, g, 0));
    } else {
      cudaGraphExecUpdateResultInfo info{};
      CHECK(cudaGraphExecUpdate(exec, g, &info));
    }
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphLaunch(exec, s));
  };
  captured();
  CHECK(cudaStreamSynchronize(s));
  for (int round = 0; round < 3; ++round) {
    double host[2];
    for (int mode = 0; mode < 2; ++mode) {
      constexpr int kSteps = 200;
      Spin<<<1, 1, 0, s>>>(40000000);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kSteps; ++i) {
        if (mode == 0) {
          enqueue(false);
        } else {
          captured();
        }
      }
      const auto t1 = std::chrono::steady_clock::now();
      CHECK(cudaStreamSynchronize(s));
      host[mode] = std::chrono::duration<double, std::micro>(t1 - t0).count() / kSteps;
    }
    // Device: one batch at a time from an idle GPU, as at concurrency 1:
    // the time from the call to the D2H copy's completion, and the
    // start -> stop events.
    double wall[2], between[2];
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<double> w, e;
      for (int i = 0; i < 300; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (mode == 0) {
          enqueue(false);
        } else {
          captured();
        }
        CHECK(cudaStreamSynchronize(s));
        const auto t1 = std::chrono::steady_clock::now();
        float ms;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        w.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        e.push_back(1000.0 * ms);
      }
      std::sort(w.begin(), w.end());
      std::sort(e.begin(), e.end());
      wall[mode] = w[w.size() / 2];
      between[mode] = e[e.size() / 2];
    }
    std::printf("server-like batch: host us per batch stream %.2f | capture+update+launch %.2f ; one at a time, call to "
                "done p50 stream %.2f | graph %.2f us ; start->stop event p50 stream %.2f | graph %.2f us\n",
                host[0], host[1], wall[0], wall[1], between[0], between[1]);
  }
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n", prop.name);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaFuncSetAttribute(Empty, cudaFuncAttributeMaxDynamicSharedMemorySize, 40960));
  CHECK(cudaFuncSetAttribute(EmptyWaits, cudaFuncAttributeMaxDynamicSharedMemorySize, 40960));
  Big big{};
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  for (int round = 0; round < 2; ++round) {
    std::printf("round %d\n", round + 1);
    ServerLikeSequence(s);
    Case("empty <<<1,32>>>", [](cudaStream_t st) { Empty<<<1, 32, 0, st>>>(); }, s);
    Case("empty <<<1,32>>> 256-byte parameter", [&](cudaStream_t st) { EmptyBig<<<1, 32, 0, st>>>(big); }, s);
    Case("empty <<<264,256>>> 40 KB dynamic smem (race grid)",
         [](cudaStream_t st) { Empty<<<264, 256, 40960, st>>>(); }, s);
    Case("empty <<<264,256>>> x2, second PDL + griddepcontrol.wait",
         [&](cudaStream_t st) {
           Empty<<<264, 256, 40960, st>>>();
           cudaLaunchConfig_t c{};
           c.gridDim = 264;
           c.blockDim = 256;
           c.dynamicSmemBytes = 40960;
           c.stream = st;
           c.attrs = &pdl;
           c.numAttrs = 1;
           CHECK(cudaLaunchKernelEx(&c, EmptyWaits));
         },
         s);
    Case("empty <<<264,256>>> x3 (pass, combine, race shape)",
         [&](cudaStream_t st) {
           Empty<<<2176, 256, 0, st>>>();
           cudaLaunchConfig_t c{};
           c.gridDim = 17;
           c.blockDim = 256;
           c.stream = st;
           c.attrs = &pdl;
           c.numAttrs = 1;
           CHECK(cudaLaunchKernelEx(&c, EmptyWaits));
           c.gridDim = 264;
           c.dynamicSmemBytes = 40960;
           CHECK(cudaLaunchKernelEx(&c, EmptyWaits));
         },
         s);
  }
  return 0;
}
