// Fuzz target: AdmissionReview decoding and admission (the webhook's outside input).
#include <cstddef>
#include <cstdint>
#include <string>

#include "scheduler/webhook.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  fracgpu::scheduler::WebhookConfig config;
  auto r = fracgpu::scheduler::HandleAdmissionReview(body, config);
  if (r.ok()) (void)r->dump();
  return 0;
}
