#pragma once
// libvgpu.so's platform seam: what differs between the shipped library and the test copy,
// chosen at link time, so both are built from the same objects (src/vgpu/CMakeLists.txt):
// platform_host.cc in libvgpu.so, platform_fake.cc in libvgpu_testpath.so. Nothing else in
// libvgpu.so is compiled differently for tests.
#include <errno.h>
#include <time.h>

#include <cstdint>

namespace fracgpu::vgpu::platform {

/// CLOCK_MONOTONIC in ns: the host's limiter clock, and the test copy's where the driver is not
/// the fake (shared by both platform files).
inline uint64_t MonotonicClockNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// Sleeps until CLOCK_MONOTONIC reaches `t` ns (absolute), restarted after signals.
inline void SleepUntilMonotonicNs(uint64_t t) noexcept {
  timespec ts{static_cast<time_t>(t / 1'000'000'000ull), static_cast<long>(t % 1'000'000'000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

/// The limits file's path (docs/design/CONTRACT.md §3). Compiled in, with deliberately no
/// run-time override, so nothing a tenant sets moves it. Host: api::kLimitsFilePath. Test:
/// "fracgpu-limits.env", relative to the working directory (which survives `env -i`).
const char* LimitsFilePath() noexcept;

/// The limits directory's path (limits.h ParseLimitsDir; a DRA container's composed limits),
/// read when the limits file is absent; compiled in like the file's. Host: api::kLimitsDirPath.
/// Test: "fracgpu-limits.d", relative to the working directory.
const char* LimitsDirPath() noexcept;

/// The node directory where containers on one node meet (per-GPU files, sm_limiter.cc). Host:
/// api::kNodeDirPath, mounted read-only by the device plugin. Test: "fracgpu-node", relative.
const char* NodeDirPath() noexcept;

/// The SM limiter's clock, ns. Host: CLOCK_MONOTONIC. Test: the fake driver's virtual clock
/// (fakeClockNowNs, tests/fakes/cuda/fake_clock.h), CLOCK_MONOTONIC where the fake has none.
uint64_t NowNs() noexcept;

/// Sleeps until NowNs() reaches `t` (ns). Host: clock_nanosleep(CLOCK_MONOTONIC, absolute),
/// restarted after signals. Test: the fake's virtual sleep.
void SleepUntilNs(uint64_t t) noexcept;

/// The time NVML timestamps its samples with, microseconds. Host: CLOCK_REALTIME (NVML's
/// "CPU timestamp"). Test: NowNs() / 1000 (the fake NVML stamps with the virtual clock).
uint64_t NvmlNowUs() noexcept;

/// True when this process must not assume it shares the host's PID namespace even if
/// /proc/self/ns/pid says so. Host: never. Test: when the fake NVML emulates a PID namespace
/// (FAKE_NVML_HOST_PID_OFFSET set), so the host-PID probe runs as inside a container.
bool ForeignPidNamespaceForced() noexcept;

}  // namespace fracgpu::vgpu::platform
