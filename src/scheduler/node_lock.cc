#include "scheduler/node_lock.h"

#include <ctime>

#include "k8s/objects.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

std::string Rfc3339(std::chrono::system_clock::time_point time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatNodeLock(std::chrono::system_clock::time_point time, const std::string& ns,
                           const std::string& name) {
  return Rfc3339(time) + "," + ns + "," + name;
}

Result<NodeLockValue> ParseNodeLock(const std::string& value) {
  NodeLockValue out;
  std::string ts = value;
  auto c1 = value.find(',');
  if (c1 != std::string::npos) {
    auto c2 = value.find(',', c1 + 1);
    if (c2 == std::string::npos)
      return InvalidArgument("node lock \"" + value + "\" is not <time>,<namespace>,<pod>");
    ts = value.substr(0, c1);
    out.pod_namespace = value.substr(c1 + 1, c2 - c1 - 1);
    out.pod_name = value.substr(c2 + 1);
  }
  std::tm tm{};
  const char* end = strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return InvalidArgument("node lock time \"" + ts + "\" is not RFC3339");
  int offset_s = 0;
  std::string rest = end;
  // Fractional seconds are allowed and ignored.
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    rest = rest.substr(i);
  }
  if (rest == "Z" || rest == "z") {
    offset_s = 0;
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int h = std::atoi(rest.substr(1, 2).c_str()), m = std::atoi(rest.substr(4, 2).c_str());
    offset_s = (rest[0] == '+' ? 1 : -1) * (h * 3600 + m * 60);
  } else {
    return InvalidArgument("node lock time \"" + ts + "\" has no valid zone");
  }
  out.time = std::chrono::system_clock::from_time_t(timegm(&tm) - offset_s);
  return out;
}

NodeLocker::NodeLocker(k8s::Client* client, k8s::Clock* clock, std::chrono::seconds expiry)
    : client_(client), clock_(clock), expiry_(expiry) {}

Status NodeLocker::Lock(const std::string& node, const std::string& ns, const std::string& name) {
  auto r = client_->PatchWithRetry(
      k8s::NodePath(node), [&](const nlohmann::json& cur) -> Result<nlohmann::json> {
        auto held = k8s::Annotation(cur, core::kAnnotationNodeLock);
        auto now = clock_->Now();
        if (held && !held->empty()) {
          auto v = ParseNodeLock(*held);
          bool take = !v.ok();  // an unreadable lock is treated as stale
          if (v.ok()) {
            if (v->pod_namespace == ns && v->pod_name == name) {
              take = true;
            } else if (now - v->time > expiry_) {
              take = true;
            } else if (!v->pod_name.empty()) {
              auto owner = client_->Get(k8s::PodPath(v->pod_namespace, v->pod_name));
              if (!owner.ok() && owner.status().code() == StatusCode::kNotFound) take = true;
            }
          }
          if (!take) return Conflict("node " + node + " is locked by " + *held);
        }
        return nlohmann::json{
            {"metadata",
             {{"annotations", {{core::kAnnotationNodeLock, FormatNodeLock(now, ns, name)}}}}}};
      });
  return r.ok() ? Status::Ok() : r.status();
}

Status NodeLocker::Unlock(const std::string& node, const std::string& ns, const std::string& name,
                          bool force) {
  auto r = client_->PatchWithRetry(
      k8s::NodePath(node), [&](const nlohmann::json& cur) -> Result<nlohmann::json> {
        auto held = k8s::Annotation(cur, core::kAnnotationNodeLock);
        if (!held) return nlohmann::json();
        auto v = ParseNodeLock(*held);
        if (!force && v.ok() && !(v->pod_namespace == ns && v->pod_name == name))
          return nlohmann::json();
        return nlohmann::json{
            {"metadata", {{"annotations", {{core::kAnnotationNodeLock, nullptr}}}}}};
      });
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fracgpu::scheduler
