#include "monitor/idle_holders.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/annotations.h"
#include "k8s/objects.h"

namespace fracgpu::monitor {
namespace {

constexpr uint64_t kMiBytes = uint64_t{1} << 20;

struct PodOnGpu {
  uint64_t bytes = 0;
  uint64_t idle_ns = std::numeric_limits<uint64_t>::max();  // least over its slices
  bool all_idle = true;
};

bool SameSet(const std::vector<core::IdleHolder>& a, const std::vector<core::IdleHolder>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].pod_uid != b[i].pod_uid || a[i].gpu_uuid != b[i].gpu_uuid) return false;
  }
  return true;
}

bool SameMib(const std::vector<core::IdleHolder>& a, const std::vector<core::IdleHolder>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].mib != b[i].mib) return false;
  }
  return true;
}

uint64_t NonNegative(std::chrono::nanoseconds d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, d.count()));
}

}  // namespace

std::vector<core::IdleHolder> IdleHoldersOf(const Snapshot& snap, uint64_t now_ns,
                                            const IdleHolderOptions& options,
                                            std::map<std::string, uint64_t>* first_seen_ns) {
  const uint64_t idle_after = NonNegative(options.idle_after);
  std::map<std::pair<std::string, std::string>, PodOnGpu> pods;  // (uuid, uid) → sums
  std::set<std::string> present;
  for (const SliceSample& s : snap.slices) {
    const SliceDevice& d = s.device;
    const std::string key = s.pod_uid + "\n" + s.container + "\n" + d.uuid;
    present.insert(key);
    uint64_t since = d.last_launch_ns;
    if (since == 0) since = first_seen_ns->emplace(key, now_ns).first->second;
    PodOnGpu& p = pods[{d.uuid, s.pod_uid}];
    // A launch in the future (the tenant's to write) counts as a launch now: not idle.
    const uint64_t idle_ns = now_ns > since ? now_ns - since : 0;
    p.bytes = d.used_bytes > UINT64_MAX - p.bytes ? UINT64_MAX : p.bytes + d.used_bytes;
    p.idle_ns = std::min(p.idle_ns, idle_ns);
    if (idle_ns < idle_after) p.all_idle = false;
  }
  for (auto it = first_seen_ns->begin(); it != first_seen_ns->end();) {
    it = present.count(it->first) ? std::next(it) : first_seen_ns->erase(it);
  }
  std::vector<core::IdleHolder> out;
  for (const auto& [key, p] : pods) {
    if (!p.all_idle) continue;
    const uint64_t mib = p.bytes / kMiBytes;
    if (mib < static_cast<uint64_t>(std::max<int64_t>(0, options.min_mib))) continue;
    core::IdleHolder h;
    h.gpu_uuid = key.first;
    h.pod_uid = key.second;
    h.mib = static_cast<int64_t>(std::min<uint64_t>(mib, core::kIdleHoldersMaxMib));
    h.idle_s = static_cast<int64_t>(
        std::min<uint64_t>(p.idle_ns / 1'000'000'000ull, core::kIdleHoldersMaxIdleSeconds));
    if (core::IdleHolderWritable(h)) out.push_back(std::move(h));
  }
  if (out.size() > core::kIdleHoldersMaxEntries) {
    // The largest holders are the ones worth showing; ties by the (GPU, pod) order.
    std::stable_sort(
        out.begin(), out.end(),
        [](const core::IdleHolder& a, const core::IdleHolder& b) { return a.mib > b.mib; });
    out.resize(core::kIdleHoldersMaxEntries);
    std::sort(out.begin(), out.end(), [](const core::IdleHolder& a, const core::IdleHolder& b) {
      return std::tie(a.gpu_uuid, a.pod_uid) < std::tie(b.gpu_uuid, b.pod_uid);
    });
  }
  return out;
}

IdleHolderPublisher::IdleHolderPublisher(IdleHolderOptions options, Write write)
    : options_(std::move(options)), write_(std::move(write)) {}

bool IdleHolderPublisher::Send(const std::string& value, uint64_t now_ns) {
  attempted_ = true;
  last_write_ns_ = now_ns;
  ++writes_;
  Status st = write_(value);
  if (!st.ok()) {
    published_.reset();  // unknown until a write succeeds
    if (st.message() != last_error_) {
      spdlog::warn("idle holders: writing {}: {}", core::kAnnotationIdleHolders, st.ToString());
      last_error_ = st.message();
    }
    return false;
  }
  last_error_.clear();
  return true;
}

void IdleHolderPublisher::Poll(const Snapshot& snap, uint64_t now_ns, int64_t now_unix) {
  holders_ = IdleHoldersOf(snap, now_ns, options_, &first_seen_ns_);
  const uint64_t since = attempted_ && now_ns >= last_write_ns_ ? now_ns - last_write_ns_ : 0;
  const bool gap_ok = !attempted_ || since >= NonNegative(options_.min_gap);
  bool due = false;
  if (!published_) {
    due = gap_ok;  // unknown: the first poll, or after a failed write
  } else if (holders_.empty()) {
    due = !published_->empty() && gap_ok;
  } else if (!SameSet(*published_, holders_)) {
    due = gap_ok;
  } else if (!SameMib(*published_, holders_)) {
    due = since >= NonNegative(options_.change_gap);
  } else {
    due = since >= NonNegative(options_.refresh);
  }
  if (!due) return;
  const std::string value =
      holders_.empty() ? std::string() : core::FormatIdleHolders({now_unix, holders_});
  if (Send(value, now_ns)) published_ = holders_;
}

void IdleHolderPublisher::Remove() {
  if (published_ && published_->empty()) return;
  if (Send("", last_write_ns_)) published_ = std::vector<core::IdleHolder>{};
}

Status PatchIdleHolders(k8s::Client* client, const std::string& node, const std::string& value) {
  nlohmann::json v = value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
  nlohmann::json patch = {{"metadata", {{"annotations", {{core::kAnnotationIdleHolders, v}}}}}};
  auto r = client->MergePatch(k8s::NodePath(node), patch);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fracgpu::monitor
