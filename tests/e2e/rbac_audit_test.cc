// RBAC audit (issue 7 "Must show"): run a pod journey that takes every path of the components
// that talks to the API server — scheduling, a pending pod (event), deletion, a refused
// Allocate, leader election as deploy/ configures it — record every request the fake API server
// serves with the caller's service account — with `fracgpu monitor` on each node killing a
// container that bypasses libvgpu.so (an Event) — and check it against the RBAC objects in deploy/:
// every call is allowed, and nothing granted to fracgpu's service accounts went unused.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cluster.h"
#include "k8s/objects.h"
#include "rbac.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;

constexpr const char* kGpuA = "GPU-a0000000-0000-4000-8000-00000000a000";
constexpr const char* kGpuB = "GPU-b0000000-0000-4000-8000-00000000b000";

// Whether the manifests run the scheduler with --leader-elect (then the run must too, so the
// Lease calls it makes are audited).
bool DeployUsesLeaderElection(const std::string& dir) {
  for (const auto& f : ManifestFiles(dir)) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find("--leader-elect") != std::string::npos &&
        ss.str().find("--leader-elect=false") == std::string::npos) {
      return true;
    }
  }
  return false;
}

// Whether `policy` binds anything to fracgpu's service accounts.
bool BindsOurAccounts(const RbacPolicy& policy) {
  for (const auto& b : policy.bindings) {
    for (const auto& u : b.users) {
      if (u == kSchedulerUser || u == kDevicePluginUser) return true;
    }
  }
  return false;
}

// Runs the journey; returns the audit log.
std::vector<fakes::AuditRecord> RunJourney(bool leader_elect) {
  // Each node also runs `fracgpu monitor` (the DaemonSet's second container, same account).
  Cluster cluster({{{"node-a", {{kGpuA, 16384}}}, {"node-b", {{kGpuB, 16384}}}},
                   "binpack",
                   "binpack",
                   leader_elect,
                   /*enforce=*/true});
  std::string error;
  EXPECT_TRUE(cluster.Start(&error)) << error;
  if (!error.empty()) return {};
  auto create = [&](const std::string& name, int64_t mib) {
    HttpResult r = cluster.CreatePod(UserPod(name, {{"main", mib, SliceProbe(mib)}}));
    EXPECT_EQ(r.status, 201) << r.body.dump();
  };
  create("first", 10000);
  EXPECT_TRUE(cluster.WaitRunning("ml", "first"));
  create("second", 10000);
  EXPECT_TRUE(cluster.WaitRunning("ml", "second"));
  create("waiting", 8000);
  EXPECT_TRUE(cluster.api().WaitFor([&] {
    for (const auto& e : cluster.api().List("events")) {
      if (e.value("reason", "") == "FilteringFailed") return true;
    }
    return false;
  }));
  EXPECT_EQ(cluster.DeletePod("ml", "first").status, 200);
  EXPECT_TRUE(cluster.WaitRunning("ml", "waiting"));
  // A forged decision the device plugin refuses (its failure path writes too).
  json bypass = UserPod("bypass", {{"main", 1000, SliceProbe(1000)}});
  bypass["metadata"]["labels"] = {{"hami.io/webhook", "ignore"}};
  bypass["metadata"]["annotations"] = {
      {"hami.io/vgpu-node", "node-b"},
      {"hami.io/vgpu-devices-allocated", std::string(kGpuB) + ",NVIDIA,1000,0:;"},
      {"hami.io/vgpu-devices-to-allocate", std::string(kGpuB) + ",NVIDIA,1000,0:;"},
      {"hami.io/bind-phase", "allocating"},
      {"hami.io/bind-time", "1700000000"}};
  bypass["spec"]["nodeName"] = "node-b";
  bypass["spec"]["schedulerName"] = kSchedulerName;
  EXPECT_EQ(cluster.CreatePod(bypass).status, 201);
  EXPECT_TRUE(cluster.WaitForPod("ml", "bypass",
                                 [](const json& p) { return k8s::PodPhase(p) == "Failed"; }));
  // A container that bypasses libvgpu.so over its limit: the monitor kills it and records an
  // Event on the pod (docs/enforcement.md).
  json over = UserPod("over", {{"main", 1000, {"bypass:1100", "hold:30000"}}});
  over["spec"]["containers"][0]["image"] = kBypassImage;
  EXPECT_EQ(cluster.CreatePod(over).status, 201);
  EXPECT_TRUE(cluster.api().WaitFor([&] {
    for (const auto& r : cluster.api().AuditLog()) {
      if (r.user == kDevicePluginUser && r.resource == "events" && r.verb == "create") return true;
    }
    return false;
  })) << "the monitor never recorded an Event";
  // The leader renews its Lease (an update) every retry period (2 s).
  if (leader_elect) {
    EXPECT_TRUE(cluster.api().WaitFor([&] {
      for (const auto& r : cluster.api().AuditLog()) {
        if (r.user == kSchedulerUser && r.resource == "leases" && r.verb == "update") return true;
      }
      return false;
    })) << "the scheduler never renewed its Lease";
  }
  // (No scheduler restart here: it adds no call of its own — lists and watches again — and
  // with --leader-elect the successor waits out the 15 s Lease, as fracgpu does not release it
  // on SIGTERM. The restart itself is JourneyTest.SchedulerRestartBetweenBindAndAllocate.)
  return cluster.api().AuditLog();
}

// The distinct calls per user, with counts, as a table.
std::string CallTable(const std::vector<fakes::AuditRecord>& log,
                      const std::set<std::string>& users) {
  std::map<std::string, std::map<std::string, int>> calls;
  for (const auto& r : log) {
    if (users.count(r.user)) ++calls[r.user][Describe(r)];
  }
  std::ostringstream out;
  for (const auto& [user, m] : calls) {
    out << user << "\n";
    for (const auto& [call, n] : m) out << "  " << call << "  ×" << n << "\n";
  }
  return out.str();
}

TEST(RbacAudit, EveryCallIsAllowedAndEveryGrantIsUsed) {
  RbacPolicy deploy = LoadRbac(FRACGPU_DEPLOY_DIR);
  bool have_deploy = BindsOurAccounts(deploy);
  // Leader election as deploy/ runs the scheduler (on while deploy/ has no RBAC: the fixture
  // is written for it).
  bool leader_elect = have_deploy ? DeployUsesLeaderElection(FRACGPU_DEPLOY_DIR) : true;
  std::vector<fakes::AuditRecord> log = RunJourney(leader_elect);
  ASSERT_FALSE(log.empty());
  const std::set<std::string> ours = {kSchedulerUser, kDevicePluginUser};
  std::cout << "---- API calls per service account (deduplicated) ----\n" << CallTable(log, ours);
  if (std::getenv("FRACGPU_E2E_DUMP_AUDIT") != nullptr) {
    for (const auto& r : log)
      std::cout << r.user << " " << Describe(r) << " " << r.name << " → " << r.code << "\n";
  }
  // Every component authenticated as itself: nothing anonymous, nothing unknown.
  for (const auto& r : log) {
    EXPECT_NE(r.user, "system:anonymous") << Describe(r);
    EXPECT_NE(r.code, 401) << Describe(r);
  }

  RbacPolicy fixture = LoadRbac(FRACGPU_E2E_TESTDATA);
  for (const auto* policy : {&fixture, &deploy}) {
    if (policy == &deploy && !have_deploy) {
      ADD_FAILURE() << FRACGPU_DEPLOY_DIR << " has no RoleBinding or ClusterRoleBinding for "
                    << kSchedulerUser << " or " << kDevicePluginUser << " (" << deploy.files
                    << " YAML files read); the calls above "
                    << "are allowed by tests/e2e/testdata/rbac.yaml, which deploy/ should grant";
      continue;
    }
    std::string name = policy == &deploy ? "deploy/" : "tests/e2e/testdata/";
    for (const auto& e : policy->errors) ADD_FAILURE() << name << ": " << e;
    std::set<std::string> denied;
    for (const auto& r : log) {
      if (!ours.count(r.user)) continue;
      std::string why;
      if (!Allows(*policy, r, &why)) denied.insert(why);
    }
    for (const auto& d : denied) ADD_FAILURE() << name << " denies a call the run made: " << d;
    for (const auto& g : UnusedGrants(*policy, log, ours)) {
      if (policy == &fixture && !leader_elect && g.resource == "coordination.k8s.io/leases")
        continue;
      // deploy/dra/ is the opt-in DRA Component: the scheduler's grant there (create/get
      // resourceclaimtemplates, --dra-mode) is not used by this HAMi-mode journey; the calls it
      // covers are those of tests/scheduler/webhook_dra_test.cc.
      if (policy == &deploy && g.role == "ClusterRole/fracgpu-scheduler-dra-mode") continue;
      // deploy/parking/ is the opt-in parking Component: the monitor's eviction of borrowers
      // (pods/eviction create, `fracgpu monitor --park`) is not used by this journey, which
      // parks nothing; the calls it covers are those of tests/monitor/parking_test.cc (Reclaim.*).
      if (policy == &deploy && g.role == "ClusterRole/fracgpu-device-plugin-parking") continue;
      ADD_FAILURE() << name << " grants what the run never used: " << g.user << " " << g.verb << " "
                    << g.resource << " (" << g.binding << " → " << g.role << ")";
    }
  }
}

}  // namespace
}  // namespace fracgpu::e2e
