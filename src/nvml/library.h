#pragma once
// NVML as a daemon loads it: one dlopen, one nvmlInit_v2, entry points looked up by name with
// the prototypes of src/api/nvml.h. Shared by the inventory (nvml/nvml.cc), the monitor's
// utilisation source (monitor/nvml_stats.cc) and the enforcer's process source
// (enforce/nvml_processes.cc), so the three agree on how NVML is opened, what a missing entry
// point is, how an NVML error reads and what happens at exit.

#include <initializer_list>
#include <memory>
#include <string>

#include "api/nvml.h"
#include "base/status.h"

namespace fracgpu::nvml {

/// An opened and initialised NVML. Destruction calls nvmlShutdown but keeps the library mapped:
/// NVML is process-wide state, and unmapping it would leave its own allocations behind
/// globals that no longer exist (LeakSanitizer reports them as leaks). Not thread-safe; each
/// user owns its own Library (NVML counts nvmlInit_v2 / nvmlShutdown pairs).
class Library {
 public:
  /// Opens `path` (normally "libnvidia-ml.so.1") and calls nvmlInit_v2. Every name in
  /// `required` must resolve (nvmlInit_v2 and nvmlShutdown always are). Errors (Unavailable):
  /// "cannot load NVML library <path>: <dlerror>", "NVML library <path> lacks entry point
  /// <name>", "nvmlInit_v2 failed: NVML error <code> (<text>)".
  static Result<std::unique_ptr<Library>> Open(const std::string& path,
                                               std::initializer_list<const char*> required);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// The entry point `name` as `Fn` (write `decltype(&::nvmlName)`), or nullptr where this NVML
  /// lacks it: an optional capability (utilisation, events, the ResourceSlice facts).
  template <typename Fn>
  Fn Get(const char* name) const {
    return reinterpret_cast<Fn>(Symbol(name));
  }
  /// "<call> failed: NVML error <code> (<nvmlErrorString text>)"; without the text where this
  /// NVML has no nvmlErrorString or it says nothing.
  std::string Error(const std::string& call, nvmlReturn_t code) const;
  /// The path it was opened from.
  const std::string& path() const { return path_; }

 private:
  Library(std::string path, void* handle);
  void* Symbol(const char* name) const;

  std::string path_;
  void* handle_ = nullptr;
  decltype(&::nvmlShutdown) shutdown_ = nullptr;
  decltype(&::nvmlErrorString) error_string_ = nullptr;
};

}  // namespace fracgpu::nvml
