// bench_filter — /filter latency over HTTP (p50 / p99) for 1,000, 5,000 and 15,000 nodes × 8
// GPUs, and the resident memory the cluster state takes (in all and per node; issues 6, 18). A CLI
// that prints a table. The nodes are half loaded (a pod of 20 GiB on every other GPU) so fit does
// real work; the pod asks for one 30,000 MiB slice with 30 % of the SMs, which fits on most nodes.
// After each size's row: /filter (decode + filter, in process) for the same pod with the largest
// admissible nvidia.com/use-gpuuuid and nouse-gpuuuid lists (core::kMaxAnnotationListEntries
// UUIDs each), matched through the request's hash sets (issue 33 item 7).
//
//   bench_filter [requests per size, default 300] [node counts, default 1000 5000 15000]
//
// /filter answers the top node of its ranking (the default, ExtenderConfig::
// filter_returns_every_fitting_node off); with BENCH_FILTER_EVERY_NODE=1 every fitting node.
//
// Besides wall-clock latency (noisy on a shared machine: the 1-minute load average is
// printed with it) it reports CPU time, which load inflates far less: srv_cpu is the handler
// thread's CPU time per request (decode + filter + reply, not the socket I/O), srv_decode its
// decode part, proc_cpu the whole process's CPU per request (client and server, HTTP
// included), and the in-process medians (no HTTP, warm caches) of decode, filter and both.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "base/heap.h"
#include "bench_cluster.h"
#include "core/annotations.h"
#include "core/codec.h"
#include "core/request.h"
#include "http/server.h"
#include "scheduler/extender.h"
#include "scheduler/extender_args.h"
#include "scheduler/service.h"
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

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // As `fracgpu scheduler` does (see TuneMallocForRequests, which acts only on glibc's heap;
  // this benchmark links jemalloc as `fracgpu` does where the build found it);
  // BENCH_FILTER_DEFAULT_MALLOC=1 keeps glibc's defaults where glibc's heap serves (a build with
  // -DFRACGPU_JEMALLOC=OFF), to measure what the setting is worth.
  const bool tuned = std::getenv("BENCH_FILTER_DEFAULT_MALLOC") == nullptr;
  // BENCH_FILTER_EVERY_NODE=1: /filter answers every fitting node
  // (--filter-returns-every-fitting-node), instead of ranking them and answering the top one.
  scheduler::ExtenderConfig extender_config;
  extender_config.filter_returns_every_fitting_node =
      std::getenv("BENCH_FILTER_EVERY_NODE") != nullptr;
  if (tuned) scheduler::TuneMallocForRequests();
  int requests = argc > 1 ? std::max(50, std::atoi(argv[1])) : 300;
  double load[1] = {0};
  if (getloadavg(load, 1) != 1) load[0] = -1;
  std::printf(
      "load average (1 min) at start: %.2f; %d requests per size, 20 warm-up excluded; heap "
      "allocator %s, %s; /filter answers %s\n",
      load[0], requests, base::HeapAllocatorName(),
      !base::HeapIsGlibc() ? "untuned"
      : tuned              ? "tuned (TuneMallocForRequests)"
                           : "glibc defaults",
      extender_config.filter_returns_every_fitting_node ? "every fitting node" : "the top node");
  std::printf("%-6s %-6s %8s %8s %8s %10s %9s %10s %10s %10s %9s %9s %9s %10s\n", "nodes", "gpus",
              "p50_ms", "p99_ms", "max_ms", "state_MiB", "KiB/node", "srv_cpu", "srv_decode",
              "proc_cpu", "decode", "filter", "total", "reply_KiB");
  std::printf("%-6s %-6s %8s %8s %8s %10s %9s %10s %10s %10s %9s %9s %9s %10s\n", "", "", "", "",
              "", "", "", "us/req", "us/req", "us/req", "us(med)", "us(med)", "us(med)", "");
  std::vector<int> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::max(1, std::atoi(argv[i])));
  if (sizes.empty()) sizes = {1000, 5000, 15000};
  for (int nodes : sizes) {
    long rss0 = RssKiB();
    scheduler::ClusterState state;
    bench::Populate(state, nodes);
    long rss1 = RssKiB();
    scheduler::Extender extender(extender_config, &state, nullptr, nullptr, nullptr, nullptr);
    http::Server server({});
    std::atomic<int64_t> handler_cpu_ns{0}, decode_cpu_ns{0};  // summed over the measured requests
    std::atomic<bool> measuring{false};
    server.Route("POST", "/filter", [&](const http::Request& r) {
      double c0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
      auto args = scheduler::DecodeExtenderArgs(r.body);
      if (!args.ok()) return http::Response::Error(400, args.status().message());
      double c1 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
      http::Response res = http::Response::Text(200, extender.Filter(*args), "application/json");
      double c2 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
      if (measuring) {
        decode_cpu_ns += static_cast<int64_t>((c1 - c0) * 1e9);
        handler_cpu_ns += static_cast<int64_t>((c2 - c0) * 1e9);
      }
      return res;
    });
    if (!server.Start().ok()) return 1;
    json names = json::array();
    for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
    json pod = bench::BenchPod();
    std::string body = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();

    // In-process stage breakdown (no HTTP).
    std::vector<double> t_decode, t_filter, t_total;
    size_t reply_bytes = 0;
    for (int i = 0; i < 60; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto args = scheduler::DecodeExtenderArgs(body);
      auto t1 = std::chrono::steady_clock::now();
      std::string reply = extender.Filter(*args);
      auto t2 = std::chrono::steady_clock::now();
      reply_bytes = reply.size();
      t_decode.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      t_filter.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      t_total.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
    }

    // The largest admissible GPU lists (issue 33 item 7): use-gpuuuid and nouse-gpuuuid of
    // core::kMaxAnnotationListEntries UUIDs each (free GPUs of nodes spread over the cluster
    // in the use list, others in the nouse list), in process: decode + filter per request.
    std::vector<double> t_lists;
    size_t lists_fit = 0;
    {
      std::string use, nouse;
      for (size_t k = 0; k < core::kMaxAnnotationListEntries; ++k) {
        const size_t node = k * static_cast<size_t>(nodes) / core::kMaxAnnotationListEntries;
        use += (k ? "," : "") + ("GPU-" + std::to_string(node) + "-1");
        nouse += (k ? "," : "") + ("GPU-" + std::to_string(node) + "-3");
      }
      json lists_pod =
          bench::BenchPod({{"nvidia.com/use-gpuuuid", use}, {"nvidia.com/nouse-gpuuuid", nouse}});
      std::string lists_body =
          json{{"Pod", lists_pod}, {"Nodes", nullptr}, {"NodeNames", names}}.dump();
      for (int i = 0; i < 25; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto args = scheduler::DecodeExtenderArgs(lists_body);
        std::string reply = extender.Filter(*args);
        auto t1 = std::chrono::steady_clock::now();
        if (i == 0) lists_fit = json::parse(reply)["NodeNames"].size();
        if (i >= 5) t_lists.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    }

    httplib::Client client("127.0.0.1", server.port());
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);  // as Go's net/http (kube-scheduler) does
    std::vector<double> ms;
    size_t fit_nodes = 0;
    double proc0 = 0;
    for (int i = 0; i < requests + 20; ++i) {
      if (i == 20) {
        measuring = true;
        proc0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
      }
      auto t0 = std::chrono::steady_clock::now();
      auto res = client.Post("/filter", body, "application/json");
      auto t1 = std::chrono::steady_clock::now();
      if (!res || res->status != 200) return 1;
      if (i == 0) fit_nodes = json::parse(res->body)["NodeNames"].size();
      if (i >= 20)
        ms.push_back(
            std::chrono::duration<double, std::milli>(t1 - t0).count());  // warm-up excluded
    }
    double proc_cpu = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - proc0;
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) {
      return ms[static_cast<size_t>(p * static_cast<double>(ms.size() - 1))];
    };
    double n = static_cast<double>(ms.size());
    std::printf(
        "%-6d %-6d %8.3f %8.3f %8.3f %10.1f %9.2f %10.0f %10.0f %10.0f %9.0f %9.0f %9.0f %10.1f   "
        "(%zu nodes fit, body %.1f KiB)\n",
        nodes, nodes * 8, pct(0.5), pct(0.99), ms.back(), static_cast<double>(rss1 - rss0) / 1024.0,
        static_cast<double>(rss1 - rss0) / nodes,
        static_cast<double>(handler_cpu_ns.load()) / n * 1e-3,
        static_cast<double>(decode_cpu_ns.load()) / n * 1e-3, proc_cpu / n * 1e6, Median(t_decode),
        Median(t_filter), Median(t_total), static_cast<double>(reply_bytes) / 1024.0, fit_nodes,
        static_cast<double>(body.size()) / 1024.0);
    std::sort(t_lists.begin(), t_lists.end());
    std::printf(
        "       largest admissible use-gpuuuid + nouse-gpuuuid (%zu + %zu UUIDs): decode+filter "
        "median %.2f ms, max %.2f ms in process (%zu nodes fit)\n",
        core::kMaxAnnotationListEntries, core::kMaxAnnotationListEntries, Median(t_lists),
        t_lists.back(), lists_fit);
    server.Stop();
  }
  if (getloadavg(load, 1) == 1) std::printf("load average (1 min) at end: %.2f\n", load[0]);
  return 0;
}
