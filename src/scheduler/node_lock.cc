#include "scheduler/node_lock.h"

#include <chrono>

#include "core/node_lock_codec.h"
#include "k8s/objects.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {

NodeLocker::NodeLocker(k8s::Client* client, base::Clock* clock, std::chrono::seconds expiry)
    : client_(client), clock_(clock), expiry_(expiry) {}

Status NodeLocker::Lock(const std::string& node, const std::string& ns, const std::string& name,
                        const nlohmann::json* current, std::string* lock_value) {
  // The last make_patch's outcome: the lock it would write, or the lock it met (one is empty).
  std::string written, met;
  auto make_patch = [&](const nlohmann::json& cur) -> Result<nlohmann::json> {
    auto held = k8s::Annotation(cur, core::kAnnotationNodeLock);
    auto now = clock_->Now();
    if (held && !held->empty()) {
      auto v = core::DecodeNodeLock(*held);
      bool take = !v.ok();  // an unreadable lock is treated as stale
      if (v.ok()) {
        if (v->pod_namespace == ns && v->pod_name == name) {
          take = true;
        } else if (now - v->time > expiry_) {
          take = true;
        } else if (v->names_pod()) {
          auto owner = client_->Get(k8s::PodPath(v->pod_namespace, v->pod_name));
          if (!owner.ok() && owner.status().code() == StatusCode::kNotFound) take = true;
        }
      }
      if (!take) {
        written.clear();
        met = *held;
        return Conflict("node " + node + " is locked by " + *held);
      }
    }
    met.clear();
    written = core::EncodeNodeLock({std::chrono::floor<std::chrono::seconds>(now), ns, name});
    return nlohmann::json{{"metadata", {{"annotations", {{core::kAnnotationNodeLock, written}}}}}};
  };
  // Success: the lock written. kConflict: the lock met, when the last make_patch refused
  // (409s that PatchWithRetry gave up on after making patches leave `met` empty). Any other
  // error: nothing (a lock met in a stale copy before a failed re-read is not reported).
  auto done = [&](const Status& st) {
    if (lock_value != nullptr)
      *lock_value = st.ok() ? written : st.code() == StatusCode::kConflict ? met : std::string();
    return st;
  };
  if (current != nullptr) {
    // The node as the caller just read it: one GET fewer; a node changed since (409) is read
    // again below.
    // A lock it shows held may have been released since: that too is read again below.
    auto patch = make_patch(*current);
    if (!patch.ok() && patch.status().code() != StatusCode::kConflict) return done(patch.status());
    const std::string rv = k8s::ResourceVersion(*current);
    if (patch.ok() && !rv.empty()) {
      (*patch)["metadata"]["resourceVersion"] = rv;
      auto r = client_->MergePatch(k8s::NodePath(node), *patch);
      if (r.ok()) return done(Status::Ok());
      if (r.status().code() != StatusCode::kConflict) return done(r.status());
    }
  }
  auto r = client_->PatchWithRetry(k8s::NodePath(node), make_patch);
  return done(r.ok() ? Status::Ok() : r.status());
}

Status NodeLocker::Unlock(const std::string& node, const std::string& ns, const std::string& name,
                          bool force) {
  auto r = client_->PatchWithRetry(
      k8s::NodePath(node), [&](const nlohmann::json& cur) -> Result<nlohmann::json> {
        auto held = k8s::Annotation(cur, core::kAnnotationNodeLock);
        if (!held) return nlohmann::json();
        auto v = core::DecodeNodeLock(*held);
        if (!force && v.ok() && !(v->pod_namespace == ns && v->pod_name == name))
          return nlohmann::json();
        return nlohmann::json{
            {"metadata", {{"annotations", {{core::kAnnotationNodeLock, nullptr}}}}}};
      });
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace fracgpu::scheduler
