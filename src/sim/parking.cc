#include "sim/parking.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

namespace fracgpu::sim {
namespace {

constexpr double kMibPerGib = 1024.0;

// Events at the same time run in this order: a finishing borrower frees memory first, an owner
// waking takes its memory back before anyone else can claim it, then idleness, then arrivals.
enum EventKind { kFinishEv = 0, kWakeEv = 1, kIdleEv = 2, kParkableEv = 3, kArriveEv = 4 };

struct Event {
  double t;
  int kind;
  int32_t id;
  uint64_t epoch;
  bool operator>(const Event& o) const {
    return std::tie(t, kind, id, epoch) > std::tie(o.t, o.kind, o.id, o.epoch);
  }
};

double Percentile(std::vector<double> v, double p) {  // nearest rank
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  k = std::clamp<size_t>(k, 1, v.size());
  return v[k - 1];
}

class ParkingRun {
 public:
  ParkingRun(const ParkInput& in, const ParkSettings& s) : in_(in), s_(s) {}

  Result<ParkResult> Run() {
    FRACGPU_RETURN_IF_ERROR(Check());
    const size_t G = in_.gpus.size();
    gpu_.resize(G);
    for (size_t g = 0; g < G; ++g) gpu_[g].free = 1000 - in_.gpus[g].held_milli;
    nb_.resize(in_.notebooks.size());
    for (size_t n = 0; n < in_.notebooks.size(); ++n) {
      const ParkNotebook& p = in_.notebooks[n];
      gpu_[p.gpu].notebooks.push_back(static_cast<int32_t>(n));
      for (const auto& [a, b] : p.active) {
        Push({a, kWakeEv, static_cast<int32_t>(n), 0});
        Push({b, kIdleEv, static_cast<int32_t>(n), 0});
        active_s_ += b - a;
      }
      if (p.active.empty() || p.active.front().first > 0) {
        nb_[n].idle_since = std::min(0.0, p.idle_since);
        ScheduleParkable(static_cast<int32_t>(n));
      }
    }
    br_.resize(in_.borrowers.size());
    for (size_t i = 0; i < in_.borrowers.size(); ++i)
      Push({in_.borrowers[i].arrival_s, kArriveEv, static_cast<int32_t>(i), 0});

    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.t >= in_.horizon_s) break;
      now_ = e.t;
      touched_.clear();
      switch (e.kind) {
        case kFinishEv:
          Finish(e);
          break;
        case kWakeEv:
          Wake(e.id);
          break;
        case kIdleEv:
          Idle(e.id);
          break;
        case kParkableEv:
          Parkable(e);
          break;
        case kArriveEv:
          Arrive(e.id);
          break;
      }
      FRACGPU_RETURN_IF_ERROR(CheckInvariant(e));
    }
    return Summarize();
  }

 private:
  struct GpuRun {
    int32_t free = 0;      // milli no resident holds
    int32_t parked = 0;    // milli of parked notebooks
    int32_t borrowed = 0;  // milli of borrowers placed (running or about to start)
    std::vector<int32_t> notebooks;
    std::vector<int32_t> running;  // borrowers placed here
  };
  struct NbRun {
    bool active = false, parked = false, parkable = false;
    double idle_since = 0;
    uint64_t idle_epoch = 0;
  };
  struct BrRun {
    enum { kNotArrived, kQueued, kRunning, kDone } state = kNotArrived;
    int32_t gpu = -1;
    double start = 0, queued_since = 0, waited = 0;
    uint64_t epoch = 0;
  };

  Status Check() const {
    for (const auto& g : in_.gpus) {
      if (g.held_milli < 0 || g.held_milli > 1000 || g.devmem_mib <= 0)
        return InvalidArgument("parking: a GPU holds " + std::to_string(g.held_milli) +
                               " milli of " + std::to_string(g.devmem_mib) + " MiB");
    }
    for (const auto& n : in_.notebooks) {
      if (n.gpu < 0 || static_cast<size_t>(n.gpu) >= in_.gpus.size() || n.milli < 1 ||
          n.milli > 1000)
        return InvalidArgument("parking: a notebook on GPU " + std::to_string(n.gpu) +
                               " with share " + std::to_string(n.milli));
      double last = 0;
      for (const auto& [a, b] : n.active) {
        if (a < last || b <= a) return InvalidArgument("parking: notebook periods out of order");
        last = b;
      }
    }
    double last = 0;
    for (const auto& b : in_.borrowers) {
      if (b.milli < 10 || b.milli > 1000 || b.milli % 10 != 0 || !(b.duration_s > 0) ||
          b.arrival_s < last)
        return InvalidArgument("parking: a borrower of share " + std::to_string(b.milli) +
                               " needing " + std::to_string(b.duration_s) + " s");
      last = b.arrival_s;
    }
    return Status::Ok();
  }

  void Push(const Event& e) { events_.push(e); }
  void Record(ParkEvent::Kind k, int32_t gpu, int32_t who) {
    if (s_.keep_events) result_.events.push_back({k, now_, gpu, who});
  }
  double Gib(int32_t milli, int32_t gpu) const {
    return static_cast<double>(milli) / 1000.0 * static_cast<double>(in_.gpus[gpu].devmem_mib) /
           kMibPerGib;
  }
  double CopySeconds(double gib) const { return s_.fixed_s + gib / s_.bandwidth_gib_s; }

  void ScheduleParkable(int32_t n) {
    NbRun& nb = nb_[n];
    ++nb.idle_epoch;
    nb.parkable = false;
    if (!s_.park) return;
    Push({std::max(now_, nb.idle_since + s_.idle_threshold_s), kParkableEv, n, nb.idle_epoch});
  }

  int32_t Avail(int32_t g) const { return gpu_[g].free + gpu_[g].parked - gpu_[g].borrowed; }
  int32_t ParkableMilli(int32_t g) const {
    int32_t m = 0;
    for (int32_t n : gpu_[g].notebooks)
      if (nb_[n].parkable && !nb_[n].parked) m += in_.notebooks[n].milli;
    return m;
  }
  bool Allowed(int32_t i, int32_t g) const {
    return (in_.borrowers[i].type_mask >> in_.gpus[g].type) & 1;
  }

  // Places borrower i on GPU g now if it fits, parking idle notebooks of g (longest idle first)
  // only when parking them all would make room; false if it does not fit.
  bool TryPlace(int32_t i, int32_t g, bool may_park) {
    if (!Allowed(i, g)) return false;
    const int32_t need = in_.borrowers[i].milli;
    double delay = 0;
    if (Avail(g) < need) {
      if (!may_park || !s_.park || Avail(g) + ParkableMilli(g) < need) return false;
      std::vector<int32_t> cand;
      for (int32_t n : gpu_[g].notebooks)
        if (nb_[n].parkable && !nb_[n].parked) cand.push_back(n);
      std::sort(cand.begin(), cand.end(), [&](int32_t a, int32_t b) {
        return std::tie(nb_[a].idle_since, a) < std::tie(nb_[b].idle_since, b);
      });
      double gib = 0;
      for (int32_t n : cand) {
        if (Avail(g) >= need) break;
        nb_[n].parked = true;
        gpu_[g].parked += in_.notebooks[n].milli;
        gib += Gib(in_.notebooks[n].milli, g);
        ++result_.parks;
        Record(ParkEvent::kPark, g, n);
      }
      delay = CopySeconds(gib);  // the borrower starts when its memory has been copied out
      parked_gib_ += gib;
      result_.max_parked_gib = std::max(result_.max_parked_gib, parked_gib_);
    }
    touched_.push_back(g);
    BrRun& b = br_[i];
    queue_[need / 10].erase(i);
    b.state = BrRun::kRunning;
    b.gpu = g;
    b.start = now_ + delay;
    b.waited += b.start - b.queued_since;
    if (b.epoch == 0) ++result_.started;
    ++b.epoch;
    gpu_[g].borrowed += need;
    gpu_[g].running.push_back(i);
    Push({b.start + in_.borrowers[i].duration_s, kFinishEv, i, b.epoch});
    Record(ParkEvent::kStart, g, i);
    return true;
  }

  // First fit over every GPU: without parking first, then (if allowed) with.
  bool PlaceAnywhere(int32_t i) {
    for (int32_t g = 0; g < static_cast<int32_t>(gpu_.size()); ++g)
      if (TryPlace(i, g, false)) return true;
    if (!s_.park) return false;
    for (int32_t g = 0; g < static_cast<int32_t>(gpu_.size()); ++g)
      if (TryPlace(i, g, true)) return true;
    return false;
  }

  // Fills GPU g from the queue, earliest arrival first among those that fit.
  void FillGpu(int32_t g) {
    while (true) {
      const int32_t room = Avail(g) + (s_.park ? ParkableMilli(g) : 0);
      int32_t best = -1;
      for (int32_t k = 1; k <= std::min(100, room / 10); ++k) {
        for (int32_t i : queue_[k]) {
          if (best >= 0 && i > best) break;
          if (Allowed(i, g)) {
            best = i;
            break;
          }
        }
      }
      if (best < 0 || !TryPlace(best, g, true)) return;
    }
  }

  void Queue(int32_t i) {
    BrRun& b = br_[i];
    b.state = BrRun::kQueued;
    b.queued_since = now_;
    queue_[in_.borrowers[i].milli / 10].insert(i);
  }

  void Arrive(int32_t i) {
    ++result_.borrowers;
    Queue(i);
    PlaceAnywhere(i);
  }

  void Finish(const Event& e) {
    BrRun& b = br_[e.id];
    if (b.state != BrRun::kRunning || b.epoch != e.epoch) return;
    const int32_t g = b.gpu, m = in_.borrowers[e.id].milli;
    b.state = BrRun::kDone;
    gpu_[g].borrowed -= m;
    std::erase(gpu_[g].running, e.id);
    borrower_milli_s_ += m * in_.borrowers[e.id].duration_s;
    ++result_.completed;
    Record(ParkEvent::kFinish, g, e.id);
    FillGpu(g);
  }

  void Wake(int32_t n) {
    NbRun& nb = nb_[n];
    const ParkNotebook& p = in_.notebooks[n];
    const int32_t g = p.gpu;
    nb.active = true;
    nb.parkable = false;
    touched_.push_back(g);
    ++nb.idle_epoch;  // a pending parkable event is stale now
    if (!nb.parked) return;
    nb.parked = false;
    gpu_[g].parked -= p.milli;
    const double gib = Gib(p.milli, g);
    parked_gib_ -= gib;
    const double wait = CopySeconds(gib);
    wake_waits_.push_back(wait);
    ++result_.wakes;
    Record(ParkEvent::kWake, g, n);
    // The active period this wake starts loses the restore time (its schedule is the model's).
    for (const auto& [a, b] : p.active) {
      if (a == now_) {
        restore_lost_milli_s_ += p.milli * std::min(wait, b - a);
        break;
      }
    }
    // Evict the most recently placed borrowers until the owner's memory is free.
    std::vector<int32_t> evicted;
    while (Avail(g) < 0) {
      auto it = std::max_element(gpu_[g].running.begin(), gpu_[g].running.end(),
                                 [&](int32_t a, int32_t b) {
                                   return std::tie(br_[a].start, a) < std::tie(br_[b].start, b);
                                 });
      const int32_t i = *it;
      gpu_[g].running.erase(it);
      BrRun& b = br_[i];
      const int32_t m = in_.borrowers[i].milli;
      gpu_[g].borrowed -= m;
      if (now_ > b.start) {
        result_.lost_gpu_hours += m / 1000.0 * (now_ - b.start) / 3600.0;
      } else {
        b.waited -= b.start - now_;  // it never started: its wait ends now
      }
      ++b.epoch;  // its finish event is stale
      ++result_.evictions;
      Record(ParkEvent::kEvict, g, i);
      Queue(i);
      evicted.push_back(i);
    }
    for (int32_t i : evicted)
      if (br_[i].state == BrRun::kQueued) PlaceAnywhere(i);
  }

  void Idle(int32_t n) {
    nb_[n].active = false;
    nb_[n].idle_since = now_;
    ScheduleParkable(n);
  }

  void Parkable(const Event& e) {
    NbRun& nb = nb_[e.id];
    if (nb.active || e.epoch != nb.idle_epoch) return;
    nb.parkable = true;
    FillGpu(in_.notebooks[e.id].gpu);
  }

  // Every GPU the event changed (a placement, a park, a wake).
  Status CheckInvariant(const Event&) const {
    for (int32_t g : touched_) {
      const GpuRun& r = gpu_[g];
      if (r.free + r.parked - r.borrowed < 0)
        return Internal("parking: GPU " + std::to_string(g) +
                        " lends more than it has at t=" + std::to_string(now_));
      for (int32_t n : r.notebooks)
        if (nb_[n].active && nb_[n].parked)
          return Internal("parking: notebook " + std::to_string(n) + " active while parked");
    }
    return Status::Ok();
  }

  Result<ParkResult> Summarize() {
    now_ = in_.horizon_s;
    std::vector<double> waits;
    for (size_t i = 0; i < br_.size(); ++i) {
      BrRun& b = br_[i];
      if (b.state == BrRun::kNotArrived) continue;
      if (b.state == BrRun::kQueued) b.waited += now_ - b.queued_since;
      if (b.state == BrRun::kRunning) {
        if (b.start > now_) {
          b.waited -= b.start - now_;
        } else {
          borrower_milli_s_ += in_.borrowers[i].milli * (now_ - b.start);
        }
      }
      waits.push_back(b.waited);
    }
    double sum = 0;
    for (double w : waits) sum += w;
    result_.wait_mean_s = waits.empty() ? 0 : sum / static_cast<double>(waits.size());
    result_.wait_p95_s = Percentile(waits, 0.95);
    result_.wake_p50_s = Percentile(wake_waits_, 0.50);
    result_.wake_p99_s = Percentile(wake_waits_, 0.99);
    double nb_milli_s = 0;
    for (const auto& p : in_.notebooks)
      for (const auto& [a, b] : p.active) nb_milli_s += p.milli * (b - a);
    nb_milli_s -= restore_lost_milli_s_;
    const double denom = 1000.0 * static_cast<double>(in_.gpus.size()) * in_.horizon_s;
    if (denom > 0) {
      result_.work_per_gpu = (static_cast<double>(in_.other_busy_milli) * in_.horizon_s +
                              nb_milli_s + borrower_milli_s_) /
                             denom;
      result_.borrower_work_per_gpu = borrower_milli_s_ / denom;
    }
    result_.notebooks = static_cast<int64_t>(in_.notebooks.size());
    if (!in_.notebooks.empty() && in_.horizon_s > 0)
      result_.notebook_active_fraction =
          active_s_ / (static_cast<double>(in_.notebooks.size()) * in_.horizon_s);
    return std::move(result_);
  }

  const ParkInput& in_;
  const ParkSettings& s_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::vector<GpuRun> gpu_;
  std::vector<NbRun> nb_;
  std::vector<BrRun> br_;
  std::set<int32_t> queue_[101];  // queued borrowers by share / 10, in arrival order
  std::vector<double> wake_waits_;
  std::vector<int32_t> touched_;  // GPUs the current event changed
  double now_ = 0, active_s_ = 0, borrower_milli_s_ = 0, restore_lost_milli_s_ = 0;
  double parked_gib_ = 0;
  ParkResult result_;
};

// Uniform in [0, 1) from 53 random bits.
double Unit(core::SeededRng& rng) { return static_cast<double>(rng.Next() >> 11) * 0x1p-53; }
double Exponential(core::SeededRng& rng, double mean) { return -mean * std::log1p(-Unit(rng)); }

}  // namespace

Result<ParkResult> SimulateParking(const ParkInput& in, const ParkSettings& settings) {
  if (settings.park && !(settings.bandwidth_gib_s > 0))
    return InvalidArgument("parking: bandwidth must be > 0 GiB/s");
  ParkingRun run(in, settings);
  return run.Run();
}

Result<ParkInput> BuildParkInput(const SimCluster& cluster, const SimWorkload& workload,
                                 const RunResult& run, const ParkBuild& build, uint64_t seed) {
  if (run.placements.size() != static_cast<size_t>(run.pods))
    return InvalidArgument("parking: the run kept no placements");
  ParkInput in;
  in.horizon_s = build.horizon_s;
  std::unordered_map<std::string, int32_t> gpu_of;
  std::map<std::string, int32_t> type_of;
  for (size_t t = 0; t < cluster.type_table.size(); ++t)
    type_of[cluster.type_table[t]] = static_cast<int32_t>(t);
  for (const auto& node : cluster.states) {
    for (const auto& g : node.gpus) {
      gpu_of[g.info.uuid] = static_cast<int32_t>(in.gpus.size());
      ParkGpu pg;
      pg.devmem_mib = g.info.devmem_mib;
      auto it = type_of.find(g.info.type);
      pg.type = it == type_of.end() ? 0 : it->second;
      in.gpus.push_back(pg);
    }
  }
  core::SeededRng nb_rng(seed, 3), br_rng(seed, 4);
  const NotebookModel& m = build.model;
  const double p_active = m.ActiveFraction();
  auto idle_mean = [&]() { return Unit(nb_rng) < m.think_prob ? m.think_mean_s : m.away_mean_s; };
  // The trace's run times (deletion − scheduled), for borrowers whose own is unknown.
  std::vector<double> trace_runs;
  for (const TracePod& p : workload.pods) {
    if (p.num_gpus > 0 && p.scheduled_time >= 0 && p.deletion_time > p.scheduled_time)
      trace_runs.push_back(static_cast<double>(p.deletion_time - p.scheduled_time));
  }
  const int64_t capacity = cluster.CapacityMilli();
  int64_t arrived = 0;
  std::vector<int32_t> later;  // arrivals after 100 %
  for (const PodPlacement& pl : run.placements) {
    const TracePod& pod = workload.pods[pl.pod];
    arrived += pod.TotalGpuMilli();
    if (arrived > capacity) {
      if (pod.num_gpus == 1) later.push_back(pl.pod);
      continue;
    }
    if (pl.node.empty() || pod.num_gpus == 0) continue;
    std::vector<int32_t> gpus;
    for (const std::string& uuid : pl.gpus) {
      auto it = gpu_of.find(uuid);
      if (it == gpu_of.end()) return InvalidArgument("parking: unknown GPU " + uuid);
      gpus.push_back(it->second);
      in.gpus[it->second].held_milli += pod.gpu_milli;
    }
    const bool candidate = pod.num_gpus == 1 && pod.gpu_milli < 1000;
    if (!candidate || Unit(nb_rng) >= build.notebook_share) {
      in.other_busy_milli += pod.TotalGpuMilli();
      continue;
    }
    ParkNotebook nb;
    nb.gpu = gpus.front();
    nb.milli = pod.gpu_milli;
    // Start in the stationary phase: active with the long-run active probability; an idle
    // period is cut at 0 into its age and its rest (both exponential of its mean: memoryless).
    double t = 0;
    bool active = Unit(nb_rng) < p_active;
    if (!active) {
      const double mean = idle_mean();
      nb.idle_since = -Exponential(nb_rng, mean);
      t = Exponential(nb_rng, mean);
    }
    while (t < build.horizon_s) {
      const double end = std::min(build.horizon_s, t + Exponential(nb_rng, m.active_mean_s));
      if (end > t) nb.active.emplace_back(t, end);
      t = end + Exponential(nb_rng, idle_mean());
    }
    in.notebooks.push_back(std::move(nb));
  }
  // Borrowers: Poisson arrivals over the horizon (sorted uniform times), in arrival order.
  std::vector<double> times;
  for (size_t i = 0; i < later.size(); ++i) times.push_back(Unit(br_rng) * build.horizon_s);
  std::sort(times.begin(), times.end());
  for (size_t i = 0; i < later.size(); ++i) {
    const TracePod& pod = workload.pods[later[i]];
    ParkBorrower b;
    b.arrival_s = times[i];
    b.milli = pod.gpu_milli;
    b.type_mask = workload.demand[later[i]].type_mask;
    if (pod.scheduled_time >= 0 && pod.deletion_time > pod.scheduled_time) {
      b.duration_s = static_cast<double>(pod.deletion_time - pod.scheduled_time);
    } else if (!trace_runs.empty()) {
      b.duration_s = trace_runs[br_rng.Uniform(trace_runs.size())];
    } else {
      b.duration_s = 3600;
    }
    in.borrowers.push_back(b);
  }
  return in;
}

}  // namespace fracgpu::sim
