#pragma once
// NodePrepareResources' output on the host: a CDI spec per claim (Container Device Interface
// spec, cncf-tags/container-device-interface SPEC.md: cdiVersion, kind, containerEdits,
// devices[].name, devices[].containerEdits{env ["K=V"], mounts [{hostPath, containerPath, type,
// options}]}) with one CDI device per allocated GPU, so that a container naming one request of a
// claim gets that request's GPUs only and one naming two requests gets each GPU once (the kubelet
// gives a container the CDI IDs of the devices whose request_names hold its request,
// pkg/kubelet/cm/dra/manager.go GetResources, without de-duplicating).
//
// The composable contract (docs/dra.md "Per-request devices"): the CDI library applies a spec's
// own containerEdits once per container however many of its devices the container names, and a
// device's edits once per time it is named (pkg/cdi/cache.go InjectDevices). So
//  - the spec's edits carry what is claim-wide: libvgpu.so and /etc/ld.so.preload, the claim's
//    region directory, the node directory, the claim's common limits file
//    (/etc/fracgpu/limits.d/claim_<uid>.env: region path, core policy, priority), the common
//    environment (the same keys as the device plugin's, without the per-GPU ones) and
//    NVIDIA_VISIBLE_DEVICES=void;
//  - each device's edits carry only per-GPU things under per-GPU names: the GPU's limits file
//    (/etc/fracgpu/limits.d/gpu-<UUID>.env) and the NVIDIA Container Toolkit's device mount
//    (/var/run/nvidia-container-devices/<UUID>), so two devices' edits never set the same env key
//    or mount path.
// libvgpu.so merges the directory per GPU UUID (vgpu/limits.h ParseLimitsDir). Every container
// and pod using the claim shares one region: a shared claim shares its limit, as DRA says; the
// claim-wide limits file `<hook>/vgpu/limits/claim_<uid>.env` (all its GPUs) stays on the host for
// the monitor.

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
/// The CDI device name of one allocated device of a claim: "claim-<uid>-<device>" (unique per
/// kind across the node's specs: a claim UID is unique, a device once per claim).
std::string CdiDeviceName(const std::string& claim_uid, const std::string& device);
/// Its fully qualified CDI device ID: "fracgpu.io/gpu=claim-<uid>-<device>".
std::string CdiDeviceId(const std::string& claim_uid, const std::string& device);
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

/// BuildClaimEdits split for composition (node::SplitComposableEdits): the claim-wide part and
/// one part per share, in share order. Pure.
node::ComposableEdits BuildComposableClaimEdits(const std::string& claim_uid,
                                                const std::vector<AllocatedShare>& shares,
                                                const CdiOptions& options);

/// The CDI spec JSON of a claim at MinimumCdiVersion (0.4.0: its mounts have a type): the spec's
/// containerEdits are `edits`' claim-wide env and mounts; one device per share (CdiDeviceName of
/// shares[i].device) with edits.gpus[i]'s mounts.
json BuildCdiSpec(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                  const node::ComposableEdits& edits);

/// Writes the claim's host files: region directory (fresh, mode 0777) and claim-wide limits file
/// (0444) by node::WriteContainerFiles, the limits directory files
/// (`<hook>/vgpu/limits/claim_<uid>.d/`: the common file and one per GPU, 0444), then the CDI spec
/// (0644, base::WriteFileAtomically). On any failure, removes what it created and returns kInternal
/// naming the claim and the path (nothing half-written). Refuses (kInternal) when
/// `<hook>/vgpu/libvgpu.so` is missing: no container runs unlimited.
Status WriteClaimFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                       const CdiOptions& options);

/// The claim's limits directory files and CDI spec alone (the region directory and claim-wide
/// limits file untouched): rewritten whole, for a claim already prepared whose spec is missing or
/// not CdiSpecText (written by an older driver). Errors: kInternal naming the claim and path.
Status WriteClaimSpecFiles(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                           const CdiOptions& options);

/// The CDI spec file's text for the claim (BuildCdiSpec of BuildClaimEdits, indented, one final
/// newline).
std::string CdiSpecText(const std::string& claim_uid, const std::vector<AllocatedShare>& shares,
                        const CdiOptions& options);

/// Removes the claim's CDI spec, limits files and region directory. Absent files are fine.
/// Errors: kInternal naming the path that cannot be removed.
Status RemoveClaimFiles(const std::string& claim_uid, const CdiOptions& options);

}  // namespace fracgpu::dra
