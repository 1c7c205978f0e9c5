#include "dra/plugin.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "dra/api.h"

namespace fracgpu::dra {

namespace fs = std::filesystem;

namespace {

// Both API versions have the same messages; one template serves either.
template <typename Api>
void PrepareInto(Driver* driver, const typename Api::NodePrepareResourcesRequest& req,
                 typename Api::NodePrepareResourcesResponse* resp) {
  for (const auto& c : req.claims()) {
    auto& out = (*resp->mutable_claims())[c.uid()];
    auto devices = driver->Prepare(c.namespace_(), c.name(), c.uid());
    if (!devices.ok()) {
      spdlog::error("NodePrepareResources {}/{} ({}): {}", c.namespace_(), c.name(), c.uid(),
                    devices.status().ToString());
      out.set_error(devices.status().ToString());
      continue;
    }
    for (const auto& d : *devices) {
      auto* dev = out.add_devices();
      dev->add_request_names(d.request);
      dev->set_pool_name(d.pool);
      dev->set_device_name(d.device);
      for (const auto& id : d.cdi_device_ids) dev->add_cdi_device_ids(id);
      // dra/v1 has share_id (field 5); dra/v1beta1 does not.
      if constexpr (requires { dev->set_share_id(d.share_id); }) {
        if (!d.share_id.empty()) dev->set_share_id(d.share_id);
      }
    }
  }
}

template <typename Api>
void UnprepareInto(Driver* driver, const typename Api::NodeUnprepareResourcesRequest& req,
                   typename Api::NodeUnprepareResourcesResponse* resp) {
  for (const auto& c : req.claims()) {
    auto& out = (*resp->mutable_claims())[c.uid()];
    Status st = driver->Unprepare(c.uid());
    if (!st.ok()) {
      spdlog::error("NodeUnprepareResources {}/{} ({}): {}", c.namespace_(), c.name(), c.uid(),
                    st.ToString());
      out.set_error(st.ToString());
    }
  }
}

Status ServeOn(const std::string& socket, grpc::Service* a, grpc::Service* b,
               std::unique_ptr<grpc::Server>* out) {
  std::error_code ec;
  fs::create_directories(fs::path(socket).parent_path(), ec);
  if (ec)
    return Internal("cannot create " + fs::path(socket).parent_path().string() + ": " +
                    ec.message());
  fs::remove(socket, ec);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(a);
  if (b != nullptr) builder.RegisterService(b);
  *out = builder.BuildAndStart();
  if (!*out) return Internal("cannot serve gRPC on " + socket);
  return Status::Ok();
}

}  // namespace

class KubeletPlugin::ServiceV1 final : public drav1::DRAPlugin::Service {
 public:
  explicit ServiceV1(Driver* d) : d_(d) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drav1::NodePrepareResourcesRequest* req,
                                    drav1::NodePrepareResourcesResponse* resp) override {
    PrepareInto<Api>(d_, *req, resp);
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drav1::NodeUnprepareResourcesRequest* req,
                                      drav1::NodeUnprepareResourcesResponse* resp) override {
    UnprepareInto<Api>(d_, *req, resp);
    return grpc::Status::OK;
  }

 private:
  struct Api {
    using NodePrepareResourcesRequest = drav1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse = drav1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest = drav1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse = drav1::NodeUnprepareResourcesResponse;
  };
  Driver* d_;
};

class KubeletPlugin::ServiceV1beta1 final : public drav1beta1::DRAPlugin::Service {
 public:
  explicit ServiceV1beta1(Driver* d) : d_(d) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drav1beta1::NodePrepareResourcesRequest* req,
                                    drav1beta1::NodePrepareResourcesResponse* resp) override {
    PrepareInto<Api>(d_, *req, resp);
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drav1beta1::NodeUnprepareResourcesRequest* req,
                                      drav1beta1::NodeUnprepareResourcesResponse* resp) override {
    UnprepareInto<Api>(d_, *req, resp);
    return grpc::Status::OK;
  }

 private:
  struct Api {
    using NodePrepareResourcesRequest = drav1beta1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse = drav1beta1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest = drav1beta1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse = drav1beta1::NodeUnprepareResourcesResponse;
  };
  Driver* d_;
};

class KubeletPlugin::RegistrationService final : public regv1::Registration::Service {
 public:
  explicit RegistrationService(KubeletPlugin* p) : p_(p) {}
  grpc::Status GetInfo(grpc::ServerContext*, const regv1::InfoRequest*,
                       regv1::PluginInfo* info) override {
    info->set_type(kPluginTypeDra);
    info->set_name(p_->options_.driver);
    info->set_endpoint(p_->service_socket());
    info->add_supported_versions(kServiceV1);
    if (p_->options_.serve_v1beta1) info->add_supported_versions(kServiceV1beta1);
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const regv1::RegistrationStatus* status,
                                        regv1::RegistrationStatusResponse*) override {
    {
      std::lock_guard<std::mutex> lock(p_->error_mu_);
      p_->registration_error_ = status->error();
    }
    p_->registered_ = status->plugin_registered();
    p_->notifications_++;
    if (status->plugin_registered()) {
      spdlog::info("kubelet registered DRA driver {}", p_->options_.driver);
    } else {
      spdlog::error("kubelet refused DRA driver {}: {}", p_->options_.driver, status->error());
    }
    return grpc::Status::OK;
  }

 private:
  KubeletPlugin* p_;
};

KubeletPlugin::KubeletPlugin(PluginOptions options, Driver* driver)
    : options_(std::move(options)), driver_(driver) {}

KubeletPlugin::~KubeletPlugin() { Stop(); }

std::string KubeletPlugin::registration_socket() const {
  return (fs::path(options_.registry_dir) / (options_.driver + "-reg.sock")).string();
}
std::string KubeletPlugin::service_socket() const {
  return (fs::path(options_.plugin_dir) / "dra.sock").string();
}

std::string KubeletPlugin::registration_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return registration_error_;
}

Status KubeletPlugin::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (service_server_) return Status::Ok();
  v1_ = std::make_unique<ServiceV1>(driver_);
  v1beta1_ = std::make_unique<ServiceV1beta1>(driver_);
  registration_ = std::make_unique<RegistrationService>(this);
  FRACGPU_RETURN_IF_ERROR(ServeOn(service_socket(), v1_.get(),
                                  options_.serve_v1beta1 ? v1beta1_.get() : nullptr,
                                  &service_server_));
  Status st = ServeOn(registration_socket(), registration_.get(), nullptr, &registration_server_);
  if (!st.ok()) {
    service_server_->Shutdown();
    service_server_.reset();
    return st;
  }
  spdlog::info("DRA driver {} serving {} (registration {})", options_.driver, service_socket(),
               registration_socket());
  return Status::Ok();
}

void KubeletPlugin::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  if (registration_server_) {
    registration_server_->Shutdown();
    registration_server_.reset();
    fs::remove(registration_socket(), ec);
  }
  if (service_server_) {
    service_server_->Shutdown();
    service_server_.reset();
    fs::remove(service_socket(), ec);
  }
  registered_ = false;
}

bool KubeletPlugin::SocketsPresent() const {
  std::error_code ec;
  return fs::exists(registration_socket(), ec) && fs::exists(service_socket(), ec);
}

}  // namespace fracgpu::dra
