// The shipped platform of libvgpu.so (platform.h): real clocks, compiled-in host paths.
#include <time.h>

#include "api/limits.h"
#include "vgpu/glibc_compat.h"  // pins old glibc symbol versions in libvgpu.so
#include "vgpu/platform.h"

namespace fracgpu::vgpu::platform {

const char* LimitsFilePath() noexcept { return api::kLimitsFilePath; }
const char* LimitsDirPath() noexcept { return api::kLimitsDirPath; }
const char* NodeDirPath() noexcept { return api::kNodeDirPath; }

uint64_t NowNs() noexcept { return MonotonicClockNs(); }

void SleepUntilNs(uint64_t t) noexcept { SleepUntilMonotonicNs(t); }

uint64_t NvmlNowUs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

bool ForeignPidNamespaceForced() noexcept { return false; }

}  // namespace fracgpu::vgpu::platform
