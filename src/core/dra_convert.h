#pragma once
// HAMi-style pods in DRA mode (docs/dra.md "Keep writing nvidia.com/gpu"): the GPU requests a
// user writes today (nvidia.com/gpu + gpumem / gpucores, use/nouse-gputype, use/nouse-gpuuuid)
// turned into ResourceClaimTemplates for fracgpu's DeviceClass plus the pod changes that use
// them, as HAMi's DRA mode does in its webhook. What DRA cannot express is refused by name
// (gpumem-percentage below 100: DRA capacity requests are absolute amounts). Pure: the
// webhook's DRA mode (src/scheduler/webhook.h) creates the templates; dra/convert.h re-exports.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/dra.h"
#include "core/request.h"

namespace fracgpu::core {

/// The result of converting one pod.
struct HamiConversion {
  /// ResourceClaimTemplate objects (resource.k8s.io/v1) to create in the pod's namespace,
  /// one per GPU container, named "<pod name or generateName>-<container>-gpu".
  std::vector<nlohmann::json> templates;
  /// RFC 6902 patch of the pod: adds spec.resourceClaims and each container's
  /// resources.claims, and removes the nvidia.com/* limits and requests.
  nlohmann::json pod_patch = nlohmann::json::array();
};

/// The CEL selector of `request`'s type and UUID rules over attributes of driver `driver`
/// ("" when there is none): use-gputype entries become an OR of ordered whole-token matches on
/// typeTokens (the core/gputype.h rule), nouse-gputype its negation, use/nouse-gpuuuid
/// case-insensitive UUID membership.
std::string CelSelector(const PodRequest& request, const std::string& driver);

/// Whether `device` passes what a converted claim selects with: the rules CelSelector(request,
/// driver) writes as CEL, evaluated here on the device's attributes of `driver` (plain or
/// qualified "<driver>/<name>" keys) with the same core/gputype.h rules — use/nouse-gputype on
/// `typeTokens`, use/nouse-gpuuuid on `uuid`, case-insensitive — and the DeviceClasses' own
/// selector (deploy/dra/deviceclasses.yaml: `healthy == true`). An attribute a rule needs
/// that is absent or of another type selects nothing (in CEL it is an evaluation error). For
/// previews without a CEL evaluator (the UI's DRA mode); kube-scheduler evaluates the CEL.
bool DeviceSelected(const PodRequest& request, const std::string& driver,
                    const DeviceUsage& device);

/// Converts `pod` (its GPU requests parsed with `names`). A pod without GPU requests gives
/// an empty conversion. Errors: kInvalidArgument naming the container and the request DRA
/// cannot express, or the pod request's own parse error.
Result<HamiConversion> ConvertHamiPod(const nlohmann::json& pod, const ResourceNames& names);

}  // namespace fracgpu::core
