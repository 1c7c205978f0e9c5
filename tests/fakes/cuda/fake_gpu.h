#pragma once
// Configuration and cross-process state shared by the fake libcuda.so.1 and the fake
// libnvidia-ml.so.1 (test code; host memory stands behind device memory).
//
// FAKE_GPU_DEVICES   comma list of `<UUID>:<MiB>[:<SM count>[:<product name>]]`, in NVML (PCI)
//                    order, which is also the unfiltered CUDA order. Default: one 16384 MiB
//                    device. Without a name, devices of one size share one model's name
//                    (FakeModelName), as a node of real GPUs of one model does. A name
//                    needs the SM field before it (empty: 108) and may hold no ','.
// FAKE_GPU_STATE_DIR when set, every process using the fake driver publishes its per-device
//                    usage in <dir>/proc-<pid> (mmap'd FakeProcState), so the fake NVML can
//                    report per-process memory and the fake driver the physical free memory
//                    of the whole device, as the real ones do.
// FAKE_CUDA_DEVICE_WIDE_OOM=1 an allocation fails with CUDA_ERROR_OUT_OF_MEMORY when every
//                    process of FAKE_GPU_STATE_DIR together would exceed the device's memory, as
//                    on a real GPU (a borrower holding memory makes the owner's allocation fail).
//                    Default: only this process's own use counts.
// FAKE_CUDA_CTX_BYTES device memory a context occupies (default 0).
// FAKE_CUDA_GREEN_CTX_BYTES device memory a green context occupies besides the primary context
//                    it retains (default FAKE_CUDA_CTX_BYTES).
// FAKE_CUDA_MODULE_BYTES device memory every module or library load occupies on the current
//                    context's device until unloaded (default 0), like the real driver's code
//                    and data segments.
// FAKE_CUDA_CTX_BARRIER=<n> a context's creation waits until <n> processes of
//                    FAKE_GPU_STATE_DIR are creating one, and returns once all <n> have one:
//                    "several processes start at the same time", deterministically.
// FAKE_NVML_HOST_PID_OFFSET=<k> the fake NVML reports pid + k as every process's PID (compute
//                    processes and utilisation samples alike), emulating a container's PID
//                    namespace (NVML reports host PIDs).
// FAKE_CUDA_DRIVER_VERSION cuDriverGetVersion (default 12080).
// FAKE_CUDA_CHECKPOINT=unsupported  every cuCheckpointProcess* call answers
//                    CUDA_ERROR_NOT_SUPPORTED (a driver or GPU without the checkpoint API).
// FAKE_CUDA_CHECKPOINT_MIB_PER_S copy bandwidth of Checkpoint and Restore on the virtual clock
//                    (MiB/s; the caller's time moves by bytes / bandwidth). Default 0: no time.
// FAKE_CUDA_CHECKPOINT_STICKY_OOM=1 a Restore refused for lack of memory breaks the process for
//                    good: every later Restore answers CUDA_ERROR_OPERATING_SYSTEM (304) and it
//                    stays CHECKPOINTED, as driver 580.95.05 does (NVIDIA/cuda-checkpoint#44).
// FAKE_CUDA_NEWER_VARIANT   <base>:<version>: cuGetProcAddress answers requests for <base> at
//                           or above <version> with a variant newer than CUDA 13.0 (fake_cuda.cc).
// FAKE_CUDA_ALIAS           <base>:<version>:<elf>: cuGetProcAddress answers requests for <base>
//                           at or above <version> with the function of ELF name <elf>, another
//                           base's (as a driver may answer cuGraphInstantiate with
//                           cuGraphInstantiateWithFlags).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fracgpu::fakes {

inline constexpr int kFakeMaxDevices = 16;
inline constexpr uint64_t kMiB = 1024ull * 1024ull;

/// One fake GPU.
struct FakeDevice {
  std::string uuid;       ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  unsigned char raw[16];  ///< the UUID's 16 bytes (cuDeviceGetUuid)
  uint64_t total_bytes;
  int sm_count;
  std::string name;  ///< NVML's product name (nvmlDeviceGetName, cuDeviceGetName)
};

/// The product name a fake device of `mib` MiB gets when FAKE_GPU_DEVICES names none: the NVML
/// name of a real model of that memory size (Tesla T4 15360 MiB, V100 16 GB, A10 24 GB,
/// A100 40 and 80 GB), else "Fake GPU <GiB>GB". Never per index: one size, one type, so the
/// dashboard's type filter and HAMi's type selectors behave as on a real fleet.
inline std::string FakeModelName(uint64_t mib) {
  switch (mib) {
    case 15360:
      return "Tesla T4";
    case 16384:
      return "Tesla V100-SXM2-16GB";
    case 24576:
      return "NVIDIA A10";
    case 40960:
      return "NVIDIA A100-SXM4-40GB";
    case 81920:
      return "NVIDIA A100-SXM4-80GB";
    default:
      return "Fake GPU " + std::to_string(mib / 1024) + "GB";
  }
}

/// Per-process usage published in FAKE_GPU_STATE_DIR/proc-<pid>.
struct FakeProcState {
  std::atomic<uint32_t> pid;
  std::atomic<uint64_t> used[kFakeMaxDevices];      ///< bytes per NVML index
  std::atomic<uint32_t> contexts[kFakeMaxDevices];  ///< live contexts per NVML index
  std::atomic<uint32_t> creating;    ///< FAKE_CUDA_CTX_BARRIER: 1 arrived, 2 has its context
  std::atomic<uint32_t> ckpt_state;  ///< CUprocessState (cuCheckpointProcessGetState of this pid)
};

/// FAKE_NVML_HOST_PID_OFFSET (0 when unset).
inline unsigned HostPidOffset() {
  const char* v = std::getenv("FAKE_NVML_HOST_PID_OFFSET");
  return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0;
}

inline int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Parses "GPU-" + 32 hex digits with dashes into 16 bytes; false if malformed.
inline bool ParseUuid(const std::string& text, unsigned char out[16]) {
  if (text.rfind("GPU-", 0) != 0) return false;
  int n = 0;
  for (size_t i = 4; i < text.size(); ++i) {
    if (text[i] == '-') continue;
    int h = HexValue(text[i]);
    if (h < 0 || n >= 32) return false;
    if (n % 2 == 0)
      out[n / 2] = static_cast<unsigned char>(h << 4);
    else
      out[n / 2] |= static_cast<unsigned char>(h);
    ++n;
  }
  return n == 32;
}

/// The fake devices from FAKE_GPU_DEVICES (malformed entries are skipped).
inline std::vector<FakeDevice> LoadFakeDevices() {
  std::vector<FakeDevice> devices;
  const char* env = std::getenv("FAKE_GPU_DEVICES");
  std::string spec = env ? env : "GPU-00000000-0000-0000-0000-000000000000:16384";
  size_t pos = 0;
  while (pos <= spec.size() && static_cast<int>(devices.size()) < kFakeMaxDevices) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    size_t c1 = item.find(':');
    if (c1 == std::string::npos) continue;
    FakeDevice d{};
    d.uuid = item.substr(0, c1);
    if (!ParseUuid(d.uuid, d.raw)) continue;
    size_t c2 = item.find(':', c1 + 1);
    const uint64_t mib = std::strtoull(item.substr(c1 + 1, c2 - c1 - 1).c_str(), nullptr, 10);
    d.total_bytes = mib * kMiB;
    size_t c3 = c2 == std::string::npos ? std::string::npos : item.find(':', c2 + 1);
    // An empty SM field ("<UUID>:<MiB>::<name>") is the default, 108.
    const std::string sm = c2 == std::string::npos ? "" : item.substr(c2 + 1, c3 - c2 - 1);
    d.sm_count = sm.empty() ? 108 : std::atoi(sm.c_str());
    d.name =
        c3 == std::string::npos || c3 + 1 == item.size() ? FakeModelName(mib) : item.substr(c3 + 1);
    devices.push_back(d);
  }
  return devices;
}

}  // namespace fracgpu::fakes
