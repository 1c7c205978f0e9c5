#include "fake_dra_kubelet.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <thread>

namespace fracgpu::fakes {

namespace fs = std::filesystem;
using namespace fracgpu::dra;

namespace {

constexpr auto kCallTimeout = std::chrono::seconds(5);

bool IsSocket(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

template <typename From, typename To>
void CopyMessage(const From& from, To* to) {
  // v1 and v1beta1 messages have the same fields and numbers: the wire bytes convert.
  to->ParseFromString(from.SerializeAsString());
}

}  // namespace

std::vector<std::string> ContainerCdiDevices(const drav1::NodePrepareResourceResponse& claim,
                                             const std::string& request) {
  std::vector<std::string> out;
  for (const auto& d : claim.devices()) {
    bool named = request.empty() || d.request_names().empty() ||
                 std::find(d.request_names().begin(), d.request_names().end(), request) !=
                     d.request_names().end();
    if (!named) continue;
    for (const auto& id : d.cdi_device_ids()) out.push_back(id);
  }
  return out;
}

drav1::Claim ClaimRef(const std::string& ns, const std::string& name, const std::string& uid) {
  drav1::Claim c;
  c.set_namespace_(ns);
  c.set_name(name);
  c.set_uid(uid);
  return c;
}

FakeDraKubelet::FakeDraKubelet(std::string registry_dir, std::vector<std::string> services)
    : dir_(std::move(registry_dir)), services_(std::move(services)) {}

int FakeDraKubelet::Discover() {
  std::vector<std::string> sockets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    // The plugin watcher ignores names starting with '.'.
    if (e.path().filename().string().rfind('.', 0) == 0 || !IsSocket(e.path())) continue;
    sockets.push_back(e.path().string());
  }
  std::sort(sockets.begin(), sockets.end());
  std::lock_guard<std::mutex> lock(mu_);
  plugins_.erase(std::remove_if(plugins_.begin(), plugins_.end(),
                                [&](const Plugin& p) {
                                  return std::find(sockets.begin(), sockets.end(),
                                                   p.reg.registration_socket) == sockets.end();
                                }),
                 plugins_.end());
  for (const auto& sock : sockets) {
    if (std::any_of(plugins_.begin(), plugins_.end(),
                    [&](const Plugin& p) { return p.reg.registration_socket == sock; })) {
      continue;
    }
    auto channel = grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials());
    auto reg = regv1::Registration::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    regv1::PluginInfo info;
    if (!reg->GetInfo(&ctx, regv1::InfoRequest(), &info).ok()) continue;  // not serving yet
    std::string error;
    std::string chosen;
    if (info.type() != kPluginTypeDra) {
      error = "plugin type \"" + info.type() + "\" is not DRAPlugin";
    } else if (info.name().empty() || info.endpoint().empty()) {
      error = "DRA plugin without a name or endpoint";
    } else {
      for (const auto& want : services_) {
        for (const auto& have : info.supported_versions()) {
          if (chosen.empty() && have == want) chosen = want;
        }
      }
      if (chosen.empty()) error = "none of the plugin's services is supported by this kubelet";
    }
    Plugin p;
    if (error.empty()) {
      p.reg = {sock, info.name(), info.endpoint(), chosen};
      p.channel =
          grpc::CreateChannel("unix:" + info.endpoint(), grpc::InsecureChannelCredentials());
      if (!p.channel->WaitForConnected(std::chrono::system_clock::now() + kCallTimeout)) {
        error = "cannot connect to endpoint " + info.endpoint();
      }
    }
    grpc::ClientContext nctx;
    nctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    regv1::RegistrationStatus status;
    status.set_plugin_registered(error.empty());
    status.set_error(error);
    regv1::RegistrationStatusResponse ignored;
    (void)reg->NotifyRegistrationStatus(&nctx, status, &ignored);
    if (error.empty()) {
      plugins_.push_back(std::move(p));
    } else {
      rejections_.push_back(error);
    }
  }
  return static_cast<int>(plugins_.size());
}

bool FakeDraKubelet::WaitForDriver(const std::string& driver, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    Discover();
    Plugin p;
    if (Find(driver, &p)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Stands in for inotify: the socket appears from another thread; bounded 5 ms polling.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void FakeDraKubelet::Restart() {
  std::lock_guard<std::mutex> lock(mu_);
  plugins_.clear();
}

std::vector<DraRegistration> FakeDraKubelet::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DraRegistration> out;
  for (const auto& p : plugins_) out.push_back(p.reg);
  return out;
}

std::vector<std::string> FakeDraKubelet::rejections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rejections_;
}

bool FakeDraKubelet::Find(const std::string& driver, Plugin* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : plugins_) {
    if (p.reg.driver == driver) {
      *out = p;
      return true;
    }
  }
  return false;
}

grpc::Status FakeDraKubelet::Prepare(const std::string& driver,
                                     const std::vector<drav1::Claim>& claims,
                                     drav1::NodePrepareResourcesResponse* out) {
  Plugin p;
  if (!Find(driver, &p))
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "driver " + driver + " not registered");
  drav1::NodePrepareResourcesRequest req;
  for (const auto& c : claims) *req.add_claims() = c;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  if (p.reg.service == kServiceV1)
    return drav1::DRAPlugin::NewStub(p.channel)->NodePrepareResources(&ctx, req, out);
  drav1beta1::NodePrepareResourcesRequest breq;
  CopyMessage(req, &breq);
  drav1beta1::NodePrepareResourcesResponse bresp;
  grpc::Status st =
      drav1beta1::DRAPlugin::NewStub(p.channel)->NodePrepareResources(&ctx, breq, &bresp);
  CopyMessage(bresp, out);
  return st;
}

grpc::Status FakeDraKubelet::Unprepare(const std::string& driver,
                                       const std::vector<drav1::Claim>& claims,
                                       drav1::NodeUnprepareResourcesResponse* out) {
  Plugin p;
  if (!Find(driver, &p))
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "driver " + driver + " not registered");
  drav1::NodeUnprepareResourcesRequest req;
  for (const auto& c : claims) *req.add_claims() = c;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  if (p.reg.service == kServiceV1)
    return drav1::DRAPlugin::NewStub(p.channel)->NodeUnprepareResources(&ctx, req, out);
  drav1beta1::NodeUnprepareResourcesRequest breq;
  CopyMessage(req, &breq);
  drav1beta1::NodeUnprepareResourcesResponse bresp;
  grpc::Status st =
      drav1beta1::DRAPlugin::NewStub(p.channel)->NodeUnprepareResources(&ctx, breq, &bresp);
  CopyMessage(bresp, out);
  return st;
}

}  // namespace fracgpu::fakes
