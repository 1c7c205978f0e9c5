#include "base/host_port.h"

#include <gtest/gtest.h>

#include <string>

namespace fracgpu::base {
namespace {

// Every --listen flag (scheduler, ui, monitor) is read by ParseHostPort (issue 38 item 5).
TEST(ParseHostPortTest, Table) {
  struct Case {
    std::string in;
    bool ok;
    std::string host;
    int port;
  };
  const Case cases[] = {
      {"0.0.0.0:8443", true, "0.0.0.0", 8443},
      {"127.0.0.1:0", true, "127.0.0.1", 0},
      {":9394", true, "", 9394},
      {"localhost:65535", true, "localhost", 65535},
      {"[::]:8080", true, "::", 8080},
      {"[::1]:1", true, "::1", 1},
      {"0.0.0.0", false, "", 0},        // no port (the monitor's old --listen HOST)
      {"0.0.0.0:", false, "", 0},       // empty port
      {"0.0.0.0:65536", false, "", 0},  // above 65535
      {"0.0.0.0:99999", false, "", 0},
      {"0.0.0.0:-1", false, "", 0},
      {"0.0.0.0:http", false, "", 0},
      {"0.0.0.0:80x", false, "", 0},
      {"0.0.0.0:123456", false, "", 0},
      {"::1:80", false, "", 0},  // IPv6 without brackets
      {"", false, "", 0},
  };
  for (const Case& c : cases) {
    auto got = ParseHostPort(c.in);
    ASSERT_EQ(got.ok(), c.ok) << c.in;
    if (!c.ok) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.in;
      EXPECT_NE(got.status().message().find("\"" + c.in + "\""), std::string::npos)
          << c.in << ": " << got.status().message();
      continue;
    }
    EXPECT_EQ(got->host, c.host) << c.in;
    EXPECT_EQ(got->port, c.port) << c.in;
  }
}

}  // namespace
}  // namespace fracgpu::base
