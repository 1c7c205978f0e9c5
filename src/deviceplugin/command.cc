// `fracgpu device-plugin`: one per GPU node (a DaemonSet). Thin main (docs/design/STYLE.md): flags
// and environment → the parts in this folder, then run until SIGTERM.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/file.h"
#include "base/signals.h"
#include "core/signature.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/cluster_api.h"
#include "deviceplugin/registrar.h"
#include "deviceplugin/server.h"
#include "deviceplugin/topology.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "node/config.h"
#include "node/device_state.h"
#include "node/health.h"
#include "nvml/nvml.h"

namespace fracgpu::cli {

namespace {

struct Flags {
  std::string node_name;
  std::string hook_path = "/usr/local";
  std::string socket_dir = "/var/lib/kubelet/device-plugins";
  std::string socket_name = "fracgpu-nvidia.sock";
  std::string config_file = "/device-config.yaml";
  std::string node_config_file = "/config/config.json";
  std::vector<std::string> scheduler_names = {"fracgpu-scheduler"};
  std::string signing_key_file = "/etc/fracgpu/signature/key";
  bool allow_unsigned = false;
  std::string kubeconfig;
  std::string nvml_library = "libnvidia-ml.so.1";
  int register_interval_s = 30;
  std::string device_list_strategy = "envvar";
  std::string cdi_kind = "nvidia.com/gpu";
  std::string cdi_device_name = "uuid";
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A configuration or key file, at most 16 MiB; with `optional`, "" when it cannot be read.
Result<std::string> ReadText(const std::string& path, bool optional) {
  auto text = base::ReadFile(path, size_t{16} << 20);
  if (!text.ok() && optional) return std::string();
  return text;
}

// A failure after the flags were accepted: `fracgpu device-plugin: <message>`, exit 1.
int Fail(const std::string& message) {
  std::fprintf(stderr, "fracgpu device-plugin: %s\n", message.c_str());
  return 1;
}

// Every flag is checked first, before NVML is opened or the cluster read (usage errors:
// CLI::ValidationError, exit 2 as `fracgpu device-plugin: <message>`, src/cli/usage.h).
int Run(const Flags& f) {
  if (f.node_name.empty()) throw CLI::ValidationError("--node-name (or NODE_NAME) is required");
  auto yaml = ReadText(f.config_file, /*optional=*/true);
  auto config = node::ParseDeviceConfigYaml(yaml.ok() ? *yaml : "");
  if (!config.ok()) {
    throw CLI::ValidationError("--config-file " + f.config_file + ": " + config.status().message());
  }
  if (auto node_json = ReadText(f.node_config_file, true); node_json.ok() && !node_json->empty()) {
    config = node::ApplyNodeOverrides(*config, *node_json, f.node_name);
    if (!config.ok()) {
      throw CLI::ValidationError("--node-config " + f.node_config_file + ": " +
                                 config.status().message());
    }
  }
  auto policy = node::ParseXidPolicy(Env("DP_DISABLE_HEALTHCHECKS"), Env("DP_ENABLE_HEALTHCHECKS"));
  if (!policy.ok()) throw CLI::ValidationError(policy.status().message());
  std::string key;
  if (auto k = ReadText(f.signing_key_file, f.allow_unsigned); k.ok()) {
    key = *k;
  } else {
    throw CLI::ValidationError("--signing-key-file: " + k.status().message() +
                               " (or pass --allow-unsigned)");
  }
  auto device_list =
      deviceplugin::ParseDeviceListStrategy(f.device_list_strategy, f.cdi_kind, f.cdi_device_name);
  if (!device_list.ok()) throw CLI::ValidationError(device_list.status().message());

  base::StopSignal stop;
  base::SignalWatcher signals(&stop);  // before any other thread
  auto nvml = nvml::Nvml::Open({f.nvml_library, "/sys"});
  if (!nvml.ok()) return Fail(nvml.status().ToString());
  auto gpus = (*nvml)->ListGpus();
  if (!gpus.ok()) return Fail(gpus.status().ToString());
  auto client = k8s::Connect(f.kubeconfig);
  if (!client.ok()) return Fail(client.status().ToString());
  node::DeviceState state(*gpus, *config);
  deviceplugin::K8sClusterApi api(client->get());
  deviceplugin::AllocatorOptions aopt;
  aopt.node_name = f.node_name;
  aopt.scheduler_names = f.scheduler_names;
  aopt.hook_path = f.hook_path;
  aopt.allow_unsigned = f.allow_unsigned;
  aopt.config = *config;
  aopt.device_list = *device_list;
  if (!key.empty()) {
    aopt.verify_signature = [key](const std::string& uid, const std::string& node,
                                  const std::string& allocated, const std::string& signature) {
      return core::VerifyAllocation(key, uid, node, allocated, signature)
                 ? Status::Ok()
                 : PermissionDenied("HMAC mismatch");
    };
  }
  deviceplugin::Allocator allocator(aopt, &api, base::RealClock::Get(),
                                    [&state] { return state.Devices(); });
  if (Status st = allocator.PrepareHostFiles(); !st.ok()) return Fail(st.ToString());
  if (std::string warning = deviceplugin::MissingLibraryWarning(f.hook_path); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  deviceplugin::ServerOptions sopt;
  sopt.socket_dir = f.socket_dir;
  sopt.socket_name = f.socket_name;
  sopt.resource_name = config->resources.gpu;
  sopt.preferred_allocation = config->preferred_allocation;
  sopt.numa_topology = config->enable_numa_topology;
  deviceplugin::PluginServer server(sopt, &state, &allocator);
  deviceplugin::NodeRegistrar registrar(f.node_name, &api);
  // HAMi's GPU link scores (hami.io/node-nvidia-score), read once: links do not change.
  registrar.set_topology_scores(deviceplugin::NodeTopologyScores(nvml->get(), state.Devices()));

  // Node registration: on start, on every health change, and every register interval.
  std::thread register_loop([&] {
    uint64_t seen = 0;
    while (!stop.stopped()) {
      seen = state.version();
      auto r = registrar.Sync(state.Devices());
      if (!r.ok()) spdlog::warn("{}", r.status().ToString());
      auto wait = r.ok() ? std::chrono::seconds(f.register_interval_s) : std::chrono::seconds(5);
      auto deadline = std::chrono::steady_clock::now() + wait;
      while (!stop.stopped() && state.version() == seen &&
             std::chrono::steady_clock::now() < deadline) {
        state.WaitForChange(seen, std::chrono::milliseconds(1000));
      }
    }
  });
  std::thread health_loop([&] {
    Status st = node::WatchHealth(nvml->get(), *policy, &state, &stop, nullptr);
    if (!st.ok()) spdlog::warn("health checks off: {}", st.ToString());
  });
  Status run = server.Run(&stop);
  if (!run.ok()) spdlog::error("{}", run.ToString());
  stop.Stop();
  state.Wake();
  server.Stop();
  register_loop.join();
  health_loop.join();
  spdlog::info("device plugin stopped");
  return run.ok() ? 0 : 1;
}

}  // namespace

void RegisterDevicePluginCommand(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  flags->node_name = Env("NODE_NAME");
  if (!Env("HOOK_PATH").empty()) flags->hook_path = Env("HOOK_PATH");
  if (!Env("CONFIG_FILE").empty()) flags->config_file = Env("CONFIG_FILE");
  if (!Env("KUBELET_SOCKET_DIR").empty()) flags->socket_dir = Env("KUBELET_SOCKET_DIR");
  auto* cmd = app.add_subcommand("device-plugin", "Run the kubelet device plugin of a GPU node");
  cmd->add_option("--node-name", flags->node_name, "this node (env NODE_NAME)");
  cmd->add_option("--hook-path", flags->hook_path,
                  "host dir holding vgpu/libvgpu.so (env HOOK_PATH)")
      ->capture_default_str();
  cmd->add_option("--socket-dir", flags->socket_dir,
                  "kubelet device-plugins dir (env KUBELET_SOCKET_DIR)")
      ->capture_default_str();
  cmd->add_option("--socket-name", flags->socket_name, "our socket's file name in --socket-dir")
      ->capture_default_str();
  cmd->add_option("--config-file", flags->config_file,
                  "cluster device config YAML (env CONFIG_FILE)")
      ->capture_default_str();
  cmd->add_option("--node-config", flags->node_config_file, "per-node overrides JSON")
      ->capture_default_str();
  // Repeatable: during a migration from HAMi the plugin serves both fracgpu-scheduler's signed
  // and hami-scheduler's unsigned pods (docs/hami-migration.md, step 2).
  cmd->add_option("--scheduler-name", flags->scheduler_names,
                  "spec.schedulerName of pods we serve (repeat for several)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->capture_default_str();
  CLI::Option* key = cmd->add_option("--signing-key-file", flags->signing_key_file,
                                     "HMAC key of the allocation signature (mounted Secret; "
                                     "the scheduler's --signing-key-file)")
                         ->capture_default_str();
  // The old spelling: accepted, with a deprecation line (docs/development.md "The command line").
  CLI::Option* old_key =
      cmd->add_option("--signature-key-file", flags->signing_key_file)->group("");
  cmd->add_flag("--allow-unsigned", flags->allow_unsigned,
                "serve unsigned decisions named by the node lock");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)");
  cmd->add_option("--nvml-library", flags->nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  cmd->add_option("--register-interval", flags->register_interval_s,
                  "seconds between node registrations")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--device-list-strategy", flags->device_list_strategy,
                  "how GPUs reach the container runtime, comma-separated: envvar "
                  "(NVIDIA_VISIBLE_DEVICES), cdi-annotations, cdi-cri (NVIDIA k8s-device-plugin's "
                  "values; docs/install.md \"Runtime class and CDI\")")
      ->capture_default_str();
  cmd->add_option("--cdi-kind", flags->cdi_kind,
                  "CDI kind the GPUs are named under (the spec nvidia-ctk cdi generate writes)")
      ->capture_default_str();
  cmd->add_option("--cdi-device-name-strategy", flags->cdi_device_name,
                  "CDI device name of a GPU within --cdi-kind: uuid or index")
      ->capture_default_str();
  cmd->callback([flags, key, old_key] {
    if (old_key->count() > 0) {
      if (key->count() > 0)
        throw CLI::ValidationError(
            "--signature-key-file is --signing-key-file's old name: give one");
      std::fputs(
          "fracgpu device-plugin: --signature-key-file is deprecated; use --signing-key-file\n",
          stderr);
    }
    int rc = Run(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fracgpu::cli
