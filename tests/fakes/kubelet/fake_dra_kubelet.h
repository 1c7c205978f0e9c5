#pragma once
// A stand-in for kubelet's DRA side (docs/design/ARCHITECTURE.md "Testing without a GPU or a
// cluster"): the plugin watcher (pkg/kubelet/pluginmanager) finds sockets in plugins_registry,
// calls pluginregistration.Registration/GetInfo, validates the answer (type "DRAPlugin", a driver
// name, an endpoint, a DRAPlugin service this kubelet speaks), then answers
// NotifyRegistrationStatus; the DRA manager calls NodePrepareResources /
// NodeUnprepareResources on the endpoint with the negotiated service (v1 preferred, as kubelet
// 1.34+ does; a 1.32–1.33 kubelet knows only v1beta1). Restart() forgets everything, as a
// restarted kubelet does, and the next Discover() registers the plugins again.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dra/api.h"

namespace fracgpu::fakes {

/// One accepted DRA plugin.
struct DraRegistration {
  std::string registration_socket;
  std::string driver;
  std::string endpoint;
  std::string service;  ///< the negotiated "v1.DRAPlugin" or "v1beta1.DRAPlugin"
};

/// The fake kubelet DRA side. Thread-safe.
class FakeDraKubelet {
 public:
  /// Watches `registry_dir`; speaks `services` in order of preference.
  FakeDraKubelet(std::string registry_dir,
                 std::vector<std::string> services = {"v1.DRAPlugin", "v1beta1.DRAPlugin"});

  /// One scan of the registry directory: registers every socket not registered yet (and
  /// drops registrations whose socket is gone). Returns the number of drivers registered.
  int Discover();
  /// Discover() until `driver` is registered or `timeout` passes.
  bool WaitForDriver(const std::string& driver, std::chrono::milliseconds timeout);
  /// A kubelet restart: all registrations and connections are forgotten.
  void Restart();

  std::vector<DraRegistration> registrations() const;
  /// Rejections so far (the error sent in NotifyRegistrationStatus).
  std::vector<std::string> rejections() const;

  /// NodePrepareResources on `driver` for `claims` through the negotiated service; the
  /// answer in v1 types (v1beta1's messages are field-for-field the same).
  grpc::Status Prepare(const std::string& driver, const std::vector<dra::drav1::Claim>& claims,
                       dra::drav1::NodePrepareResourcesResponse* out);
  grpc::Status Unprepare(const std::string& driver, const std::vector<dra::drav1::Claim>& claims,
                         dra::drav1::NodeUnprepareResourcesResponse* out);

 private:
  struct Plugin {
    DraRegistration reg;
    std::shared_ptr<grpc::Channel> channel;
  };
  bool Find(const std::string& driver, Plugin* out) const;

  std::string dir_;
  std::vector<std::string> services_;
  mutable std::mutex mu_;
  std::vector<Plugin> plugins_;
  std::vector<std::string> rejections_;
};

/// The CDI device IDs the kubelet gives a container that names `request` of a prepared claim
/// (its resources.claims[].request; "" = the whole claim): as the kubelet's
/// ClaimInfo.cdiDevicesAsList (pkg/kubelet/cm/dra/claiminfo.go), a device counts when the request
/// is "", the device names no request, or its request_names contain `request` exactly. A
/// container never names a firstAvailable subrequest, so a "<request>/<subrequest>" there
/// matches nothing.
std::vector<std::string> ContainerCdiDevices(const dra::drav1::NodePrepareResourceResponse& claim,
                                             const std::string& request);

/// A claim reference as kubelet sends it.
dra::drav1::Claim ClaimRef(const std::string& ns, const std::string& name, const std::string& uid);

}  // namespace fracgpu::fakes
