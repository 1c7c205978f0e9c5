// Every ELF name the real libcuda.so.1 exports (CUDA 13.0 stub, data/cuda/libcuda_exports.txt),
// so the fake links and resolves like the driver. Names fake_cuda.cc does not implement are
// weak aliases of one function answering CUDA_ERROR_NOT_SUPPORTED (801); their list is
// tests/fakes/cuda/not_supported.txt, checked by tests/vgpu/fake_exports_test.cc. This file
// deliberately does not include vgpu/cuda_api.h: here every name is only an address.
#include <cstring>

#include "vgpu/cuda_variants.def"

extern "C" {

__attribute__((used)) int fake_cuda_not_supported() { return 801; }

#define FAKE_WEAK(elf) int elf() __attribute__((weak, alias("fake_cuda_not_supported")));
#define FAKE_WEAK_VARIANT(base, ver, fl, elf) FAKE_WEAK(elf)
FRACGPU_CUDA_VARIANTS(FAKE_WEAK_VARIANT)
FRACGPU_CUDA_UNTYPED_EXPORTS(FAKE_WEAK)
#undef FAKE_WEAK
#undef FAKE_WEAK_VARIANT

}  // extern "C"

namespace fracgpu::fakes {

/// One row of the driver's variant table with the fake's function for it.
struct FakeVariant {
  const char* base;
  int version;  ///< introduced; 0 for exports without a PFN typedef (version unknown)
  int flavour;  ///< 0 plain, 1 _ptsz, 2 _ptds
  const char* elf;
  void* fn;
};

#define FAKE_ROW(base, ver, fl, elf) {#base, ver, fl, #elf, reinterpret_cast<void*>(&elf)},
#define FAKE_UNTYPED_ROW(elf) {#elf, 0, 0, #elf, reinterpret_cast<void*>(&elf)},
// Sorted by base name (the generator's order), untyped names after.
// C linkage: fake_cuda.cc declares them inside its extern "C" block.
extern "C" const FakeVariant kFakeVariants[] = {FRACGPU_CUDA_VARIANTS(FAKE_ROW)
                                                    FRACGPU_CUDA_UNTYPED_EXPORTS(FAKE_UNTYPED_ROW)};
extern "C" const int kFakeVariantCount = sizeof(kFakeVariants) / sizeof(kFakeVariants[0]);
#undef FAKE_ROW
#undef FAKE_UNTYPED_ROW

bool IsNotSupportedStub(const void* fn) {
  return fn == reinterpret_cast<const void*>(&fake_cuda_not_supported);
}

}  // namespace fracgpu::fakes

/// Test hook: 1 when the fake's `elf` is the CUDA_ERROR_NOT_SUPPORTED stub, 0 when implemented,
/// -1 when the driver exports no such name.
extern "C" int fakeCudaIsNotSupported(const char* elf) noexcept {
  using namespace fracgpu::fakes;
  for (int i = 0; i < kFakeVariantCount; ++i)
    if (std::strcmp(kFakeVariants[i].elf, elf) == 0)
      return IsNotSupportedStub(kFakeVariants[i].fn) ? 1 : 0;
  return -1;
}
