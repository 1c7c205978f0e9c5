#pragma once
// The kubelet plugin: the registration socket kubelet's plugin watcher discovers
// (<registry_dir>/<driver>-reg.sock, pluginregistration.Registration: GetInfo answers
// type DRAPlugin, the driver name, the service socket and the DRAPlugin services;
// NotifyRegistrationStatus records kubelet's verdict) and the service socket
// (<plugin_dir>/dra.sock) serving k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (kubelet 1.34+)
// and ...v1beta1.DRAPlugin (kubelet 1.32–1.33) over the same Driver.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "dra/driver.h"

namespace grpc {
class Server;
}

namespace fracgpu::dra {

struct PluginOptions {
  std::string driver;         ///< kDriverName
  std::string registry_dir;   ///< kubelet's plugins_registry directory
  std::string plugin_dir;     ///< directory of the service socket (<kPluginsDir>/<driver>)
  bool serve_v1beta1 = true;  ///< also offer v1beta1.DRAPlugin (kubelet 1.32–1.33)
};

/// Owns both gRPC servers. Thread-safe.
class KubeletPlugin {
 public:
  /// `driver` not owned.
  KubeletPlugin(PluginOptions options, Driver* driver);
  ~KubeletPlugin();

  /// Serves the service socket, then the registration socket (stale files removed first, so
  /// kubelet never dials a registration whose endpoint is not served yet).
  /// Errors: kInternal naming the socket that cannot be served.
  Status Start();
  /// Stops both servers and removes the socket files.
  void Stop();
  /// True when both socket files exist (kubelet may remove the registration socket).
  bool SocketsPresent() const;

  std::string registration_socket() const;
  std::string service_socket() const;
  /// kubelet's last NotifyRegistrationStatus: registered, and its error text.
  bool registered() const { return registered_.load(); }
  std::string registration_error() const;
  int registration_notifications() const { return notifications_.load(); }

 private:
  class RegistrationService;
  class ServiceV1;
  class ServiceV1beta1;

  PluginOptions options_;
  Driver* driver_;
  std::mutex mu_;
  std::unique_ptr<RegistrationService> registration_;
  std::unique_ptr<ServiceV1> v1_;
  std::unique_ptr<ServiceV1beta1> v1beta1_;
  std::unique_ptr<grpc::Server> service_server_;
  std::unique_ptr<grpc::Server> registration_server_;
  std::atomic<bool> registered_{false};
  std::atomic<int> notifications_{0};
  mutable std::mutex error_mu_;
  std::string registration_error_;
};

}  // namespace fracgpu::dra
