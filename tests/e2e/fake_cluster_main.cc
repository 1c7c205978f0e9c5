// fake-cluster: the sandbox's whole cluster on 127.0.0.1, long-running (`make sandbox`,
// scripts/sandbox.sh, docs/e2e.md "Sandbox"). Built from the end-to-end harness (cluster.h):
//
//   fake-cluster [--ready-file PATH] [--dir DIR] [--user NAME]
//
// starts the fake API server (tokens, the fracgpu webhook as pod admission, plus Kubeflow's
// Notebook CRD kubeflow.org/v1 and SubjectAccessReviews), `fracgpu scheduler`, the
// kube-scheduler stand-in, one NodeAgent (device plugin over the fake NVML + fake kubelet) per
// GPU node, and Kubeflow's notebook controller stand-in (notebook_controller.h). The cluster:
//
//   node-a  2 GPUs × 40960 MiB; GPU 1 holds team-b/train (30720 MiB)
//   node-b  1 GPU  × 15360 MiB; holds team-a/infer (10000 MiB, 50 % of the SMs)
//   node-c  3 GPUs × 81920 MiB; GPU 0 holds team-a/nb-old (20480 MiB, 30 %) and team-c/etl
//           (8192 MiB, 20 %); GPU 2 is cordoned (hami.io/device-cordon)
//   node-d  no GPUs
//   node-e  1 GPU  × 1024 MiB whose agent parks (`fracgpu monitor --park`, idle 1 s): the
//           parking demo below
//
// The four slices are real pods, created as user alice through admission, pinned to their GPU
// with nvidia.com/use-gpuuuid, placed by the scheduler and running. A container without args
// runs vgpu_app `init info wait` (it prints what cuMemGetInfo reports under libvgpu.so and
// stays up). Then it runs issue 36's journey once on node-e (tests/e2e/park_journey.h,
// docs/reclaim.md): team-a/nb-idle (opted in to parking, its slice the whole GPU, 768 MiB held)
// goes idle, the borrower team-a/batch-borrow (512 MiB) waits, the agent parks the notebook and
// lends its memory, the borrower runs on it, and the notebook's next CUDA call wakes it: the
// borrower is evicted, the notebook's bytes come back; it prints each step and the wake's
// latency. Then it prints one line per step of every new pod's journey (journey_printer.h)
// and, when ready, writes PATH (written whole, then renamed into place):
//
//   api=http://127.0.0.1:<port>
//   ui_kubeconfig=<a kubeconfig for `fracgpu ui`, with the UI's token>
//   user=<NAME>
//
// SANDBOX-ONLY SIMPLIFICATION: every SubjectAccessReview about kubeflow.org notebooks for user
// NAME (default alice) is allowed, in every namespace; any other review is denied. A real
// cluster answers them from RBAC.
//
//   fake-cluster gateway --to URL [--user NAME] [--ready-file PATH]
//
// stands in for Kubeflow's auth gateway: serves 127.0.0.1:<free port>, forwards every request
// to URL with header `kubeflow-userid: NAME` (replacing any the client sent), as the gateway
// does for a signed-in user; PATH gets "url=http://127.0.0.1:<port>".
//
// Both run until stdin closes or SIGTERM / SIGINT, then stop every child and remove DIR
// (default: a new /tmp/fge2e-XXXXXX). Only 127.0.0.1 is listened on.
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster.h"
#include "journey_printer.h"
#include "k8s/objects.h"
#include "notebook_controller.h"
#include "park_journey.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;

constexpr const char* kUiToken = "token-sandbox-ui";
constexpr const char* kUiUser = "system:serviceaccount:kubeflow:fracgpu-ui";
constexpr const char* kControllerToken = "token-notebook-controller";
constexpr const char* kControllerUser =
    "system:serviceaccount:kubeflow:notebook-controller-service-account";
constexpr const char* kNarratorToken = "token-sandbox-narrator";
constexpr const char* kNarratorUser = "system:serviceaccount:kube-system:sandbox-narrator";

std::mutex g_out_mu;
void Say(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_out_mu);
  std::cout << line << '\n' << std::flush;
}

int Usage(const std::string& problem) {
  std::cerr << "fake-cluster: " << problem << "\n"
            << "usage: fake-cluster [--ready-file PATH] [--dir DIR] [--user NAME]\n"
            << "       fake-cluster gateway --to URL [--user NAME] [--ready-file PATH]\n";
  return 2;
}

// ---- stop on stdin EOF or SIGTERM / SIGINT ----

int g_signal_pipe[2] = {-1, -1};
void OnSignal(int) {
  char b = 1;
  ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  (void)n;
}

void InstallStopSignals() {
  if (::pipe(g_signal_pipe) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

// Blocks until stdin reaches EOF (or fails) or a stop signal arrives.
void WaitForStop() {
  char buf[256];
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    int n = ::poll(fds, g_signal_pipe[0] >= 0 ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0) {
      ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
      if (got <= 0) return;
    }
  }
}

// Writes `text` to `path` whole (a temporary beside it, renamed into place).
bool WriteReadyFile(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

// ---- the cluster ----

struct Seed {
  std::string ns, name, uuid;
  int64_t mib = 0;
  int cores = -1;  // -1: not set
};

constexpr const char* kParkNode = "node-e";

std::vector<std::pair<std::string, std::vector<GpuSpec>>> SandboxNodes() {
  auto gpu = [](const char* uuid, int64_t mib) { return GpuSpec{uuid, mib}; };
  return {{"node-a",
           {gpu("GPU-aaaa0000-0000-4000-8000-000000000000", 40960),
            gpu("GPU-aaaa0001-0000-4000-8000-000000000000", 40960)}},
          {"node-b", {gpu("GPU-bbbb0000-0000-4000-8000-000000000000", 15360)}},
          {"node-c",
           {gpu("GPU-cccc0000-0000-4000-8000-000000000000", 81920),
            gpu("GPU-cccc0001-0000-4000-8000-000000000000", 81920),
            gpu("GPU-cccc0002-0000-4000-8000-000000000000", 81920)}},
          {kParkNode, {gpu("GPU-eeee0000-0000-4000-8000-000000000000", 1024)}}};
}
constexpr const char* kGpuLessNode = "node-d";
constexpr const char* kCordonedNode = "node-c";
constexpr const char* kCordonedGpu = "GPU-cccc0002-0000-4000-8000-000000000000";

std::vector<Seed> SandboxSeeds() {
  return {{"team-b", "train", "GPU-aaaa0001-0000-4000-8000-000000000000", 30720, -1},
          {"team-a", "infer", "GPU-bbbb0000-0000-4000-8000-000000000000", 10000, 50},
          {"team-a", "nb-old", "GPU-cccc0000-0000-4000-8000-000000000000", 20480, 30},
          {"team-c", "etl", "GPU-cccc0000-0000-4000-8000-000000000000", 8192, 20}};
}

json SeedPod(const Seed& s) {
  json limits = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(s.mib)}};
  if (s.cores >= 0) limits["nvidia.com/gpucores"] = std::to_string(s.cores);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", s.name},
            {"namespace", s.ns},
            {"annotations", {{"nvidia.com/use-gpuuuid", s.uuid}}}}},
          {"spec",
           {{"containers", json::array({{{"name", s.name},
                                         {"image", "nvcr.io/nvidia/cuda:12.4.1-base"},
                                         {"resources", {{"limits", limits}}}}})}}}};
}

int RunCluster(const std::string& ready_file, const std::string& dir, const std::string& user) {
  InstallStopSignals();
  ClusterOptions options;
  options.nodes = SandboxNodes();
  // `fracgpu scheduler`'s own defaults (and the UI preview's, --gpu-scheduler-policy spread).
  options.node_policy = "binpack";
  options.gpu_policy = "spread";
  options.extra_tokens = {
      {kUiToken, kUiUser}, {kControllerToken, kControllerUser}, {kNarratorToken, kNarratorUser}};
  options.dir = dir;
  options.default_container_args = {"init", "info", "wait"};
  options.park_idle_s = 1;
  options.park_nodes = {kParkNode};
  Say("fake cluster: starting the fake API server, fracgpu scheduler, the kube-scheduler stand-in "
      "and a device "
      "plugin + fake kubelet per GPU node (fake NVML) ...");
  Cluster cluster(options);
  cluster.api().AddResource(fakes::kNotebookResource);
  cluster.api().SetAccessReviewer([user](const json& spec) {
    const json ra = spec.value("resourceAttributes", json::object());
    const std::string who = spec.value("user", "");
    const std::string verb = ra.is_object() ? ra.value("verb", "") : "";
    const std::string ns = ra.is_object() ? ra.value("namespace", "") : "";
    const bool notebooks = ra.is_object() && ra.value("group", "") == "kubeflow.org" &&
                           ra.value("resource", "") == "notebooks";
    fakes::AccessDecision d;
    d.allowed = notebooks && who == user;
    d.reason = d.allowed
                   ? "sandbox: " + user + " is the signed-in user, allowed every notebooks request"
                   : "sandbox: only " + user + "'s notebooks requests are allowed";
    // Creates and denials only: the form lists the user's notebooks often, each after a review.
    if (verb == "create" || !d.allowed) {
      Say("API server: SubjectAccessReview: may " + who + " " + verb + " notebooks in " + ns +
          "? " + (d.allowed ? "allowed" : "denied") + " (" + d.reason + ")");
    }
    return d;
  });
  std::string error;
  if (!cluster.Start(&error)) {
    std::cerr << "fake-cluster: the cluster did not start: " << error << "\n";
    return 1;
  }
  cluster.api().Put("nodes",
                    {{"metadata", {{"name", kGpuLessNode}, {"labels", {{"gpu", "off"}}}}},
                     {"status", {{"capacity", {{"cpu", "8"}}}, {"allocatable", {{"cpu", "8"}}}}}});
  cluster.api().Patch("nodes", "", kCordonedNode,
                      {{"metadata", {{"annotations", {{"hami.io/device-cordon", kCordonedGpu}}}}}});

  JourneyPrinter printer(&cluster, options.nodes, Say);
  if (!printer.Start(kNarratorToken, &error)) {
    std::cerr << "fake-cluster: " << error << "\n";
    return 1;
  }
  printer.SetQuiet(true);
  Say("fake cluster: 5 nodes, 7 fake GPUs:");
  for (const auto& [node, gpus] : options.nodes) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      Say("  " + printer.DescribeGpu(gpus[i].uuid) +
          (gpus[i].uuid == kCordonedGpu ? " cordoned" : ""));
    }
  }
  Say("  " + std::string(kGpuLessNode) + " no GPUs");
  Say("fake cluster: seeding 4 running slices (pods created as alice through the webhook, pinned "
      "with "
      "nvidia.com/use-gpuuuid):");
  for (const auto& seed : SandboxSeeds()) {
    HttpResult r = cluster.CreatePod(SeedPod(seed));
    if (r.status != 201) {
      std::cerr << "fake-cluster: seed pod " << seed.ns << "/" << seed.name << " refused: HTTP "
                << r.status << " " << r.body.dump() << "\n";
      return 1;
    }
    if (!cluster.WaitRunning(seed.ns, seed.name)) {
      auto pod = cluster.Pod(seed.ns, seed.name);
      std::cerr << "fake-cluster: seed pod " << seed.ns << "/" << seed.name
                << " is not Running within 30 s: " << (pod ? pod->dump() : "gone")
                << "\nscheduler log:\n"
                << cluster.SchedulerLog() << "\n";
      return 1;
    }
  }
  NotebookControllerHooks hooks;
  hooks.say = Say;
  hooks.on_pod = [&printer](const json& pod) { printer.OnPod(pod); };
  NotebookController controller(cluster.api().url(), kControllerToken, hooks);
  if (!controller.Start(&error)) {
    std::cerr << "fake-cluster: " << error << "\n";
    return 1;
  }
  // Each seed's line comes from the pod watch; these calls return once it is printed (by the
  // watch or by them), so no seed line interleaves with what follows.
  for (const auto& seed : SandboxSeeds()) {
    if (auto pod = cluster.Pod(seed.ns, seed.name)) printer.OnPod(*pod);
  }
  printer.SetQuiet(false);
  Say("fake cluster: parking demo on " + std::string(kParkNode) +
      " (docs/reclaim.md): a notebook opted in to parking goes idle, a borrower waits for its "
      "memory, the node's agent parks the notebook and lends the memory, the borrower runs on it, "
      "and the notebook's next CUDA call wakes it");
  ParkJourneyOptions park;
  park.ns = "team-a";
  park.notebook = "nb-idle";
  park.borrower = "batch-borrow";
  park.node = kParkNode;
  park.hold_mib = 768;
  park.borrow_mib = 512;
  const ParkJourney j = RunParkJourney(cluster, park);
  if (!j.failed.empty()) {
    std::cerr << "fake-cluster: the parking demo failed at: " << j.failed << "\n";
    return 1;
  }
  char wake[160];
  std::snprintf(wake, sizeof wake, "%.1f ms", j.wake_ms);
  Say("container: team-a/nb-idle/main: its first CUDA call after idle (a 4 KiB read) waited " +
      std::string(wake) + " for the wake (the borrower evicted first); the bytes it wrote " +
      (j.bytes_intact ? "came back intact" : "did NOT come back") + ", its charge " +
      (j.charged_after == j.charged_before ? "unchanged" : "CHANGED") + " (" +
      std::to_string(j.charged_after / (1024 * 1024)) + " MiB)");
  const std::string kubeconfig = cluster.WriteKubeconfig("ui", kUiToken);
  if (!WriteReadyFile(ready_file, "api=" + cluster.api().url() + "\nui_kubeconfig=" + kubeconfig +
                                      "\nuser=" + user + "\n")) {
    std::cerr << "fake-cluster: cannot write --ready-file " << ready_file << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  Say("fake cluster: ready; the fake API server is " + cluster.api().url() +
      " (with kubeflow.org/v1 notebooks and authorization.k8s.io/v1 subjectaccessreviews)");
  WaitForStop();
  Say("fake cluster: stopping");
  controller.Stop();
  printer.Stop();
  return 0;
}

// ---- the auth gateway ----

int RunGateway(const std::string& to, const std::string& user, const std::string& ready_file) {
  InstallStopSignals();
  httplib::Server server;
  auto forward = [to, user](const httplib::Request& req, httplib::Response& res) {
    httplib::Client upstream(to);
    upstream.set_read_timeout(60, 0);
    httplib::Headers headers;
    for (const auto& [k, v] : req.headers) {
      std::string lower = k;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower == "kubeflow-userid" || lower == "host" || lower == "content-length" ||
          lower == "connection" || lower == "content-type" || lower == "remote_addr" ||
          lower == "remote_port" || lower == "local_addr" || lower == "local_port") {
        continue;
      }
      headers.emplace(k, v);
    }
    headers.emplace("kubeflow-userid", user);
    const std::string target = req.target.empty() ? req.path : req.target;
    const std::string type = req.get_header_value("Content-Type");
    httplib::Result r =
        req.method == "GET"     ? upstream.Get(target.c_str(), headers)
        : req.method == "POST"  ? upstream.Post(target.c_str(), headers, req.body, type.c_str())
        : req.method == "PUT"   ? upstream.Put(target.c_str(), headers, req.body, type.c_str())
        : req.method == "PATCH" ? upstream.Patch(target.c_str(), headers, req.body, type.c_str())
                                : upstream.Delete(target.c_str(), headers, req.body, type.c_str());
    if (!r) {
      res.status = 502;
      res.set_content("gateway: " + to + " did not answer: " + httplib::to_string(r.error()) + "\n",
                      "text/plain");
      return;
    }
    res.status = r->status;
    res.set_content(r->body, r->get_header_value("Content-Type").c_str());
  };
  server.Get(R"(/.*)", forward);
  server.Post(R"(/.*)", forward);
  server.Put(R"(/.*)", forward);
  server.Patch(R"(/.*)", forward);
  server.Delete(R"(/.*)", forward);
  int port = server.bind_to_any_port("127.0.0.1");
  if (port <= 0) {
    std::cerr << "fake-cluster gateway: cannot listen on 127.0.0.1\n";
    return 1;
  }
  std::thread serving([&] { server.listen_after_bind(); });
  fakes::WaitUntilRunning(server);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  if (!WriteReadyFile(ready_file, "url=" + url + "\n")) {
    std::cerr << "fake-cluster gateway: cannot write --ready-file " << ready_file << ": "
              << std::strerror(errno) << "\n";
    server.stop();
    serving.join();
    return 1;
  }
  WaitForStop();
  server.stop();
  serving.join();
  return 0;
}

}  // namespace
}  // namespace fracgpu::e2e

int main(int argc, char** argv) {
  using fracgpu::e2e::Usage;
  std::vector<std::string> args(argv + 1, argv + argc);
  bool gateway = !args.empty() && args[0] == "gateway";
  if (gateway) args.erase(args.begin());
  std::string ready_file, dir, user = "alice", to;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag != "--ready-file" && flag != "--dir" && flag != "--user" && flag != "--to") {
      return Usage("unknown argument \"" + flag + "\"");
    }
    if (i + 1 >= args.size() || args[i + 1].empty()) return Usage(flag + " needs a value");
    const std::string& value = args[++i];
    if (flag == "--ready-file") ready_file = value;
    if (flag == "--dir") dir = value;
    if (flag == "--user") user = value;
    if (flag == "--to") to = value;
  }
  if (gateway) {
    if (to.rfind("http://127.0.0.1:", 0) != 0)
      return Usage("gateway --to must be http://127.0.0.1:<port>, got \"" + to + "\"");
    if (!dir.empty()) return Usage("gateway takes no --dir");
    return fracgpu::e2e::RunGateway(to, user, ready_file);
  }
  if (!to.empty()) return Usage("--to is for the gateway (fake-cluster gateway --to URL)");
  return fracgpu::e2e::RunCluster(ready_file, dir, user);
}
