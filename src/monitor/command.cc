// `fracgpu monitor`: one per GPU node (beside the device plugin). Thin main (STYLE.md): flags
// → Monitor (monitor.h), a poll loop, and /metrics on the HTTP server, until SIGTERM.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

#include "http/server.h"
#include "k8s/client.h"
#include "k8s/clock.h"
#include "k8s/config.h"
#include "k8s/signals.h"
#include "monitor/monitor.h"
#include "monitor/nvml_stats.h"

#ifndef FRACGPU_MONITOR_VERSION
#define FRACGPU_MONITOR_VERSION "0.0.0"
#endif

namespace fracgpu::cli {
namespace {

struct Flags {
  std::string node_name;
  std::string hook_path = "/usr/local";
  std::string node_dir = "/usr/local/vgpu/node";
  std::string listen = "0.0.0.0";
  int port = 9394;
  double interval_s = 5;
  double orphan_grace_s = 300;
  bool no_remove = false;
  bool no_apiserver = false;
  bool hami_metric_names = false;
  std::string kubeconfig;
  std::string nvml_library = "libnvidia-ml.so.1";
  bool once = false;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int Run(const Flags& f) {
  if (f.node_name.empty() && !f.no_apiserver) {
    spdlog::error("--node-name (or NODE_NAME) is required unless --no-apiserver");
    return 2;
  }
  monitor::MonitorOptions options;
  options.node_name = f.node_name;
  options.hook_path = f.hook_path;
  options.node_dir = f.node_dir;
  options.orphan_grace = std::chrono::nanoseconds(static_cast<int64_t>(f.orphan_grace_s * 1e9));
  options.remove_orphans = !f.no_remove;
  options.hami_metric_names = f.hami_metric_names;
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
    if (!c.ok()) {
      spdlog::error("{}", c.status().ToString());
      return 1;
    }
    client = std::move(*c);
    pods = std::make_unique<monitor::K8sPodLister>(client.get());
  }
  monitor::Monitor mon(options, nvml.get(), pods.get());
  if (f.once) {
    mon.Poll(monitor::MonotonicNowNs());
    std::fputs(mon.registry().Render().c_str(), stdout);
    return 0;
  }

  k8s::StopSignal stop;
  k8s::SignalWatcher signals(&stop);
  http::ServerOptions http_options;
  http_options.host = f.listen;
  http_options.port = f.port;
  http::Server server(http_options);
  server.Route("GET", "/metrics", [&mon](const http::Request&) {
    return http::Response::Text(200, mon.registry().Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Route("GET", "/healthz", [](const http::Request&) { return http::Response::Text(200, "ok\n"); });
  if (Status st = server.Start(); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  spdlog::info("monitor on {} (node {}, regions under {})", server.BaseUrl(), f.node_name, mon.containers_root());
  auto period = std::chrono::nanoseconds(static_cast<int64_t>(f.interval_s * 1e9));
  while (!stop.stopped()) {
    mon.Poll(monitor::MonotonicNowNs());
    stop.WaitFor(period);
  }
  server.Stop();
  spdlog::info("monitor stopped");
  return 0;
}

}  // namespace

void RegisterMonitorCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  flags->node_name = Env("NODE_NAME");
  if (!Env("HOOK_PATH").empty()) flags->hook_path = Env("HOOK_PATH");
  auto* cmd = app.add_subcommand("monitor", "Export per-GPU and per-container-slice metrics of this node");
  cmd->add_option("--node-name", flags->node_name, "this node (env NODE_NAME)");
  cmd->add_option("--hook-path", flags->hook_path, "host dir holding vgpu/containers (env HOOK_PATH)");
  cmd->add_option("--node-dir", flags->node_dir, "SM limiter's per-GPU priority files (\"\" = off)");
  cmd->add_option("--listen", flags->listen, "address of /metrics");
  cmd->add_option("--port", flags->port, "port of /metrics")->check(CLI::Range(0, 65535));
  cmd->add_option("--interval", flags->interval_s, "seconds between polls")->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--orphan-grace", flags->orphan_grace_s,
                  "seconds a directory of a pod gone from the node is kept before removal")
      ->check(CLI::Range(0.0, 86400.0 * 30));
  cmd->add_flag("--no-remove", flags->no_remove, "never remove region directories");
  cmd->add_flag("--no-apiserver", flags->no_apiserver, "do not name pods (labels carry the pod UID); never remove");
  cmd->add_flag("--hami-metric-names", flags->hami_metric_names, "also emit HAMi vGPUmonitor's metric names");
  cmd->add_option("--kubeconfig", flags->kubeconfig, "kubeconfig (default: in-cluster)");
  cmd->add_option("--nvml-library", flags->nvml_library, "NVML library to dlopen");
  cmd->add_flag("--once", flags->once, "poll once, print the metrics to stdout and exit");
  cmd->callback([flags] {
    int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
