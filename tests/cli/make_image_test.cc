// `make image` (the Makefile target docs/install.md names): with docker it runs the BuildKit
// build of deploy/image/Dockerfile from the repository root with the IMAGE tag; without docker,
// or with its daemon down, it says so, prints the command to run, and exits 2. A fake `docker`
// on a PATH made for the test stands in for the real one (no image is built here).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
const std::string kSource = FRACGPU_SOURCE_DIR;

class MakeImage : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* make = nullptr;
    for (const char* p : {"/usr/bin/make", "/bin/make", "/usr/local/bin/make"}) {
      if (fs::exists(p)) make = p;
    }
    if (make == nullptr) GTEST_SKIP() << "make not installed";
    char tmpl[] = "/tmp/fracgpu-make-image-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/bin");
    fs::create_symlink(make, dir_ + "/bin/make");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // A fake docker: `info` exits `info_rc`; every call is logged to <dir>/docker.log.
  void FakeDocker(int info_rc) {
    std::ofstream f(dir_ + "/bin/docker");
    f << "#!/bin/sh\necho \"$DOCKER_BUILDKIT $*\" >> " << dir_ << "/docker.log\n"
      << "[ \"$1\" = info ] && exit " << info_rc << "\nexit 0\n";
    f.close();
    fs::permissions(dir_ + "/bin/docker", fs::perms::owner_all);
  }
  // Runs make image with PATH = <dir>/bin only; returns output, sets *rc.
  std::string Run(const std::string& image, int* rc) {
    std::string cmd = "cd " + kSource + " && env -i PATH=" + dir_ + "/bin " + dir_ +
                      "/bin/make -s image" + (image.empty() ? "" : " IMAGE=" + image) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
  }
  std::string Log() {
    std::ifstream in(dir_ + "/docker.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::string dir_;
};

TEST_F(MakeImage, WithoutDockerSaysWhatToRun) {
  int rc = -1;
  std::string out = Run("", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("make image: docker is not installed here."), std::string::npos) << out;
  EXPECT_NE(out.find("DOCKER_BUILDKIT=1 docker build -f deploy/image/Dockerfile -t "
                     "ghcr.io/fracgpu/fracgpu:0.1.0 ."),
            std::string::npos)
      << out;
}

TEST_F(MakeImage, DaemonDownSaysSo) {
  FakeDocker(1);
  int rc = -1;
  std::string out = Run("", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("docker is installed but its daemon does not answer"), std::string::npos)
      << out;
  EXPECT_EQ(Log(), " info\n");  // nothing built
}

TEST_F(MakeImage, WithDockerBuildsTheDockerfileWithTheTag) {
  FakeDocker(0);
  int rc = -1;
  std::string out = Run("registry.example.com/fracgpu:9.9", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(Log(),
            " info\n1 build -f deploy/image/Dockerfile -t registry.example.com/fracgpu:9.9 .\n");
  EXPECT_TRUE(fs::exists(kSource + "/deploy/image/Dockerfile"));
}

}  // namespace
