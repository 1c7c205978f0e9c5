// Host PID → pod mapping (src/enforce/proc.h): real cgroup path forms, bad input, PID reuse,
// and the start-time-checked kill.
#include "enforce/proc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "../support/temp_dir.h"

namespace fracgpu::enforce {
namespace {

const std::string kUid = "2ca4a155-3599-498d-bb9d-4446693fa3ea";
const std::string kId = "0ba8ac17e4e7a31fb82279503552fe94e64bab4745bf6fd2ff231e7c8ca8bed0";

TEST(Cgroup, RealPathFormsMapToPodAndContainer) {
  struct Case {
    const char* name;
    std::string text;
    std::string runtime;
  };
  const std::string sd_uid = "2ca4a155_3599_498d_bb9d_4446693fa3ea";
  const std::vector<Case> cases = {
      {"v2 systemd containerd",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd_uid +
           ".slice/cri-containerd-" + kId + ".scope\n",
       "containerd"},
      {"v2 systemd CRI-O, guaranteed QoS",
       "0::/kubepods.slice/kubepods-pod" + sd_uid + ".slice/crio-" + kId + ".scope\n", "crio"},
      {"v2 seen from another cgroup namespace",
       "0::/../../kubepods-besteffort-pod" + sd_uid + ".slice/cri-containerd-" + kId + ".scope\n",
       "containerd"},
      {"v2 kind (kubelet cgroup root)",
       "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
       "kubelet-kubepods-besteffort-pod" +
           sd_uid + ".slice/cri-containerd-" + kId + ".scope\n",
       "containerd"},
      {"v2 cgroupfs driver", "0::/kubepods/besteffort/pod" + kUid + "/" + kId + "\n", ""},
      {"v1 cgroupfs, several hierarchies",
       "12:pids:/kubepods/burstable/pod" + kUid + "/" + kId +
           "\n11:memory:/kubepods/burstable/pod" + kUid + "/" + kId +
           "\n1:name=systemd:/kubepods/burstable/pod" + kUid + "/" + kId + "\n0::/\n",
       ""},
      {"v1 systemd CRI-O",
       "13:freezer:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd_uid +
           ".slice/crio-" + kId + ".scope\n11:files:/\n",
       "crio"},
      {"v1 systemd docker",
       "4:cpu,cpuacct:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd_uid +
           ".slice/docker-" + kId + ".scope\n",
       "docker"},
      {"tenant's nested cgroup below its container is ignored",
       "0::/kubepods.slice/kubepods-pod" + sd_uid + ".slice/cri-containerd-" + kId +
           ".scope/kubepods-pod11111111_1111_1111_1111_111111111111.slice/cri-containerd-" +
           std::string(64, 'f') + ".scope\n",
       "containerd"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto id = ParseCgroupFile(c.text);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(id->pod_uid, kUid);
    EXPECT_EQ(id->container_id, kId);
    EXPECT_EQ(id->runtime, c.runtime);
  }
}

TEST(Cgroup, HostProcessesSandboxesAndBadInputAreRefusedNamingTheLine) {
  const std::string sd_uid = "2ca4a155_3599_498d_bb9d_4446693fa3ea";
  struct Case {
    std::string text;
    StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"0::/system.slice/containerd.service\n", StatusCode::kNotFound, "no Kubernetes container"},
      {"0::/user.slice/user-1000.slice/session-2.scope\n", StatusCode::kNotFound, ""},
      {"", StatusCode::kNotFound, ""},
      {"garbage without colons\n", StatusCode::kNotFound, ""},
      {"0::/kubepods.slice/kubepods-pod" + sd_uid + ".slice\n", StatusCode::kNotFound,
       ""},  // pod cgroup only
      {"0::/kubepods.slice/kubepods-pod" + sd_uid + ".slice/crio-conmon-" + kId + ".scope\n",
       StatusCode::kNotFound, ""},  // CRI-O's conmon, not the container
      {"0::/kubepods.slice/kubepods-podNOTAUID.slice/crio-" + kId + ".scope\n",
       StatusCode::kInvalidArgument, "line 1: malformed pod UID"},
      {"1:cpu:/\n0::/kubepods/pod" + kUid + "/" + "cri-containerd-abc.scope\n",
       StatusCode::kInvalidArgument, "line 2: malformed container ID"},
      {"0::/kubepods/pod" + kUid + "/" + std::string(63, 'a') + "G\n", StatusCode::kInvalidArgument,
       "malformed container ID"},
      {std::string(kMaxCgroupFileBytes + 1, 'x'), StatusCode::kInvalidArgument, "more than 65536"},
  };
  for (const Case& c : cases) {
    auto id = ParseCgroupFile(c.text);
    ASSERT_FALSE(id.ok()) << c.text.substr(0, 120);
    EXPECT_EQ(id.status().code(), c.code) << c.text.substr(0, 120);
    EXPECT_NE(id.status().message().find(c.message), std::string::npos) << id.status().message();
  }
}

TEST(Stat, StartTimeIsField22EvenWithSpacesAndParensInComm) {
  std::string fields;
  for (int f = 3; f <= 52; ++f) {
    fields += ' ';
    fields += std::to_string(f == 22 ? 987654 : f);
  }
  auto t = ParseStatStartTime("1234 (a) b) c)" + fields + "\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, 987654u);
  EXPECT_FALSE(ParseStatStartTime("1234 no comm 1 2 3").ok());
  EXPECT_FALSE(ParseStatStartTime("1234 (x) S 1 2 3").ok());
  std::string negative = "1234 (x)";
  for (int f = 3; f < 22; ++f) negative += " 1";
  negative += " -5";
  EXPECT_FALSE(ParseStatStartTime(negative).ok());
  // Our own process: the same as the kernel's value read independently with sscanf.
  std::ifstream in("/proc/self/stat");
  std::string self((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto mine = ParseStatStartTime(self);
  ASSERT_TRUE(mine.ok());
  unsigned long long expect = 0;
  const char* p = self.c_str() + self.rfind(')') + 2;
  for (int f = 3; f < 22; ++f) p = std::strchr(p, ' ') + 1;
  std::sscanf(p, "%llu", &expect);
  EXPECT_EQ(*mine, expect);
}

// A copy of /proc's layout: <root>/<pid>/{stat,cgroup}.
class FakeProc {
 public:
  FakeProc() : root_(tmp_.path()) {}
  void Set(uint32_t pid, uint64_t start, const std::string& cgroup) {
    std::filesystem::create_directories(root_ + "/" + std::to_string(pid));
    std::string stat = std::to_string(pid) + " (app) S 1";
    for (int f = 5; f <= 52; ++f) {
      stat += ' ';
      stat += std::to_string(f == 22 ? start : 0);
    }
    std::ofstream(root_ + "/" + std::to_string(pid) + "/stat") << stat << "\n";
    std::ofstream(root_ + "/" + std::to_string(pid) + "/cgroup") << cgroup;
  }
  void Remove(uint32_t pid) { std::filesystem::remove_all(root_ + "/" + std::to_string(pid)); }
  const std::string& root() const { return root_; }

 private:
  test_support::TempDir tmp_{"fracgpu-proc-"};  // declared first: root_ is its path
  std::string root_;
};

TEST(ProcResolver, ReusedPidIsRemappedAndGoneIsNotFound) {
  FakeProc proc;
  const std::string other = "11111111-2222-3333-4444-555555555555";
  proc.Set(42, 100, "0::/kubepods/pod" + kUid + "/" + kId + "\n");
  ProcReader reader(proc.root());
  ProcResolver r(&reader);
  auto a = r.Resolve(42);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->cgroup.pod_uid, kUid);
  EXPECT_EQ(a->start_time, 100u);
  // PID 42 exits and the kernel hands it to a process of another pod: new start time.
  proc.Set(42, 200, "0::/kubepods/pod" + other + "/" + std::string(64, 'b') + "\n");
  auto b = r.Resolve(42);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->cgroup.pod_uid, other);
  EXPECT_EQ(b->start_time, 200u);
  // Same start time: the cached mapping (not re-read: a cgroup edit would not show).
  proc.Set(42, 200, "0::/system.slice/x.service\n");
  EXPECT_TRUE(r.Resolve(42).ok());
  proc.Remove(42);
  auto c = r.Resolve(42);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  // A host process is "not found" in Kubernetes terms.
  proc.Set(7, 5, "0::/system.slice/sshd.service\n");
  EXPECT_EQ(r.Resolve(7).status().code(), StatusCode::kNotFound);
}

TEST(KillIfSame, ChecksTheStartTimeBeforeSignalling) {
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ProcReader reader;
  auto start = reader.StartTime(static_cast<uint32_t>(child));
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  // A different start time (a reused PID): nothing is sent.
  Status wrong = KillIfSame(reader, static_cast<uint32_t>(child), *start + 1);
  EXPECT_EQ(wrong.code(), StatusCode::kNotFound) << wrong.ToString();
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0);  // still running
  ASSERT_TRUE(KillIfSame(reader, static_cast<uint32_t>(child), *start).ok());
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(KillIfSame(reader, static_cast<uint32_t>(child), *start).code(), StatusCode::kNotFound);
  EXPECT_EQ(KillIfSame(reader, 1, 0).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fracgpu::enforce
