// `fracgpu simulate`: the FGD paper's experiment on the bundled Alibaba openb trace, every
// policy × every seed, with the paper's published means beside ours
// (docs/design/fgd-evaluation.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/file.h"
#include "base/strings.h"
#include "core/codec.h"
#include "core/gputype.h"
#include "core/workload_json.h"
#include "sim/bound.h"
#include "sim/expected.h"
#include "sim/parking.h"
#include "sim/simulator.h"

namespace fracgpu::cli {
namespace {

namespace fs = std::filesystem;
using core::PlacementPolicy;

constexpr char kDataDir[] = "data/alibaba-gpu-v2023";

struct Flags {
  std::string trace = std::string(kDataDir) + "/csv/openb_pod_list_default.csv";
  std::string nodes = std::string(kDataDir) + "/csv/openb_node_list_gpu_node.csv";
  std::string expected = std::string(kDataDir) + "/expected_results";
  std::string policies =
      "Random,DotProduct,GpuClustering,GpuPacking,BestFit,FGD,FGD+CpuRoute+Crumb,DRA-FirstFit";
  std::string seeds = "42-51";
  double tune = 1.3;
  double coverage = 95;
  std::string out = "simulate-out";
  int jobs = 0;
  // Notebook parking (sim/parking.h, docs/simulate.md "Idle notebooks: parking and lending").
  bool parking = true;
  std::string park_idle = "10,30,60";  // idle thresholds, minutes, one table row each
  double notebook_share = 0.5;         // fraction of resident fractional pods that are notebooks
  double park_hours = 24;              // simulated time, hours
  double park_bandwidth = 4;           // park / restore copy rate, GiB/s (assumed)
  std::string node_order = "seeded";
  bool verify = false;
  bool quiet = false;
  bool bound = true;
  std::string replay_out;
};

// A relative path that does not exist from the working directory is looked up relative to the
// directories above the executable (./build/release/fracgpu finds <repo>/data/…).
std::string Resolve(const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute() || fs::exists(path)) return path;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return path;
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / path)) return (dir / path).string();
    if (dir == dir.root_path()) break;
  }
  return path;
}

// The non-empty items of a comma-separated flag value ("a,,b," → {"a", "b"}; nothing trimmed).
std::vector<std::string> SplitCommaList(const std::string& text) {
  return base::SplitComma(text, {.skip_empty = true});
}

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  for (const std::string& item : SplitCommaList(text)) {
    const size_t dash = item.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        seeds.push_back(std::stoull(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } else {
        size_t u1 = 0, u2 = 0;
        const uint64_t a = std::stoull(item.substr(0, dash), &u1);
        const uint64_t b = std::stoull(item.substr(dash + 1), &u2);
        if (u1 != dash || u2 != item.size() - dash - 1 || b < a || b - a > 10000) {
          throw std::invalid_argument(item);
        }
        for (uint64_t s = a; s <= b; ++s) seeds.push_back(s);
      }
    } catch (const std::exception&) {
      return InvalidArgument("--seeds: \"" + item + "\" is not a seed or a range like 42-51");
    }
  }
  if (seeds.empty()) return InvalidArgument("--seeds: no seed given");
  return seeds;
}

// --park-idle: idle thresholds in minutes, each > 0.
Result<std::vector<double>> ParseParkIdle(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : SplitCommaList(text)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size() || !(v > 0) || v > 100000) {
      return InvalidArgument("--park-idle: \"" + item + "\" is not a number of minutes > 0");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("--park-idle: no threshold given");
  return out;
}

Result<std::vector<PlacementPolicy>> ParsePolicies(const std::string& text) {
  std::vector<PlacementPolicy> out;
  // An empty entry ("FGD,,BestFit", "FGD,") is a typo, not a list separator: refused.
  if (!text.empty() &&
      (text.front() == ',' || text.back() == ',' || text.find(",,") != std::string::npos)) {
    return InvalidArgument("--policies: \"" + text + "\" has an empty entry");
  }
  for (const std::string& item : SplitCommaList(text)) {
    if (item == "all") {
      for (auto p : core::AllPlacementPolicies()) out.push_back(p);
      continue;
    }
    auto p = core::ParsePlacementPolicy(item);
    if (!p.ok()) return p.status().WithPrefix("--policies");
    out.push_back(*p);
  }
  if (out.empty()) return InvalidArgument("--policies: no policy given");
  return out;
}

std::string Fmt(double v, int decimals = 2) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Fmt(const std::optional<double>& v, int decimals = 2) {
  return v ? Fmt(*v, decimals) : "n/a";
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v) {
    if (!std::isnan(x)) {
      s += x;
      ++n;
    }
  }
  return n ? s / n : std::nan("");
}

struct PaperFiles {
  std::optional<sim::PaperTable> allo, frag_ratio;
};

PaperFiles LoadPaper(const std::string& dir) {
  PaperFiles p;
  auto load = [&](const char* name) -> std::optional<sim::PaperTable> {
    const std::string path = dir + "/" + name;
    auto text = base::ReadFile(path, sim::kMaxTraceFileBytes);
    if (!text.ok()) return std::nullopt;
    auto t = sim::ParsePaperCsv(*text, path);
    if (!t.ok()) {
      std::fprintf(stderr, "fracgpu simulate: warning: %s\n", t.status().message().c_str());
      return std::nullopt;
    }
    return std::move(t).value();
  };
  p.allo = load("analysis_allo_discrete.csv");
  p.frag_ratio = load("analysis_frag_ratio_discrete.csv");
  return p;
}

void Progress(size_t done, size_t total, double seconds) {
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  std::fprintf(stderr, "\r[%.*s%.*s] %zu/%zu runs %.0fs", filled, "##############################",
               width - filled, "..............................", done, total, seconds);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// A flag value as the user wrote it ("1.3", not "1.300000").
std::string Shown(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// --out can hold the results: it exists (or is created now) as a directory and a file can be
// created in it. Checked before anything is simulated.
Status CheckOutDir(const std::string& out) {
  if (out.empty()) return InvalidArgument("--out: \"\" is not a directory");
  std::error_code ec, dir_ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out, dir_ec)) {
    return InvalidArgument("--out: \"" + out + "\": cannot create the directory" +
                           (ec ? ": " + ec.message() : std::string(": a file is in the way")));
  }
  const std::string probe = out + "/.fracgpu-simulate-write-test";
  {
    std::ofstream f(probe);
    if (!f) return InvalidArgument("--out: \"" + out + "\": cannot write in this directory");
  }
  fs::remove(probe, ec);
  return Status::Ok();
}

// A trace's gpu_spec entry that no GPU model of the cluster matches (GpuTypeEntryMatches, the
// rule of use-gputype) is a typo or the wrong node list: such pods could never be placed.
Status CheckGpuSpecs(const std::vector<sim::TracePod>& pods, const sim::SimCluster& cluster,
                     const std::string& trace_path, const std::string& node_path) {
  for (const sim::TracePod& p : pods) {
    if (p.gpu_spec.empty()) continue;
    for (const std::string& entry : core::SplitGpuSpec(p.gpu_spec)) {
      bool known = false;
      for (const std::string& model : cluster.type_table)
        known = known || core::GpuTypeEntryMatches(entry, model);
      if (known) continue;
      const std::string models = base::Join(cluster.type_table, ", ");
      return InvalidArgument("--trace " + trace_path + ":" + std::to_string(p.line) +
                             ": gpu_spec: \"" + entry + "\" (of \"" + p.gpu_spec +
                             "\") is no GPU model of --nodes " + node_path +
                             " (its models: " + (models.empty() ? "none" : models) + ")");
    }
  }
  return Status::Ok();
}

// One seed's parking rows: the input built from the run, then every setting on it.
Result<std::vector<sim::ParkResult>> RunParking(
    const sim::SimCluster& cluster, const sim::SimWorkload& workload, const sim::RunResult& run,
    const sim::ParkBuild& build, const std::vector<sim::ParkSettings>& settings, uint64_t seed) {
  auto in = sim::BuildParkInput(cluster, workload, run, build, seed);
  if (!in.ok()) return in.status();
  std::vector<sim::ParkResult> out;
  for (const auto& s : settings) {
    auto r = sim::SimulateParking(*in, s);
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

// Every flag, before any input is read or anything simulated. Errors name the flag and value.
Status CheckFlags(const Flags& flags) {
  auto seeds = ParseSeeds(flags.seeds);
  if (!seeds.ok()) return seeds.status();
  auto policies = ParsePolicies(flags.policies);
  if (!policies.ok()) return policies.status();
  if (!flags.replay_out.empty() && (seeds->size() != 1 || policies->size() != 1)) {
    return InvalidArgument("--replay-out: needs one policy and one seed (--policies \"" +
                           flags.policies + "\", --seeds \"" + flags.seeds + "\")");
  }
  if (!(flags.tune > 0 && flags.tune <= 10)) {
    return InvalidArgument("--tune: " + Shown(flags.tune) +
                           " is not in (0, 10] (a multiple of capacity)");
  }
  if (!(flags.coverage > 0 && flags.coverage <= 100)) {
    return InvalidArgument("--coverage: " + Shown(flags.coverage) + " is not in (0, 100]");
  }
  if (auto idle = ParseParkIdle(flags.park_idle); flags.parking && !idle.ok()) {
    return idle.status();
  }
  if (!(flags.notebook_share >= 0 && flags.notebook_share <= 1)) {
    return InvalidArgument("--notebook-share: " + Shown(flags.notebook_share) +
                           " is not in [0, 1] (a fraction)");
  }
  if (!(flags.park_hours > 0 && flags.park_hours <= 24 * 365)) {
    return InvalidArgument("--park-hours: " + Shown(flags.park_hours) + " is not in (0, 8760]");
  }
  if (!(flags.park_bandwidth > 0 && flags.park_bandwidth <= 10000)) {
    return InvalidArgument("--park-bandwidth: " + Shown(flags.park_bandwidth) +
                           " is not in (0, 10000] GiB/s");
  }
  if (flags.jobs < 0) {
    return InvalidArgument("-j/--jobs: " + std::to_string(flags.jobs) +
                           " is not a number of runs (>= 0; 0 = one per CPU)");
  }
  if (flags.node_order != "seeded" && flags.node_order != "cpu-per-gpu-desc" &&
      flags.node_order != "cpu-per-gpu-asc") {
    return InvalidArgument("--node-order: \"" + flags.node_order +
                           "\" is not seeded, cpu-per-gpu-desc or cpu-per-gpu-asc");
  }
  if (!flags.expected.empty()) {
    const std::string expected = Resolve(flags.expected);
    std::error_code ec;
    if (!fs::is_directory(expected, ec)) {
      return InvalidArgument("--expected: \"" + flags.expected + "\" is not a directory" +
                             (fs::exists(expected, ec) ? "" : " (no such file or directory)"));
    }
  }
  return CheckOutDir(flags.out);
}

// --replay-out: one run (one policy, one seed) as a replay through kube-scheduler needs it
// (bench/cluster/trace.py): the nodes in the run's tie-break order (a node's rank there is its
// place in name order on the cluster) with their device-plugin registration and allocatable CPU
// and memory, the target workload M, each arrival's pod spec (sim::TracePodSpec), its GPU
// request and where the simulator put it, the capacity, and the run's allocation % per bucket.
// `run` is that run, with its placements kept (RunOptions::keep_placements).
Status WriteReplay(const std::string& path, const sim::SimCluster& cluster,
                   const sim::SimWorkload& workload, const sim::RunResult& run,
                   PlacementPolicy policy, uint64_t seed, const sim::RunOptions& options,
                   const std::string& trace_name) {
  nlohmann::json nodes = nlohmann::json::array();
  for (int32_t i : sim::TieBreakOrder(cluster, seed, options)) {
    const core::NodeState& n = cluster.states[static_cast<size_t>(i)];
    std::vector<core::DeviceInfo> devices;
    int64_t slices = 0;
    for (const auto& g : n.gpus) {
      devices.push_back(g.info);
      slices += g.info.count;
    }
    nodes.push_back({{"name", n.name},
                     {"cpu_milli", n.cpu_milli_total},
                     {"mem_mib", n.mem_mib_total},
                     {"gpus", n.gpus.size()},
                     {"slices", slices},
                     {"register", core::EncodeNodeRegister(devices)}});
  }
  const nlohmann::json target = core::TargetWorkloadToJson(workload.target);
  nlohmann::json arrivals = nlohmann::json::array();
  for (const auto& p : run.placements) {
    const sim::TracePod& pod = workload.pods[static_cast<size_t>(p.pod)];
    arrivals.push_back({{"pod", pod.name},
                        {"cpu_milli", pod.cpu_milli},
                        {"memory_mib", pod.memory_mib},
                        {"num_gpus", pod.num_gpus},
                        {"gpu_milli", pod.gpu_milli},
                        {"spec", sim::TracePodSpec(pod)},
                        {"node", p.node},
                        {"gpus", p.gpus}});
  }
  nlohmann::json alloc = nlohmann::json::object();
  for (size_t b = 0; b < run.buckets.alloc_pct.size(); ++b) {
    if (!std::isnan(run.buckets.alloc_pct[b])) alloc[std::to_string(b)] = run.buckets.alloc_pct[b];
  }
  nlohmann::json out = {{"trace", trace_name},
                        {"policy", core::PlacementPolicyName(policy)},
                        {"seed", seed},
                        {"tune", options.tune},
                        {"capacity_milli", cluster.CapacityMilli()},
                        {"failed", run.failed},
                        {"nodes", std::move(nodes)},
                        {"target_workload", std::move(target)},
                        {"arrivals", std::move(arrivals)},
                        {"alloc_pct", std::move(alloc)}};
  std::ofstream f(path);
  f << out.dump() << '\n';
  f.close();
  if (!f) return InvalidArgument("--replay-out: cannot write \"" + path + "\"");
  return Status::Ok();
}

// The with/without parking table (mean over the seeds of each figure) and
// OUT/parking_<trace>.csv (docs/simulate.md "Idle notebooks: parking and lending").
Status PrintParking(const Flags& flags, const std::string& trace_name, PlacementPolicy policy,
                    const sim::ParkBuild& build, const std::vector<sim::ParkSettings>& settings,
                    const std::vector<std::optional<Result<std::vector<sim::ParkResult>>>>& all) {
  std::vector<const std::vector<sim::ParkResult>*> seeds;
  for (const auto& r : all)
    if (r) seeds.push_back(&r->value());
  if (seeds.empty()) return Status::Ok();
  using R = const sim::ParkResult&;
  auto mean = [&](size_t k, auto field) {
    double s = 0;
    for (const auto* v : seeds) s += static_cast<double>(field((*v)[k]));
    return s / static_cast<double>(seeds.size());
  };
  std::printf(
      "\nnotebook parking (docs/simulate.md \"Idle notebooks\"): %s's packing at 100 %% arrived, "
      "%s h; %s %% of its fractional single-GPU pods are notebooks (%.0f per run, active "
      "%.1f %% of the time by the model); borrowers = the single-GPU pods arriving after "
      "100 %% (%.0f per run), Poisson over the run; park/restore %s GiB/s + %s s (assumed); "
      "mean of %zu seeds\n",
      core::PlacementPolicyName(policy), Shown(build.horizon_s / 3600).c_str(),
      Shown(build.notebook_share * 100).c_str(), mean(0, [](R r) { return r.notebooks; }),
      build.model.ActiveFraction() * 100, mean(0, [](R r) { return r.borrowers; }),
      Shown(flags.park_bandwidth).c_str(), Shown(sim::ParkSettings{}.fixed_s).c_str(),
      seeds.size());
  std::printf("%-22s %9s %9s %6s %6s %10s %10s %6s %6s %9s %9s %9s %9s\n", "setting", "work/GPU",
              "borrowed", "ran", "done", "wait mean", "wait p95", "parks", "wakes", "wake p50",
              "wake p99", "evictions", "lost GPUh");
  const std::string csv_path = flags.out + "/parking_" + trace_name + ".csv";
  std::ofstream csv(csv_path);
  csv << "setting,idle_threshold_min,work_per_gpu,borrower_work_per_gpu,borrowers,started,"
         "completed,wait_mean_min,wait_p95_min,parks,wakes,wake_p50_s,wake_p99_s,evictions,"
         "lost_gpu_hours,max_parked_gib\n";
  for (size_t k = 0; k < settings.size(); ++k) {
    const bool park = settings[k].park;
    const std::string name =
        park ? "park, idle >= " + Shown(settings[k].idle_threshold_s / 60) + " min"
             : "without parking";
    const double work = mean(k, [](R r) { return r.work_per_gpu; });
    const double borrowed = mean(k, [](R r) { return r.borrower_work_per_gpu; });
    const double ran = mean(k, [](R r) { return r.started; });
    const double done = mean(k, [](R r) { return r.completed; });
    const double wait = mean(k, [](R r) { return r.wait_mean_s; }) / 60;
    const double p95 = mean(k, [](R r) { return r.wait_p95_s; }) / 60;
    const double parks = mean(k, [](R r) { return r.parks; });
    const double wakes = mean(k, [](R r) { return r.wakes; });
    const double w50 = mean(k, [](R r) { return r.wake_p50_s; });
    const double w99 = mean(k, [](R r) { return r.wake_p99_s; });
    const double ev = mean(k, [](R r) { return r.evictions; });
    const double lost = mean(k, [](R r) { return r.lost_gpu_hours; });
    const double gib = mean(k, [](R r) { return r.max_parked_gib; });
    const std::string s50 = park ? Fmt(w50, 1) + " s" : "-", s99 = park ? Fmt(w99, 1) + " s" : "-";
    std::printf("%-22s %9s %9s %6s %6s %10s %10s %6s %6s %9s %9s %9s %9s\n", name.c_str(),
                Fmt(work, 4).c_str(), Fmt(borrowed, 4).c_str(), Fmt(ran, 0).c_str(),
                Fmt(done, 0).c_str(), (Fmt(wait, 1) + " min").c_str(),
                (Fmt(p95, 1) + " min").c_str(), Fmt(parks, 0).c_str(), Fmt(wakes, 0).c_str(),
                s50.c_str(), s99.c_str(), Fmt(ev, 0).c_str(), Fmt(lost, 1).c_str());
    csv << name << "," << (park ? Shown(settings[k].idle_threshold_s / 60) : "") << ","
        << Fmt(work, 6) << "," << Fmt(borrowed, 6) << ","
        << Fmt(mean(k, [](R r) { return r.borrowers; }), 1) << "," << Fmt(ran, 1) << ","
        << Fmt(done, 1) << "," << Fmt(wait, 2) << "," << Fmt(p95, 2) << "," << Fmt(parks, 1) << ","
        << Fmt(wakes, 1) << "," << (park ? Fmt(w50, 2) : "") << "," << (park ? Fmt(w99, 2) : "")
        << "," << Fmt(ev, 1) << "," << Fmt(lost, 3) << "," << Fmt(gib, 1) << "\n";
  }
  std::printf(
      "(work/GPU = busy GPU-hours per GPU-hour: notebooks while active, borrowers' progress not "
      "lost, other residents assumed busy throughout; borrowed = the borrowers' part; ran / done "
      "= borrowers started / finished within the run; wait = time queued per borrower, censored "
      "at the end of the run; wakes = owners that found their memory parked, wake p50 / p99 = "
      "their wait for the restore; lost = GPU-hours of borrower work thrown away by evictions)\n");
  csv.close();
  if (!csv) return Internal("cannot write " + csv_path);
  std::printf("wrote %s\n", csv_path.c_str());
  return Status::Ok();
}

int Run(const Flags& flags) {
  if (Status st = CheckFlags(flags); !st.ok()) {
    throw CLI::ValidationError(st.message());
  }
  auto seeds = ParseSeeds(flags.seeds);
  auto policies = ParsePolicies(flags.policies);
  const std::string trace_path = Resolve(flags.trace), node_path = Resolve(flags.nodes);

  // Parse everything before simulating anything.
  auto nodes = sim::LoadNodeCsv(node_path);
  if (!nodes.ok()) {
    throw CLI::ValidationError(nodes.status().message());
  }
  auto pods = sim::LoadPodCsv(trace_path);
  if (!pods.ok()) {
    throw CLI::ValidationError(pods.status().message());
  }
  auto cluster = sim::BuildCluster(*nodes, node_path);
  if (!cluster.ok()) {
    throw CLI::ValidationError(cluster.status().message());
  }
  if (Status st = CheckGpuSpecs(*pods, *cluster, trace_path, node_path); !st.ok()) {
    throw CLI::ValidationError(st.message());
  }
  auto workload =
      sim::PrepareWorkload(std::move(pods).value(), *cluster, flags.coverage, trace_path);
  if (!workload.ok()) {
    throw CLI::ValidationError(workload.status().message());
  }
  const std::string trace_name = fs::path(trace_path).stem().string();
  const PaperFiles paper = LoadPaper(Resolve(flags.expected));

  // Summary of the inputs.
  int64_t whole = 0, gpu_pods = 0;
  for (const auto& p : workload->pods) {
    whole += p.num_gpus;
    gpu_pods += p.num_gpus > 0;
  }
  double covered = 0;
  std::printf(
      "trace %s: %zu pods (%lld GPU pods), %.0f GPUs requested; cluster %s: %zu nodes, %lld GPUs\n",
      trace_name.c_str(), workload->pods.size(), static_cast<long long>(gpu_pods),
      static_cast<double>(workload->total_gpu_milli) / 1000.0,
      fs::path(node_path).filename().c_str(), cluster->states.size(),
      static_cast<long long>(cluster->total_gpus));
  (void)covered;
  std::printf(
      "target workload M: %zu task shapes (coverage threshold %.0f %%); tune %.2f; seeds %s\n",
      workload->target.size(), flags.coverage, flags.tune, flags.seeds.c_str());
  std::printf(
      "sharing gain: the trace's GPU pods need %lld GPUs allocated whole, %lld with "
      "fractional sharing (Σ gpu_milli / 1000, rounded up): %.1f %% fewer\n",
      static_cast<long long>(whole),
      static_cast<long long>((workload->total_gpu_milli + 999) / 1000),
      whole ? 100.0 * (1.0 - std::ceil(workload->total_gpu_milli / 1000.0) / whole) : 0.0);

  // Every policy × seed, spread over threads (each run is single-threaded).
  struct Job {
    PlacementPolicy policy;
    uint64_t seed;
  };
  std::vector<Job> jobs;
  for (auto p : *policies) {
    for (auto s : *seeds) jobs.push_back({p, s});
  }
  std::vector<std::optional<Result<sim::RunResult>>> results(jobs.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mu;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  sim::RunOptions run_options;
  run_options.tune = flags.tune;
  run_options.verify_failures = flags.verify;
  if (flags.node_order == "cpu-per-gpu-desc") {
    run_options.node_order = sim::RunOptions::NodeOrder::kCpuPerGpuDesc;
  } else if (flags.node_order == "cpu-per-gpu-asc") {
    run_options.node_order = sim::RunOptions::NodeOrder::kCpuPerGpuAsc;
  }  // any other value was refused by CheckFlags
  // The packing upper bound (sim/bound.h) of each seed's arrival sequence, at every 5 % of
  // arrived from 80 % to the end (for the chart near the knee) — one more job per seed.
  std::vector<int> bound_pcts;
  const int last_pct = std::max(100, static_cast<int>(std::floor(flags.tune * 100 + 1e-9)));
  for (int b = 80; b <= last_pct; b += 5) bound_pcts.push_back(b);
  if (bound_pcts.back() != last_pct) bound_pcts.push_back(last_pct);
  // Per seed two bounds: for placing policies (every policy here; the table's bound100 and
  // bound130) and for any policy, free to refuse pods (sim::ArrivalBoundSeries).
  std::vector<std::optional<Result<sim::ArrivalBoundSeries>>> bounds(flags.bound ? seeds->size()
                                                                                 : 0);
  // Notebook parking on one policy's packing per seed: the scheduler's fragmentation-aware
  // policy when it is in --policies, else the first policy; the rows are without parking, then
  // each --park-idle threshold.
  PlacementPolicy park_policy = policies->front();
  for (auto p : *policies)
    if (p == core::kFragmentationAwarePolicy) park_policy = p;
  sim::ParkBuild park_build;
  park_build.notebook_share = flags.notebook_share;
  park_build.horizon_s = flags.park_hours * 3600;
  std::vector<sim::ParkSettings> park_settings(1);
  std::vector<double> park_idle;
  if (flags.parking) park_idle = *ParseParkIdle(flags.park_idle);
  for (double minutes : park_idle) {
    sim::ParkSettings s;
    s.park = true;
    s.idle_threshold_s = minutes * 60;
    s.bandwidth_gib_s = flags.park_bandwidth;
    park_settings.push_back(s);
  }
  std::vector<std::optional<Result<std::vector<sim::ParkResult>>>> park_results(jobs.size());
  const size_t total_jobs = jobs.size() + bounds.size();
  // The order the workers take the jobs in: the bounds spread evenly among the runs (their LPs
  // are solved one at a time, so two bound jobs in a row would leave a worker waiting), the
  // first one first. Entry < bounds.size() = that seed's bound, else run entry − bounds.size().
  std::vector<size_t> order;
  {
    const size_t stride = bounds.empty() ? 1 : std::max<size_t>(1, total_jobs / bounds.size());
    size_t b = 0, r = 0;
    for (size_t i = 0; i < total_jobs; ++i) {
      const bool bound_now = b < bounds.size() && (i % stride == 0 || r == jobs.size());
      order.push_back(bound_now ? b++ : bounds.size() + r++);
    }
  }
  auto worker = [&] {
    for (size_t n; (n = next.fetch_add(1)) < total_jobs;) {
      const size_t i = order[n];
      if (i < bounds.size()) {
        bounds[i] = sim::ArrivalBounds(*cluster, *workload, (*seeds)[i], flags.tune, bound_pcts);
      } else {
        const size_t j = i - bounds.size();
        const bool park_here = flags.parking && jobs[j].policy == park_policy;
        // --replay-out has one job, whose placements it writes after the pool.
        const bool replay = !flags.replay_out.empty();
        sim::RunOptions options = run_options;
        options.keep_placements = park_here || replay;
        results[j] = sim::RunExperiment(*cluster, *workload, jobs[j].policy, jobs[j].seed, options);
        if (park_here && results[j]->ok()) {
          park_results[j] = RunParking(*cluster, *workload, **results[j], park_build, park_settings,
                                       jobs[j].seed);
          if (!replay) {
            (*results[j])->placements.clear();
            (*results[j])->placements.shrink_to_fit();
          }
        }
      }
      const size_t d = ++done;
      if (!flags.quiet) {
        std::lock_guard<std::mutex> lock(progress_mu);
        Progress(d, total_jobs, elapsed());
      }
    }
  };
  int threads = flags.jobs > 0 ? flags.jobs : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp<int>(threads, 1, static_cast<int>(total_jobs));
  if (!flags.quiet) Progress(0, total_jobs, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (park_results[i] && !park_results[i]->ok()) {
      std::fprintf(stderr, "fracgpu simulate: parking, seed %llu: %s\n",
                   static_cast<unsigned long long>(jobs[i].seed),
                   park_results[i]->status().message().c_str());
      return 1;
    }
    if (!results[i]->ok()) {
      std::fprintf(
          stderr, "fracgpu simulate: %s seed %llu: %s\n", core::PlacementPolicyName(jobs[i].policy),
          static_cast<unsigned long long>(jobs[i].seed), results[i]->status().message().c_str());
      return 1;
    }
  }
  if (!flags.replay_out.empty()) {
    Status st = WriteReplay(flags.replay_out, *cluster, *workload, results[0]->value(),
                            jobs[0].policy, jobs[0].seed, run_options, trace_name);
    if (!st.ok()) {
      std::fprintf(stderr, "fracgpu simulate: %s\n", st.ToString().c_str());
      return 1;
    }
  }

  // Mean bound per arrived % over the seeds.
  std::vector<double> bound_mean, bound_any_mean;
  for (size_t b = 0; b < bounds.size(); ++b) {
    if (!bounds[b]->ok()) {
      std::fprintf(stderr, "fracgpu simulate: bound seed %llu: %s\n",
                   static_cast<unsigned long long>((*seeds)[b]),
                   bounds[b]->status().message().c_str());
      return 1;
    }
  }
  for (size_t k = 0; k < bound_pcts.size() && !bounds.empty(); ++k) {
    std::vector<double> v, any;
    for (const auto& b : bounds) {
      v.push_back((*b)->placing[k]);
      any.push_back((*b)->any_policy[k]);
    }
    bound_mean.push_back(Mean(v));
    bound_any_mean.push_back(Mean(any));
  }
  // A series' mean at arrived `pct` (bound_mean for placing policies, bound_any_mean).
  auto bound_at = [&](const std::vector<double>& series, int pct) -> std::optional<double> {
    for (size_t k = 0; k < series.size(); ++k) {
      if (bound_pcts[k] == pct) return series[k];
    }
    return std::nullopt;
  };

  // The table: means over seeds, the paper's means beside ours.
  const double gpus = static_cast<double>(cluster->total_gpus);
  std::printf(
      "\nGPU allocation ratio (%% of %lld GPUs) by arrived workload, mean of %zu seeds; "
      "paper = the authors' published runs (expected_results/)\n",
      static_cast<long long>(cluster->total_gpus), seeds->size());
  std::printf("%-18s %8s %8s | %8s %8s %6s | %9s %8s | %9s %8s | %7s | %8s %8s | %8s %8s\n",
              "policy", "@100%", "paper", "@130%", "paper", "diff", "unalloc", "paper", "frag@90%",
              "paper", "failed", "bound100", "gap", "bound130", "gap");
  std::vector<std::vector<double>> curves;  // per policy: mean allocation per bucket
  // Per policy: the paper's published means at 100 % and 130 % arrived (the chart's points).
  std::vector<std::pair<std::optional<double>, std::optional<double>>> paper_points;
  for (auto p : *policies) {
    std::vector<double> a100, a130, f90, failed;
    std::vector<std::vector<double>> per_bucket;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].policy != p) continue;
      const auto& r = results[i]->value();
      a100.push_back(r.buckets.alloc_pct[100]);
      a130.push_back(r.buckets.alloc_pct[130]);
      f90.push_back(r.buckets.frag_rate[90]);
      failed.push_back(static_cast<double>(r.failed));
      per_bucket.push_back(r.buckets.alloc_pct);
    }
    std::vector<double> curve(per_bucket.front().size());
    for (size_t b = 0; b < curve.size(); ++b) {
      std::vector<double> v;
      for (const auto& pb : per_bucket) v.push_back(pb[b]);
      curve[b] = Mean(v);
    }
    curves.push_back(curve);
    std::optional<double> p100, p130, pf90;
    if (paper.allo) {
      p100 = sim::PaperMean(*paper.allo, trace_name, p, "100");
      p130 = sim::PaperMean(*paper.allo, trace_name, p, "130");
    }
    if (paper.frag_ratio) pf90 = sim::PaperMean(*paper.frag_ratio, trace_name, p, "90");
    paper_points.emplace_back(p100, p130);
    const double m130 = Mean(a130);
    const std::optional<double> b130 = bound_at(bound_mean, 130), b100 = bound_at(bound_mean, 100);
    const double m100 = Mean(a100);
    std::printf(
        "%-18s %8s %8s | %8s %8s %6s | %9s %8s | %9s %8s | %7s | %8s %8s | %8s %8s\n",
        core::PlacementPolicyName(p), Fmt(m100).c_str(), Fmt(p100).c_str(), Fmt(m130).c_str(),
        Fmt(p130).c_str(),
        p130 ? (std::string(m130 - *p130 >= 0 ? "+" : "") + Fmt(m130 - *p130)).c_str() : "n/a",
        Fmt((100 - m130) / 100 * gpus, 0).c_str(),
        p130 ? Fmt((100 - *p130) / 100 * gpus, 0).c_str() : "n/a", Fmt(Mean(f90), 1).c_str(),
        Fmt(pf90, 1).c_str(), Fmt(Mean(failed), 0).c_str(), Fmt(b100).c_str(),
        b100 ? Fmt(*b100 - m100).c_str() : "n/a", Fmt(b130).c_str(),
        b130 ? Fmt(*b130 - m130).c_str() : "n/a");
  }
  std::printf(
      "(unalloc = unallocated GPUs at 130 %%; frag@90%% = fragmentation rate, fragment / "
      "unallocated GPU × 100, at 90 %% arrived; failed = pods that fit nowhere, mean per run; "
      "bound100 / bound130 = upper bound on the "
      "allocation any placing policy (one that places every pod that fits, as each policy here "
      "does) could reach for the same arrivals at 100 / 130 %%, mean of the seeds "
      "(docs/simulate.md), gap = bound − the policy's figure)\n");
  if (!bound_mean.empty()) {
    for (const auto& [who, series] :
         {std::pair<const char*, const std::vector<double>*>{"placing policies", &bound_mean},
          {"any policy (may refuse pods)", &bound_any_mean}}) {
      std::printf("upper bound by arrived %%, %s:", who);
      for (size_t k = 0; k < bound_pcts.size(); ++k) {
        std::printf(" %d%%: %s", bound_pcts[k], Fmt((*series)[k]).c_str());
      }
      std::printf("\n");
    }
  }

  if (flags.parking) {
    if (Status st =
            PrintParking(flags, trace_name, park_policy, park_build, park_settings, park_results);
        !st.ok()) {
      std::fprintf(stderr, "fracgpu simulate: %s\n", st.message().c_str());
      return 1;
    }
  }

  // CSV of allocation vs arrived % per policy, and a chart when gnuplot is installed.
  const std::string csv_path = flags.out + "/allocation_" + trace_name + ".csv";
  {
    std::ofstream csv(csv_path);
    csv << "arrived_pct";
    for (auto p : *policies) csv << "," << core::PlacementPolicyName(p);
    if (!bound_mean.empty()) csv << ",upper_bound,upper_bound_any_policy";
    csv << "\n";
    for (size_t b = 0; b < curves.front().size(); ++b) {
      csv << b;
      for (const auto& c : curves) csv << "," << (std::isnan(c[b]) ? std::string("") : Fmt(c[b]));
      if (!bound_mean.empty()) {
        for (const auto* series : {&bound_mean, &bound_any_mean}) {
          const auto v = bound_at(*series, static_cast<int>(b));
          csv << "," << (v ? Fmt(*v) : std::string(""));
        }
      }
      csv << "\n";
    }
    if (!csv) {
      std::fprintf(stderr, "fracgpu simulate: cannot write %s\n", csv_path.c_str());
      return 1;
    }
  }
  std::printf("wrote %s\n", csv_path.c_str());
  // The paper's points (x = 100 and 130 % arrived), one column per policy, for the chart.
  const std::string paper_csv = flags.out + "/paper_" + trace_name + ".csv";
  bool any_paper = false;
  {
    std::ofstream csv(paper_csv);
    csv << "arrived_pct";
    for (auto p : *policies) csv << "," << core::PlacementPolicyName(p);
    csv << "\n";
    for (const int x : {100, 130}) {
      csv << x;
      for (const auto& [p100, p130] : paper_points) {
        const std::optional<double> v = x == 100 ? p100 : p130;
        any_paper = any_paper || v.has_value();
        csv << "," << (v ? Fmt(*v) : std::string(""));
      }
      csv << "\n";
    }
  }
  // The gnuplot scripts are always written (they are the chart's definition); the PNGs only
  // when gnuplot is installed.
  const bool have_gnuplot = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  {
    // One colour per policy, told apart also by the line style: gnuplot's default colour cycle
    // repeats after 8 and its 6th and 8th colours are hard to tell apart on the knee chart.
    static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                           "#9467bd", "#8c564b", "#e377c2", "#17becf",
                                           "#bcbd22", "#7f7f7f", "#000080", "#800000"};
    constexpr size_t kNumColours = sizeof(kColours) / sizeof(kColours[0]);
    // Two charts: the whole curve, and the knee (80 % arrived to the end) where the policies
    // part and the upper bound is drawn (points every 5 %).
    for (const bool knee : {false, true}) {
      const std::string stem = flags.out + "/allocation_" + trace_name + (knee ? "_knee" : "");
      const std::string png = stem + ".png", gp = stem + ".gp";
      std::ofstream script(gp);
      // The key goes outside the plot area, right of it, so it never hides a curve whatever
      // the policies and the trace.
      // pngcairo draws dash patterns (libgd's png draws every line solid); png where it is
      // missing.
      script << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
             << "  set terminal pngcairo size 1150,600 noenhanced\n"
             << "} else {\n  set terminal png size 1150,600 noenhanced\n}\n"
             << "set output '" << png << "'\n"
             << "set datafile separator ','\nset datafile missing ''\n"
             << "set key outside right top vertical box opaque\nset grid\n"
             << "set title 'GPU allocation vs arrived workload (" << trace_name
             << (knee ? ", near the knee" : "") << ", mean of " << seeds->size() << " seeds)'\n"
             << "set xlabel 'arrived GPU request (% of the cluster GPU capacity)'\n"
             << "set ylabel 'GPU allocated (% of the cluster GPU capacity)'\n";
      if (knee) {
        script << "set xrange [80:" << curves.front().size() - 1 << "]\nset yrange [85:101]\n";
      } else {
        script << "set xrange [0:" << curves.front().size() - 1 << "]\nset yrange [0:105]\n";
      }
      script << "plot ";
      for (size_t i = 0; i < policies->size(); ++i) {
        script << (i ? ", '" : "'") << csv_path << "' using 1:" << i + 2
               << " with lines lw 2 dashtype " << 1 + i / kNumColours << " lc rgb '"
               << kColours[i % kNumColours] << "' title '"
               << core::PlacementPolicyName((*policies)[i]) << "'";
      }
      // The arrived line after the policies, dashed, so that it stays visible where every
      // policy still places everything (the curves coincide with it up to the knee).
      script << ", x title 'arrived (all placed)' with lines lw 2 dashtype (8,6) lc rgb 'black'";
      // The paper's published means as points of the same colour (no key entry per policy: one
      // entry says what the points are).
      if (any_paper) {
        for (size_t i = 0; i < policies->size(); ++i) {
          if (!paper_points[i].first && !paper_points[i].second) continue;
          script << ", '" << paper_csv << "' using 1:" << i + 2
                 << " with points pt 7 ps 1.5 lc rgb '" << kColours[i % kNumColours] << "' notitle";
        }
        script << ", NaN with points pt 7 ps 1.5 lc rgb 'black' title 'paper (published means)'";
      }
      if (!bound_mean.empty()) {
        script << ", '" << csv_path << "' using 1:" << policies->size() + 2
               << " with linespoints lw 3 dashtype 3 pt 5 ps 1 lc rgb 'black'"
               << " title 'upper bound, placing policies (LP)'"
               << ", '" << csv_path << "' using 1:" << policies->size() + 3
               << " with linespoints lw 2 dashtype 2 pt 4 ps 1 lc rgb '#606060'"
               << " title 'upper bound, any policy (LP)'";
      }
      script << "\n";
      script.close();
      if (!script) {
        std::fprintf(stderr, "fracgpu simulate: cannot write %s\n", gp.c_str());
        return 1;
      }
      if (have_gnuplot && std::system(("gnuplot '" + gp + "' 2>/dev/null").c_str()) == 0) {
        std::printf("wrote %s\n", png.c_str());
      }
    }
  }
  return 0;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Run the FGD paper's experiment (Weng et al., ATC '23) on the Alibaba openb trace: every "
      "policy x seed, our means beside the paper's");
  cmd->add_option("--trace", flags->trace, "pod list CSV (openb_pod_list_*.csv)")
      ->capture_default_str();
  cmd->add_option("--nodes", flags->nodes, "node list CSV (openb_node_list_*.csv)")
      ->capture_default_str();
  cmd->add_option("--expected", flags->expected, "the authors' expected_results/ directory")
      ->capture_default_str();
  // The names from the policy list itself, so the help cannot miss a policy.
  std::string names;
  for (const core::PlacementPolicy p : core::AllPlacementPolicies()) {
    if (!names.empty()) names += ", ";
    names += core::PlacementPolicyName(p);
  }
  cmd->add_option("--policies", flags->policies,
                  "comma list of " + names + " (DRA-FirstFit: kube-scheduler's DRA first fit, " +
                      "docs/dra.md; fragmentation-aware: the scheduler's policy, " +
                      core::PlacementPolicyName(core::kFragmentationAwarePolicy) + "), or all")
      ->capture_default_str();
  cmd->add_option("--seeds", flags->seeds, "seeds: a comma list of numbers and ranges (42-51)")
      ->capture_default_str();
  cmd->add_option("--tune", flags->tune, "arrived GPU request as a multiple of capacity")
      ->capture_default_str();
  cmd->add_option("--coverage", flags->coverage,
                  "target workload M: most popular shapes covering this % of pods")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "directory for the CSV and the PNG chart")
      ->capture_default_str();
  cmd->add_option("-j,--jobs", flags->jobs, "runs in parallel (0 = one per CPU)")
      ->capture_default_str();
  cmd->add_option("--node-order", flags->node_order,
                  "tie-break order of nodes: seeded (the paper), cpu-per-gpu-desc, cpu-per-gpu-asc")
      ->capture_default_str();
  cmd->add_option("--replay-out", flags->replay_out,
                  "with one policy and one seed: write the run's nodes (in tie-break order), M, "
                  "arrivals and placements as JSON for a replay through kube-scheduler "
                  "(bench/cluster/trace.py)");
  cmd->add_flag("--verify", flags->verify,
                "also check with core fit that no node could host a failed pod (slower)");
  cmd->add_flag("-q,--quiet", flags->quiet, "no progress bar");
  cmd->add_flag("!--no-parking", flags->parking,
                "skip the notebook parking table (docs/simulate.md \"Idle notebooks\")");
  cmd->add_option("--park-idle", flags->park_idle,
                  "parking: idle thresholds in minutes, comma list, one row each")
      ->capture_default_str();
  cmd->add_option("--notebook-share", flags->notebook_share,
                  "parking: fraction of the resident fractional single-GPU pods that are notebooks")
      ->capture_default_str();
  cmd->add_option("--park-hours", flags->park_hours, "parking: simulated hours")
      ->capture_default_str();
  cmd->add_option("--park-bandwidth", flags->park_bandwidth,
                  "parking: park and restore copy rate, GiB/s (assumed until measured)")
      ->capture_default_str();
  cmd->add_flag(
      "!--no-bound", flags->bound,
      "skip the packing upper bounds (per seed: the forced pods of placing policies, then one or "
      "two GLPK LPs per 5 % of arrived)");
  cmd->callback([flags] {
    const int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
