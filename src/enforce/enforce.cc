#include "enforce/enforce.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace fracgpu::enforce {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string Key(Reason r, const std::string& uuid, const std::string& who) {
  return fmt::format("{}|{}|{}", static_cast<int>(r), uuid, who);
}

std::string Who(const ContainerId& c) { return c.pod_uid + "/" + c.container; }

}  // namespace

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kMemoryOverLimit:
      return "memory_over_limit";
    case Reason::kRegionMismatch:
      return "region_mismatch";
    case Reason::kUnmanagedProcess:
      return "unmanaged_process";
    case Reason::kSmOverLimit:
      return "sm_over_limit";
    case Reason::kLimitsUnreadable:
      return "limits_unreadable";
  }
  return "unknown";
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kNone:
      return "none";
    case Action::kReport:
      return "report";
    case Action::kKill:
      return "kill";
  }
  return "unknown";
}

bool ParseAction(const std::string& text, Action* out) {
  if (text == "report")
    *out = Action::kReport;
  else if (text == "kill")
    *out = Action::kKill;
  else if (text == "none")
    *out = Action::kNone;
  else
    return false;
  return true;
}

std::string Finding::Describe() const {
  std::string who =
      container ? fmt::format("pod {} container {}", container->pod_uid, container->container)
                : fmt::format("pid {}", pid);
  std::string text;
  switch (reason) {
    case Reason::kMemoryOverLimit:
      text = fmt::format(
          "{} on {}: {} uses {:.1f} MiB of {:.1f} MiB (+{:.1f} MiB), pushed over by pid {} ({:.1f} "
          "MiB)",
          ReasonName(reason), gpu_uuid, who, MiB(used_bytes), MiB(limit_bytes),
          MiB(used_bytes - std::min(used_bytes, limit_bytes)), pid, MiB(process_bytes));
      break;
    case Reason::kRegionMismatch:
      text = fmt::format(
          "{} on {}: {}: pid {} holds {:.1f} MiB on the driver, its region claims {:.1f} MiB",
          ReasonName(reason), gpu_uuid, who, pid, MiB(process_bytes), MiB(claimed_bytes));
      break;
    case Reason::kUnmanagedProcess:
      text = fmt::format("{} on {}: pid {} holds {:.1f} MiB and belongs to no fracgpu container",
                         ReasonName(reason), gpu_uuid, pid, MiB(process_bytes));
      break;
    case Reason::kSmOverLimit:
      text = fmt::format("{} on {}: {} uses {:.0f}% of the SMs, limit {:.0f}%", ReasonName(reason),
                         gpu_uuid, who, sm_ratio * 100, sm_limit_ratio * 100);
      break;
    case Reason::kLimitsUnreadable:
      text =
          fmt::format("{} on {}: {} has processes holding {:.1f} MiB but its limits cannot be read",
                      ReasonName(reason), gpu_uuid, who, MiB(used_bytes));
      break;
  }
  if (!detail.empty()) text += " (" + detail + ")";
  text += fmt::format("; action {}",
                      ActionName(action == Action::kNone && confirmed ? Action::kReport : action));
  return text;
}

Finding Enforcer::Track(const std::string& key, Finding f, uint64_t now_ns, bool sm,
                        std::set<std::string>* seen) {
  seen->insert(key);
  auto [it, fresh] = episodes_.try_emplace(key);
  Episode& e = it->second;
  if (fresh) e.since_ns = now_ns;
  ++e.polls;
  f.polls = e.polls;
  f.confirmed = sm ? now_ns - e.since_ns >= policy_.sm_window_ns
                   : e.polls >= std::max(1, policy_.confirm_polls);
  f.new_episode = f.confirmed && !e.reported;
  if (f.confirmed) e.reported = true;
  if (!f.confirmed) f.action = Action::kNone;
  return f;
}

std::vector<Finding> Enforcer::Evaluate(const Observation& obs) {
  std::vector<Finding> out;
  std::set<std::string> seen;
  std::set<std::string> failed_gpus;
  std::map<ContainerId, const ContainerState*> states;
  for (const ContainerState& c : obs.containers) states[c.id] = &c;
  std::map<std::pair<std::string, uint32_t>, uint64_t> current_used;
  const uint64_t slack = policy_.memory_slack_bytes;

  for (const GpuSample& gpu : obs.gpus) {
    if (!gpu.managed) continue;
    if (!gpu.processes_ok) {
      failed_gpus.insert(gpu.uuid);
      continue;
    }
    std::map<ContainerId, std::vector<DriverProcess>> groups;
    for (const DriverProcess& p : gpu.processes) {
      if (obs.exited.count(p.host_pid)) continue;
      auto owner = obs.owners.find(p.host_pid);
      if (owner == obs.owners.end() || !states.count(owner->second.container)) {
        if (policy_.unmanaged == Action::kNone || p.used_bytes <= policy_.ignore_below_bytes)
          continue;
        Finding f;
        f.reason = Reason::kUnmanagedProcess;
        f.gpu_uuid = gpu.uuid;
        f.pid = p.host_pid;
        f.start_time = owner == obs.owners.end() ? 0 : owner->second.start_time;
        f.used_bytes = f.process_bytes = p.used_bytes;
        // Kill only a process known to be in a pod container fracgpu gave no GPU; never one in
        // no pod (the host's) or one that cannot be placed.
        auto foreign = obs.foreign_pod_processes.find(p.host_pid);
        if (policy_.unmanaged == Action::kKill && foreign != obs.foreign_pod_processes.end()) {
          f.action = Action::kKill;
          f.start_time = foreign->second;
          f.detail = "a pod container with no fracgpu GPU";
        } else {
          f.action = Action::kReport;
        }
        out.push_back(Track(Key(f.reason, gpu.uuid, std::to_string(p.host_pid)), f, obs.now_ns,
                            false, &seen));
        continue;
      }
      groups[owner->second.container].push_back(p);
    }

    for (const auto& [id, procs] : groups) {
      const ContainerState& c = *states.at(id);
      uint64_t total = 0;
      for (const auto& p : procs)
        total = total + p.used_bytes < total ? UINT64_MAX : total + p.used_bytes;
      auto start_of = [&](uint32_t pid) { return obs.owners.at(pid).start_time; };
      if (!c.limits_ok) {
        Finding f;
        f.reason = Reason::kLimitsUnreadable;
        f.gpu_uuid = gpu.uuid;
        f.container = id;
        f.used_bytes = total;
        f.detail = c.limits_error;
        f.action = Action::kReport;  // reported, never killed
        out.push_back(Track(Key(f.reason, gpu.uuid, Who(id)), f, obs.now_ns, false, &seen));
        continue;
      }
      static const std::map<uint32_t, uint64_t> kNoClaims;
      auto ci = c.claims.find(gpu.uuid);
      const auto& claims = ci == c.claims.end() ? kNoClaims : ci->second;
      auto claim_of = [&](uint32_t pid) {
        auto it = claims.find(pid);
        return it == claims.end() ? uint64_t{0} : it->second;
      };
      auto excess_of = [&](const DriverProcess& p) {
        uint64_t claim = claim_of(p.host_pid);
        return p.used_bytes > claim ? p.used_bytes - claim : uint64_t{0};
      };

      // Region claims against the driver.
      if (policy_.region_mismatch != Action::kNone) {
        const DriverProcess* worst = nullptr;
        for (const auto& p : procs) {
          if (p.used_bytes <= policy_.ignore_below_bytes) continue;
          bool bad = !c.region_ok || excess_of(p) > slack;
          if (bad && (worst == nullptr || excess_of(p) > excess_of(*worst))) worst = &p;
        }
        if (worst != nullptr) {
          Finding f;
          f.reason = Reason::kRegionMismatch;
          f.gpu_uuid = gpu.uuid;
          f.container = id;
          f.pid = worst->host_pid;
          f.start_time = start_of(worst->host_pid);
          f.process_bytes = worst->used_bytes;
          f.used_bytes = total;
          f.claimed_bytes = c.region_ok ? claim_of(worst->host_pid) : 0;
          if (!c.region_ok) f.detail = "region unusable: " + c.region_error;
          f.action = policy_.region_mismatch;
          out.push_back(Track(Key(f.reason, gpu.uuid, Who(id)), f, obs.now_ns, false, &seen));
        }
      }

      // Memory over the limit.
      auto li = c.memory_limit_bytes.find(gpu.uuid);
      uint64_t limit = li == c.memory_limit_bytes.end() ? 0 : li->second;
      Action memory_action = c.memory_action.value_or(policy_.memory);
      bool over = limit > 0 && total > limit && total - limit > slack;
      for (const auto& p : procs) {
        current_used[{gpu.uuid, p.host_pid}] = p.used_bytes;
        if (!over) baseline_used_[{gpu.uuid, p.host_pid}] = p.used_bytes;
      }
      if (over && memory_action != Action::kNone) {
        auto growth = [&](const DriverProcess& p) {
          auto prev = baseline_used_.find({gpu.uuid, p.host_pid});
          uint64_t before = prev == baseline_used_.end() ? 0 : prev->second;
          return p.used_bytes > before ? p.used_bytes - before : uint64_t{0};
        };
        const DriverProcess* culprit = &procs.front();
        for (const auto& p : procs) {
          if (std::make_tuple(excess_of(p), growth(p), p.used_bytes) >
              std::make_tuple(excess_of(*culprit), growth(*culprit), culprit->used_bytes))
            culprit = &p;
        }
        Finding f;
        f.reason = Reason::kMemoryOverLimit;
        f.gpu_uuid = gpu.uuid;
        f.container = id;
        f.pid = culprit->host_pid;
        f.start_time = start_of(culprit->host_pid);
        f.used_bytes = total;
        f.limit_bytes = limit;
        f.process_bytes = culprit->used_bytes;
        f.claimed_bytes = claim_of(culprit->host_pid);
        f.action = memory_action;
        out.push_back(Track(Key(f.reason, gpu.uuid, Who(id)), f, obs.now_ns, false, &seen));
      }
    }

    // SM utilisation over the limit for the whole window (every container with an owner on
    // this GPU, whether or not it holds memory there).
    if (gpu.sm_utilization && policy_.sm != Action::kNone) {
      std::map<ContainerId, double> sums;
      for (const auto& [pid, ratio] : *gpu.sm_utilization) {
        if (obs.exited.count(pid)) continue;
        auto owner = obs.owners.find(pid);
        if (owner == obs.owners.end() || !states.count(owner->second.container)) continue;
        sums[owner->second.container] += ratio;
      }
      for (const auto& [id, sum] : sums) {
        const ContainerState& c = *states.at(id);
        if (!c.limits_ok) continue;
        auto si = c.sm_limit_percent.find(gpu.uuid);
        uint32_t pct = si == c.sm_limit_percent.end() ? 0 : si->second;
        if (pct == 0 || pct >= 100) continue;
        double limit = pct / 100.0;
        if (sum <= limit + policy_.sm_slack_ratio) continue;
        Finding f;
        f.reason = Reason::kSmOverLimit;
        f.gpu_uuid = gpu.uuid;
        f.container = id;
        f.sm_ratio = sum;
        f.sm_limit_ratio = limit;
        f.action = Action::kReport;  // the SM limiter throttles; the agent only reports
        out.push_back(Track(Key(f.reason, gpu.uuid, Who(id)), f, obs.now_ns, true, &seen));
      }
    }
  }

  // Episodes not seen this poll are over, except on GPUs NVML could not read.
  for (auto it = episodes_.begin(); it != episodes_.end();) {
    bool keep = seen.count(it->first) > 0;
    if (!keep) {
      for (const auto& uuid : failed_gpus)
        if (it->first.find("|" + uuid + "|") != std::string::npos) keep = true;
    }
    it = keep ? std::next(it) : episodes_.erase(it);
  }
  // Baselines of processes no longer listed are dropped (kept on GPUs NVML could not read).
  for (auto it = baseline_used_.begin(); it != baseline_used_.end();) {
    bool keep = current_used.count(it->first) > 0 || failed_gpus.count(it->first.first) > 0;
    it = keep ? std::next(it) : baseline_used_.erase(it);
  }

  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.reason, a.gpu_uuid, a.container, a.pid) <
           std::tie(b.reason, b.gpu_uuid, b.container, b.pid);
  });
  return out;
}

}  // namespace fracgpu::enforce
