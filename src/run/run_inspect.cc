// `fracgpu run` / `fracgpu inspect` (see run_inspect.h).
#include "run/run_inspect.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "api/limits.h"
#include "base/strings.h"
#include "enforce/region_reader.h"
#include "run/run_watch.h"

namespace fracgpu::run {
namespace {

bool WholeNumber(const std::string& s, unsigned long long max, unsigned long long* v) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *v = std::stoull(s);
  return *v <= max;
}

}  // namespace

std::string DefaultLibrary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    auto candidate = std::filesystem::path(self).parent_path() / "lib" / "libvgpu.so";
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return "/usr/local/vgpu/libvgpu.so";
}

Result<std::vector<std::pair<std::string, std::string>>> BuildRunEnvironment(const RunOptions& o) {
  std::vector<std::pair<std::string, std::string>> env;
  // Every piece as written, empty ones and spaces included ("" → {""}): each must be a number.
  std::vector<std::string> mems = base::SplitComma(o.gpumem);
  for (size_t i = 0; i < mems.size(); ++i) {
    unsigned long long mib = 0;
    if (!WholeNumber(mems[i], 1ull << 30, &mib) || mib == 0) {
      return InvalidArgument(
          fmt::format("--gpumem: \"{}\" is not a whole number of MiB >= 1", mems[i]));
    }
    env.emplace_back(fmt::format("{}_{}", api::kEnvMemoryLimit, i), fmt::format("{}m", mib));
  }
  if (mems.size() > static_cast<size_t>(kMaxDevices)) {
    return InvalidArgument(
        fmt::format("--gpumem: at most {} devices, got {}", kMaxDevices, mems.size()));
  }
  if (o.gpucores < 0 || o.gpucores > 100) {
    return InvalidArgument(fmt::format("--gpucores: must be 0..100, got {}", o.gpucores));
  }
  std::string devices = o.devices;
  if (devices.empty()) {
    for (size_t i = 0; i < mems.size(); ++i) devices += (i ? "," : "") + std::to_string(i);
  }
  std::vector<std::string> devs = base::SplitComma(devices);
  for (const std::string& d : devs) {
    unsigned long long v = 0;
    if (!WholeNumber(d, 63, &v))
      return InvalidArgument(fmt::format("--devices: \"{}\" is not a GPU index", d));
  }
  if (devs.size() != mems.size()) {
    return InvalidArgument(fmt::format("--devices names {} GPUs but --gpumem gives {} limits",
                                       devs.size(), mems.size()));
  }
  for (size_t i = 0; i < devs.size(); ++i) {
    env.emplace_back(fmt::format("{}_{}", api::kEnvSmLimit, i), std::to_string(o.gpucores));
  }
  env.emplace_back(api::kEnvSmLimit, std::to_string(o.gpucores));
  // Indices are NVML indices: libvgpu.so resolves them to UUIDs; CUDA sees the same GPUs.
  env.emplace_back(api::kEnvVisibleDevices, devices);
  env.emplace_back("CUDA_VISIBLE_DEVICES", devices);
  env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  env.emplace_back(api::kEnvSharedCache, o.region);
  env.emplace_back("LD_PRELOAD", o.library);
  return env;
}

std::string FormatRegion(const Region& r) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now_ns =
      static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  std::string out = fmt::format("region v{}  devices {}  policy {}  priority {}\n", r.version,
                                r.device_count, r.policy, r.priority);
  out += fmt::format("{:<4} {:<42} {:>12} {:>12} {:>8} {:>14}\n", "dev", "uuid", "limit MiB",
                     "used MiB", "sm %", "last kernel");
  for (uint32_t d = 0; d < r.device_count && d < static_cast<uint32_t>(kMaxDevices); ++d) {
    const RegionDevice& dev = r.devices[d];
    std::string uuid(dev.uuid, strnlen(dev.uuid, kUuidSize));
    std::string limit =
        dev.memory_limit ? fmt::format("{:.1f}", dev.memory_limit / 1048576.0) : "unlimited";
    if (dev.flags & kDeviceFailClosed) limit = "FAIL-CLOSED";
    uint64_t last = dev.last_launch_ns.load();
    std::string ago =
        last == 0 ? "never"
                  : fmt::format("{:.2f} s ago", last < now_ns ? (now_ns - last) / 1e9 : 0.0);
    out += fmt::format("{:<4} {:<42} {:>12} {:>12.1f} {:>8} {:>14}\n", d,
                       uuid.empty() ? "(by ordinal)" : uuid, limit, dev.used.load() / 1048576.0,
                       dev.sm_limit ? std::to_string(dev.sm_limit) : "-", ago);
  }
  // Per device: used MiB = context + module + data (region layout version 2).
  out += fmt::format("{:<8} {:<9} {:<6}", "pid", "host pid", "alive");
  for (uint32_t d = 0; d < r.device_count && d < static_cast<uint32_t>(kMaxDevices); ++d)
    out += fmt::format(" {:>30}", fmt::format("dev{} MiB (ctx+mod+data)", d));
  out += "\n";
  for (const RegionSlot& s : r.slots) {
    if (s.state.load() != kSlotActive) continue;
    out +=
        fmt::format("{:<8} {:<9} {:<6}", s.pid, s.host_pid > 0 ? std::to_string(s.host_pid) : "?",
                    SlotProcessAlive(s) ? "yes" : "no");
    for (uint32_t d = 0; d < r.device_count && d < static_cast<uint32_t>(kMaxDevices); ++d) {
      out += fmt::format(
          " {:>30}",
          fmt::format("{:.1f} ({:.1f}+{:.1f}+{:.1f})", s.used[d].load() / 1048576.0,
                      s.context_bytes[d].load() / 1048576.0, s.module_bytes[d].load() / 1048576.0,
                      s.data_bytes[d].load() / 1048576.0));
    }
    out += "\n";
  }
  return out;
}

Result<enforce::RegionCopy> ReadRegionFile(const std::string& path) {
  // The hardened reader (bounded pread, regular files only, O_NONBLOCK: a FIFO does not block
  // us), following a symlink: the path is one an operator typed. Errors in inspect's words.
  enforce::RegionReadInfo info;
  auto copy = enforce::ReadRegion(path, {.follow_symlink = true}, &info);
  if (copy.ok()) return copy;
  const std::string file = fmt::format("region file \"{}\"", path);
  switch (info.fault) {
    case enforce::RegionFault::kMissing:
    case enforce::RegionFault::kOpen:
      return NotFound(fmt::format("{}: cannot open: {}", file, std::strerror(info.error_number)));
    case enforce::RegionFault::kStat:
      return InvalidArgument(
          fmt::format("{}: not a regular file: {}", file, std::strerror(info.error_number)));
    case enforce::RegionFault::kNotRegular:
      if (info.directory)
        return InvalidArgument(fmt::format("{}: is a directory, not a region file", file));
      return InvalidArgument(fmt::format("{}: not a regular file", file));
    case enforce::RegionFault::kRead:
      return InvalidArgument(
          fmt::format("{}: cannot read: {}", file, std::strerror(info.error_number)));
    default:  // wrong size, truncated while read, a layout RegionValidate refuses
      return InvalidArgument(fmt::format("{}: not a fracgpu v{} region ({} bytes, expected {})",
                                         file, kRegionVersion, info.file_size, sizeof(Region)));
  }
}

}  // namespace fracgpu::run

namespace fracgpu::cli {

void RegisterRunCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "run",
      "Run a command on this machine under libvgpu.so limits, watched by the driver's account");
  auto opts = std::make_shared<run::RunOptions>();
  auto watch = std::make_shared<run::WatchOptions>();
  auto no_watch = std::make_shared<bool>(false);
  auto argv = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--gpumem", opts->gpumem, "MiB per GPU, comma-separated (3000 or 3000,4000)")
      ->required();
  cmd->add_option("--gpucores", opts->gpucores, "SM share per GPU, percent (0 = no limit)");
  cmd->add_option("--devices", opts->devices, "GPU indices, comma-separated (default 0..n-1)");
  cmd->add_option("--lib", opts->library, "path of libvgpu.so (default: next to fracgpu, lib/)");
  cmd->add_option("--poll-ms", watch->poll_ms,
                  "milliseconds between checks of the driver's per-process memory")
      ->check(CLI::Range(10u, 10000u));
  cmd->add_option("--nvml-library", watch->nvml_library, "NVML library to dlopen");
  cmd->add_flag("--no-watch", *no_watch,
                "do not watch the driver's account (libvgpu.so limits only)");
  cmd->add_flag("--keep-region", opts->keep_region,
                "keep the region's directory ($TMPDIR or /tmp) after the command exits, for "
                "`fracgpu inspect`");
  cmd->add_option("command", *argv, "command and arguments (after --)")->required();
  cmd->callback([opts, watch, no_watch, argv] {
    if (opts->library.empty()) opts->library = run::DefaultLibrary();
    // The flags first (usage errors: exit 2 as `fracgpu run: <message>`, src/cli/usage.h).
    if (auto env = run::BuildRunEnvironment(*opts); !env.ok()) {
      throw CLI::ValidationError(env.status().message());
    }
    // Refuse before anything is created or run when the library cannot be used (fail closed).
    if (Status st = run::ProbeLibrary(opts->library); !st.ok()) {
      std::fprintf(stderr, "fracgpu run: %s; refusing to run without limits\n",
                   st.message().c_str());
      throw CLI::RuntimeError(run::kRunExitRefused);
    }
    // RunWatched creates the region's directory once every check has passed, and removes it.
    watch->watch = !*no_watch;
    int rc = run::RunWatched(*opts, *watch, *argv);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

// A path that is not a readable region (missing, a directory, another file): a usage error.
constexpr int kInspectExitUnreadable = 2;

void RegisterInspectCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect",
                                 "Print a libvgpu.so region file: per-process, per-device usage");
  auto path = std::make_shared<std::string>();
  cmd->add_option("REGION_FILE", *path, "region file (CUDA_DEVICE_MEMORY_SHARED_CACHE)")
      ->required();
  cmd->callback([path] {
    auto region = run::ReadRegionFile(*path);
    if (!region.ok()) {
      std::fprintf(stderr, "fracgpu inspect: %s\n", region.status().message().c_str());
      throw CLI::RuntimeError(kInspectExitUnreadable);
    }
    std::fputs(run::FormatRegion(**region).c_str(), stdout);
  });
}

}  // namespace fracgpu::cli
