#include "scheduler/leader.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "k8s/objects.h"

namespace fracgpu::scheduler {
namespace {

// metav1.MicroTime: RFC3339 with microseconds, UTC.
std::string MicroTime(std::chrono::system_clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(us % 1000000));
  return out;
}

}  // namespace

LeaderElector::LeaderElector(k8s::Client* client, base::Clock* clock, LeaderElectionConfig config,
                             std::function<void(bool)> on_change)
    : client_(client),
      clock_(clock),
      config_(std::move(config)),
      on_change_(std::move(on_change)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::SetLeader(bool leader) {
  bool was = leader_.exchange(leader);
  if (was != leader) {
    spdlog::info("leader election: {} {} the lease {}/{}", config_.identity,
                 leader ? "holds" : "lost", config_.lease_namespace, config_.lease_name);
    if (on_change_) on_change_(leader);
  }
}

Status LeaderElector::CheckLeader() const {
  if (!leader_.load()) {
    return Unavailable("not the leader (lease " + config_.lease_namespace + "/" +
                       config_.lease_name + ")");
  }
  const auto renewed = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(renewed_ns_.load())));
  const auto age = clock_->Now() - renewed;
  if (age >= config_.lease_duration) {
    return Unavailable(
        "leadership lapsed: the last successful renew of lease " + config_.lease_namespace + "/" +
        config_.lease_name + " was " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(age).count()) +
        " ms ago, not less than the lease duration of " +
        std::to_string(config_.lease_duration.count()) + " s");
  }
  return Status::Ok();
}

void LeaderElector::NoteRenewed(std::chrono::system_clock::time_point at) {
  renewed_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count());
}

bool LeaderElector::TryAcquireOrRenew() {
  // A Lease of unexpected field types (or any other error) ends the round as "not leader";
  // nothing escapes to the elector's thread.
  try {
    return Round();
  } catch (const std::exception& e) {
    spdlog::warn("leader election: round failed: {}", e.what());
  } catch (...) {
    spdlog::warn("leader election: round failed");
  }
  SetLeader(false);
  return false;
}

bool LeaderElector::Round() {
  auto now = clock_->Now();
  std::string path = k8s::LeasePath(config_.lease_namespace, config_.lease_name);
  nlohmann::json spec = {{"holderIdentity", config_.identity},
                         {"leaseDurationSeconds", config_.lease_duration.count()},
                         {"renewTime", MicroTime(now)}};
  auto lease = client_->Get(path);
  if (!lease.ok()) {
    if (lease.status().code() != StatusCode::kNotFound) {
      SetLeader(false);
      return false;
    }
    spec["acquireTime"] = MicroTime(now);
    spec["leaseTransitions"] = 0;
    nlohmann::json obj = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec", spec}};
    auto created = client_->Create(k8s::LeasePath(config_.lease_namespace), obj);
    if (created.ok()) NoteRenewed(now);
    SetLeader(created.ok());
    return created.ok();
  }
  const nlohmann::json old_spec = lease->value("spec", nlohmann::json::object());
  std::string holder = old_spec.value("holderIdentity", "");
  std::string record = holder + "|" + old_spec.value("renewTime", "");
  if (record != observed_record_) {
    observed_record_ = record;
    observed_time_ = now;
  }
  int64_t transitions = old_spec.value("leaseTransitions", 0);
  if (holder != config_.identity) {
    auto duration = std::chrono::seconds(
        old_spec.value("leaseDurationSeconds", config_.lease_duration.count()));
    if (!holder.empty() && now < observed_time_ + duration) {
      SetLeader(false);
      return false;
    }
    spec["acquireTime"] = MicroTime(now);
    spec["leaseTransitions"] = transitions + 1;
  } else {
    spec["acquireTime"] = old_spec.value("acquireTime", MicroTime(now));
    spec["leaseTransitions"] = transitions;
  }
  nlohmann::json updated = *lease;
  updated["spec"] = spec;  // carries metadata.resourceVersion: a racing update gets 409
  auto r = client_->Update(path, updated);
  if (r.ok()) {
    observed_record_ = config_.identity + "|" + spec["renewTime"].get<std::string>();
    observed_time_ = now;
    NoteRenewed(now);
  }
  SetLeader(r.ok());
  return r.ok();
}

void LeaderElector::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    while (!stop_.stopped()) {
      TryAcquireOrRenew();
      if (!clock_->Sleep(config_.retry_period, &stop_)) break;
    }
  });
}

void LeaderElector::Stop() {
  stop_.Stop();
  if (thread_.joinable()) thread_.join();
  if (!leader_.load()) return;
  try {
    Release();
  } catch (const std::exception& e) {
    spdlog::warn("leader election: releasing the lease: {}", e.what());
    SetLeader(false);
  }
}

void LeaderElector::Release() {
  // client-go's ReleaseOnCancel: blank the holder and shorten the lease, so a successor takes
  // over at its next round instead of waiting out leaseDurationSeconds.
  std::string path = k8s::LeasePath(config_.lease_namespace, config_.lease_name);
  auto lease = client_->Get(path);
  if (lease.ok()) {
    nlohmann::json spec = lease->value("spec", nlohmann::json::object());
    if (spec.value("holderIdentity", "") == config_.identity) {
      spec["holderIdentity"] = "";
      spec["leaseDurationSeconds"] = 1;
      spec["renewTime"] = MicroTime(clock_->Now());
      nlohmann::json updated = *lease;
      updated["spec"] = spec;  // carries resourceVersion: never overwrites a successor's record
      auto r = client_->Update(path, updated);
      if (!r.ok()) spdlog::warn("leader election: releasing the lease: {}", r.status().ToString());
    }
  } else {
    spdlog::warn("leader election: releasing the lease: {}", lease.status().ToString());
  }
  SetLeader(false);
}

}  // namespace fracgpu::scheduler
