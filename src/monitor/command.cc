// `fracgpu monitor`: one per GPU node (beside the device plugin). Thin main (docs/design/STYLE.md):
// flags → Monitor (monitor.h), a poll loop, and /metrics on the HTTP server, until SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/limits.h"
#include "base/clock.h"
#include "base/host_port.h"
#include "base/signals.h"
#include "base/strings.h"
#include "enforce/nvml_processes.h"
#include "http/server.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "metrics/hami.h"
#include "monitor/agent_loop.h"
#include "monitor/borrowers.h"
#include "monitor/enforcement.h"
#include "monitor/idle_holders.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"
#include "monitor/park_host.h"
#include "monitor/parking.h"
#include "monitor/priority.h"

#ifndef FRACGPU_MONITOR_VERSION
#define FRACGPU_MONITOR_VERSION "0.0.0"
#endif

namespace fracgpu::cli {
namespace {

struct Flags {
  std::string node_name;
  std::string hook_path = "/usr/local";
  std::string node_dir = api::HostNodeDir("/usr/local");  // follows hook_path unless given
  std::string listen = "0.0.0.0:9394";
  int port = -1;              // the deprecated --port (-1: not given)
  bool listen_given = false;  // --listen on the command line (else its default)
  double interval_s = monitor::kDefaultIntervalS;
  double orphan_grace_s = 300;
  bool no_remove = false;
  bool no_apiserver = false;
  bool hami_metrics = true;
  bool legacy_metrics = false;
  std::string kubeconfig;
  std::string nvml_library = "libnvidia-ml.so.1";
  bool once = false;
  double priority_interval_s = 0.01;  // node files for CUDA_TASK_PRIORITY (monitor/priority.h)
  // Enforcement (docs/enforcement.md).
  double enforce_interval_s = monitor::kDefaultEnforceIntervalS;
  std::string enforce_memory = "kill";
  std::string enforce_mismatch = "report";
  std::string enforce_unmanaged = "kill";
  int enforce_confirm_polls = monitor::kDefaultConfirmPolls;
  double enforce_memory_slack_mib = monitor::kDefaultMemorySlackMiB;
  std::string proc_root = "/proc";
  bool no_enforce = false;
  // Parking idle containers (issue 36; docs/reclaim.md, docs/monitor.md "Parking").
  bool park = false;
  double park_idle_s = 1800;
  std::vector<std::string> park_namespaces;
  std::vector<std::string> park_drivers;
  double park_interval_s = 0.2;
  unsigned park_lock_timeout_ms = 500;
  double park_lend_interval_s = 30;
  double park_reclaim_timeout_s = 60;
  std::string cuda_library = "libcuda.so.1";
  std::string cgroup_root = "/sys/fs/cgroup";
};

// A namespace name: a DNS label (RFC 1123), as Kubernetes validates it.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// A driver allow-list entry: an NVML driver version ("580.95.05") or a prefix ending in '.'.
bool IsDriverEntry(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  return true;
}

// The parking flags, checked with the others (usage errors); the options they make.
monitor::ParkingOptions ParkingFlags(const Flags& f) {
  monitor::ParkingOptions o;
  if (!f.park) return o;
  if (f.no_apiserver)
    throw CLI::ValidationError(
        "--park needs the API server (pods opt in by annotation; a borrower is a pending pod): "
        "not with --no-apiserver");
  if (f.park_drivers.empty())
    throw CLI::ValidationError(
        "--park needs --park-drivers: the NVIDIA driver versions (or prefixes such as 580.) "
        "whose checkpoint API may park a container; an empty allow-list parks nothing");
  for (const std::string& d : f.park_drivers) {
    if (!IsDriverEntry(d))
      throw CLI::ValidationError("--park-drivers: '" + d.substr(0, 64) +
                                 "' is not a driver version or a prefix ending in '.' (digits "
                                 "and dots, at most 32)");
  }
  for (const std::string& n : f.park_namespaces) {
    if (!IsDnsLabel(n))
      throw CLI::ValidationError("--park-namespaces: '" + n.substr(0, 64) +
                                 "' is not a namespace name (a DNS label)");
  }
  if (f.cuda_library.empty()) throw CLI::ValidationError("--cuda-library: empty");
  if (f.cgroup_root.empty() || f.cgroup_root[0] != '/')
    throw CLI::ValidationError("--cgroup-root: '" + f.cgroup_root.substr(0, 256) +
                               "' is not an absolute path");
  o.idle_after = std::chrono::nanoseconds(static_cast<int64_t>(f.park_idle_s * 1e9));
  o.default_namespaces.insert(f.park_namespaces.begin(), f.park_namespaces.end());
  o.allowed_drivers = f.park_drivers;
  o.lock_timeout_ms = f.park_lock_timeout_ms;
  o.reclaim_timeout =
      std::chrono::nanoseconds(static_cast<int64_t>(f.park_reclaim_timeout_s * 1e9));
  return o;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A failure after the flags were accepted: `fracgpu monitor: <message>`, exit 1.
int Fail(const std::string& message) {
  std::fprintf(stderr, "fracgpu monitor: %s\n", message.c_str());
  return 1;
}

// Every flag is checked first, before NVML is opened or the cluster read (usage errors:
// CLI::ValidationError, exit 2 as `fracgpu monitor: <message>`, src/cli/usage.h).
int Run(const Flags& f) {
  if (f.node_name.empty() && !f.no_apiserver) {
    throw CLI::ValidationError("--node-name (or NODE_NAME) is required unless --no-apiserver");
  }
  // --listen host:port; the old --listen HOST with --port PORT is still read.
  // The old form's --listen is a bare host: IPv4, a name, or an IPv6 address ("::", "[::1]").
  auto names_port = [](const std::string& l) {
    if (!l.empty() && l[0] == '[') return l.find("]:") != std::string::npos;
    return std::count(l.begin(), l.end(), ':') == 1;
  };
  auto with_port = [](std::string host, int p) {
    if (host.find(':') != std::string::npos && host[0] != '[') host = "[" + host + "]";
    return host + ":" + std::to_string(p);
  };
  std::string listen_text = f.listen;
  if (f.port >= 0 && !f.listen_given) {
    listen_text = with_port("0.0.0.0", f.port);  // --port alone: the old default host
  } else if (!names_port(f.listen)) {
    listen_text = with_port(f.listen, f.port >= 0 ? f.port : 9394);
  } else if (f.port >= 0) {
    throw CLI::ValidationError("--listen " + f.listen +
                               " names its port; the deprecated --port must not be given too");
  }
  auto listen = base::ParseHostPort(listen_text);
  if (!listen.ok()) throw CLI::ValidationError("--listen " + listen.status().message());
  monitor::EnforcementOptions eo;
  eo.hook_path = f.hook_path;
  eo.proc_root = f.proc_root;
  eo.policy.confirm_polls = f.enforce_confirm_polls;
  eo.policy.memory_slack_bytes = static_cast<uint64_t>(f.enforce_memory_slack_mib * 1024 * 1024);
  if (!enforce::ParseAction(f.enforce_memory, &eo.policy.memory) ||
      !enforce::ParseAction(f.enforce_mismatch, &eo.policy.region_mismatch) ||
      !enforce::ParseAction(f.enforce_unmanaged, &eo.policy.unmanaged)) {
    throw CLI::ValidationError(
        "--enforce-memory/--enforce-mismatch/--enforce-unmanaged: none, report or kill");
  }
  if (std::string bad = metrics::CheckHamiMetricFlags(f.hami_metrics, f.legacy_metrics);
      !bad.empty()) {
    throw CLI::ValidationError(bad);
  }
  const monitor::ParkingOptions parking = ParkingFlags(f);
  if (std::string warning = monitor::MissingContainersWarning(f.hook_path); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  monitor::MonitorOptions options;
  options.node_name = f.node_name;
  options.hook_path = f.hook_path;
  options.node_dir = f.node_dir;
  options.orphan_grace = std::chrono::nanoseconds(static_cast<int64_t>(f.orphan_grace_s * 1e9));
  options.remove_orphans = !f.no_remove;
  options.hami_metric_names = f.hami_metrics;
  options.legacy_metric_names = f.legacy_metrics;
  options.version = FRACGPU_MONITOR_VERSION;

  std::unique_ptr<monitor::NvmlGpuStats> nvml;
  if (auto n = monitor::NvmlGpuStats::Open(f.nvml_library); n.ok()) {
    nvml = std::move(*n);
  } else {
    // Still useful without NVML (region metrics); the error is logged and per-GPU metrics absent.
    spdlog::warn("{} (per-GPU metrics off)", n.status().ToString());
  }
  std::unique_ptr<k8s::Client> client;
  std::unique_ptr<monitor::K8sPodLister> pods;
  if (!f.no_apiserver) {
    auto c = k8s::Connect(f.kubeconfig);
    if (!c.ok()) return Fail(c.status().ToString());
    client = std::move(*c);
    pods = std::make_unique<monitor::K8sPodLister>(client.get());
  }
  monitor::Monitor mon(options, nvml.get(), pods.get());
  std::unique_ptr<enforce::NvmlProcesses> driver;
  std::unique_ptr<monitor::K8sEventSink> events;
  std::unique_ptr<monitor::NodeEnforcer> enforcer;
  if (!f.no_enforce) {
    if (auto d = enforce::NvmlProcesses::Open(f.nvml_library); d.ok()) {
      driver = std::move(*d);
      if (client) events = std::make_unique<monitor::K8sEventSink>(client.get());
      enforcer =
          std::make_unique<monitor::NodeEnforcer>(eo, driver.get(), events.get(), &mon.registry());
      spdlog::info("enforcement on: every {} s, memory {}, region mismatch {}",
                   f.enforce_interval_s, f.enforce_memory, f.enforce_mismatch);
    } else {
      // Said loudly and counted: without NVML there is no driver truth to enforce.
      spdlog::error("enforcement OFF: {}", d.status().ToString());
      mon.registry().Add("fracgpu_monitor_errors_total", {{"source", "nvml_processes"}});
    }
  }
  std::unique_ptr<monitor::PriorityPublisher> priority;
  if (!f.node_dir.empty())
    priority = std::make_unique<monitor::PriorityPublisher>(f.hook_path, f.node_dir);
  if (f.once) {
    if (priority) priority->Poll(monitor::MonotonicNowNs());
    mon.Poll(monitor::MonotonicNowNs());
    if (enforcer) enforcer->Poll(monitor::MonotonicNowNs(), mon.known_pods());
    std::fputs(mon.registry().Render().c_str(), stdout);
    return 0;
  }

  base::StopSignal stop;
  base::SignalWatcher signals(&stop);
  // Parking (--park): its own driver, NVML, API client and pod list, on its own thread (a park
  // or wake takes seconds and must not delay enforcement). Anything missing: said loudly, and
  // the monitor runs without parking (never parks blind).
  // Loaded after the SignalWatcher: the threads cuInit and nvmlInit start must have SIGTERM
  // blocked too, or one of them takes it and the process dies before the loop wakes what it parked.
  std::unique_ptr<monitor::NvmlParkFacts> park_nvml;
  std::unique_ptr<enforce::NvmlProcesses> park_processes;  // verifies the PIDs a region names
  std::unique_ptr<k8s::Client> park_client;
  std::unique_ptr<monitor::K8sPodLister> park_pods;
  std::unique_ptr<monitor::ParkController> park_controller;
  monitor::ParkHost park_host;
  monitor::ParkedSlices parked;
  if (f.park) {
    auto driver = monitor::LoadCheckpointDriver(f.cuda_library);
    auto facts = driver.ok() ? monitor::NvmlParkFacts::Open(f.nvml_library)
                             : Result<std::unique_ptr<monitor::NvmlParkFacts>>(driver.status());
    auto processes = facts.ok() ? enforce::NvmlProcesses::Open(f.nvml_library)
                                : Result<std::unique_ptr<enforce::NvmlProcesses>>(facts.status());
    auto c = processes.ok() ? k8s::Connect(f.kubeconfig)
                            : Result<std::unique_ptr<k8s::Client>>(processes.status());
    if (!c.ok()) {
      spdlog::error("parking OFF: {}", c.status().ToString());
      mon.registry().Add("fracgpu_monitor_errors_total", {{"source", "parking"}});
    } else {
      park_nvml = std::move(*facts);
      park_processes = std::move(*processes);
      park_client = std::move(*c);
      park_pods = std::make_unique<monitor::K8sPodLister>(park_client.get());
      park_host =
          monitor::MakeParkHost(std::move(*driver), park_nvml.get(), park_processes.get(),
                                f.proc_root, f.cgroup_root, api::HostLimitsDir(f.hook_path));
      // A wake without room evicts the GPU's borrowers (pods/eviction: the opt-in ClusterRole
      // fracgpu-device-plugin-parking, deploy/parking/).
      park_host.reclaim = [client = park_client.get(), node = f.node_name](
                              const std::string& uuid, uint64_t need, const std::string& owner) {
        return monitor::ReclaimFromBorrowers(*client, node, uuid, need, owner);
      };
      park_controller = std::make_unique<monitor::ParkController>(parking, park_host);
      monitor::RegisterParkingMetrics(&mon.registry(), f.node_name, &parked);
      auto join = [](const std::vector<std::string>& v) {
        return v.empty() ? std::string("none") : base::Join(v, ",");
      };
      spdlog::info("parking on: idle {} s, every {} s, drivers {}, default namespaces {}",
                   f.park_idle_s, f.park_interval_s, join(f.park_drivers), join(f.park_namespaces));
    }
  }
  http::ServerOptions http_options;
  http_options.host = listen->host;
  http_options.port = listen->port;
  http::Server server(http_options);
  server.Route("GET", "/metrics", [&mon](const http::Request&) {
    return http::Response::Text(200, mon.registry().Render(),
                                "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Route("GET", "/healthz",
               [](const http::Request&) { return http::Response::Text(200, "ok\n"); });
  if (Status st = server.Start(); !st.ok()) return Fail(st.ToString());
  spdlog::info("monitor on {} (node {}, regions under {})", server.BaseUrl(), f.node_name,
               mon.containers_root());
  // The priority files on their own thread: a slow API server or NVML call in the poll loop
  // never delays them (priority-1 containers read them every few ms).
  std::thread priority_thread;
  if (priority) {
    const auto every = std::chrono::nanoseconds(static_cast<int64_t>(f.priority_interval_s * 1e9));
    priority_thread = std::thread([&stop, &priority, every] {
      do {
        priority->Poll(monitor::MonotonicNowNs());
      } while (!stop.WaitFor(every));
    });
  }
  std::thread parking_thread;
  if (park_controller) {
    monitor::ParkingLoopSources sources;
    sources.containers_root = mon.containers_root();
    sources.node_name = f.node_name;
    sources.pods = park_pods.get();
    sources.host = &park_host;
    sources.options = &parking;
    sources.opted_in = [parking](const monitor::PodRef& pod) {
      return monitor::ParkOptedIn(&pod, parking);
    };
    sources.borrower_pending = [&park_client, node = f.node_name] {
      return monitor::PendingBorrowers(park_client.get(), node);
    };
    sources.lend = [&park_client, node = f.node_name](const std::string& value) {
      return monitor::PatchLentMemory(park_client.get(), node, value);
    };
    sources.lend_period =
        std::chrono::nanoseconds(static_cast<int64_t>(f.park_lend_interval_s * 1e9));
    const auto every = std::chrono::nanoseconds(static_cast<int64_t>(f.park_interval_s * 1e9));
    parking_thread = std::thread([&stop, &park_controller, &parked, sources, every] {
      monitor::RunParkingLoop(park_controller.get(), sources, every, &stop, &parked);
    });
  }
  // The idle-holder record (fracgpu.io/idle-holders, docs/monitor.md "Idle holders"): from
  // each metrics poll's slices, on its own thread (an API write never delays the polls).
  // Its GPUs and bytes come from the grants and NVML's process lists (an NVML of its own), never
  // from the regions alone; without NVML's processes, min(grant, region).
  std::thread idle_thread;
  std::unique_ptr<enforce::NvmlProcesses> idle_processes;
  std::unique_ptr<monitor::K8sPodLister> idle_pods;
  if (client) {
    monitor::IdleHolderOptions io;
    io.idle_after = std::chrono::nanoseconds(static_cast<int64_t>(f.park_idle_s * 1e9));
    if (auto p = enforce::NvmlProcesses::Open(f.nvml_library); p.ok()) {
      idle_processes = std::move(*p);
    } else {
      spdlog::warn("idle holders: no NVML process list ({}): held bytes from the regions",
                   p.status().ToString());
    }
    idle_pods = std::make_unique<monitor::K8sPodLister>(client.get());
    monitor::IdleHolderSources sources = monitor::MakeIdleHolderSources(
        idle_processes.get(), f.proc_root, api::HostLimitsDir(f.hook_path), idle_pods.get(),
        f.node_name);
    idle_thread =
        std::thread([&stop, &mon, &client, io, sources, node = f.node_name,
                     every = std::chrono::nanoseconds(static_cast<int64_t>(f.interval_s * 1e9))] {
          monitor::IdleHolderPublisher publisher(
              io, sources, [&client, &node](const std::string& v) {
                return monitor::PatchIdleHolders(client.get(), node, v);
              });
          while (!stop.WaitFor(every)) {
            publisher.Poll(mon.snapshot(), monitor::MonotonicNowNs(),
                           std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
          }
          publisher.Remove();
        });
  }
  monitor::AgentSchedule schedule;
  schedule.metrics_period = std::chrono::nanoseconds(static_cast<int64_t>(f.interval_s * 1e9));
  schedule.enforce_period =
      std::chrono::nanoseconds(static_cast<int64_t>(f.enforce_interval_s * 1e9));
  monitor::RunAgentLoop(&mon, enforcer.get(), schedule, &stop);
  if (priority_thread.joinable()) priority_thread.join();
  if (parking_thread.joinable()) parking_thread.join();
  if (idle_thread.joinable()) idle_thread.join();
  server.Stop();
  spdlog::info("monitor stopped");
  return 0;
}

}  // namespace

void RegisterMonitorCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  flags->node_name = Env("NODE_NAME");
  if (!Env("HOOK_PATH").empty()) flags->hook_path = Env("HOOK_PATH");
  flags->node_dir = api::HostNodeDir(flags->hook_path);
  auto* cmd =
      app.add_subcommand("monitor", "Export per-GPU and per-container-slice metrics of this node");
  cmd->add_option("--node-name", flags->node_name, "this node (env NODE_NAME)")
      ->capture_default_str();
  cmd->add_option("--hook-path", flags->hook_path,
                  "host dir holding vgpu/containers (env HOOK_PATH)")
      ->capture_default_str();
  CLI::Option* node_dir =
      cmd->add_option("--node-dir", flags->node_dir,
                      "per-GPU priority files this agent writes (\"\" = off; default "
                      "<hook-path>/vgpu/node, following --hook-path and HOOK_PATH)")
          ->capture_default_str();
  CLI::Option* listen =
      cmd->add_option("--listen", flags->listen, "host:port of /metrics")->capture_default_str();
  // The old spelling, --listen HOST --port PORT: accepted, with a deprecation line
  // (docs/development.md "The command line").
  CLI::Option* port =
      cmd->add_option("--port", flags->port)->check(CLI::Range(0, 65535))->group("");
  cmd->add_option("--interval", flags->interval_s, "seconds between polls")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--orphan-grace", flags->orphan_grace_s,
                  "seconds a directory of a pod gone from the node is kept before removal")
      ->check(CLI::Range(0.0, 86400.0 * 30))
      ->capture_default_str();
  cmd->add_flag("--no-remove", flags->no_remove, "never remove region directories");
  cmd->add_flag("--no-apiserver", flags->no_apiserver,
                "do not name pods (labels carry the pod UID); never remove");
  cmd->add_flag("--hami-metrics,--hami-metric-names", flags->hami_metrics,
                "also expose HAMi v2.10 vGPUmonitor's metric names on /metrics (hami_host_gpu_*, "
                "hami_vgpu_*, "
                "hami_container_*; --hami-metrics=false: fracgpu_* only)")
      ->capture_default_str();
  cmd->add_flag("--legacy-metrics", flags->legacy_metrics,
                "also expose HAMi's pre-v2.10 names (HostGPUMemoryUsage, "
                "vGPU_device_memory_usage_in_bytes, ...), "
                "as HAMi's --legacy-metrics does")
      ->capture_default_str();
  cmd->add_option("--kubeconfig", flags->kubeconfig, "kubeconfig (default: in-cluster)")
      ->capture_default_str();
  cmd->add_option("--nvml-library", flags->nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  cmd->add_option("--priority-interval", flags->priority_interval_s,
                  "seconds between updates of the per-GPU priority files under --node-dir "
                  "(CUDA_TASK_PRIORITY; docs/sm-limiter.md)")
      ->check(CLI::Range(0.001, 1.0))
      ->capture_default_str();
  cmd->add_flag("--once", flags->once, "poll once, print the metrics to stdout and exit");
  cmd->add_option("--enforce-interval", flags->enforce_interval_s,
                  "seconds between checks of the driver's account")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  cmd->add_option("--enforce-memory", flags->enforce_memory,
                  "over the memory limit: kill (default), report or none; pods override with "
                  "fracgpu.io/enforcement")
      ->capture_default_str();
  cmd->add_option("--enforce-mismatch", flags->enforce_mismatch,
                  "driver usage above the region's claim (bypass, edited region): report "
                  "(default), kill or none")
      ->capture_default_str();
  cmd->add_option("--enforce-unmanaged", flags->enforce_unmanaged,
                  "a process on a fracgpu GPU in no fracgpu container: kill (default; only a "
                  "process of a pod container fracgpu gave no GPU, e.g. NVIDIA_VISIBLE_DEVICES=all "
                  "without a GPU request; a host process is only reported), report or none")
      ->capture_default_str();
  cmd->add_option("--enforce-confirm-polls", flags->enforce_confirm_polls,
                  "consecutive polls a finding must persist before it is acted on")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--enforce-memory-slack", flags->enforce_memory_slack_mib,
                  "MiB of driver memory libvgpu.so cannot charge (lazily loaded kernel code, "
                  "cuCtxSetLimit heap growth) allowed above a container's limit or a process's "
                  "claim before a finding")
      ->check(CLI::Range(0.0, 65536.0))
      ->capture_default_str();
  cmd->add_option("--proc-root", flags->proc_root,
                  "the host's /proc (the DaemonSet runs with hostPID)")
      ->capture_default_str();
  cmd->add_flag("--no-enforce", flags->no_enforce, "metrics only: no driver-truth enforcement");
  cmd->add_flag("--park", flags->park,
                "park idle opted-in containers while a borrower is pending (CUDA checkpoint; "
                "docs/reclaim.md); needs --park-drivers and the API server");
  cmd->add_option("--park-idle", flags->park_idle_s,
                  "seconds without a kernel launch before a container is idle: it may be "
                  "parked (with --park) and is listed in the node's fracgpu.io/idle-holders "
                  "record when it holds at least 1 GiB")
      ->check(CLI::Range(1.0, 86400.0 * 30))
      ->capture_default_str();
  cmd->add_option("--park-namespaces", flags->park_namespaces,
                  "namespaces whose pods park unless annotated fracgpu.io/park: \"false\" "
                  "(elsewhere only pods annotated \"true\"); comma-separated")
      ->delimiter(',');
  cmd->add_option("--park-drivers", flags->park_drivers,
                  "NVIDIA driver versions (or prefixes such as 580.) allowed to park; "
                  "comma-separated; required with --park")
      ->delimiter(',');
  cmd->add_option("--park-interval", flags->park_interval_s,
                  "seconds between polls of the parking loop (a parked container's call waits "
                  "at most about this long before its wake starts)")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  cmd->add_option("--park-lock-timeout-ms", flags->park_lock_timeout_ms,
                  "cuCheckpointProcessLock's timeout: a container still busy after it is not "
                  "parked (retried next poll)")
      ->check(CLI::Range(1u, 60000u))
      ->capture_default_str();
  cmd->add_option("--park-lend-interval", flags->park_lend_interval_s,
                  "seconds between writes of the node's lent-memory record while it lends "
                  "(fracgpu.io/lent-memory; the scheduler counts a record for 90 s)")
      ->check(CLI::Range(1.0, 45.0))
      ->capture_default_str();
  cmd->add_option("--park-reclaim-timeout", flags->park_reclaim_timeout_s,
                  "seconds a wake waits, after evicting the GPU's borrowers, for their memory "
                  "to be free before it evicts again (never restored without it)")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--cgroup-root", flags->cgroup_root,
                  "the host's cgroup filesystem, where a parked container's memory limit is read "
                  "(with --park)")
      ->capture_default_str();
  cmd->add_option("--cuda-library", flags->cuda_library,
                  "CUDA driver to dlopen for the checkpoint calls (with --park)")
      ->capture_default_str();
  cmd->callback([flags, node_dir, listen, port] {
    flags->listen_given = listen->count() > 0;
    if (port->count() > 0) {
      std::fputs("fracgpu monitor: --port is deprecated; use --listen host:port\n", stderr);
    } else if (listen->count() > 0 &&
               (flags->listen.find(':') == std::string::npos || flags->listen == "::")) {
      std::fputs("fracgpu monitor: --listen without a port is deprecated; use --listen host:port\n",
                 stderr);
    }
    // Without an explicit --node-dir, the node directory is the one under the final hook path
    // (the device plugin creates both from the same HOOK_PATH), so the two never disagree.
    if (node_dir->count() == 0) flags->node_dir = api::HostNodeDir(flags->hook_path);
    int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
