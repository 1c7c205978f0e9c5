#pragma once
// The device plugin's gRPC side (docs/design/wire-apis.md §1): serve DevicePlugin v1beta1 on our
// socket in kubelet's device-plugins directory, Register with kubelet, and start over when kubelet
// restarts (it deletes our socket and recreates kubelet.sock).

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "deviceplugin/allocator.h"
#include "node/device_state.h"

namespace grpc {
class Server;
}

namespace fracgpu::deviceplugin {

class DevicePluginService;

struct ServerOptions {
  /// kubelet's device-plugins directory (holds kubelet.sock and our socket).
  std::string socket_dir = "/var/lib/kubelet/device-plugins";
  /// Our socket's file name in socket_dir.
  std::string socket_name = "fracgpu-nvidia.sock";
  /// Extended resource advertised (the config's resourceCountName).
  std::string resource_name = "nvidia.com/gpu";
  bool preferred_allocation = true;  ///< advertise GetPreferredAllocation
  bool numa_topology = false;        ///< report each device's NUMA node to kubelet
  std::chrono::milliseconds register_timeout{10000};
  /// How often the watch loop retries a failed registration.
  std::chrono::milliseconds retry_interval{5000};
};

/// Owns the gRPC server and the registration with kubelet. Thread-safe.
class PluginServer {
 public:
  /// `state` and `allocator` not owned; must outlive the server.
  PluginServer(ServerOptions options, node::DeviceState* state, Allocator* allocator);
  ~PluginServer();

  /// Serves on our socket (removing a stale file first), then registers with kubelet.
  /// Errors: kInternal when the socket cannot be served, the registration error otherwise
  /// (the server keeps serving; Run() retries).
  Status Start();
  /// Stops serving (ends ListAndWatch streams) and removes our socket.
  void Stop();
  /// Watches socket_dir, then Start()s unless already registered, and runs until `stop`
  /// fires: restarts and re-registers when kubelet.sock is (re)created or our socket
  /// disappears, and retries a failed registration every retry_interval. Does not Stop() the
  /// server on return. Errors: kInternal when the directory cannot be watched.
  Status Run(base::StopSignal* stop);

  /// Successful registrations so far (tests and logs).
  int registrations() const { return registrations_.load(); }
  std::string socket_path() const;
  std::string kubelet_socket_path() const;

 private:
  Status Serve();
  Status Register();

  ServerOptions options_;
  node::DeviceState* state_;
  Allocator* allocator_;
  std::mutex mu_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> registrations_{0};
  std::atomic<bool> registered_{false};
};

}  // namespace fracgpu::deviceplugin
