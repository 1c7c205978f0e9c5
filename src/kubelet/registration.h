#pragma once
// Client side of kubelet's Registration service: how a device plugin announces itself
// (docs/design/wire-apis.md §1.4: plaintext gRPC over the Unix socket kubelet.sock).

#include <chrono>
#include <string>

#include "base/status.h"
#include "kubelet/api.h"

namespace fracgpu::kubelet {

/// gRPC target for a Unix socket path: "unix:" + absolute path.
std::string UnixTarget(const std::string& socket_path);

/// Calls Registration/Register on the kubelet socket `kubelet_socket` (a filesystem path)
/// with `request`, waiting at most `timeout` for the connection and the answer.
/// Kubelet dials the plugin back inside Register, so the plugin must already serve.
/// Errors: kUnavailable when kubelet cannot be reached or times out, kInvalidArgument when
/// kubelet rejects the request (its message is included). Thread-safe.
Status RegisterWithKubelet(const std::string& kubelet_socket,
                           const v1beta1::RegisterRequest& request,
                           std::chrono::milliseconds timeout);

}  // namespace fracgpu::kubelet
