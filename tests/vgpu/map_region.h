#pragma once
// Maps an existing region file read-write, as the tests that inspect or edit a region written by
// libvgpu.so need (multiprocess_test, park_wake_test).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "vgpu/region.h"

namespace fracgpu::vgpu::testing {

/// The region at `path` mapped MAP_SHARED read-write, or nullptr when it cannot be opened or
/// mapped or RegionValidate refuses it. Unmap with munmap(r, sizeof(Region)).
inline Region* MapRegion(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  if (RegionValidate(p, sizeof(Region)) != RegionError::kOk) return nullptr;
  return static_cast<Region*>(p);
}

}  // namespace fracgpu::vgpu::testing
