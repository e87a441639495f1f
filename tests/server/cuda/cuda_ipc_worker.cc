// A stand-in for an inference worker's process in the CUDA-region tests:
// it owns CUDA memory and exports it, as a worker exports its logits or KV
// cache. Protocol on stdin/stdout (binary): the parent sends an int64 size
// and that many bytes; the worker copies them into fresh device memory and
// answers the 64-byte cudaIpcMemHandle_t. Then one-byte commands: 'R' sends
// the region's bytes back, 'Q' (or end of input) exits.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "client/cuda_region.h"

namespace {

bool ReadAll(void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(STDIN_FILENO, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(STDOUT_FILENO, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main() {
  int64_t bytes = 0;
  if (!ReadAll(&bytes, sizeof(bytes)) || bytes <= 0) return 2;
  std::vector<char> image(static_cast<size_t>(bytes));
  if (!ReadAll(image.data(), image.size())) return 2;
  auto region = specverify::client::CudaDeviceRegion::Create(0, bytes);
  if (!region.ok()) {
    std::fprintf(stderr, "cuda_ipc_worker: %s\n", region.status().ToString().c_str());
    return 3;
  }
  if (!(*region)->CopyIn(0, image.data(), bytes).ok()) return 3;
  const std::string handle = (*region)->Registration("x").cuda().ipc_handle();
  if (!WriteAll(handle.data(), handle.size())) return 4;
  char command = 0;
  while (ReadAll(&command, 1)) {
    if (command == 'Q') break;
    if (command == 'R') {
      if (!(*region)->CopyOut(0, image.data(), bytes).ok()) return 3;
      if (!WriteAll(image.data(), image.size())) return 4;
    }
  }
  return 0;
}
