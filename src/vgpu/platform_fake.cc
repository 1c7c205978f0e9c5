// The test platform of libvgpu.so (platform.h), linked only into libvgpu_testpath.so, which is
// never installed: paths relative to the working directory and the fake driver's virtual clock
// (tests/fakes/cuda/fake_clock.h), found in libcuda.so.1 at first use; the real clocks where
// the driver is not the fake.
#include <dlfcn.h>
#include <stdlib.h>

#include <atomic>

#include "vgpu/glibc_compat.h"  // pins old glibc symbol versions in libvgpu.so
#include "vgpu/interpose.h"
#include "vgpu/platform.h"

namespace fracgpu::vgpu::platform {
namespace {

using NowFn = uint64_t (*)() noexcept;
using SleepFn = void (*)(uint64_t) noexcept;
std::atomic<NowFn> g_now{nullptr};
std::atomic<SleepFn> g_sleep{nullptr};
std::atomic<bool> g_resolved{false};

void ResolveClock() noexcept {
  if (g_resolved.load(std::memory_order_acquire)) return;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  g_sleep.store(reinterpret_cast<SleepFn>(lib ? RealDlsym(lib, "fakeClockSleepUntilNs") : nullptr));
  g_now.store(reinterpret_cast<NowFn>(lib ? RealDlsym(lib, "fakeClockNowNs") : nullptr));
  g_resolved.store(true, std::memory_order_release);
}

}  // namespace

const char* LimitsFilePath() noexcept { return "fracgpu-limits.env"; }
const char* LimitsDirPath() noexcept { return "fracgpu-limits.d"; }
const char* NodeDirPath() noexcept { return "fracgpu-node"; }

uint64_t NowNs() noexcept {
  ResolveClock();
  if (NowFn f = g_now.load(std::memory_order_relaxed)) return f();
  return MonotonicClockNs();
}

void SleepUntilNs(uint64_t t) noexcept {
  ResolveClock();
  if (SleepFn f = g_sleep.load(std::memory_order_relaxed)) return f(t);
  SleepUntilMonotonicNs(t);
}

uint64_t NvmlNowUs() noexcept { return NowNs() / 1000; }

bool ForeignPidNamespaceForced() noexcept { return getenv("FAKE_NVML_HOST_PID_OFFSET") != nullptr; }

}  // namespace fracgpu::vgpu::platform
