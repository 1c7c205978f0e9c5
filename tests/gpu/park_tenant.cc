// park_tenant <MiB> [<MiB>...]: the CUDA program gpu_park_check parks in tests/gpu check 10
// (issue 36 item 7). Driver API only (no PyTorch, no runtime): allocates one buffer per argument
// on device 0, fills each with a position-dependent pattern copied from host memory, prints
// "ready <pid> <MiB in all>", then waits for a line on stdin (the caller parks and wakes it
// meanwhile). Then reads every buffer back and prints "intact <MiB>" (exit 0) or "corrupted
// buffer <i> word <w> got <x> want <y>" (exit 1). A CUDA error: "cuda-error <call> <CUresult>"
// (exit 3). Built against NVIDIA's cuda.h by run_gpu_checks.sh, and against src/vgpu/cuda_api.h
// with PARK_TENANT_CUDA_API (the fake driver, tests/gpu/park_check_test.cc).
#ifdef PARK_TENANT_CUDA_API
#include "vgpu/cuda_api.h"
#else
#include <cuda.h>
#endif
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr size_t kChunk = 64ull << 20;  // bytes copied per call

// The word at index `w` of buffer `b`: every word differs from its neighbours and from the
// same index in the other buffers, so a page put back in the wrong place is seen.
uint32_t Pattern(size_t b, size_t w) {
  return static_cast<uint32_t>(w * 2654435761u) ^ static_cast<uint32_t>(0x9e3779b9u * (b + 1));
}

int Check(const char* call, CUresult r) {
  if (r == 0) return 0;
  std::printf("cuda-error %s %d\n", call, static_cast<int>(r));
  std::fflush(stdout);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: park_tenant <MiB> [<MiB>...]\n");
    return 2;
  }
  std::vector<size_t> sizes;
  size_t total_mib = 0;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || mib == 0 || mib > (1ull << 20)) {
      std::fprintf(stderr, "park_tenant: '%s' is not a size in MiB (1..1048576)\n", argv[i]);
      return 2;
    }
    sizes.push_back(static_cast<size_t>(mib) << 20);
    total_mib += static_cast<size_t>(mib);
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (int rc = Check("cuInit", cuInit(0))) return rc;
  if (int rc = Check("cuDeviceGet", cuDeviceGet(&dev, 0))) return rc;
  if (int rc = Check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev))) return rc;
  if (int rc = Check("cuCtxSetCurrent", cuCtxSetCurrent(ctx))) return rc;
  std::vector<CUdeviceptr> bufs(sizes.size());
  std::vector<uint32_t> host(kChunk / 4);
  for (size_t b = 0; b < sizes.size(); ++b) {
    if (int rc = Check("cuMemAlloc", cuMemAlloc_v2(&bufs[b], sizes[b]))) return rc;
    for (size_t off = 0; off < sizes[b]; off += kChunk) {
      const size_t n = sizes[b] - off < kChunk ? sizes[b] - off : kChunk;
      for (size_t w = 0; w < n / 4; ++w) host[w] = Pattern(b, off / 4 + w);
      if (int rc = Check("cuMemcpyHtoD", cuMemcpyHtoD_v2(bufs[b] + off, host.data(), n))) return rc;
    }
  }
  if (int rc = Check("cuCtxSynchronize", cuCtxSynchronize())) return rc;
  std::printf("ready %d %zu\n", static_cast<int>(getpid()), total_mib);
  std::fflush(stdout);
  char line[64];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) {
    std::printf("no go-ahead on stdin\n");
    return 2;
  }
  for (size_t b = 0; b < sizes.size(); ++b) {
    for (size_t off = 0; off < sizes[b]; off += kChunk) {
      const size_t n = sizes[b] - off < kChunk ? sizes[b] - off : kChunk;
      if (int rc = Check("cuMemcpyDtoH", cuMemcpyDtoH_v2(host.data(), bufs[b] + off, n))) return rc;
      for (size_t w = 0; w < n / 4; ++w) {
        const uint32_t want = Pattern(b, off / 4 + w);
        if (host[w] != want) {
          std::printf("corrupted buffer %zu word %zu got %08x want %08x\n", b, off / 4 + w, host[w],
                      want);
          return 1;
        }
      }
    }
  }
  std::printf("intact %zu\n", total_mib);
  return 0;
}
