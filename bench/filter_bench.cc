// bench_filter — /filter latency over HTTP (p50 / p99) for 1,000 and 5,000 nodes × 8 GPUs,
// and the resident memory the cluster state takes at 5,000 nodes (issue 6). A CLI that prints
// a table. The nodes are half loaded (a pod of 20 GiB on every other GPU) so fit does real
// work; the pod asks for one 30,000 MiB slice with 30 % of the SMs, which fits on most nodes.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/codec.h"
#include "http/server.h"
#include "scheduler/extender.h"
#include "scheduler/extender_args.h"
#include "scheduler/state.h"

namespace {

using nlohmann::json;
using namespace fracgpu;

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

void Populate(scheduler::ClusterState& state, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    std::string name = "node-" + std::to_string(n);
    std::vector<core::DeviceInfo> devices;
    for (int g = 0; g < 8; ++g) {
      core::DeviceInfo d;
      d.uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g);
      d.index = g;
      d.devmem_mib = 81920;
      d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
      d.numa = g / 4;
      devices.push_back(d);
    }
    json node = {{"metadata", {{"name", name}, {"annotations", {{scheduler::kAnnotationRegister, core::EncodeNodeRegister(devices)}}}}},
                 {"status", {{"allocatable", {{"nvidia.com/gpu", "80"}}}}}};
    (void)state.UpsertNode(node);
    for (int g = 0; g < 8; g += 2) {
      json pod = {{"metadata", {{"name", name + "-p" + std::to_string(g)}, {"namespace", "bench"},
                                {"uid", name + "-u" + std::to_string(g)},
                                {"annotations", {{scheduler::kAnnotationVgpuNode, name},
                                                 {scheduler::kAnnotationAllocated, devices[g].uuid + ",NVIDIA,20480,25:;"}}}}},
                  {"status", {{"phase", "Running"}}}};
      (void)state.UpsertPod(pod);
    }
  }
}

}  // namespace

int main() {
  std::printf("%-8s %-6s %10s %10s %10s %12s\n", "nodes", "gpus", "p50_ms", "p99_ms", "max_ms", "state_MiB");
  for (int nodes : {1000, 5000}) {
    long rss0 = RssKiB();
    scheduler::ClusterState state;
    Populate(state, nodes);
    long rss1 = RssKiB();
    scheduler::Extender extender({}, &state, nullptr, nullptr, nullptr, nullptr);
    http::Server server({});
    server.Route("POST", "/filter", [&](const http::Request& r) {
      auto args = scheduler::DecodeExtenderArgs(r.body);
      if (!args.ok()) return http::Response::Error(400, args.status().message());
      return http::Response::Json(200, extender.Filter(*args));
    });
    if (!server.Start().ok()) return 1;
    json names = json::array();
    for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
    json pod = {{"metadata", {{"name", "q"}, {"namespace", "bench"}, {"uid", "q"}}},
                {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"},
                  {"nvidia.com/gpumem", "30000"}, {"nvidia.com/gpucores", "30"}}}}}}}}}}};
    std::string body = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
    httplib::Client client("127.0.0.1", server.port());
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);  // as Go's net/http (kube-scheduler) does
    std::vector<double> ms;
    size_t fit_nodes = 0;
    for (int i = 0; i < 300; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto res = client.Post("/filter", body, "application/json");
      auto t1 = std::chrono::steady_clock::now();
      if (!res || res->status != 200) return 1;
      if (i == 0) fit_nodes = json::parse(res->body)["NodeNames"].size();
      if (i >= 20) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());  // warm-up excluded
    }
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) { return ms[static_cast<size_t>(p * static_cast<double>(ms.size() - 1))]; };
    std::printf("%-8d %-6d %10.3f %10.3f %10.3f %12.1f   (%zu nodes fit)\n", nodes, nodes * 8, pct(0.5), pct(0.99),
                ms.back(), static_cast<double>(rss1 - rss0) / 1024.0, fit_nodes);
    server.Stop();
  }
  return 0;
}
