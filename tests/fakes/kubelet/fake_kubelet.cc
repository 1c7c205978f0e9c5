#include "fake_kubelet.h"

#include <filesystem>

namespace fracgpu::fakes {

namespace fs = std::filesystem;

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  explicit Service(FakeKubelet* owner) : owner_(owner) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    return owner_->OnRegister(*request);
  }

 private:
  FakeKubelet* owner_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

bool FakeKubelet::Start() {
  std::error_code ec;
  fs::remove(socket_path(), ec);
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  return server_ != nullptr;
}

void FakeKubelet::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  std::vector<std::thread> watchers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : watch_contexts_) c->TryCancel();
    watch_contexts_.clear();
    watchers.swap(watchers_);
    stub_.reset();
  }
  for (auto& t : watchers) t.join();
}

bool FakeKubelet::Restart() {
  Stop();
  // kubelet's device manager removes every socket in its directory except its checkpoint.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.is_socket(ec) && entry.path().filename() != "kubelet_internal_checkpoint")
      fs::remove(entry.path(), ec);
  }
  return Start();
}

grpc::Status FakeKubelet::OnRegister(const v1beta1::RegisterRequest& request) {
  if (request.version() != kubelet::kVersion) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unsupported version " + request.version());
  }
  const std::string& name = request.resource_name();
  size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
      name.rfind("kubernetes.io/", 0) == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "invalid extended resource name " + name);
  }
  // Like kubelet: dial the plugin synchronously and ask for its options before answering.
  auto channel = grpc::CreateChannel("unix:" + dir_ + "/" + request.endpoint(),
                                     grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "cannot dial plugin endpoint " + request.endpoint());
  }
  auto stub = std::shared_ptr<v1beta1::DevicePlugin::Stub>(v1beta1::DevicePlugin::NewStub(channel));
  Registration reg;
  reg.endpoint = request.endpoint();
  reg.resource_name = name;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1beta1::Empty empty;
    grpc::Status st = stub->GetDevicePluginOptions(&context, empty, &reg.options);
    if (!st.ok()) return st;
  }
  auto context = std::make_shared<grpc::ClientContext>();
  std::lock_guard<std::mutex> lock(mu_);
  stub_ = stub;
  registrations_.push_back(reg);
  watch_contexts_.push_back(context);
  watchers_.emplace_back([this, stub, context] { Watch(stub, context); });
  cv_.notify_all();
  return grpc::Status::OK;
}

void FakeKubelet::Watch(std::shared_ptr<v1beta1::DevicePlugin::Stub> stub,
                        std::shared_ptr<grpc::ClientContext> context) {
  v1beta1::Empty empty;
  auto reader = stub->ListAndWatch(context.get(), empty);
  v1beta1::ListAndWatchResponse response;
  while (reader->Read(&response)) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_.assign(response.devices().begin(), response.devices().end());
    ++lists_;
    cv_.notify_all();
  }
  reader->Finish();
}

std::shared_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::PluginStub() {
  std::lock_guard<std::mutex> lock(mu_);
  return stub_;
}

bool FakeKubelet::WaitForRegistrations(int n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return static_cast<int>(registrations_.size()) >= n; });
}

bool FakeKubelet::WaitForDevices(
    const std::function<bool(const std::vector<v1beta1::Device>&)>& pred,
    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return lists_ > 0 && pred(devices_); });
}

std::vector<Registration> FakeKubelet::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

std::vector<v1beta1::Device> FakeKubelet::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return devices_;
}

int FakeKubelet::lists_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_;
}

grpc::Status FakeKubelet::Allocate(const std::vector<std::vector<std::string>>& requests,
                                   v1beta1::AllocateResponse* out) {
  auto stub = PluginStub();
  if (!stub) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  v1beta1::AllocateRequest request;
  for (const auto& ids : requests) {
    auto* c = request.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->Allocate(&context, request, out);
}

grpc::Status FakeKubelet::GetPreferredAllocation(const v1beta1::PreferredAllocationRequest& request,
                                                 v1beta1::PreferredAllocationResponse* out) {
  auto stub = PluginStub();
  if (!stub) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->GetPreferredAllocation(&context, request, out);
}

grpc::Status FakeKubelet::PreStartContainer(const std::vector<std::string>& ids) {
  auto stub = PluginStub();
  if (!stub) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  v1beta1::PreStartContainerRequest request;
  for (const auto& id : ids) request.add_devices_ids(id);
  v1beta1::PreStartContainerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->PreStartContainer(&context, request, &response);
}

}  // namespace fracgpu::fakes
