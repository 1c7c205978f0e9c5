#pragma once
// Listen addresses as every `--listen` flag writes them ("host:port"), parsed once for the
// scheduler, the UI and the monitor (docs/development.md "The command line").

#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::base {

/// A listen address: `host` as written ("" or "0.0.0.0": every IPv4 address; an IPv6 address
/// without its brackets) and `port` 0..65535 (0: any free port).
struct HostPort {
  std::string host;
  int port = 0;
};

/// Parses "host:port" or "[ipv6]:port", the form of every `--listen` flag. kInvalidArgument,
/// naming `text`, when the port is missing, not a decimal number or above 65535.
Result<HostPort> ParseHostPort(std::string_view text);

}  // namespace fracgpu::base
