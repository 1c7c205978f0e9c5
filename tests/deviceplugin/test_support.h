#pragma once
// Shared helpers of the device-plugin tests: unique temporary directories, pods and nodes as
// the scheduler leaves them after /bind, and an independent HMAC-SHA256 signer (OpenSSL's
// one-shot HMAC + EVP_EncodeBlock, not the code under test).

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "nvml/gpu_source.h"

namespace fracgpu::deviceplugin::testing {

using nlohmann::json;

inline constexpr const char* kNode = "node-a";
inline constexpr const char* kKey = "test-signing-key";
inline constexpr const char* kUuidA = "GPU-aaaaaaaa-1111-2222-3333-000000000001";
inline constexpr const char* kUuidB = "GPU-bbbbbbbb-1111-2222-3333-000000000002";

/// A fresh, checked directory (short, so Unix socket paths fit), removed on destruction.
class TempDir : public ::fracgpu::test_support::TempDir {
 public:
  TempDir() : ::fracgpu::test_support::TempDir("fgdp-", /*socket_safe=*/true) {}
};

/// Standard padded base64 of HMAC-SHA256(key, "<uid>\n<node>\n<allocated>")
/// (docs/design/CONTRACT.md §2).
inline std::string Sign(const std::string& uid, const std::string& node,
                        const std::string& allocated, const std::string& key = kKey) {
  std::string msg = uid + "\n" + node + "\n" + allocated;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  int n = EVP_EncodeBlock(b64, mac, static_cast<int>(len));
  return std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n));
}

/// Two V100s: 32 GiB, NUMA 0 and 1.
inline std::vector<nvml::GpuInfo> TwoGpus() {
  nvml::GpuInfo a{kUuidA, 0, "Tesla V100-PCIE-32GB", 32ULL << 30, "0000:3b:00.0", 0};
  nvml::GpuInfo b{kUuidB, 1, "Tesla V100-PCIE-32GB", 32ULL << 30, "0000:86:00.0", 1};
  return {a, b};
}

struct ContainerSpec {
  ContainerSpec(std::string n, bool i = false, int g = 0,
                std::optional<std::string> dc = std::nullopt,
                std::optional<std::string> p = std::nullopt)
      : name(std::move(n)),
        init(i),
        gpus(g),
        disable_control(std::move(dc)),
        priority(std::move(p)) {}
  std::string name;
  bool init = false;
  int gpus = 0;
  std::optional<std::string> disable_control;
  std::optional<std::string> priority;
};

/// A pod as fracgpu's scheduler leaves it after /bind: schedulerName ours, bound to kNode,
/// Pending, bind-phase allocating, allocated == to-allocate == `allocated`, signed with kKey
/// (unless `signature` is given; "" = no signature annotation).
inline json MakePod(const std::string& name, const std::vector<ContainerSpec>& containers,
                    const std::string& allocated,
                    std::optional<std::string> signature = std::nullopt,
                    const std::string& ns = "ml") {
  std::string uid = "uid-" + name;
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", uid},
                {"annotations",
                 {{"hami.io/vgpu-node", kNode},
                  {"hami.io/vgpu-time", "1700000000"},
                  {"hami.io/bind-time", "1700000000"},
                  {"hami.io/bind-phase", "allocating"},
                  {"hami.io/vgpu-devices-allocated", allocated},
                  {"hami.io/vgpu-devices-to-allocate", allocated}}}}},
              {"spec", {{"schedulerName", "fracgpu-scheduler"}, {"nodeName", kNode}}},
              {"status", {{"phase", "Pending"}}}};
  std::string sig = signature.value_or(Sign(uid, kNode, allocated));
  if (!sig.empty()) pod["metadata"]["annotations"]["fracgpu.io/allocation-signature"] = sig;
  for (const auto& c : containers) {
    json spec = {{"name", c.name}, {"image", "cuda"}};
    if (c.gpus > 0) spec["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(c.gpus);
    if (c.priority) spec["resources"]["limits"]["nvidia.com/priority"] = *c.priority;
    if (c.disable_control)
      spec["env"] =
          json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", *c.disable_control}}});
    pod["spec"][c.init ? "initContainers" : "containers"].push_back(spec);
  }
  return pod;
}

/// The node, optionally locked for pod `ns/name`.
inline json MakeNode(const std::string& lock_ns = "", const std::string& lock_name = "") {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", kNode}, {"annotations", json::object()}}}};
  if (!lock_name.empty()) {
    node["metadata"]["annotations"]["hami.io/mutex.lock"] =
        "2024-05-01T10:00:00Z," + lock_ns + "," + lock_name;
  }
  return node;
}

}  // namespace fracgpu::deviceplugin::testing
