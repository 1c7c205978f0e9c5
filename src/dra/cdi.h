#pragma once
// NodePrepareResources' output on the host: a CDI spec per claim (Container Device Interface
// spec, cncf-tags/container-device-interface SPEC.md: cdiVersion, kind, devices[].name,
// devices[].containerEdits{env ["K=V"], mounts [{hostPath, containerPath, type, options}]})
// whose edits give a container exactly what the device plugin's Allocate gives it: both come
// from node::BuildContainerEdits (node/container_edits.h): the GPUs (NVIDIA_VISIBLE_DEVICES), the
// limit environment, the read-only limits file, libvgpu.so and /etc/ld.so.preload, the region
// directory and the node directory. Every container and pod using the claim gets the same CDI
// device, hence one region and one limit: a shared claim shares its limit, as DRA semantics say.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "dra/claim.h"
#include "node/config.h"
#include "node/container_edits.h"

namespace fracgpu::dra {

using nlohmann::json;

/// Where the claim's host files go.
struct CdiOptions {
  std::string cdi_dir = "/var/run/cdi";
  /// HOOK_PATH as for the device plugin: `<hook>/vgpu/` holds libvgpu.so, ld.so.preload,
  /// containers/<slot>/ (regions), limits/<slot>.env and node/.
  std::string hook_path = "/usr/local";
  /// The device config (disableCoreLimit, gpuCorePolicy, deviceMemoryScaling, libCudaLogLevel).
  node::DeviceConfig config;
};

/// The slot name of a claim's region directory and limits file: "claim_<uid>".
std::string ClaimSlot(const std::string& claim_uid);
/// The fully qualified CDI device name of a claim: "fracgpu.io/gpu=claim-<uid>".
std::string CdiDeviceId(const std::string& claim_uid);
/// The claim's CDI spec file: "<cdi_dir>/fracgpu.io-gpu-claim-<uid>.json".
std::string CdiSpecPath(const CdiOptions& options, const std::string& claim_uid);

/// The edits for `shares` (in order: GPU i of the container is shares[i]; memory in MiB, cores in
/// percent): node::BuildContainerEdits with the claim's slot (ClaimSlot), the default priority
/// (1, low) and ld.so.preload mounted. Pure.
node::ContainerEdits BuildClaimEdits(const std::string& claim_uid,
                                     const std::vector<AllocatedShare>& shares,
                                     const CdiOptions& options);

/// The lowest CDI spec version whose features `spec` uses, by the rules of the CDI reference
/// library (tags.cncf.io/container-device-interface specs-go/version.go, spec 0.8.0): 0.3.0
/// base; 0.4.0 a mount with "type"; 0.5.0 a device name not starting with a letter, a device
/// node with "hostPath"; 0.6.0 annotations (spec or device), a '.' in the kind's class; 0.7.0
/// "intelRdt" or "additionalGids". The lowest is written so that older runtimes read it too
/// (early containerd 1.7.x releases vendor a CDI library older than 0.6.0).
std::string MinimumCdiVersion(const json& spec);

/// The CDI spec JSON carrying `edits` as device "claim-<uid>", at MinimumCdiVersion (0.4.0:
/// its mounts have a type).
json BuildCdiSpec(const std::string& claim_uid, const node::ContainerEdits& edits);

/// Writes the claim's host files: region directory (fresh, mode 0777) and limits file (0444) by
/// node::WriteContainerFiles, then the CDI spec (0644, base::WriteFileAtomically). On any
/// failure, removes what it created and returns kInternal naming the claim and the path (nothing
/// half-written). Refuses (kInternal) when `<hook>/vgpu/libvgpu.so` is missing: no container
/// runs unlimited.
Status WriteClaimFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                       const CdiOptions& options);

/// Removes the claim's CDI spec, limits file and region directory. Absent files are fine.
/// Errors: kInternal naming the path that cannot be removed.
Status RemoveClaimFiles(const std::string& claim_uid, const CdiOptions& options);

}  // namespace fracgpu::dra
