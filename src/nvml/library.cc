#include "nvml/library.h"

#include <dlfcn.h>

namespace fracgpu::nvml {

Library::Library(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {
  shutdown_ = Get<decltype(&::nvmlShutdown)>("nvmlShutdown");
  error_string_ = Get<decltype(&::nvmlErrorString)>("nvmlErrorString");
}

Library::~Library() {
  if (shutdown_ != nullptr) shutdown_();
}

void* Library::Symbol(const char* name) const { return ::dlsym(handle_, name); }

std::string Library::Error(const std::string& call, nvmlReturn_t code) const {
  std::string text = error_string_ != nullptr ? error_string_(code) : "";
  return call + " failed: NVML error " + std::to_string(code) +
         (text.empty() ? "" : " (" + text + ")");
}

Result<std::unique_ptr<Library>> Library::Open(const std::string& path,
                                               std::initializer_list<const char*> required) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return Unavailable("cannot load NVML library " + path + ": " + (err ? err : "unknown error"));
  }
  for (std::initializer_list<const char*> names : {{"nvmlInit_v2", "nvmlShutdown"}, required}) {
    for (const char* name : names) {
      if (::dlsym(handle, name) == nullptr) {
        ::dlclose(handle);  // nothing of it ran yet
        return Unavailable("NVML library " + path + " lacks entry point " + name);
      }
    }
  }
  std::unique_ptr<Library> lib(new Library(path, handle));
  const auto init = lib->Get<decltype(&::nvmlInit_v2)>("nvmlInit_v2");
  if (nvmlReturn_t r = init(); r != NVML_SUCCESS) {
    std::string msg = lib->Error("nvmlInit_v2", r);
    lib->shutdown_ = nullptr;  // not initialised: nothing to shut down
    return Unavailable(msg);
  }
  return lib;
}

}  // namespace fracgpu::nvml
