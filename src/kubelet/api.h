#pragma once
// The kubelet device-plugin API, v1beta1 (generated from proto/deviceplugin_v1beta1.proto),
// and its constants. Source: docs/design/wire-apis.md §1.1 (Kubernetes
// k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1, constants.go).

#include "deviceplugin_v1beta1.grpc.pb.h"  // IWYU pragma: export
#include "deviceplugin_v1beta1.pb.h"       // IWYU pragma: export

namespace fracgpu::kubelet {

/// The only API version kubelet accepts in RegisterRequest.version.
inline constexpr const char* kVersion = "v1beta1";
/// Directory of kubelet's and the plugins' sockets (kubelet's DevicePluginPath).
inline constexpr const char* kDevicePluginPath = "/var/lib/kubelet/device-plugins/";
/// File name of kubelet's Registration socket inside kDevicePluginPath.
inline constexpr const char* kKubeletSocketName = "kubelet.sock";
/// Device health values of Device.health (exact case).
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";
/// Longest Device.ID kubelet documents.
inline constexpr size_t kMaxDeviceIdLength = 63;

}  // namespace fracgpu::kubelet
