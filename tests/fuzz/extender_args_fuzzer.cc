// Fuzz target: ExtenderArgs / ExtenderBindingArgs decoding (kube-scheduler's requests).
// DecodeExtenderArgs streams NodeNames off a SAX parser; it must agree with the plain DOM
// decoder (tests/scheduler/extender_args_reference.h) on every input — a difference aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../scheduler/extender_args_reference.h"
#include "scheduler/extender_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  std::string diff = fracgpu::scheduler::reference::CompareDecoders(body);
  if (!diff.empty()) {
    std::fprintf(stderr, "DecodeExtenderArgs differs from the reference decoder: %s\n",
                 diff.c_str());
    std::abort();
  }
  (void)fracgpu::scheduler::DecodeExtenderBindingArgs(body);
  return 0;
}
