// The Grafana dashboard (deploy/grafana/fracgpu-dashboard.json): the JSON parses, its
// structure is what Grafana needs (panels with targets and positions, the variables it uses
// are defined), and every metric name its queries use exists in a scrape — the monitor's
// (a Monitor polled over hand-made regions so that every family has samples) or the
// scheduler's (a SchedulerService fed a node and a pod, with requests served over HTTP).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/node_gpu.h"
#include "base/clock.h"
#include "monitor/monitor.h"
#include "region_files.h"
#include "scheduler/service.h"

namespace fracgpu::monitor::testing {
namespace {

using nlohmann::json;
constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";

// Sample names (the part before '{' or ' ') of a Prometheus text scrape.
std::set<std::string> SeriesNames(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    out.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return out;
}

class OneGpu : public GpuStatsSource {
 public:
  Result<std::vector<GpuStats>> ListGpus() override {
    return std::vector<GpuStats>{{kGpu0, 0, "Fake", 1024 * kMiB, 10 * kMiB, 0.5, 0.1}};
  }
  Result<std::map<uint32_t, double>> ProcessSmUtilization(const std::string&) override {
    return std::map<uint32_t, double>{{42, 0.3}};
  }
};

// Lists one pod the first time, fails the second time (for the error counter).
class FlakyPods : public PodLister {
 public:
  Result<std::vector<PodRef>> ListNodePods(const std::string&) override {
    if (calls_++ == 0) return std::vector<PodRef>{{"uid-a", "ns", "pod-a", {}, "", ""}};
    return Unavailable("injected");
  }

 private:
  int calls_ = 0;
};

// A monitor scrape in which every family the monitor can export has a sample.
std::string MonitorScrape(const TempDir& dir) {
  std::string root = dir.path() + "/hook/vgpu/containers";
  std::filesystem::create_directories(root + "/uid-a_main");
  auto h = MakeRegion(root + "/uid-a_main/region.cache", {{kGpu0, 256 * kMiB, 50}});
  SetSlot(h.region, 0, 1, 42, {{kMiB, kMiB, kMiB}});
  h.region->devices[0].last_launch_ns.store(1);
  vgpu::RegionClose(&h);
  std::filesystem::create_directories(root + "/uid-gone_old");  // removed (grace 0): counter
  std::filesystem::create_directories(root + "/uid-a_broken");
  WriteBytes(root + "/uid-a_broken/region.cache", "short");  // skipped: counter
  std::filesystem::create_directories(dir.path() + "/node");
  api::NodeGpu node{};
  node.magic = api::kNodeGpuMagic;
  node.version = api::kNodeGpuVersion;
  node.high_last_launch_ns = 1;
  node.high_last_launch_check = ~node.high_last_launch_ns;  // as fracgpu monitor writes it
  WriteBytes(dir.path() + "/node/" + kGpu0,
             std::string(reinterpret_cast<const char*>(&node), sizeof node));
  OneGpu gpus;
  FlakyPods pods;
  MonitorOptions o;
  o.node_name = "n";
  o.hook_path = dir.path() + "/hook";
  o.node_dir = dir.path() + "/node";
  o.orphan_grace = std::chrono::seconds(0);
  Monitor m(o, &gpus, &pods);
  m.Poll(10'000'000'000ull);
  m.Poll(20'000'000'000ull);  // the pod list fails: errors counter
  return m.registry().Render();
}

// A scheduler scrape: GPU and pod gauges from its state, HTTP and admission counters from
// requests served on a real port.
std::string SchedulerScrape() {
  scheduler::SchedulerOptions options;
  options.http.port = 0;
  scheduler::SchedulerService service(options, nullptr);
  json node = {
      {"metadata",
       {{"name", "n"},
        {"annotations",
         {{"hami.io/node-nvidia-register",
           R"([{"id":"GPU-1","count":10,"devmem":20000,"devcore":100,"type":"NVIDIA-A100","health":true}])"}}}}},
      {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}};
  EXPECT_TRUE(service.state().UpsertNode(node).ok());
  json pod = {{"metadata",
               {{"name", "p"},
                {"namespace", "ns"},
                {"uid", "u1"},
                {"annotations",
                 {{"hami.io/vgpu-node", "n"},
                  {"hami.io/vgpu-devices-allocated", "GPU-1,NVIDIA,5000,10:;"}}}}},
              {"spec", {{"containers", {{{"name", "a"}}}}}},
              {"status", {{"phase", "Running"}}}};
  EXPECT_TRUE(service.state().UpsertPod(pod).ok());
  EXPECT_TRUE(service.Start().ok());
  httplib::Client http("127.0.0.1", service.port());
  http.Post("/webhook", "not json", "application/json");
  http.Post("/bind", "not json", "application/json");
  std::string text = service.metrics().Render();
  service.Stop();
  return text;
}

TEST(Dashboard, ParsesAndEveryQueriedMetricExistsInAScrape) {
  std::ifstream in(FRACGPU_DASHBOARD);
  ASSERT_TRUE(in) << FRACGPU_DASHBOARD;
  json dash = json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dash.is_discarded()) << "not JSON";
  ASSERT_TRUE(dash.contains("panels") && dash["panels"].is_array());
  EXPECT_FALSE(dash.value("uid", "").empty());
  EXPECT_FALSE(dash.value("title", "").empty());

  // Variables defined, and every $variable used in a query is one of them (or Grafana's own).
  std::set<std::string> vars = {"__all", "__interval", "__rate_interval", "__range"};
  for (const auto& v : dash["templating"]["list"]) vars.insert(v["name"].get<std::string>());
  for (const char* needed : {"datasource", "node", "namespace", "idle_minutes"})
    EXPECT_TRUE(vars.count(needed)) << needed;

  std::vector<std::string> queries;
  int data_panels = 0;
  for (const auto& p : dash["panels"]) {
    ASSERT_TRUE(p.contains("gridPos")) << p.dump();
    if (p["type"] == "row") continue;
    ++data_panels;
    ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << p["title"];
    for (const auto& t : p["targets"]) queries.push_back(t["expr"].get<std::string>());
  }
  for (const auto& v : dash["templating"]["list"])
    if (v["type"] == "query") queries.push_back(v["query"].get<std::string>());
  EXPECT_GE(data_panels, 20);

  TempDir dir;
  std::set<std::string> names = SeriesNames(MonitorScrape(dir));
  std::set<std::string> sched = SeriesNames(SchedulerScrape());
  names.insert(sched.begin(), sched.end());
  // Sanity of the scrapes themselves: one name from each side.
  ASSERT_TRUE(names.count("fracgpu_container_last_kernel_age_seconds"));
  ASSERT_TRUE(names.count("fracgpu_gpu_memory_allocated_bytes"));

  // Metric names (fracgpu_* / hami_* as whole words) and $var / ${var} references. Scanned by
  // hand: GCC 12's <regex> trips -Werror=maybe-uninitialized in the ASan build.
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto metric_names = [&](const std::string& q) {
    std::vector<std::string> out;
    for (size_t i = 0; i < q.size(); ++i) {
      if (i > 0 && word(q[i - 1])) continue;
      for (const char* prefix : {"fracgpu_", "hami_"}) {
        if (q.compare(i, std::strlen(prefix), prefix) != 0) continue;
        size_t j = i + std::strlen(prefix);
        while (j < q.size() && (std::islower(static_cast<unsigned char>(q[j])) ||
                                std::isdigit(static_cast<unsigned char>(q[j])) || q[j] == '_')) {
          ++j;
        }
        if (j > i + std::strlen(prefix) && (j == q.size() || !word(q[j])))
          out.push_back(q.substr(i, j - i));
      }
    }
    return out;
  };
  auto variable_names = [&](const std::string& q) {
    std::vector<std::string> out;
    for (size_t i = 0; i < q.size(); ++i) {
      if (q[i] != '$') continue;
      size_t j = i + 1;
      if (j < q.size() && q[j] == '{') ++j;
      if (j >= q.size() || !(std::isalpha(static_cast<unsigned char>(q[j])) || q[j] == '_'))
        continue;
      size_t k = j;
      while (k < q.size() && word(q[k])) ++k;
      out.push_back(q.substr(j, k - j));
    }
    return out;
  };
  std::set<std::string> used;
  for (const std::string& q : queries) {
    for (const std::string& m : metric_names(q)) used.insert(m);
    for (const std::string& v : variable_names(q)) {
      EXPECT_TRUE(vars.count(v)) << "undefined variable $" << v << " in " << q;
    }
  }
  EXPECT_GE(used.size(), 20u);
  std::set<std::string> scheduler_names_used;
  for (const std::string& name : used) {
    bool found = names.count(name) > 0;
    // fracgpu_binds_total has samples only after a bind; it must at least be a family the
    // scheduler declares (its HELP line in a scrape once it has a sample).
    if (!found && name == "fracgpu_binds_total") {
      scheduler::SchedulerOptions options;
      scheduler::SchedulerService service(options, nullptr);
      service.metrics().Add(name, {{"result", "ok"}}, 0);
      found = service.metrics().Render().find("# HELP " + name + " Bind") != std::string::npos;
    }
    // A kernel without schedstat: the scheduler records no wait for a CPU (base/clock.h).
    if (!found && name.rfind("fracgpu_http_request_cpu_wait_seconds", 0) == 0 &&
        base::ThreadRunDelay().count() < 0) {
      found = true;
    }
    EXPECT_TRUE(found) << name << " is queried by the dashboard but no scrape has it";
    if (sched.count(name)) scheduler_names_used.insert(name);
  }
  EXPECT_GE(scheduler_names_used.size(), 5u);  // the dashboard covers the scheduler's metrics too
}

}  // namespace
}  // namespace fracgpu::monitor::testing
