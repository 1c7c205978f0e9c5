#pragma once
// The node side of fracgpu's DRA driver: NodePrepareResources / NodeUnprepareResources for
// one claim at a time, idempotent, with a checkpoint on the node so that a restarted plugin
// still knows (and can unprepare) what it prepared.

#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device.h"
#include "dra/cdi.h"
#include "dra/claim.h"

namespace fracgpu::k8s {
class Client;
}

namespace fracgpu::dra {

using nlohmann::json;

/// Reads ResourceClaims (a narrow interface so the driver is testable in memory).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  /// GET the claim `ns/name`. Errors: kNotFound, kUnavailable, …
  virtual Result<json> GetClaim(const std::string& ns, const std::string& name) = 0;
};

/// ClaimSource over the REST client (GET
/// /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>).
class K8sClaimSource final : public ClaimSource {
 public:
  explicit K8sClaimSource(k8s::Client* client) : client_(client) {}
  Result<json> GetClaim(const std::string& ns, const std::string& name) override;

 private:
  k8s::Client* client_;
};

struct DriverOptions {
  std::string driver;     ///< kDriverName
  std::string pool;       ///< this node's pool (the node name)
  std::string state_dir;  ///< holds checkpoint.json
  CdiOptions cdi;
};

/// One device of a prepared claim as kubelet is told about it (dra/v1 Device).
struct PreparedDevice {
  std::string request;  ///< the claim's request (a subrequest's parent), as containers name it
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  std::string share_id;  ///< the allocation's shareID; "" for a whole-device allocation
  bool operator==(const PreparedDevice&) const = default;
};

/// A claim this node prepared.
struct PreparedClaim {
  std::string ns, name, uid;
  std::vector<AllocatedShare> shares;
};

/// Prepare / Unprepare with a checkpoint. Calls are serialised. Thread-safe.
class Driver {
 public:
  /// `claims` not owned; `devices` returns the node's register entries (health included).
  Driver(DriverOptions options, ClaimSource* claims,
         std::function<std::vector<core::DeviceInfo>()> devices);

  /// Reads the checkpoint (absent = nothing prepared). Errors: kInternal naming the file
  /// when it exists but cannot be read or parsed (the driver refuses to start blind).
  Status Load();

  /// Prepares claim `ns/name` with UID `uid`: reads it, checks its allocation for this
  /// node, writes the CDI spec and host files, records it in the checkpoint, and returns the
  /// devices for kubelet. A claim already prepared returns the same devices (its files
  /// rewritten if missing). Errors: as ParseClaimAllocation, kNotFound / kInvalidArgument
  /// when the claim is gone or its UID differs, kInternal for host files (nothing of the
  /// claim left behind).
  Result<std::vector<PreparedDevice>> Prepare(const std::string& ns, const std::string& name,
                                              const std::string& uid);

  /// Removes the claim's files and checkpoint entry. Unknown UIDs succeed (idempotent).
  Status Unprepare(const std::string& uid);

  /// The prepared claims, by UID.
  std::map<std::string, PreparedClaim> Prepared() const;
  const DriverOptions& options() const { return options_; }

 private:
  std::vector<PreparedDevice> DevicesOf(const PreparedClaim& c) const;
  Status SaveLocked(const std::map<std::string, PreparedClaim>& claims);

  DriverOptions options_;
  ClaimSource* claims_;
  std::function<std::vector<core::DeviceInfo>()> devices_;
  mutable std::mutex mu_;
  std::map<std::string, PreparedClaim> prepared_;
};

/// The request a result's request names: "<request>/<subrequest>" (firstAvailable) → "<request>".
std::string BaseRequest(const std::string& request);

/// The checkpoint file of `state_dir`.
std::string CheckpointPath(const std::string& state_dir);

}  // namespace fracgpu::dra
