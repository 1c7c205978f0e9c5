#pragma once
// Helpers of the DRA tests: the node's GPUs, claims in the exact wire format kube-scheduler
// writes (resource.k8s.io/v1 ResourceClaim status.allocation), a temporary directory.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/files.h"
#include "../support/temp_dir.h"
#include "core/device.h"

namespace fracgpu::dra::testing {

using nlohmann::json;

inline constexpr const char* kNode = "node-a";
inline constexpr const char* kUuid0 = "GPU-aaaaaaaa-1111-2222-3333-000000000001";
inline constexpr const char* kUuid1 = "GPU-bbbbbbbb-1111-2222-3333-000000000002";

/// Two healthy 16 GiB GPUs as the device plugin's BuildDeviceInfos reports them.
inline std::vector<core::DeviceInfo> TwoGpus() {
  core::DeviceInfo a;
  a.uuid = kUuid0;
  a.index = 0;
  a.devmem_mib = 16384;
  a.type = "NVIDIA-Tesla T4";
  core::DeviceInfo b = a;
  b.uuid = kUuid1;
  b.index = 1;
  b.numa = 1;
  return {a, b};
}

/// One allocation result entry.
inline json Result(const std::string& device, const std::string& memory = "",
                   const std::string& cores = "", const std::string& share = "",
                   const std::string& request = "gpu") {
  json r = {
      {"request", request}, {"driver", "gpu.fracgpu.io"}, {"pool", kNode}, {"device", device}};
  if (!share.empty()) r["shareID"] = share;
  if (!memory.empty()) r["consumedCapacity"] = {{"memory", memory}, {"cores", cores}};
  return r;
}

/// An allocated ResourceClaim with `results`.
inline json Claim(const std::string& name, const std::string& uid, json results) {
  return json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", uid}}},
      {"spec",
       {{"devices",
         {{"requests", json::array({{{"name", "gpu"},
                                     {"exactly", {{"deviceClassName", "gpu.fracgpu.io"}}}}})}}}}},
      {"status",
       {{"allocation",
         {{"devices", {{"results", results}}},
          {"nodeSelector",
           {{"nodeSelectorTerms",
             json::array(
                 {{{"matchFields", json::array({{{"key", "metadata.name"},
                                                 {"operator", "In"},
                                                 {"values", json::array({kNode})}}})}}})}}}}}}}};
}

/// A fresh, checked directory (short: Unix socket paths), removed on destruction.
class TempDir : public ::fracgpu::test_support::TempDir {
 public:
  TempDir() : ::fracgpu::test_support::TempDir("fgdra", /*socket_safe=*/true) {}
};

/// The suites' name for test_support::ReadWholeFile ("" when unreadable).
inline std::string ReadFile(const std::string& path) { return test_support::ReadWholeFile(path); }

}  // namespace fracgpu::dra::testing
