// Fuzz target: arbitrary bytes as a JSON pod → ParsePodRequest and the limit defaults; bytes
// that are not JSON are parsed as a Kubernetes quantity instead.
// Checks, beyond "no crash": every accepted request is within docs/design/CONTRACT.md §1's ranges,
// the webhook's limit defaults apply cleanly, are idempotent, leave the parsed request unchanged,
// and the JSON Patch form gives the same pod as applying them in place.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/quantity.h"
#include "core/request.h"

namespace {

using fracgpu::core::ContainerRequest;
using fracgpu::core::PodRequest;

void Fail(const char* what) {
  std::fprintf(stderr, "request_fuzz: %s\n", what);
  std::abort();
}

void CheckQuantity(std::string_view text) {
  fracgpu::Result<fracgpu::core::Quantity> q = fracgpu::core::ParseQuantity(text);
  if (!q.ok()) {
    if (q.status().message().empty()) Fail("quantity error without message");
    return;
  }
  int64_t bytes = 0;
  int64_t mib = 0;
  auto whole = fracgpu::core::QuantityToInt64(*q, &bytes);
  auto whole_mib = fracgpu::core::QuantityToInt64(*q, &mib, 20);
  // A whole number of MiB is a whole number of bytes (unless that overflows).
  if (whole_mib == fracgpu::core::WholeStatus::kOk &&
      whole == fracgpu::core::WholeStatus::kFraction) {
    Fail("whole MiB but fractional bytes");
  }
  if (whole == fracgpu::core::WholeStatus::kOk && whole_mib == fracgpu::core::WholeStatus::kOk &&
      mib != bytes / (int64_t{1} << 20)) {
    Fail("MiB and byte values disagree");
  }
}

void CheckRanges(const PodRequest& r) {
  for (const ContainerRequest& c : r.containers) {
    if (c.num_gpus < 0) Fail("negative num_gpus");
    if (c.mem_mib < 0 || c.mem_mib > 2147483647) Fail("mem_mib out of range");
    if (c.mem_percent < 1 || c.mem_percent > 100) Fail("mem_percent out of range");
    if (c.cores_percent < 0 || c.cores_percent > 100) Fail("cores_percent out of range");
    if (c.priority != 0 && c.priority != 1) Fail("priority out of range");
    if (!c.UsesGpu() && (c.mem_mib != 0 || c.cores_percent != 0))
      Fail("slice on a container without GPU");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json pod =
      nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (pod.is_discarded()) {
    CheckQuantity(std::string_view(reinterpret_cast<const char*>(data), size));
    return 0;
  }
  fracgpu::Result<PodRequest> r = fracgpu::core::ParsePodRequest(pod);
  if (!r.ok()) {
    if (r.status().message().empty()) Fail("error without message");
    if (fracgpu::core::ComputeLimitDefaults(pod).ok()) Fail("defaults of an invalid pod");
    return 0;
  }
  CheckRanges(*r);
  for (const char* type : {"NVIDIA A100-SXM4-80GB", "NVIDIA-Tesla V100-PCIE-32GB", ""}) {
    (void)fracgpu::core::GpuTypeAllowed(*r, type);
  }
  (void)fracgpu::core::GpuUuidAllowed(*r, "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448");

  nlohmann::json applied = pod;
  if (!fracgpu::core::ApplyLimitDefaults(applied).ok()) Fail("defaults failed on a valid pod");
  fracgpu::Result<PodRequest> again = fracgpu::core::ParsePodRequest(applied);
  if (!again.ok()) Fail("defaulted pod does not parse");
  if (!(*again == *r)) Fail("defaults changed the parsed request");
  fracgpu::Result<std::vector<fracgpu::core::LimitDefault>> second =
      fracgpu::core::ComputeLimitDefaults(applied);
  if (!second.ok() || !second->empty()) Fail("defaults are not idempotent");
  fracgpu::Result<nlohmann::json> patch = fracgpu::core::LimitDefaultsPatch(pod);
  if (!patch.ok()) Fail("patch failed on a valid pod");
  try {
    if (pod.patch(*patch) != applied) Fail("patch and apply disagree");
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    Fail("patch does not apply");
  }
  return 0;
}
