#include "monitor/parking.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "api/limits.h"
#include "api/region.h"
#include "base/file.h"
#include "base/strings.h"
#include "core/annotations.h"
#include "core/request.h"
#include "vgpu/limits.h"

namespace fracgpu::monitor {

namespace {

std::string RegionPath(const std::string& dir_path) { return dir_path + "/region.cache"; }

constexpr size_t kMaxLimitsBytes = 64 * 1024;  // a limits file, as the enforcement reads it

bool EqualsIgnoreCase(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const char* OutcomeName(node::ParkOutcome o) {
  switch (o) {
    case node::ParkOutcome::kParked:
      return "parked";
    case node::ParkOutcome::kAwake:
      return "awake";
    case node::ParkOutcome::kIneligible:
      return "ineligible";
    case node::ParkOutcome::kBusy:
      return "busy";
    case node::ParkOutcome::kNoRoom:
      return "no room";
    case node::ParkOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

}  // namespace

bool ParkOptedIn(const PodRef* pod, const ParkingOptions& options) {
  if (!pod) return false;
  if (pod->park == "true") return true;
  if (pod->park == "false") return false;
  return options.default_namespaces.count(pod->namespace_name) != 0;
}

ParkAction DecideParking(const ParkInput& in, const ParkingOptions& options) {
  if (in.parked) {
    return (in.wake_requests != in.wake_baseline || !in.opted_in) ? ParkAction::kWake
                                                                  : ParkAction::kNone;
  }
  const uint64_t idle_after =
      static_cast<uint64_t>(std::max<int64_t>(0, options.idle_after.count()));
  if (in.opted_in && in.borrower_pending && in.single_gpu && in.used_bytes > 0 &&
      in.processes > 0 && in.processes_without_host_pid == 0 && in.idle_ns >= idle_after)
    return ParkAction::kPark;
  return ParkAction::kNone;
}

ParkController::ParkController(ParkingOptions options, ParkHost host)
    : options_(std::move(options)),
      host_(std::move(host)),
      parker_(host_.driver, options_.allowed_drivers, options_.lock_timeout_ms) {}

node::ParkTarget ParkController::Target(const std::string& path, const std::string& uuid,
                                        const std::string& pod_uid, std::vector<int> pids,
                                        std::vector<uint64_t> start_times) const {
  node::ParkTarget t;
  t.pids = pids;
  // Each process must still be the one verified at the park (its start time) before each Lock,
  // Restore and Unlock: a PID reused after an exit is another process.
  t.same = [this, pids, start_times = std::move(start_times)](int pid) -> std::string {
    auto at = std::find(pids.begin(), pids.end(), pid);
    if (at == pids.end() || static_cast<size_t>(at - pids.begin()) >= start_times.size())
      return "not a process verified";
    if (!host_.start_time) return "no start time to check";
    auto now = host_.start_time(pid);
    if (!now.ok()) return now.status().message();
    const uint64_t then = start_times[static_cast<size_t>(at - pids.begin())];
    if (*now != then)
      return "its start time is " + std::to_string(*now) + ", not " + std::to_string(then);
    return "";
  };
  // The facts are read again at each call (Parker reads them before and after the Lock): the
  // region's record of the processes' uses and their charged memory, the GPU's and the pod's.
  t.facts = [this, path, uuid, pod_uid, pids = std::move(pids)] {
    node::CheckpointFacts f = host_.facts(uuid, pod_uid, pids);
    auto region = ReadRegionFile(path);
    if (!region.ok() || region->devices.size() != 1) {
      f.process_uses.clear();  // fails the "no process recorded" gate
      return f;
    }
    f.process_uses = region->slot_uses;
    f.device_bytes = region->devices[0].used_bytes;
    return f;
  };
  t.free_bytes = [this, uuid] { return host_.free_bytes(uuid); };
  return t;
}

std::string ParkController::Changed(const ParkedSlice& slice) const {
  std::string out;
  for (size_t i = 0; i < slice.pids.size(); ++i) {
    auto now = host_.start_time ? host_.start_time(slice.pids[i])
                                : Result<uint64_t>(Unavailable("no start time to check"));
    std::string why;
    if (!now.ok()) {
      why = now.status().message();
    } else if (i >= slice.start_times.size() || *now != slice.start_times[i]) {
      why = "started again (start time " + std::to_string(*now) + ")";
    }
    if (!why.empty())
      out += (out.empty() ? "" : "; ") + std::string("pid ") + std::to_string(slice.pids[i]) +
             ": " + why;
  }
  return out;
}

void ParkController::TryPark(const ContainerDir& dir, const RegionContents& region,
                             const PodRef* pod) {
  const std::string path = RegionPath(dir.path);
  const SliceDevice& dev = region.devices[0];
  // Fail closed: nothing is written nor touched unless the GPU and the processes are verified.
  auto refuse = [&](const std::string& why) {
    const std::string outcome = "not parked: " + why;
    if (last_outcome_[dir.name] != outcome) spdlog::warn("parking {}: {}", dir.name, outcome);
    last_outcome_[dir.name] = outcome;
    ++refusals_;
  };
  if (!host_.grant || !host_.verify_process || !host_.start_time)
    return refuse("the agent cannot verify the slice's grant and processes");
  auto grant = host_.grant(dir.name);
  if (!grant.ok()) return refuse("its grant is unknown: " + grant.status().message());
  if (!EqualsIgnoreCase(dev.uuid, grant->uuid))
    return refuse("its region names GPU " + dev.uuid.substr(0, 96) + ", its grant " + grant->uuid);
  std::vector<int> pids;
  std::vector<uint64_t> start_times;
  for (int32_t pid : region.host_pids) {
    if (std::find(pids.begin(), pids.end(), pid) != pids.end()) continue;
    auto start = host_.verify_process(pid, dir, pod, grant->uuid, /*on_gpu=*/true);
    if (!start.ok())
      return refuse("pid " + std::to_string(pid) + " is not verified: " + start.status().message());
    pids.push_back(pid);
    start_times.push_back(*start);
  }
  const uint64_t baseline = dev.wake_requests;
  Status w = WriteParkState(path, 0, api::kParkParked);
  if (!w.ok()) {
    last_outcome_[dir.name] = "park not attempted: " + w.message();
    spdlog::warn("parking {}: {}", dir.name, w.message());
    return;
  }
  node::ParkResult r = parker_.Park(Target(path, grant->uuid, dir.pod_uid, pids, start_times));
  if (r.outcome != node::ParkOutcome::kParked) {
    Status back = WriteParkState(path, 0, api::kParkRunning);
    last_outcome_[dir.name] = std::string(OutcomeName(r.outcome)) + ": " + r.reason;
    if (!back.ok()) last_outcome_[dir.name] += "; park_state not reset: " + back.message();
    if (r.outcome == node::ParkOutcome::kFailed || !back.ok())
      spdlog::warn("parking {}: {}", dir.name, last_outcome_[dir.name]);
    return;
  }
  ParkedSlice s;
  s.dir = dir.name;
  s.uuid = grant->uuid;
  s.pids = std::move(pids);
  s.start_times = std::move(start_times);
  s.released_bytes = r.released_bytes;
  s.lent_bytes = std::min({r.released_bytes, r.charged_bytes, grant->bytes});
  s.wake_baseline = baseline;
  last_outcome_[dir.name] = "parked";
  spdlog::info("parked {} on {}: {} MiB released, {} MiB lent", dir.name, s.uuid,
               r.released_bytes >> 20, s.lent_bytes >> 20);
  parked_[dir.name] = std::move(s);
}

void ParkController::TryWake(ParkedSlice& slice, const std::string& path, uint64_t now_ns,
                             const std::string& owner) {
  slice.wake_requested = true;  // the GPU stops lending now (LentFromParked)
  const std::string pod_uid = slice.dir.substr(0, slice.dir.find('_'));
  node::ParkResult r = parker_.Wake(
      Target(path, slice.uuid, pod_uid, slice.pids, slice.start_times), slice.released_bytes);
  if (r.outcome == node::ParkOutcome::kAwake) {
    Status back = WriteParkState(path, 0, api::kParkRunning);
    std::string outcome = r.gone.empty() ? "awake" : "awake; gone while parked: " + r.reason;
    if (!back.ok()) outcome += "; park_state not reset: " + back.message();
    last_outcome_[slice.dir] = outcome;
    spdlog::info("woke {} on {}: {}", slice.dir, slice.uuid, outcome);
    parked_.erase(slice.dir);  // `slice` is gone from here on
    return;
  }
  slice.waiting_for_room = r.outcome == node::ParkOutcome::kNoRoom;
  std::string outcome = std::string(OutcomeName(r.outcome)) + ": " + r.reason;
  const bool changed = last_outcome_[slice.dir] != outcome;
  last_outcome_[slice.dir] = outcome;
  if (slice.waiting_for_room && host_.reclaim) {
    Reclaim(slice, now_ns, owner);
  } else if (changed) {
    spdlog::warn("waking {}: {}", slice.dir, outcome);
  }
}

void ParkController::Reclaim(ParkedSlice& slice, uint64_t now_ns, const std::string& owner) {
  std::string& outcome = last_outcome_[slice.dir];
  const uint64_t timeout =
      static_cast<uint64_t>(std::max<int64_t>(0, options_.reclaim_timeout.count()));
  if (slice.reclaim_since_ns != 0) {
    const uint64_t waited = now_ns > slice.reclaim_since_ns ? now_ns - slice.reclaim_since_ns : 0;
    if (waited < timeout) {
      outcome += "; waiting for the evicted borrowers to free it";
      return;
    }
    // The borrowers did not free the memory in time (a slow graceful termination, a
    // PodDisruptionBudget, a process the books do not know): say so, and evict again at the next
    // poll (what is still there, the terminating ones excluded). Never a restore without room.
    ++reclaim_timeouts_;
    slice.reclaim_since_ns = 0;
    outcome += "; the memory is still not free " + std::to_string(waited / 1'000'000'000) +
               " s after evicting the GPU's borrowers (timeout " +
               std::to_string(timeout / 1'000'000'000) + " s): not restored, evicting again";
    spdlog::error("waking {}: {}", slice.dir, outcome);
    return;
  }
  const uint64_t free = host_.free_bytes(slice.uuid);
  const uint64_t need = slice.released_bytes > free ? slice.released_bytes - free : 0;
  Result<int> evicted = host_.reclaim(slice.uuid, need, owner);
  slice.reclaim_since_ns = std::max<uint64_t>(now_ns, 1);
  if (!evicted.ok()) {
    outcome += "; evicting the GPU's borrowers: " + evicted.status().message();
    spdlog::error("waking {}: {}", slice.dir, outcome);
    return;
  }
  evictions_ += static_cast<uint64_t>(std::max(0, *evicted));
  outcome += "; evicted " + std::to_string(*evicted) + " borrower(s) of " + slice.uuid + " for " +
             std::to_string((need + (1 << 20) - 1) >> 20) + " MiB";
  spdlog::warn("waking {}: {}", slice.dir, outcome);
}

void ParkController::Poll(uint64_t now_ns, const std::vector<ContainerDir>& dirs,
                          const std::map<std::string, PodRef>& pods, bool borrower_pending) {
  std::vector<PendingBorrower> borrowers;
  if (borrower_pending) borrowers.push_back(PendingBorrower{});
  Poll(now_ns, dirs, pods, borrowers);
}

void ParkController::Poll(uint64_t now_ns, const std::vector<ContainerDir>& dirs,
                          const std::map<std::string, PodRef>& pods,
                          const std::vector<PendingBorrower>& borrowers) {
  std::set<std::string> present;
  idle_lent_.clear();
  // NVML's process lists, read at most once a poll and only when a slice may lend.
  std::optional<Result<std::vector<enforce::GpuSample>>> sample;
  const auto idle_after = static_cast<uint64_t>(std::max<int64_t>(0, options_.idle_after.count()));
  // Each slice's facts for the decision, a borrower assumed pending (filled in below).
  auto input = [&](const ContainerDir& dir, const RegionContents& region) {
    auto pod = pods.find(dir.pod_uid);
    ParkInput in;
    in.opted_in = ParkOptedIn(pod == pods.end() ? nullptr : &pod->second, options_);
    in.borrower_pending = true;
    in.single_gpu = region.devices.size() == 1;
    in.processes = region.active_slots;
    in.processes_without_host_pid = region.slots_without_host_pid;
    if (!region.devices.empty()) {
      const SliceDevice& dev = region.devices[0];
      in.used_bytes = dev.used_bytes;
      in.wake_requests = dev.wake_requests;
      uint64_t since = dev.last_launch_ns;
      if (since == 0) since = first_seen_ns_.emplace(dir.name, now_ns).first->second;
      in.idle_ns = now_ns > since ? now_ns - since : 0;
    }
    auto parked = parked_.find(dir.name);
    in.parked = parked != parked_.end();
    if (in.parked) in.wake_baseline = parked->second.wake_baseline;
    return in;
  };
  std::vector<Result<RegionContents>> regions;
  regions.reserve(dirs.size());
  for (const ContainerDir& dir : dirs) regions.push_back(ReadRegionFile(RegionPath(dir.path)));
  // What parking could lend per GPU (the grant's): what the slices parked there lend (no wake
  // asked), plus the charged bytes, bounded by the grant, of each slice that would park now.
  // The region is the tenant's to write: the grant names the GPU and bounds the bytes.
  std::map<std::string, uint64_t> could_lend;
  std::map<std::string, std::string> candidate_gpu;  // directory → its grant's GPU
  auto add = [](uint64_t& sum, uint64_t b) { sum = sum > UINT64_MAX - b ? UINT64_MAX : sum + b; };
  if (!borrowers.empty()) {
    for (const auto& [name, slice] : parked_)
      if (!slice.wake_requested) add(could_lend[slice.uuid], slice.lent_bytes);
    for (size_t i = 0; i < dirs.size(); ++i) {
      if (!regions[i].ok() || !host_.grant) continue;
      const ParkInput in = input(dirs[i], *regions[i]);
      if (DecideParking(in, options_) != ParkAction::kPark) continue;
      auto grant = host_.grant(dirs[i].name);
      if (!grant.ok() || !EqualsIgnoreCase(regions[i]->devices[0].uuid, grant->uuid)) continue;
      candidate_gpu[dirs[i].name] = grant->uuid;
      add(could_lend[grant->uuid], std::min(in.used_bytes, grant->bytes));
    }
  }
  // Whether a pending borrower could use what parking lends on GPU `uuid` ("" unknown: only a
  // borrower asking nothing).
  std::map<std::string, bool> wanted;
  auto borrower_for = [&](const std::string& uuid) {
    auto w = wanted.find(uuid);
    if (w != wanted.end()) return w->second;
    const uint64_t total = !uuid.empty() && host_.total_bytes ? host_.total_bytes(uuid) : 0;
    const uint64_t room = uuid.empty() ? 0 : could_lend[uuid];
    bool any = false;
    for (const PendingBorrower& b : borrowers) any = any || BorrowerNeedBytes(b, total) <= room;
    return wanted[uuid] = any;
  };
  for (size_t i = 0; i < dirs.size(); ++i) {
    const ContainerDir& dir = dirs[i];
    present.insert(dir.name);
    const std::string path = RegionPath(dir.path);
    auto& region = regions[i];
    if (!region.ok()) continue;
    auto pod = pods.find(dir.pod_uid);
    ParkInput in = input(dir, *region);
    auto parked = parked_.find(dir.name);
    auto gpu = candidate_gpu.find(dir.name);
    in.borrower_pending =
        !borrowers.empty() && borrower_for(gpu == candidate_gpu.end() ? "" : gpu->second);
    ParkAction action = DecideParking(in, options_);
    // A process of a parked slice gone (a kernel restarted, killed) or started again under its
    // PID: the slice is woken, which restores what is still the process parked and drops the
    // rest; its GPU stops lending from now on (wake_requested).
    if (in.parked && action == ParkAction::kNone) {
      if (std::string changed = Changed(parked->second); !changed.empty()) {
        spdlog::warn("parking {}: a process parked is gone: {}", dir.name, changed);
        action = ParkAction::kWake;
      }
    }
    switch (action) {
      case ParkAction::kPark:
        TryPark(dir, *region, pod == pods.end() ? nullptr : &pod->second);
        break;
      case ParkAction::kWake:
        TryWake(
            parked->second, path, now_ns,
            pod == pods.end() ? dir.pod_uid : pod->second.namespace_name + "/" + pod->second.name);
        break;
      case ParkAction::kNone:
        break;
    }
    // The fallback: an idle, opted-in slice not parked lends its never-allocated part on its
    // granted GPU (idle_ns is the region's). After the decision: a slice parked now lends its
    // released bytes only (LentFromSlices), and its park is no owner coming back. The GPU and
    // the limit are the grant's, the live bytes the larger of the region's and the driver's
    // (FallbackTruth): the region is the tenant's to write.
    const bool now_parked = parked_.count(dir.name) > 0;
    const bool idle = in.opted_in && !now_parked && in.idle_ns >= idle_after;
    const std::string owner =
        pod == pods.end() ? dir.pod_uid : pod->second.namespace_name + "/" + pod->second.name;
    auto lent = lending_.find(dir.name);
    std::optional<Result<FallbackFacts>> facts;
    if (idle || (lent != lending_.end() && !now_parked)) {
      facts = FallbackTruth(dir, *region, pod == pods.end() ? nullptr : &pod->second, &sample);
      std::string& last = lend_errors_[dir.name];
      const std::string why = facts->ok() ? "" : facts->status().message();
      if (idle && !why.empty() && why != last)
        spdlog::warn("parking {}: its never-allocated part is not lent: {}", dir.name, why);
      last = why;
    }
    const FallbackFacts* known = facts && facts->ok() ? &facts->value() : nullptr;
    const uint64_t b =
        idle && known && !region->devices[0].fail_closed
            ? IdleLendBytes({known->grant.uuid, known->grant.bytes, known->live_bytes},
                            options_.idle_lend_margin_bytes)
            : 0;
    // libvgpu.so's reclaim requests (a one-GPU slice whose grant is verified): answered first;
    // an eviction they cause stands for the after-the-fact one below.
    const bool answered = !region->devices.empty() &&
                          AnswerReclaims(dir, path, *region, known, b, now_parked, now_ns, owner);
    auto answering = answering_.find(dir.name);
    const bool quiet = answering != answering_.end() && now_ns < answering->second.quiet_until_ns;
    if (b > 0 && !quiet) {
      uint64_t& sum = idle_lent_[known->grant.uuid];
      sum = sum > UINT64_MAX - b ? UINT64_MAX : sum + b;
    }
    // The owner of a part lent at the last poll allocates again (its live bytes grew) or is no
    // longer idle: where the GPU lacks the room for the rest of its grant, its borrowers are
    // evicted (the weaker fallback: after the fact, at the poll's pace; the only one for an
    // older libvgpu.so, which raises no request). The rest is the grant less the live bytes,
    // the driver's included; NVML unreadable now, the region's alone, still within the grant.
    if (!answered && lent != lending_.end() && !now_parked) {
      const uint64_t live = known                     ? known->live_bytes
                            : region->devices.empty() ? 0
                                                      : region->devices[0].used_bytes;
      if (b == 0 || live > lent->second.live_bytes) {
        const uint64_t rest = lent->second.grant_bytes > live ? lent->second.grant_bytes - live : 0;
        if (answering != answering_.end()) {  // one eviction at a time
          ReclaimForSlice(answering->second, rest, owner, now_ns);
        } else {
          ReclaimForOwner(lent->second.uuid, rest, owner);
        }
      }
    }
    if (b > 0) {
      lending_[dir.name] = {known->grant.uuid, known->grant.bytes, known->live_bytes};
    } else if (lent != lending_.end()) {
      lending_.erase(lent);
    }
  }
  // A directory gone (its pod removed): its processes are gone with it.
  for (auto it = parked_.begin(); it != parked_.end();)
    it = present.count(it->first) ? std::next(it) : parked_.erase(it);
  for (auto it = first_seen_ns_.begin(); it != first_seen_ns_.end();)
    it = present.count(it->first) ? std::next(it) : first_seen_ns_.erase(it);
  for (auto it = lending_.begin(); it != lending_.end();)
    it = present.count(it->first) ? std::next(it) : lending_.erase(it);
  for (auto it = lend_errors_.begin(); it != lend_errors_.end();)
    it = present.count(it->first) ? std::next(it) : lend_errors_.erase(it);
  for (auto it = answering_.begin(); it != answering_.end();)
    it = present.count(it->first) ? std::next(it) : answering_.erase(it);
  for (auto it = mark_errors_.begin(); it != mark_errors_.end();)
    it = present.count(it->first) ? std::next(it) : mark_errors_.erase(it);
}

Result<ParkController::FallbackFacts> ParkController::FallbackTruth(
    const ContainerDir& dir, const RegionContents& region, const PodRef* pod,
    std::optional<Result<std::vector<enforce::GpuSample>>>* sample) {
  if (!host_.grant || !host_.verify_process || !host_.gpu_processes)
    return Unavailable("the agent cannot read the slice's grant or NVML's processes");
  auto grant = host_.grant(dir.name);
  if (!grant.ok()) return Unavailable("its grant is unknown: " + grant.status().message());
  if (region.devices.size() != 1)
    return InvalidArgument("its region names " + std::to_string(region.devices.size()) +
                           " GPUs, its grant one (" + grant->uuid + ")");
  if (!EqualsIgnoreCase(region.devices[0].uuid, grant->uuid))
    return InvalidArgument("its region names GPU " + region.devices[0].uuid.substr(0, 96) +
                           ", its grant " + grant->uuid);
  if (!sample->has_value()) *sample = host_.gpu_processes();
  const Result<std::vector<enforce::GpuSample>>& gpus = **sample;
  if (!gpus.ok()) return Unavailable("NVML: " + gpus.status().message());
  const enforce::GpuSample* gpu = nullptr;
  for (const enforce::GpuSample& g : *gpus)
    if (EqualsIgnoreCase(g.uuid, grant->uuid)) gpu = &g;
  if (gpu == nullptr) return Unavailable("NVML lists no GPU " + grant->uuid);
  if (!gpu->processes_ok) return Unavailable("NVML cannot list the processes of " + grant->uuid);
  // The container's own processes among those NVML lists on the GPU, verified as the park
  // verifies a pid (its cgroup's pod and container). Another pod's or container's process, a
  // host process, or one gone since NVML listed it is not the container's; a process that
  // cannot be told (its pod's containers not named yet, /proc unreadable) leaves the live
  // bytes unknown.
  uint64_t driver = 0;
  for (const enforce::DriverProcess& p : gpu->processes) {
    if (p.host_pid == 0 || p.host_pid > static_cast<uint32_t>(INT32_MAX)) continue;
    auto v = host_.verify_process(static_cast<int>(p.host_pid), dir, pod, grant->uuid,
                                  /*on_gpu=*/false);
    if (v.ok()) {
      driver = driver > UINT64_MAX - p.used_bytes ? UINT64_MAX : driver + p.used_bytes;
    } else if (v.status().code() != StatusCode::kPermissionDenied &&
               v.status().code() != StatusCode::kNotFound) {
      return Unavailable("pid " + std::to_string(p.host_pid) + " on " + grant->uuid +
                         " cannot be told the container's or not: " + v.status().message());
    }
  }
  FallbackFacts f;
  f.grant = std::move(*grant);
  f.driver_bytes = driver;
  f.live_bytes = std::max(region.devices[0].used_bytes, driver);
  return f;
}

void ParkController::MarkReclaimLending(const std::string& dir_name, const std::string& path,
                                        uint32_t devices) {
  Status st = WriteReclaimLending(path, devices);
  std::string& last = mark_errors_[dir_name];
  if (!st.ok() && last != st.message())
    spdlog::warn("parking {}: reclaim mark not written: {}", dir_name, st.message());
  last = st.ok() ? "" : st.message();
}

bool ParkController::AnswerReclaims(const ContainerDir& dir, const std::string& path,
                                    const RegionContents& region, const FallbackFacts* facts,
                                    uint64_t lent_now, bool parked, uint64_t now_ns,
                                    const std::string& owner) {
  auto it = answering_.find(dir.name);
  bool fresh = false;
  // The mark is set only where the agent knows what it may evict for: one GPU, the grant's
  // (FallbackTruth checked both; a slice lends only then).
  if (it == answering_.end() && lent_now > 0 && facts != nullptr && region.devices.size() == 1 &&
      EqualsIgnoreCase(region.devices[0].uuid, facts->grant.uuid)) {
    Answering a;
    a.uuid = facts->grant.uuid;
    a.grant_bytes = facts->grant.bytes;
    it = answering_.emplace(dir.name, std::move(a)).first;
    fresh = true;
  }
  if (it == answering_.end()) {
    // A mark this agent does not hold (an earlier agent's, or the tenant's own): cleared, so no
    // allocation waits for requests nobody answers.
    if (region.reclaim_lending != 0) MarkReclaimLending(dir.name, path, 0);
    return false;
  }
  Answering& a = it->second;
  const uint64_t window =
      static_cast<uint64_t>(std::max<int64_t>(0, options_.reclaim_request_window.count()));
  if (lent_now > 0) {
    a.lent_bytes = std::max(a.lent_bytes, std::min(lent_now, a.grant_bytes));
    a.window_end_ns = 0;
  } else if (parked) {
    a.window_end_ns = 0;
  } else if (a.window_end_ns == 0) {
    a.window_end_ns = now_ns + window;
  } else if (now_ns >= a.window_end_ns) {
    answering_.erase(it);
    MarkReclaimLending(dir.name, path, 0);
    return false;
  }
  if (region.reclaim_lending != 1) MarkReclaimLending(dir.name, path, 1);
  // What the slots asked since the last poll: the growth of each process's byte total while its
  // count grew. A process first seen after the mark counts from zero; at the mark itself every
  // count is the baseline (asked before anything was lent).
  uint64_t asked = 0;
  std::map<std::tuple<int, int32_t, uint64_t>, std::pair<uint64_t, uint64_t>> seen;
  for (const SlotReclaim& r : region.slot_reclaims) {
    const auto k = std::make_tuple(r.slot, r.pid, r.start_time);
    auto prev = a.seen.find(k);
    const uint64_t requests = prev == a.seen.end() ? 0 : prev->second.first;
    const uint64_t bytes = prev == a.seen.end() ? 0 : prev->second.second;
    if (!fresh && r.requests > requests && r.bytes > bytes) {
      const uint64_t more = r.bytes - bytes;
      asked = asked > UINT64_MAX - more ? UINT64_MAX : asked + more;
    }
    seen[k] = {r.requests, r.bytes};
  }
  a.seen = std::move(seen);
  if (asked == 0 || parked) return false;
  ++reclaim_requests_;
  // The tenant wrote both the request and its live bytes: the grant bounds what is evicted.
  // `held` is what the slice holds besides the waiting allocations (charged before the driver
  // refused them), at least what NVML shows its processes holding when known (the refused
  // allocations hold nothing there); it may take back at most its grant less that, and at most
  // what it lent.
  const uint64_t used = region.devices[0].used_bytes;
  const uint64_t held =
      std::max(used > asked ? used - asked : 0, facts != nullptr ? facts->driver_bytes : 0);
  const uint64_t entitled = a.grant_bytes > held ? a.grant_bytes - held : 0;
  const uint64_t need = std::min({asked, a.lent_bytes, entitled});
  a.quiet_until_ns =
      now_ns + static_cast<uint64_t>(std::max<int64_t>(0, options_.reclaim_timeout.count()));
  spdlog::info("parking {}: its allocation of {} MiB met a full GPU {}: reclaiming {} MiB",
               dir.name, (asked + (1 << 20) - 1) >> 20, a.uuid, (need + (1 << 20) - 1) >> 20);
  ReclaimForSlice(a, need, owner, now_ns);
  return true;
}

void ParkController::ReclaimForSlice(Answering& a, uint64_t need_bytes, const std::string& owner,
                                     uint64_t now_ns) {
  if (need_bytes == 0) return;
  // The borrowers an earlier eviction chose may still be terminating (NVML does not show their
  // memory yet): a need it covered evicts nobody more.
  if (now_ns < a.covered_until_ns && need_bytes <= a.covered_bytes) return;
  if (ReclaimForOwner(a.uuid, need_bytes, owner) <= 0) return;
  a.covered_bytes =
      now_ns < a.covered_until_ns ? std::max(a.covered_bytes, need_bytes) : need_bytes;
  a.covered_until_ns =
      now_ns + static_cast<uint64_t>(std::max<int64_t>(0, options_.reclaim_timeout.count()));
}

int ParkController::ReclaimForOwner(const std::string& uuid, uint64_t need_bytes,
                                    const std::string& owner) {
  if (!host_.free_bytes || !host_.reclaim) return 0;
  const uint64_t free = host_.free_bytes(uuid);
  if (free >= need_bytes) return 0;
  auto n = host_.reclaim(uuid, need_bytes - free, owner);
  if (!n.ok()) {
    spdlog::warn("parking: evicting the borrowers of {} for {}: {}", uuid, owner,
                 n.status().message());
    return 0;
  }
  evictions_ += static_cast<uint64_t>(std::max(0, *n));
  spdlog::info(
      "parking: {} is active again on {} with {} MiB of its slice not free: {} borrower(s) evicted",
      owner, uuid, (need_bytes - free) >> 20, *n);
  return *n;
}

Result<SliceGrant> ReadSliceGrant(const std::string& limits_dir, const std::string& dir_name) {
  const std::string path = api::JoinHostPath(limits_dir, api::LimitsFileName(dir_name));
  auto text =
      base::ReadFile(path, kMaxLimitsBytes, {.follow_symlinks = false, .nonblocking = true});
  if (!text.ok()) return text.status();
  auto config = std::make_unique<vgpu::Config>();
  vgpu::ParseLimitsFile(config.get(), text->data(), text->size());
  vgpu::FinishConfig(config.get());
  if (config->error_count > 0) return InvalidArgument(path + ": " + std::string(config->error));
  const std::vector<std::string> uuids =
      base::SplitComma(config->visible_devices, {.drop_trailing_empty = true});
  if (uuids.size() != 1 || uuids[0].empty())
    return InvalidArgument(path + ": NVIDIA_VISIBLE_DEVICES names " + std::to_string(uuids.size()) +
                           " GPUs, not one");
  bool fail_closed = false;
  const uint64_t bytes = vgpu::EffectiveMemoryLimit(*config, 0, &fail_closed);
  if (fail_closed || bytes == 0)
    return InvalidArgument(path + ": no memory limit on " + uuids[0] +
                           " (a slice without one lends nothing)");
  return SliceGrant{uuids[0], bytes};
}

namespace {
// One word of the agent's (`what` names it in errors) written at byte `at` of the region file at
// `path`: O_NOFOLLOW (the file lies in a directory the tenant writes), a regular file of
// sizeof(api::Region) bytes, one pwrite; never a mapping a tenant could truncate under the agent.
Status WriteRegionWord(const std::string& path, const char* what, off_t at, const void* word,
                       size_t size) {
  const std::string w = what;
  int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Unavailable(w + ": open " + path + ": " + std::strerror(errno));
  struct stat st {};
  Status out;
  if (::fstat(fd, &st) != 0) {
    out = Unavailable(w + ": stat " + path + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    out = InvalidArgument(w + ": " + path + " is not a regular file");
  } else if (static_cast<uint64_t>(st.st_size) != sizeof(api::Region)) {
    out = InvalidArgument(w + ": " + path + " has " + std::to_string(st.st_size) + " bytes, not " +
                          std::to_string(sizeof(api::Region)));
  } else if (::pwrite(fd, word, size, at) != static_cast<ssize_t>(size)) {
    out = Unavailable(w + ": write " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  return out;
}
}  // namespace

Status WriteParkState(const std::string& path, int device, uint64_t state) {
  if (device < 0 || device >= static_cast<int>(api::kMaxDevices))
    return InvalidArgument("park_state: device " + std::to_string(device) + " is out of range");
  const off_t at = static_cast<off_t>(offsetof(api::Region, devices) +
                                      static_cast<size_t>(device) * sizeof(api::RegionDevice) +
                                      offsetof(api::RegionDevice, park_state));
  return WriteRegionWord(path, "park_state", at, &state, sizeof(state));
}

Status WriteReclaimLending(const std::string& path, uint32_t devices) {
  return WriteRegionWord(path, "reclaim_lending",
                         static_cast<off_t>(offsetof(api::Region, reclaim_lending)), &devices,
                         sizeof(devices));
}

namespace {

using nlohmann::json;

// `obj`[key] when obj is an object holding it, else null.
const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string StringMember(const json& obj, const char* key) {
  const json* v = Member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// k8s.io/api core/v1 Toleration.ToleratesTaint; an operator it does not define counts as
// tolerating (the agent may park for it: the rule before the node was checked).
bool Tolerates(const json& t, const NodeTaint& taint) {
  if (!t.is_object()) return false;
  const std::string effect = StringMember(t, "effect");
  const std::string key = StringMember(t, "key");
  if (!effect.empty() && effect != taint.effect) return false;
  if (!key.empty() && key != taint.key) return false;
  const std::string op = StringMember(t, "operator");
  if (op.empty() || op == "Equal") return StringMember(t, "value") == taint.value;
  return true;  // Exists, or an operator this agent does not know
}

std::optional<int64_t> ParseInt(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return s[0] == '-' ? -v : v;
}

enum class Match { kNo, kYes, kUnknown };

// One requirement of a node selector term against `value` (the label's or field's, null when
// absent). kUnknown: an operator it does not evaluate.
Match Requirement(const json& r, const std::string* value) {
  if (!r.is_object()) return Match::kNo;
  const std::string op = StringMember(r, "operator");
  std::vector<std::string> values;
  if (const json* vs = Member(r, "values")) {
    if (!vs->is_array()) return Match::kNo;
    for (const json& v : *vs) {
      if (!v.is_string()) return Match::kNo;
      values.push_back(v.get<std::string>());
    }
  }
  const bool in =
      value != nullptr && std::find(values.begin(), values.end(), *value) != values.end();
  if (op == "In") return in ? Match::kYes : Match::kNo;
  if (op == "NotIn") return in ? Match::kNo : Match::kYes;
  if (op == "Exists") return value != nullptr ? Match::kYes : Match::kNo;
  if (op == "DoesNotExist") return value == nullptr ? Match::kYes : Match::kNo;
  if (op == "Gt" || op == "Lt") {
    if (value == nullptr || values.size() != 1) return Match::kNo;
    auto have = ParseInt(*value), want = ParseInt(values[0]);
    if (!have || !want) return Match::kNo;
    return (op == "Gt" ? *have > *want : *have < *want) ? Match::kYes : Match::kNo;
  }
  return Match::kUnknown;
}

// One nodeSelectorTerm: its matchExpressions (labels) and matchFields (metadata.name) ANDed;
// an empty term matches nothing (k8s.io/component-helpers nodeaffinity).
Match Term(const json& term, const NodeView& node) {
  if (!term.is_object()) return Match::kNo;
  Match out = Match::kYes;
  int requirements = 0;
  for (const char* what : {"matchExpressions", "matchFields"}) {
    const json* list = Member(term, what);
    if (list == nullptr) continue;
    if (!list->is_array()) return Match::kNo;
    const bool fields = what[5] == 'F';
    for (const json& r : *list) {
      ++requirements;
      const std::string key = StringMember(r, "key");
      Match m;
      if (fields) {
        m = key == "metadata.name" ? Requirement(r, &node.name) : Match::kUnknown;
      } else {
        auto l = node.labels.find(key);
        m = Requirement(r, l == node.labels.end() ? nullptr : &l->second);
      }
      if (m == Match::kNo) return Match::kNo;
      if (m == Match::kUnknown) out = Match::kUnknown;
    }
  }
  return requirements == 0 ? Match::kNo : out;
}

}  // namespace

Result<NodeView> ParseNodeView(const json& node) {
  NodeView v;
  const json* md = Member(node, "metadata");
  v.name = md ? StringMember(*md, "name") : "";
  if (v.name.empty()) return InvalidArgument("node: metadata.name is missing or not a string");
  if (const json* labels = md ? Member(*md, "labels") : nullptr) {
    if (!labels->is_object())
      return InvalidArgument("node " + v.name + ": metadata.labels is a " + labels->type_name() +
                             ", not an object");
    for (const auto& [k, val] : labels->items()) {
      if (!val.is_string())
        return InvalidArgument("node " + v.name + ": label " + k + " is a " + val.type_name() +
                               ", not a string");
      v.labels[k] = val.get<std::string>();
    }
  }
  const json* spec = Member(node, "spec");
  if (const json* taints = spec ? Member(*spec, "taints") : nullptr) {
    if (!taints->is_array())
      return InvalidArgument("node " + v.name + ": spec.taints is a " + taints->type_name() +
                             ", not an array");
    for (size_t i = 0; i < taints->size(); ++i) {
      const json& t = (*taints)[i];
      for (const char* f : {"key", "value", "effect"}) {
        const json* x = Member(t, f);
        if (!t.is_object() || (x != nullptr && !x->is_string()))
          return InvalidArgument("node " + v.name + ": spec.taints[" + std::to_string(i) + "]." +
                                 f + " is not a string");
      }
      NodeTaint taint{StringMember(t, "key"), StringMember(t, "value"), StringMember(t, "effect")};
      if (taint.effect == "NoSchedule" || taint.effect == "NoExecute")
        v.taints.push_back(std::move(taint));
    }
  }
  return v;
}

std::string BorrowerNodeMismatch(const json& pod, const NodeView& node) {
  const json* spec = Member(pod, "spec");
  if (spec == nullptr) return "";
  if (const json* n = Member(*spec, "nodeName")) {
    if (!n->is_string()) return "spec.nodeName is not a string";
    if (!n->get<std::string>().empty() && n->get<std::string>() != node.name)
      return "spec.nodeName is " + n->get<std::string>().substr(0, 253);
  }
  if (const json* sel = Member(*spec, "nodeSelector")) {
    if (!sel->is_object()) return "spec.nodeSelector is not an object";
    for (const auto& [k, val] : sel->items()) {
      auto l = node.labels.find(k);
      if (!val.is_string() || l == node.labels.end() || l->second != val.get<std::string>())
        return "spec.nodeSelector " + k.substr(0, 317) + "=" +
               (val.is_string() ? val.get<std::string>().substr(0, 63) : val.dump()) +
               (l == node.labels.end() ? ": the node has no such label"
                                       : ": the node's is " + l->second);
    }
  }
  const json* tolerations = Member(*spec, "tolerations");
  if (tolerations != nullptr && !tolerations->is_array()) return "spec.tolerations is not a list";
  for (const NodeTaint& taint : node.taints) {
    bool ok = false;
    if (tolerations != nullptr)
      for (const json& t : *tolerations) ok = ok || Tolerates(t, taint);
    if (!ok)
      return "the node's taint " + taint.key + "=" + taint.value + ":" + taint.effect +
             " is not tolerated";
  }
  const json* affinity = Member(*spec, "affinity");
  const json* na = affinity ? Member(*affinity, "nodeAffinity") : nullptr;
  const json* req = na ? Member(*na, "requiredDuringSchedulingIgnoredDuringExecution") : nullptr;
  if (req != nullptr) {
    const json* terms = Member(*req, "nodeSelectorTerms");
    bool any = false;
    if (terms != nullptr && terms->is_array())
      for (const json& term : *terms) any = any || Term(term, node) != Match::kNo;
    if (!any) return "its required node affinity matches no term of the node";
  }
  return "";
}

uint64_t BorrowerNeedBytes(const PendingBorrower& b, uint64_t total_bytes) {
  const uint64_t mib = static_cast<uint64_t>(std::clamp<int64_t>(b.mem_mib, 0, int64_t{1} << 40));
  const uint64_t pct = static_cast<uint64_t>(std::clamp<int32_t>(b.mem_percent, 0, 100));
  const uint64_t by_share = total_bytes / 100 * pct + total_bytes % 100 * pct / 100;
  return std::max(mib << 20, by_share);
}

Result<std::vector<PendingBorrower>> PendingBorrowers(k8s::Client* client,
                                                      const std::string& node_name) {
  k8s::ListOptions options;
  options.field_selector = "status.phase=Pending,spec.nodeName=";
  std::vector<json> pending;
  auto rv = client->ListEach("/api/v1/pods", options, [&](json& item) {
    const json* md = Member(item, "metadata");
    const json* a = md ? Member(*md, "annotations") : nullptr;
    if (a != nullptr && StringMember(*a, core::kAnnotationBorrower) == "true")
      pending.push_back(std::move(item));
  });
  if (!rv.ok()) return rv.status();
  std::vector<PendingBorrower> out;
  if (pending.empty()) return out;
  auto node = client->Get(k8s::NodePath(node_name));
  if (!node.ok()) return node.status().WithPrefix("reading node " + node_name);
  auto view = ParseNodeView(*node);
  if (!view.ok()) return view.status();
  for (const json& pod : pending) {
    const json* md = Member(pod, "metadata");
    const std::string name =
        md ? StringMember(*md, "namespace") + "/" + StringMember(*md, "name") : "";
    if (std::string why = BorrowerNodeMismatch(pod, *view); !why.empty()) {
      spdlog::debug("parking: borrower {} cannot use node {}: {}", name, node_name, why);
      continue;
    }
    auto request = core::ParsePodRequest(pod);
    if (!request.ok()) continue;  // the scheduler cannot place it either
    PendingBorrower b;
    b.name = name;
    bool gpu = false;
    for (const core::ContainerRequest& c : request->containers) {
      if (!c.UsesGpu()) continue;
      gpu = true;
      if (c.mem_mib > 0) {
        b.mem_mib = std::max(b.mem_mib, c.mem_mib);
      } else {
        b.mem_percent = std::max(b.mem_percent, c.mem_percent);
      }
    }
    if (gpu) out.push_back(std::move(b));
  }
  return out;
}

uint64_t IdleLendBytes(const IdleSlice& slice, uint64_t margin_bytes) {
  if (slice.uuid.empty() || slice.limit_bytes == 0 || slice.used_bytes >= slice.limit_bytes)
    return 0;
  const uint64_t free = slice.limit_bytes - slice.used_bytes;
  return free > margin_bytes ? free - margin_bytes : 0;
}

core::LentMemory LentFromParked(const std::map<std::string, ParkedSlice>& parked, int64_t at_unix) {
  return LentFromSlices(parked, {}, at_unix);
}

core::LentMemory LentFromSlices(const std::map<std::string, ParkedSlice>& parked,
                                const std::map<std::string, uint64_t>& idle_bytes,
                                int64_t at_unix) {
  std::map<std::string, uint64_t> bytes = idle_bytes;  // by UUID: sorted, distinct
  for (const auto& [name, slice] : parked) {
    uint64_t& b = bytes[slice.uuid];
    b = b > UINT64_MAX - slice.lent_bytes ? UINT64_MAX : b + slice.lent_bytes;
  }
  // A GPU whose owner asked for its memory back lends nothing while the agent reclaims it.
  for (const auto& [name, slice] : parked)
    if (slice.wake_requested) bytes.erase(slice.uuid);
  core::LentMemory out;
  out.at_unix = at_unix;
  for (const auto& [uuid, b] : bytes) {
    // The UUID comes from the grant (a parked slice) or the region (an idle one): one the
    // record's grammar refuses is not lent (core/lent.h).
    const bool valid = uuid.size() > 4 && uuid.size() <= core::kLentMaxUuid &&
                       uuid.compare(0, 4, "GPU-") == 0 &&
                       std::all_of(uuid.begin() + 4, uuid.end(), [](char c) {
                         return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                (c >= 'A' && c <= 'Z') || c == '-';
                       });
    if (!valid) continue;
    const int64_t mib = static_cast<int64_t>(std::min<uint64_t>(b >> 20, core::kLentMaxMib));
    if (mib > 0 && out.gpus.size() < core::kLentMaxGpus) out.gpus.push_back({uuid, mib});
  }
  return out;
}

Status PatchLentMemory(k8s::Client* client, const std::string& node, const std::string& value) {
  nlohmann::json v = value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
  nlohmann::json patch = {{"metadata", {{"annotations", {{core::kAnnotationLentMemory, v}}}}}};
  auto r = client->MergePatch(k8s::NodePath(node), patch);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fracgpu::monitor
