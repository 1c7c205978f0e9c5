// ui_browser_harness: runs one Playwright browser test (tests/browser/*.test.mjs) against a real
// `fracgpu ui` process and the fake API server.
//
//   ui_browser_harness --fracgpu BIN --node NODE --chromium CHROMIUM --seed seed.json
//                      --web-dir DIR --artifacts DIR --script X.test.mjs [--ui-flag FLAG]
//
// 1. Starts the fake API server (tests/fakes/apiserver) seeded with seed.json's "nodes" and
//    "pods", and in front of it the SubjectAccessReview/Notebook handler of tests/ui
//    (authz_notebooks.h) with seed.json's "allow" list ([{"user","verb","namespace"}]).
// 2. Starts `fracgpu ui --listen 127.0.0.1:0` with a kubeconfig pointing at that handler and
//    reads the bound URL from its "fracgpu ui on <url>" log line; --ui-flag adds one flag
//    without a value (e.g. --dashboard-only).
// 3. Runs `node <script>` with FRACGPU_UI_URL, FRACGPU_API_URL, FRACGPU_SEED,
//    FRACGPU_ARTIFACT_DIR and FRACGPU_CHROMIUM in its environment; the script drives Chromium
//    with playwright-core and reads what the API side received from FRACGPU_API_URL
//    (FRACGPU_FAKE_API_URL is the fake API server itself, for a script that patches a node).
// 4. Stops `fracgpu ui` with SIGTERM; the test passes when the script exits 0 and `fracgpu ui`
//    exits 0 (under ASan a leak or error report makes that exit non-zero).
//
// Missing tools are a failure with a message saying what to install, never a silent skip:
// the test is registered because chromium is listed in scripts/deps/ui.txt.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "authz_notebooks.h"
#include "fake_apiserver.h"

extern char** environ;

namespace fracgpu::ui::browser {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr auto kUiStartTimeout =
    std::chrono::seconds(60);  // ASan builds start slowly on 2 busy cores
constexpr auto kScriptTimeout = std::chrono::seconds(200);  // below CTest's 240 s per test

int Fail(const std::string& message) {
  std::cerr << "ui_browser_harness: FAIL: " << message << std::endl;
  return 1;
}

bool Executable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

// Starts `argv` with `env` (KEY=VALUE strings appended to ours); stdout+stderr go to `out_fd`
// when >= 0. The child gets SIGTERM if the harness dies (CTest's timeout kills the harness
// with SIGKILL), so no `fracgpu ui` or browser outlives a test. Returns the pid or -1.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd) {
  // Everything is prepared before fork(): between fork and exec only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "ui_browser_harness: fork failed: " << std::strerror(errno) << std::endl;
    return -1;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the harness is already gone
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    if (out_fd >= 0) {
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(out_fd, STDERR_FILENO);
    }
    ::execve(args[0], args.data(), envp.data());
    static const char kMsg[] = "ui_browser_harness: exec failed\n";
    ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    (void)ignored;
    ::_exit(127);
  }
  return pid;
}

// waitpid in a thread so the main thread can wait with a deadline (no polling sleeps).
class Child {
 public:
  explicit Child(pid_t pid)
      : pid_(pid), waiter_([this] {
          int status = 0;
          while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
          }
          std::lock_guard<std::mutex> lock(mu_);
          status_ = status;
          cv_.notify_all();
        }) {}
  ~Child() {
    Kill(SIGKILL);
    waiter_.join();
  }
  /// The wait status, or nullopt when it has not exited within `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return status_.has_value(); });
    return status_;
  }
  void Kill(int sig) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_) ::kill(pid_, sig);
  }

 private:
  pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int> status_;
  std::thread waiter_;
};

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Reads `fracgpu ui`'s output line by line, echoing it to stderr; hands over the URL of its
// "fracgpu ui on <url>" line.
class UiOutput {
 public:
  explicit UiOutput(int fd) : fd_(fd), reader_([this] { Read(); }) {}
  ~UiOutput() {
    reader_.join();
    ::close(fd_);
  }
  std::optional<std::string> WaitForUrl(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return url_.has_value() || eof_; });
    return url_;
  }

 private:
  void Read() {
    std::string line;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != '\n') {
          line.push_back(buf[i]);
          continue;
        }
        std::cerr << "[fracgpu ui] " << line << "\n";
        static const std::string kMarker = "fracgpu ui on ";
        if (auto at = line.find(kMarker); at != std::string::npos) {
          std::string rest = line.substr(at + kMarker.size());
          std::lock_guard<std::mutex> lock(mu_);
          url_ = rest.substr(0, rest.find(' '));
          cv_.notify_all();
        }
        line.clear();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    eof_ = true;
    cv_.notify_all();
  }

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> url_;
  bool eof_ = false;
  std::thread reader_;
};

int Run(const std::map<std::string, std::string>& flags) {
  for (const char* f :
       {"--fracgpu", "--node", "--chromium", "--seed", "--web-dir", "--artifacts", "--script"}) {
    if (!flags.count(f) || flags.at(f).empty()) return Fail(std::string("missing flag ") + f);
  }
  const std::string script = flags.at("--script");
  const fs::path browser_dir = fs::path(script).parent_path();
  // Everything the test needs, each with how to get it.
  if (!Executable(flags.at("--fracgpu")))
    return Fail("no fracgpu binary at " + flags.at("--fracgpu") + " (build target fracgpu)");
  if (!Executable(flags.at("--node"))) {
    return Fail("Node.js not found (\"" + flags.at("--node") +
                "\"): install Debian package nodejs (scripts/install-deps.sh)");
  }
  if (!Executable(flags.at("--chromium"))) {
    return Fail("chromium not found at " + flags.at("--chromium") +
                ": install Debian package chromium (scripts/install-deps.sh)");
  }
  if (!fs::exists(browser_dir / "node_modules" / "playwright-core" / "package.json")) {
    return Fail("npm package playwright-core is not installed in " +
                (browser_dir / "node_modules").string() +
                ": run scripts/deps/ui-npm.sh (npm ci in tests/browser)");
  }
  std::ifstream seed_in(flags.at("--seed"));
  json seed = json::parse(seed_in, nullptr, false);
  if (!seed.is_object()) return Fail("seed " + flags.at("--seed") + " is not a JSON object");

  fakes::FakeApiServer fake;
  if (fake.port() <= 0) return Fail("fake API server cannot listen");
  for (const char* resource : {"nodes", "pods"}) {
    for (const auto& obj : seed.value(resource, json::array())) fake.Put(resource, obj);
  }
  uitest::AuthzAndNotebooks authz(fake);
  for (const auto& a : seed.value("allow", json::array())) {
    authz.Allow(a.value("user", ""), a.value("verb", ""), a.value("namespace", ""));
  }

  // A kubeconfig for `fracgpu ui` pointing at the handler (plain HTTP, no credentials).
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path() / ("fracgpu-ui-browser-" + std::to_string(::getpid()));
  fs::create_directories(tmp, ec);
  const fs::path kubeconfig = tmp / "kubeconfig";
  {
    std::ofstream k(kubeconfig);
    k << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: "
      << authz.url()
      << "\nusers:\n- name: ui\n  user: {}\ncontexts:\n- name: fake\n  context:\n    cluster: "
         "fake\n    user: ui\n"
      << "current-context: fake\n";
  }
  std::string images;
  for (const auto& i : seed.value("images", json::array()))
    images += (images.empty() ? "" : ",") + i.get<std::string>();

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Fail("pipe failed");
  std::vector<std::string> ui_argv = {flags.at("--fracgpu"),
                                      "ui",
                                      "--listen",
                                      "127.0.0.1:0",
                                      "--kubeconfig",
                                      kubeconfig.string(),
                                      "--web-dir",
                                      flags.at("--web-dir"),
                                      "--cluster-cache-ms",
                                      "0"};
  if (!images.empty()) ui_argv.insert(ui_argv.end(), {"--images", images});
  if (flags.count("--ui-flag")) ui_argv.push_back(flags.at("--ui-flag"));
  pid_t ui_pid = Spawn(ui_argv, {}, pipe_fds[1]);
  ::close(pipe_fds[1]);
  if (ui_pid < 0) {
    ::close(pipe_fds[0]);
    return Fail("cannot start fracgpu ui");
  }
  int rc = 0;
  {
    UiOutput ui_out(pipe_fds[0]);
    Child ui(ui_pid);
    auto url = ui_out.WaitForUrl(kUiStartTimeout);
    if (!url) {
      rc = Fail("fracgpu ui did not report its URL within 60 s");
    } else {
      fs::create_directories(flags.at("--artifacts"), ec);
      pid_t node_pid =
          Spawn({flags.at("--node"), script},
                {"FRACGPU_UI_URL=" + *url, "FRACGPU_API_URL=" + authz.url(),
                 "FRACGPU_FAKE_API_URL=" + fake.url(), "FRACGPU_SEED=" + flags.at("--seed"),
                 "FRACGPU_ARTIFACT_DIR=" + flags.at("--artifacts"),
                 "FRACGPU_CHROMIUM=" + flags.at("--chromium"), "FRACGPU_TMP=" + tmp.string()},
                -1);
      if (node_pid < 0) {
        rc = Fail("cannot start node");
      } else {
        Child node(node_pid);
        auto status = node.Wait(kScriptTimeout);
        if (!status) {
          node.Kill(SIGTERM);  // Playwright closes its browser on SIGTERM
          node.Wait(std::chrono::seconds(10));
          rc = Fail(script + " did not finish within 200 s");
        } else if (*status != 0) {
          rc = Fail(script + " failed (" + DescribeStatus(*status) + ")");
        }
      }
    }
    ui.Kill(SIGTERM);
    auto ui_status = ui.Wait(std::chrono::seconds(30));
    if (!ui_status) {
      rc = Fail("fracgpu ui did not stop within 30 s of SIGTERM");
    } else if (*ui_status != 0) {
      rc = Fail("fracgpu ui ended with " + DescribeStatus(*ui_status));
    }
  }
  fs::remove_all(tmp, ec);
  if (rc == 0) std::cerr << "ui_browser_harness: PASS " << script << std::endl;
  return rc;
}

}  // namespace
}  // namespace fracgpu::ui::browser

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  if (argc % 2 != 1) return fracgpu::ui::browser::Fail("flags come in pairs: --name value");
  ::signal(SIGPIPE, SIG_IGN);
  return fracgpu::ui::browser::Run(flags);
}
