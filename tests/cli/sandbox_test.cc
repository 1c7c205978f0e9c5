// scripts/sandbox.sh (`make sandbox`): starts, shows the refused allocation and the region,
// brings up the fake API server and `fracgpu ui` on 127.0.0.1 only, and stops cleanly within
// its --for bound (exit 0, both ports closed afterwards, its temporary folder removed).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

// The port of the first "http://127.0.0.1:<port>" after `marker` in `out`, or 0.
int PortAfter(const std::string& out, const std::string& marker) {
  size_t at = out.find(marker);
  if (at == std::string::npos) return 0;
  const std::string prefix = "http://127.0.0.1:";
  size_t p = out.find(prefix, at);
  if (p == std::string::npos) return 0;
  return std::atoi(out.c_str() + p + prefix.size());
}

bool Listening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(Sandbox, StartsShowsTheRefusalAndStopsCleanly) {
  const std::string cmd = std::string("bash ") + FRACGPU_SOURCE_DIR + "/scripts/sandbox.sh --build " +
                          FRACGPU_BUILD_DIR + " --for 1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 0) << out;
  EXPECT_NE(out.find("alloc 600 MiB: CUDA_SUCCESS (granted)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 600 MiB: CUDA_ERROR_OUT_OF_MEMORY (refused: 1200 MiB > the 1000 MiB limit)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("region v2  devices 1"), std::string::npos) << out;  // fracgpu inspect
  EXPECT_NE(out.find("1000.0"), std::string::npos) << out;                  // the limit, MiB
  const int api = PortAfter(out, "fake API server: ");
  const int ui = PortAfter(out, "fracgpu ui: ");
  EXPECT_GT(api, 0) << out;
  EXPECT_GT(ui, 0) << out;
  EXPECT_NE(out.find("sandbox: stopping after 1 s"), std::string::npos) << out;
  // Stopped: nothing listens on those loopback ports any more, and the temporary folder is gone.
  if (api > 0) {
    EXPECT_FALSE(Listening(api));
  }
  if (ui > 0) {
    EXPECT_FALSE(Listening(ui));
  }
  const std::string files = "sandbox: files in ";
  size_t at = out.find(files);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string dir = out.substr(at + files.size(), out.find('\n', at) - at - files.size());
  EXPECT_EQ(dir.rfind("/tmp/fracgpu-sandbox-", 0), 0u) << dir;
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  // Nothing in the output points anywhere but loopback.
  EXPECT_EQ(out.find("0.0.0.0"), std::string::npos) << out;
}

}  // namespace
