// Fuzz target: ExtenderArgs / ExtenderBindingArgs decoding (kube-scheduler's requests).
#include <cstddef>
#include <cstdint>
#include <string>

#include "scheduler/extender_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  (void)fracgpu::scheduler::DecodeExtenderArgs(body);
  (void)fracgpu::scheduler::DecodeExtenderBindingArgs(body);
  return 0;
}
