#pragma once
// `fracgpu run`'s fail-closed start and driver-truth watch (docs/enforcement.md "fracgpu run"):
// the library is probed before anything runs (missing or unloadable: refuse, naming the path),
// the command runs as a child with run as its subreaper, and every poll the driver's
// per-process memory (NVML) of the child's process tree is checked with the enforcement core
// against the --gpumem limits: a process that takes the tree over its limit is killed.
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "run/run_inspect.h"

namespace fracgpu::run {

/// Exit codes of `fracgpu run` besides the command's own.
inline constexpr int kRunExitRefused = 2;  ///< bad flags, libvgpu.so missing/unloadable, no NVML
inline constexpr int kRunExitKilled = 3;   ///< a process of the command was killed for going over
inline constexpr int kRunExitUnlimited =
    4;  ///< a process used the GPU without libvgpu.so (no region slot)

/// How the watch runs.
struct WatchOptions {
  uint32_t poll_ms = 100;  ///< between NVML polls
  int confirm_polls = 2;   ///< consecutive polls over the limit before the kill
  std::string nvml_library = "libnvidia-ml.so.1";
  bool watch = true;  ///< false: --no-watch (libvgpu.so only)
};

/// Loads `library` with dlopen(RTLD_NOW) in a short-lived child process (its constructors never
/// run in `fracgpu run` itself). Errors: kNotFound ("<path>: no such file"), kInvalidArgument
/// (the loader's message: not an ELF object, wrong class, missing dependency, …).
Status ProbeLibrary(const std::string& library);

/// Runs `argv` under `options` (environment from BuildRunEnvironment) and watches it. When
/// `options.region` is "", a private directory `$TMPDIR/fracgpu-run-XXXXXX` (else /tmp) is created
/// once every check has passed, named on stderr, and removed on every return (the command's
/// exit, a kill, a failed exec), unless `options.keep_region`; a refusal creates nothing. The
/// signals run forwards (INT, TERM, HUP, QUIT) are held from then until the child's pid is known,
/// so a signal at any moment reaches the command and run still cleans up. Returns
/// the exit code for `fracgpu run`: the command's (128 + signal when it died of a signal),
/// or kRunExitKilled / kRunExitUnlimited / kRunExitRefused; every refusal and kill prints one
/// line on stderr starting with "fracgpu run: ".
int RunWatched(const RunOptions& options, const WatchOptions& watch,
               const std::vector<std::string>& argv);

}  // namespace fracgpu::run
