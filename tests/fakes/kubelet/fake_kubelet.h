#pragma once
// A stand-in for kubelet's device manager (docs/design/ARCHITECTURE.md "Testing without a GPU or a
// cluster"): serves Registration on <dir>/kubelet.sock, and on Register does what kubelet
// does (docs/design/wire-apis.md §1.4): checks the version and resource name, dials the plugin's
// socket, calls GetDevicePluginOptions, then follows ListAndWatch in the background. Tests call
// Allocate / GetPreferredAllocation through it, and Restart() deletes every socket in the
// directory and recreates kubelet.sock, as a restarting kubelet does.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kubelet/api.h"

namespace fracgpu::fakes {

/// One accepted registration.
struct Registration {
  std::string endpoint;
  std::string resource_name;
  v1beta1::DevicePluginOptions options;  ///< as GetDevicePluginOptions answered
};

/// The fake kubelet. Thread-safe.
class FakeKubelet {
 public:
  /// Serves on `<dir>/kubelet.sock` (the directory must exist).
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  /// Starts serving. Returns false when the socket cannot be served.
  bool Start();
  /// Stops serving and ends every ListAndWatch stream.
  void Stop();
  /// A kubelet restart: Stop(), delete every socket file in the directory (the plugin's too),
  /// then Start() on a fresh kubelet.sock.
  bool Restart();

  /// Waits until at least `n` registrations were accepted; false on timeout.
  bool WaitForRegistrations(int n, std::chrono::milliseconds timeout);
  /// Waits until the latest ListAndWatch list satisfies `pred`; false on timeout.
  bool WaitForDevices(const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
                      std::chrono::milliseconds timeout);
  std::vector<Registration> registrations() const;
  /// The latest device list received, and how many lists were received in all.
  std::vector<v1beta1::Device> devices() const;
  int lists_received() const;

  /// Calls Allocate on the registered plugin (one ContainerAllocateRequest per entry).
  grpc::Status Allocate(const std::vector<std::vector<std::string>>& requests,
                        v1beta1::AllocateResponse* out);
  /// Calls GetPreferredAllocation on the registered plugin.
  grpc::Status GetPreferredAllocation(const v1beta1::PreferredAllocationRequest& request,
                                      v1beta1::PreferredAllocationResponse* out);
  grpc::Status PreStartContainer(const std::vector<std::string>& ids);

  const std::string& dir() const { return dir_; }
  std::string socket_path() const { return dir_ + "/kubelet.sock"; }

 private:
  class Service;
  grpc::Status OnRegister(const v1beta1::RegisterRequest& request);
  void Watch(std::shared_ptr<v1beta1::DevicePlugin::Stub> stub,
             std::shared_ptr<grpc::ClientContext> context);
  std::shared_ptr<v1beta1::DevicePlugin::Stub> PluginStub();

  std::string dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Registration> registrations_;
  std::shared_ptr<v1beta1::DevicePlugin::Stub> stub_;
  std::vector<std::shared_ptr<grpc::ClientContext>> watch_contexts_;
  std::vector<std::thread> watchers_;
  std::vector<v1beta1::Device> devices_;
  int lists_ = 0;
};

}  // namespace fracgpu::fakes
