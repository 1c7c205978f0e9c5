#include "base/host_port.h"

namespace fracgpu::base {

Result<HostPort> ParseHostPort(std::string_view text) {
  const std::string shown = "\"" + std::string(text.substr(0, 256)) + "\"";
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument(shown + " is not host:port (e.g. 0.0.0.0:8080)");
  }
  HostPort out;
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return InvalidArgument(shown +
                           " is not host:port (an IPv6 address goes in brackets: [::]:8080)");
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) > 65535) {
    return InvalidArgument(shown + ": the port is not a number 0..65535");
  }
  out.host = std::string(host);
  out.port = std::stoi(std::string(port));
  return out;
}

}  // namespace fracgpu::base
