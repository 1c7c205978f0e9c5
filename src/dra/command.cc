// `fracgpu dra-driver`: the DRA kubelet plugin of a GPU node (a DaemonSet, deploy/dra/).
// Thin main (docs/design/STYLE.md): flags and environment → the parts in this folder, then run
// until SIGTERM. Shares node/ with the device plugin: config parsing, inventory (BuildDeviceInfos
// via DeviceState), Xid health watch and host-file setup.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/file.h"
#include "base/signals.h"
#include "dra/api.h"
#include "dra/driver.h"
#include "dra/plugin.h"
#include "dra/slices.h"
#include "k8s/client.h"
#include "node/config.h"
#include "node/container_edits.h"
#include "node/device_state.h"
#include "node/health.h"
#include "nvml/nvml.h"

namespace fracgpu::cli {

namespace {

struct Flags {
  std::string node_name;
  std::string driver_name = dra::kDriverName;
  std::string hook_path = "/usr/local";
  std::string registry_dir = dra::kPluginsRegistryDir;
  std::string plugin_dir;  // default <kPluginsDir>/<driver>
  std::string cdi_dir = dra::kCdiDir;
  std::string state_dir;  // default <plugin_dir>
  std::string config_file = "/device-config.yaml";
  std::string node_config_file = "/config/config.json";
  std::string kubeconfig;
  std::string nvml_library = "libnvidia-ml.so.1";
  /// "auto" (publish shareable devices; whole devices, said loudly, when the API server drops
  /// the fields), "true" (refuse to run without them), "false" (whole devices).
  std::string consumable_capacity = "auto";
  bool serve_v1beta1 = true;
  int slice_interval_s = 60;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A configuration file, at most 16 MiB; "" when it cannot be read.
std::string ReadOptional(const std::string& path) {
  auto text = base::ReadFile(path, size_t{16} << 20);
  return text.ok() ? std::move(*text) : std::string();
}

// A failure after the flags were accepted: `fracgpu dra-driver: <message>`, exit 1.
int Fail(const std::string& message) {
  std::fprintf(stderr, "fracgpu dra-driver: %s\n", message.c_str());
  return 1;
}

// Every flag is checked first, before NVML is opened or the cluster read (usage errors:
// CLI::ValidationError, exit 2 as `fracgpu dra-driver: <message>`, src/cli/usage.h).
int Run(Flags f) {
  if (f.node_name.empty()) throw CLI::ValidationError("--node-name (or NODE_NAME) is required");
  if (f.plugin_dir.empty()) f.plugin_dir = std::string(dra::kPluginsDir) + "/" + f.driver_name;
  if (f.state_dir.empty()) f.state_dir = f.plugin_dir;
  auto config = node::ParseDeviceConfigYaml(ReadOptional(f.config_file));
  if (!config.ok()) {
    throw CLI::ValidationError("--config-file " + f.config_file + ": " + config.status().message());
  }
  if (std::string overrides = ReadOptional(f.node_config_file); !overrides.empty()) {
    config = node::ApplyNodeOverrides(*config, overrides, f.node_name);
    if (!config.ok()) {
      throw CLI::ValidationError("--node-config " + f.node_config_file + ": " +
                                 config.status().message());
    }
  }
  auto policy = node::ParseXidPolicy(Env("DP_DISABLE_HEALTHCHECKS"), Env("DP_ENABLE_HEALTHCHECKS"));
  if (!policy.ok()) throw CLI::ValidationError(policy.status().message());

  base::StopSignal stop;
  base::SignalWatcher signals(&stop);  // before any other thread
  auto nvml = nvml::Nvml::Open({f.nvml_library, "/sys"});
  if (!nvml.ok()) return Fail(nvml.status().ToString());
  auto gpus = (*nvml)->ListGpus();
  if (!gpus.ok()) return Fail(gpus.status().ToString());
  // Optional slice attributes (architecture, computeCapability, driverVersion): an older
  // driver without an entry point, or a product answering NOT_SUPPORTED, just omits them.
  nvml::FactsReport facts = (*nvml)->Facts();
  for (const auto& line : dra::UnpublishableFacts(facts.by_uuid)) facts.omitted.push_back(line);
  for (const auto& line : facts.omitted) spdlog::debug("ResourceSlice: {}", line);
  if (!facts.omitted.empty()) {
    spdlog::info("ResourceSlice: {} NVML fact(s) left out of the device attributes; the first: {}",
                 facts.omitted.size(), facts.omitted.front());
  }
  auto client = k8s::Connect(f.kubeconfig);
  if (!client.ok()) return Fail(client.status().ToString());
  node::DeviceState state(*gpus, *config);
  // The node's shared host files (ld.so.preload, containers/, limits/, node/), as the device
  // plugin prepares them.
  if (Status st = node::PrepareHostFiles(f.hook_path); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  // (No defaultMemory: memory's requestPolicy.default is the whole card, src/dra/slices.cc.)
  dra::SliceOptions slice_opt{f.driver_name,         f.node_name, f.consumable_capacity != "false",
                              config->default_cores, "",          true};
  // The slice is owned by its Node (removed with it); without the Node's uid it is published
  // without an ownerReference, as before, and says so.
  if (auto node = (*client)->Get("/api/v1/nodes/" + f.node_name); node.ok()) {
    slice_opt.node_uid = (*node)["metadata"].value("uid", "");
  } else {
    spdlog::warn("ResourceSlice without ownerReference: reading Node {}: {}", f.node_name,
                 node.status().ToString());
  }
  dra::SlicePublisher publisher(slice_opt, client->get());
  dra::K8sClaimSource claims(client->get());
  dra::DriverOptions dopt{
      f.driver_name, f.node_name, f.state_dir, {f.cdi_dir, f.hook_path, *config}};
  dra::Driver driver(dopt, &claims, [&state] { return state.Devices(); });
  if (Status st = driver.Load(); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  dra::KubeletPlugin plugin({f.driver_name, f.registry_dir, f.plugin_dir, f.serve_v1beta1},
                            &driver);
  if (Status st = plugin.Start(); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  std::thread health_loop([&] {
    Status st = node::WatchHealth(nvml->get(), *policy, &state, &stop, nullptr);
    if (!st.ok()) spdlog::warn("health checks off: {}", st.ToString());
  });
  // The slice is watched: a kubelet deletes its node's ResourceSlices when it starts (and
  // those of a driver that stays unregistered), and another writer may change it; either
  // makes the loop below publish it again at once instead of at the next interval.
  std::atomic<bool> resync{false};
  std::thread slice_watch([&] {
    k8s::WatchOptions wo;
    wo.field_selector = "metadata.name=" + publisher.SliceName();
    bool first = true;
    while (!stop.stopped()) {
      auto end = (*client)->Watch(
          "/apis/resource.k8s.io/v1/resourceslices", wo,
          [&](const k8s::WatchEvent& ev) {
            if (ev.type == "DELETED" || ev.type == "MODIFIED" || (ev.type == "ADDED" && !first)) {
              if (ev.type == "DELETED")
                spdlog::info("ResourceSlice {} was deleted; publishing it again",
                             publisher.SliceName());
              resync = true;
              state.Wake();
            }
            return true;
          },
          &stop);
      first = false;
      if (!end.ok()) {
        spdlog::warn("watching ResourceSlice {}: {}", publisher.SliceName(),
                     end.status().ToString());
        for (int i = 0; i < 20 && !stop.stopped(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  // ResourceSlice: on start, on every health change, when the watch saw it change and every
  // interval; sockets re-served when they disappear (a kubelet wiping plugins_registry).
  uint64_t seen = 0;
  bool served_checked = false;
  int rc = 0;
  while (!stop.stopped()) {
    seen = state.version();
    resync = false;
    dra::json devices =
        dra::BuildSliceDevices(state.Devices(), *gpus, facts.by_uuid, publisher.options());
    auto gen = publisher.Sync(devices);
    if (!gen.ok()) spdlog::warn("{}", gen.status().ToString());
    // Once: did the API server keep the consumable-capacity fields? One without the
    // DRAConsumableCapacity gate drops them silently, and fractional claims would get whole GPUs.
    if (gen.ok() && !served_checked && publisher.options().consumable_capacity) {
      auto stored = publisher.Read();
      if (stored.ok()) {
        served_checked = true;
        dra::json sent = dra::BuildResourceSlice(devices, publisher.options(), *gen)["spec"];
        auto dropped =
            dra::DroppedConsumableFields(sent, stored->value("spec", dra::json::object()));
        if (!dropped.empty()) {
          std::string why = fmt::format(
              "the API server dropped {} field(s) of ResourceSlice {} (first: {}): it does not "
              "serve consumable capacity (enable the DRAConsumableCapacity feature gate on "
              "kube-apiserver, kube-scheduler, kube-controller-manager and the kubelet; "
              "docs/dra.md)",
              dropped.size(), publisher.SliceName(), dropped.front());
          if (f.consumable_capacity == "true") {
            spdlog::error("{}; --consumable-capacity=true: stopping", why);
            rc = 1;
            stop.Stop();
            break;
          }
          spdlog::error(
              "{}; publishing whole GPUs instead, and claims that ask for memory or cores fail "
              "to prepare with this reason rather than get a whole GPU",
              why);
          publisher.UseWholeDevices();
          continue;
        }
      }
    }
    if (!plugin.SocketsPresent()) {
      spdlog::warn("plugin sockets disappeared; serving them again");
      plugin.Stop();
      if (Status st = plugin.Start(); !st.ok()) spdlog::error("{}", st.ToString());
    }
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(gen.ok() ? f.slice_interval_s : 5);
    while (!stop.stopped() && state.version() == seen && !resync &&
           std::chrono::steady_clock::now() < deadline) {
      state.WaitForChange(seen, std::chrono::milliseconds(1000));
    }
  }
  state.Wake();
  plugin.Stop();
  health_loop.join();
  slice_watch.join();
  spdlog::info("DRA driver stopped (ResourceSlice kept for the next instance)");
  return rc;
}

}  // namespace

void RegisterDraDriverCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  flags->node_name = Env("NODE_NAME");
  if (!Env("HOOK_PATH").empty()) flags->hook_path = Env("HOOK_PATH");
  if (!Env("CONFIG_FILE").empty()) flags->config_file = Env("CONFIG_FILE");
  auto* cmd =
      app.add_subcommand("dra-driver", "Run the DRA kubelet plugin of a GPU node (docs/dra.md)");
  cmd->add_option("--node-name", flags->node_name, "this node (env NODE_NAME); also the pool name");
  cmd->add_option("--driver-name", flags->driver_name, "DRA driver name");
  cmd->add_option("--hook-path", flags->hook_path,
                  "host dir holding vgpu/libvgpu.so (env HOOK_PATH)");
  cmd->add_option("--registry-dir", flags->registry_dir, "kubelet plugins_registry dir");
  cmd->add_option("--plugin-dir", flags->plugin_dir,
                  "dir of the DRA service socket (default <plugins>/<driver>)");
  cmd->add_option("--cdi-dir", flags->cdi_dir, "CDI spec dir the container runtime reads");
  cmd->add_option("--state-dir", flags->state_dir, "dir of the checkpoint (default --plugin-dir)");
  cmd->add_option("--config-file", flags->config_file,
                  "cluster device config YAML (env CONFIG_FILE)");
  cmd->add_option("--node-config", flags->node_config_file, "per-node overrides JSON");
  cmd->add_option("--kubeconfig", flags->kubeconfig, "kubeconfig (default: in-cluster)");
  cmd->add_option("--nvml-library", flags->nvml_library, "NVML library to dlopen");
  cmd->add_option("--consumable-capacity", flags->consumable_capacity,
                  "auto: publish shareable devices (KEP-5075, DRAConsumableCapacity), whole "
                  "cards with an error line when the API server drops the fields; true: exit "
                  "then; false: whole cards")
      ->check(CLI::IsMember({"auto", "true", "false"}));
  cmd->add_option("--serve-v1beta1", flags->serve_v1beta1,
                  "also serve the v1beta1 DRAPlugin (kubelet 1.32-1.33)");
  cmd->add_option("--slice-interval", flags->slice_interval_s,
                  "seconds between ResourceSlice checks")
      ->check(CLI::Range(1, 3600));
  cmd->callback([flags] {
    int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
