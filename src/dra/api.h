#pragma once
// The kubelet APIs a DRA driver speaks (generated from proto/pluginregistration_v1.proto,
// proto/dra_v1.proto, proto/dra_v1beta1.proto) and the names fracgpu's driver uses.
// Sources: k8s.io/kubelet/pkg/apis/pluginregistration/v1 (api.proto, constants.go),
// k8s.io/kubelet/pkg/apis/dra/{v1,v1beta1} (api.proto, types.go), k8s.io/api/resource/v1.

#include "core/dra.h"
#include "dra_v1.grpc.pb.h"                 // IWYU pragma: export
#include "dra_v1.pb.h"                      // IWYU pragma: export
#include "dra_v1beta1.grpc.pb.h"            // IWYU pragma: export
#include "dra_v1beta1.pb.h"                 // IWYU pragma: export
#include "pluginregistration_v1.grpc.pb.h"  // IWYU pragma: export
#include "pluginregistration_v1.pb.h"       // IWYU pragma: export

namespace fracgpu::dra {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace regv1 = ::pluginregistration;

/// PluginInfo.type of a DRA plugin (pluginregistration/v1 constants.go DRAPlugin).
inline constexpr const char* kPluginTypeDra = "DRAPlugin";
/// Service names listed in PluginInfo.supported_versions (dra/v1 and dra/v1beta1 types.go
/// DRAPluginService): kubelet 1.34+ prefers v1, 1.32–1.33 speak v1beta1.
inline constexpr const char* kServiceV1 = "v1.DRAPlugin";
inline constexpr const char* kServiceV1beta1 = "v1beta1.DRAPlugin";
/// kubelet's plugin watcher directory (pkg/kubelet/pluginmanager: <root-dir>/plugins_registry).
inline constexpr const char* kPluginsRegistryDir = "/var/lib/kubelet/plugins_registry";
/// Where DRA drivers conventionally put their service socket (<root-dir>/plugins/<driver>).
inline constexpr const char* kPluginsDir = "/var/lib/kubelet/plugins";

/// fracgpu's DRA driver name (core/dra.h: the webhook and the simulator use it too).
inline constexpr const char* kDriverName = core::kDraDriverName;
/// CDI kind of the specs the driver writes ("vendor/class"; CDI spec §"kind").
inline constexpr const char* kCdiKind = "fracgpu.io/gpu";
/// Default CDI spec directory (the runtimes' dynamic spec dir).
inline constexpr const char* kCdiDir = "/var/run/cdi";

/// Capacity names published per device (unqualified: in the driver's domain).
inline constexpr const char* kCapacityMemory = core::kDraCapacityMemory;  ///< MiB of device memory
inline constexpr const char* kCapacityCores =
    core::kDraCapacityCores;  ///< percent of the SMs, 0..100

}  // namespace fracgpu::dra
