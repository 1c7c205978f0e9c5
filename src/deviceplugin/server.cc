#include "deviceplugin/server.h"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>

#include "kubelet/api.h"
#include "kubelet/registration.h"
#include "node/inventory.h"

namespace fracgpu::deviceplugin {

namespace fs = std::filesystem;
namespace pb = ::v1beta1;

/// The DevicePlugin v1beta1 service.
class DevicePluginService final : public pb::DevicePlugin::Service {
 public:
  DevicePluginService(const ServerOptions& options, node::DeviceState* state, Allocator* allocator)
      : options_(options), state_(state), allocator_(allocator) {}

  void Stop() {
    stopping_ = true;
    state_->Wake();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const pb::Empty*,
                                      pb::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(options_.preferred_allocation);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const pb::Empty*,
                            grpc::ServerWriter<pb::ListAndWatchResponse>* writer) override {
    uint64_t sent = 0;
    while (!stopping_ && !context->IsCancelled()) {
      uint64_t version = state_->version();
      if (version != sent) {
        pb::ListAndWatchResponse response;
        for (const auto& d : state_->Devices()) {
          for (int32_t i = 0; i < d.count; ++i) {
            pb::Device* dev = response.add_devices();
            dev->set_id(node::ReplicaId(d.uuid, i));
            dev->set_health(d.health ? kubelet::kHealthy : kubelet::kUnhealthy);
            if (options_.numa_topology) dev->mutable_topology()->add_nodes()->set_id(d.numa);
          }
        }
        if (!writer->Write(response)) break;
        spdlog::info("ListAndWatch: sent {} devices (state version {})", response.devices_size(),
                     version);
        sent = version;
      }
      // Bounded wait so a stream whose client went away is noticed.
      state_->WaitForChange(sent, std::chrono::milliseconds(500));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const pb::PreferredAllocationRequest* request,
                                      pb::PreferredAllocationResponse* out) override {
    std::vector<PreferredRequest> requests;
    for (const auto& r : request->container_requests()) {
      PreferredRequest p;
      p.available.assign(r.available_deviceids().begin(), r.available_deviceids().end());
      p.must_include.assign(r.must_include_deviceids().begin(), r.must_include_deviceids().end());
      p.size = r.allocation_size();
      requests.push_back(std::move(p));
    }
    for (const auto& ids : allocator_->PreferredAllocation(requests)) {
      auto* c = out->add_container_responses();
      for (const auto& id : ids) c->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const pb::AllocateRequest* request,
                        pb::AllocateResponse* out) override {
    std::vector<std::vector<std::string>> requests;
    for (const auto& r : request->container_requests())
      requests.emplace_back(r.devices_ids().begin(), r.devices_ids().end());
    auto result = allocator_->Allocate(requests);
    if (!result.ok()) {
      grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
      switch (result.status().code()) {
        case StatusCode::kNotFound:
          code = grpc::StatusCode::NOT_FOUND;
          break;
        case StatusCode::kPermissionDenied:
          code = grpc::StatusCode::PERMISSION_DENIED;
          break;
        case StatusCode::kInvalidArgument:
          code = grpc::StatusCode::INVALID_ARGUMENT;
          break;
        case StatusCode::kUnavailable:
          code = grpc::StatusCode::UNAVAILABLE;
          break;
        default:
          code = grpc::StatusCode::INTERNAL;
          break;
      }
      return grpc::Status(code, result.status().message());
    }
    for (const auto& a : *result) {
      auto* c = out->add_container_responses();
      for (const auto& [k, v] : a.envs) (*c->mutable_envs())[k] = v;
      for (const auto& m : a.mounts) {
        auto* mount = c->add_mounts();
        mount->set_container_path(m.container_path);
        mount->set_host_path(m.host_path);
        mount->set_read_only(m.read_only);
      }
      for (const auto& name : a.cdi_devices) c->add_cdi_devices()->set_name(name);
      for (const auto& [k, v] : a.annotations) (*c->mutable_annotations())[k] = v;
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const pb::PreStartContainerRequest*,
                                 pb::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const ServerOptions& options_;
  node::DeviceState* state_;
  Allocator* allocator_;
  std::atomic<bool> stopping_{false};
};

PluginServer::PluginServer(ServerOptions options, node::DeviceState* state, Allocator* allocator)
    : options_(std::move(options)), state_(state), allocator_(allocator) {}

PluginServer::~PluginServer() { Stop(); }

std::string PluginServer::socket_path() const {
  return (fs::path(options_.socket_dir) / options_.socket_name).string();
}
std::string PluginServer::kubelet_socket_path() const {
  return (fs::path(options_.socket_dir) / kubelet::kKubeletSocketName).string();
}

Status PluginServer::Serve() {
  std::error_code ec;
  fs::remove(socket_path(), ec);
  auto service = std::make_unique<DevicePluginService>(options_, state_, allocator_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(kubelet::UnixTarget(socket_path()), grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  auto server = builder.BuildAndStart();
  if (!server) return Internal("cannot serve the device plugin on " + socket_path());
  service_ = std::move(service);
  server_ = std::move(server);
  spdlog::info("device plugin serving {} on {}", options_.resource_name, socket_path());
  return Status::Ok();
}

Status PluginServer::Register() {
  pb::RegisterRequest request;
  request.set_version(kubelet::kVersion);
  request.set_endpoint(options_.socket_name);
  request.set_resource_name(options_.resource_name);
  request.mutable_options()->set_get_preferred_allocation_available(options_.preferred_allocation);
  Status st =
      kubelet::RegisterWithKubelet(kubelet_socket_path(), request, options_.register_timeout);
  registered_ = st.ok();
  if (st.ok()) {
    ++registrations_;
    spdlog::info("registered {} with kubelet ({})", options_.resource_name, kubelet_socket_path());
  } else {
    spdlog::warn("registration with kubelet failed: {}", st.ToString());
  }
  return st;
}

Status PluginServer::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!server_) FRACGPU_RETURN_IF_ERROR(Serve());
  return Register();
}

void PluginServer::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!server_) return;
  service_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  service_.reset();
  registered_ = false;
  std::error_code ec;
  fs::remove(socket_path(), ec);
}

Status PluginServer::Run(base::StopSignal* stop) {
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (in < 0) return Internal("inotify_init1 failed");
  int wd = inotify_add_watch(in, options_.socket_dir.c_str(),
                             IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM);
  if (wd < 0) {
    close(in);
    return Internal("cannot watch " + options_.socket_dir);
  }
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int64_t waker = stop->OnStop([wake] {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake, &one, sizeof(one));
  });
  // The directory is watched before the first registration, so no kubelet restart is missed.
  if (!registered_ && !stop->stopped()) {
    Status st = Start();
    if (!st.ok()) spdlog::warn("{} (retrying)", st.ToString());
  }
  while (!stop->stopped()) {
    pollfd fds[2] = {{in, POLLIN, 0}, {wake, POLLIN, 0}};
    int timeout = registered_ ? -1 : static_cast<int>(options_.retry_interval.count());
    int n = poll(fds, 2, timeout);
    if (stop->stopped()) break;
    bool kubelet_created = false, ours_gone = false;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      alignas(inotify_event) char buf[4096];
      ssize_t len;
      while ((len = read(in, buf, sizeof(buf))) > 0) {
        for (char* p = buf; p < buf + len;) {
          auto* ev = reinterpret_cast<inotify_event*>(p);
          std::string name = ev->len ? ev->name : "";
          if (name == kubelet::kKubeletSocketName && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
            kubelet_created = true;
          if (name == options_.socket_name && (ev->mask & (IN_DELETE | IN_MOVED_FROM)))
            ours_gone = true;
          p += sizeof(inotify_event) + ev->len;
        }
      }
    }
    std::error_code ec;
    if (ours_gone && fs::exists(socket_path(), ec))
      ours_gone = false;  // our own restart recreated it
    if (kubelet_created || ours_gone) {
      spdlog::info("kubelet restarted ({}); restarting the device plugin server",
                   kubelet_created ? "kubelet.sock created" : "our socket removed");
      Stop();
      Status st = Start();
      if (!st.ok()) spdlog::warn("restart: {}", st.ToString());
    } else if (!registered_) {
      Status st = Start();
      if (!st.ok()) spdlog::warn("retrying registration: {}", st.ToString());
    }
  }
  stop->Unregister(waker);
  close(wake);
  close(in);
  return Status::Ok();
}

}  // namespace fracgpu::deviceplugin
