#pragma once
// Hand-made region files for the monitor tests: a valid version-2 region created with
// vgpu::RegionOpen (libvgpu's own initialiser), then edited through its mapping, plus raw
// byte-level surgery for corrupt, truncated, wrong-version and oversized files.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "vgpu/region.h"

namespace fracgpu::monitor::testing {

inline constexpr uint64_t kMiB = 1024ull * 1024ull;

/// A temporary directory removed at destruction (test_support::TempDir: under $TEST_TMPDIR,
/// checked).
class TempDir : public test_support::TempDir {
 public:
  TempDir() : test_support::TempDir("fracgpu-monitor-") {}
};

/// One device of a hand-made region.
struct DeviceSpec {
  std::string uuid;
  uint64_t limit = 0;
  uint32_t sm_limit = 0;
};

/// Creates a valid region at `path` with `devices`; returns the mapping (unmap with
/// vgpu::RegionClose). Slots are edited by the caller through the returned handle.
inline vgpu::RegionHandle MakeRegion(const std::string& path,
                                     const std::vector<DeviceSpec>& devices) {
  std::vector<vgpu::RegionDevice> init(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    std::memset(static_cast<void*>(&init[i]), 0, sizeof(vgpu::RegionDevice));
    std::strncpy(init[i].uuid, devices[i].uuid.c_str(), vgpu::kUuidSize - 1);
    init[i].memory_limit = devices[i].limit;
    init[i].sm_limit = devices[i].sm_limit;
  }
  vgpu::RegionHandle h;
  if (vgpu::RegionOpen(path.c_str(), init.data(), static_cast<int>(init.size()), 0, 1, &h) !=
      vgpu::RegionError::kOk)
    return {};
  return h;
}

/// Marks slot `s` active with host PID `host_pid` and per-device (context, module, data) bytes;
/// used = their sum.
inline void SetSlot(vgpu::Region* r, int s, int32_t pid, int32_t host_pid,
                    const std::vector<std::array<uint64_t, 3>>& per_device) {
  vgpu::RegionSlot& slot = r->slots[s];
  slot.pid = pid;
  slot.host_pid = host_pid;
  for (size_t d = 0; d < per_device.size(); ++d) {
    slot.context_bytes[d].store(per_device[d][0]);
    slot.module_bytes[d].store(per_device[d][1]);
    slot.data_bytes[d].store(per_device[d][2]);
    slot.used[d].store(per_device[d][0] + per_device[d][1] + per_device[d][2]);
  }
  slot.state.store(vgpu::kSlotActive);
}

/// The bytes of a file.
inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A process `pid` in the fake /proc at `proc`: its cgroup names pod `pod_uid` and container
/// `container` (cgroup v2 kubepods path), its stat a start time of 1000 + pid ticks. For the
/// adapters that verify a PID belongs to a container (monitor::MakeParkHost and its users).
inline void WriteFakeProcess(const std::string& proc, int pid, const std::string& pod_uid,
                             const std::string& container) {
  const std::string d = proc + "/" + std::to_string(pid);
  std::filesystem::create_directories(d);
  std::ofstream(d + "/cgroup") << "0::/kubepods/burstable/pod" << pod_uid << "/" << container
                               << "\n";
  std::ofstream(d + "/stat") << pid << " (python) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                             << 1000 + pid << " 0 0\n";
}

}  // namespace fracgpu::monitor::testing
