#pragma once
// In-memory ClusterApi for the Allocate and registration tests: nodes and pods as JSON with
// resourceVersions, RFC 7386 merge patches, optimistic concurrency (a concurrent writer can be
// injected between read and write), and injected API-server errors.

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin/cluster_api.h"

namespace fracgpu::deviceplugin::testing {

class FakeCluster : public ClusterApi {
 public:
  void PutNode(json node) {
    std::lock_guard<std::mutex> l(mu_);
    Stamp(node);
    std::string name = node["metadata"]["name"].get<std::string>();
    nodes_[name] = std::move(node);
  }
  void PutPod(json pod) {
    std::lock_guard<std::mutex> l(mu_);
    Stamp(pod);
    std::string key = Key(pod);
    pods_[key] = std::move(pod);
  }
  json Node(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return nodes_.at(name);
  }
  json Pod(const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return pods_.at(ns + "/" + name);
  }
  /// The next `n` calls of `op` ("get_node", "get_pod", "list", "patch_pod", "patch_node")
  /// fail with `status` before doing anything.
  void FailNext(const std::string& op, int n, Status status) {
    std::lock_guard<std::mutex> l(mu_);
    for (int i = 0; i < n; ++i) failures_[op].push_back(status);
  }
  /// The next pod patch applies, then reports kUnavailable (the reply was lost).
  void LoseNextPodPatchReply() {
    std::lock_guard<std::mutex> l(mu_);
    lose_pod_reply_ = true;
  }
  /// Runs `writer` (once) between the read and the write of the next pod patch: the write then
  /// conflicts and the patch starts over, as with a 409 from the API server.
  void InterleaveNextPodPatch(std::function<void(FakeCluster*)> writer) {
    std::lock_guard<std::mutex> l(mu_);
    interleave_ = std::move(writer);
  }
  int pod_patches() const {
    std::lock_guard<std::mutex> l(mu_);
    return pod_patches_;
  }
  int node_patches() const {
    std::lock_guard<std::mutex> l(mu_);
    return node_patches_;
  }
  int conflicts() const {
    std::lock_guard<std::mutex> l(mu_);
    return conflicts_;
  }

  /// GetNode calls and PatchNode reads (each attempt of a patch reads the node first).
  int node_reads() const {
    std::lock_guard<std::mutex> l(mu_);
    return node_reads_;
  }

  Result<json> GetNode(const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    ++node_reads_;
    if (auto st = Injected("get_node"); !st.ok()) return st;
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return NotFound("node " + name);
    return it->second;
  }
  Result<json> GetPod(const std::string& ns, const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto st = Injected("get_pod"); !st.ok()) return st;
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) return NotFound("pod " + ns + "/" + name);
    return it->second;
  }
  Result<json> ListPodsOnNode(const std::string& node) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto st = Injected("list"); !st.ok()) return st;
    json items = json::array();
    for (const auto& [k, p] : pods_) {
      if (p.contains("spec") && p["spec"].value("nodeName", "") == node) items.push_back(p);
    }
    return items;
  }
  Result<json> PatchPod(const std::string& ns, const std::string& name,
                        const PatchFn& make_patch) override {
    return Patch("patch_pod", ns + "/" + name, make_patch, &pods_, &pod_patches_);
  }
  Result<json> PatchNode(const std::string& name, const PatchFn& make_patch) override {
    return Patch("patch_node", name, make_patch, &nodes_, &node_patches_);
  }

 private:
  static std::string Key(const json& o) {
    return o["metadata"].value("namespace", "") + "/" + o["metadata"].value("name", "");
  }
  void Stamp(json& o) { o["metadata"]["resourceVersion"] = std::to_string(++rv_); }
  Status Injected(const std::string& op) {
    auto& q = failures_[op];
    if (q.empty()) return Status::Ok();
    Status st = q.front();
    q.pop_front();
    return st;
  }
  Result<json> Patch(const std::string& op, const std::string& key, const PatchFn& make_patch,
                     std::map<std::string, json>* store, int* counter) {
    for (int round = 0; round < 10; ++round) {
      json current;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (op == "patch_node") ++node_reads_;
        if (auto st = Injected(op); !st.ok()) return st;
        auto it = store->find(key);
        if (it == store->end()) return NotFound(op + " " + key);
        current = it->second;
      }
      auto patch = make_patch(current);
      if (!patch.ok()) return patch.status();
      std::function<void(FakeCluster*)> interleave;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (op == "patch_pod") interleave.swap(interleave_);
      }
      if (interleave) interleave(this);
      std::lock_guard<std::mutex> l(mu_);
      json& stored = (*store)[key];
      if (patch->is_null()) return stored;
      if (stored["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]) {
        ++conflicts_;
        continue;  // 409: read again
      }
      stored.merge_patch(*patch);
      Stamp(stored);
      ++*counter;
      if (op == "patch_pod" && lose_pod_reply_) {
        lose_pod_reply_ = false;
        return Unavailable("PATCH " + key + ": connection reset (injected)");
      }
      return stored;
    }
    return Conflict("too many conflicts on " + key);
  }

  mutable std::mutex mu_;
  std::map<std::string, json> nodes_, pods_;
  std::map<std::string, std::deque<Status>> failures_;
  std::function<void(FakeCluster*)> interleave_;
  bool lose_pod_reply_ = false;
  int64_t rv_ = 0;
  int pod_patches_ = 0, node_patches_ = 0, conflicts_ = 0, node_reads_ = 0;
};

}  // namespace fracgpu::deviceplugin::testing
