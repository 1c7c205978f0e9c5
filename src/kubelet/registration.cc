#include "kubelet/registration.h"

#include <grpcpp/grpcpp.h>

namespace fracgpu::kubelet {

std::string UnixTarget(const std::string& socket_path) { return "unix:" + socket_path; }

Status RegisterWithKubelet(const std::string& kubelet_socket,
                           const v1beta1::RegisterRequest& request,
                           std::chrono::milliseconds timeout) {
  auto channel =
      grpc::CreateChannel(UnixTarget(kubelet_socket), grpc::InsecureChannelCredentials());
  auto deadline = std::chrono::system_clock::now() + timeout;
  if (!channel->WaitForConnected(deadline)) {
    return Unavailable("kubelet socket " + kubelet_socket + ": cannot connect");
  }
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  v1beta1::Empty reply;
  grpc::Status status = stub->Register(&context, request, &reply);
  if (status.ok()) return Status::Ok();
  std::string what = "kubelet Register(" + request.resource_name() + ", endpoint " +
                     request.endpoint() + "): " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Unavailable(what);
    default:
      return InvalidArgument(what);
  }
}

}  // namespace fracgpu::kubelet
