#include "dra/driver.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "base/file.h"
#include "k8s/client.h"

namespace fracgpu::dra {

namespace fs = std::filesystem;

namespace {
// The checkpoint is our own file, but read with a bound all the same.
constexpr std::uintmax_t kMaxCheckpointBytes = 16u << 20;
constexpr int kCheckpointVersion = 1;
}  // namespace

Result<json> K8sClaimSource::GetClaim(const std::string& ns, const std::string& name) {
  return client_->Get("/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name);
}

std::string CheckpointPath(const std::string& state_dir) {
  return (fs::path(state_dir) / "checkpoint.json").string();
}

Driver::Driver(DriverOptions options, ClaimSource* claims,
               std::function<std::vector<core::DeviceInfo>()> devices)
    : options_(std::move(options)), claims_(claims), devices_(std::move(devices)) {}

Status Driver::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string path = CheckpointPath(options_.state_dir);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    prepared_.clear();
    return Status::Ok();
  }
  auto text = base::ReadFile(path, kMaxCheckpointBytes);
  if (!text.ok()) return Internal("checkpoint " + path + " cannot be read or is too large");
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kCheckpointVersion ||
      !j.contains("claims") || !j["claims"].is_object()) {
    return Internal("checkpoint " + path + " is not a version-1 fracgpu DRA checkpoint");
  }
  std::map<std::string, PreparedClaim> loaded;
  for (const auto& [uid, c] : j["claims"].items()) {
    PreparedClaim pc;
    pc.uid = uid;
    pc.ns = c.value("namespace", "");
    pc.name = c.value("name", "");
    if (!c.contains("shares") || !c["shares"].is_array())
      return Internal("checkpoint " + path + ": claim " + uid + " has no shares");
    for (const auto& s : c["shares"]) {
      auto share = ShareFromJson(s);
      if (!share.ok())
        return Internal("checkpoint " + path + ": claim " + uid + ": " + share.status().message());
      pc.shares.push_back(std::move(share).value());
    }
    loaded[uid] = std::move(pc);
  }
  prepared_ = std::move(loaded);
  spdlog::info("DRA checkpoint {}: {} prepared claim(s)", path, prepared_.size());
  return Status::Ok();
}

Status Driver::SaveLocked(const std::map<std::string, PreparedClaim>& claims) {
  json out = {{"version", kCheckpointVersion}, {"claims", json::object()}};
  for (const auto& [uid, c] : claims) {
    json shares = json::array();
    for (const auto& s : c.shares) shares.push_back(ShareToJson(s));
    out["claims"][uid] = {{"namespace", c.ns}, {"name", c.name}, {"shares", shares}};
  }
  std::error_code ec;
  fs::create_directories(options_.state_dir, ec);
  if (ec) return Internal("cannot create " + options_.state_dir + ": " + ec.message());
  return base::WriteFileAtomically(CheckpointPath(options_.state_dir), out.dump() + "\n", 0600);
}

std::string BaseRequest(const std::string& request) { return request.substr(0, request.find('/')); }

std::vector<PreparedDevice> Driver::DevicesOf(const PreparedClaim& c) const {
  std::vector<PreparedDevice> out;
  for (const auto& s : c.shares) {
    // The kubelet matches a container's resources.claims[].request against the request names
    // exactly, and a container names the request, never a firstAvailable subrequest: the
    // allocation's "<request>/<subrequest>" is reported as "<request>" (as the upstream
    // kubeletplugin helper does, stripSubrequestNames).
    // Each allocated device has its own CDI device carrying only its GPU (dra/cdi.h), so a
    // container naming this request gets this device once, and one naming two requests gets
    // each of their devices once (the kubelet does not de-duplicate CDI IDs).
    PreparedDevice d{
        BaseRequest(s.request), s.pool, s.device, {CdiDeviceId(c.uid, s.device)}, s.share_id};
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<PreparedDevice>> Driver::Prepare(const std::string& ns, const std::string& name,
                                                    const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string who = "claim " + ns + "/" + name + " (" + uid + ")";
  if (ns.empty() || name.empty() || uid.empty())
    return InvalidArgument("claim needs namespace, name and uid: " + who);
  if (auto it = prepared_.find(uid); it != prepared_.end()) {
    std::error_code ec;
    const std::string spec = CdiSpecPath(options_.cdi, uid);
    if (!fs::exists(spec, ec)) {
      FRACGPU_RETURN_IF_ERROR(WriteClaimFiles(uid, it->second.shares, options_.cdi));
    } else if (auto have = base::ReadFile(spec, kMaxCheckpointBytes);
               !have.ok() || *have != CdiSpecText(uid, it->second.shares, options_.cdi)) {
      // Written by an older driver (one CDI device per claim): its spec and limits directory
      // are rewritten, the region of the containers already running kept.
      FRACGPU_RETURN_IF_ERROR(WriteClaimSpecFiles(uid, it->second.shares, options_.cdi));
    }
    return DevicesOf(it->second);
  }
  auto claim = claims_->GetClaim(ns, name);
  if (!claim.ok()) return claim.status().WithPrefix("reading " + who);
  std::string got_uid = claim->contains("metadata") ? (*claim)["metadata"].value("uid", "") : "";
  if (got_uid != uid)
    return NotFound(who + ": the API server has UID \"" + got_uid + "\" (claim was recreated)");
  auto shares = ParseClaimAllocation(*claim, options_.driver, options_.pool, devices_());
  if (!shares.ok()) return shares.status().WithPrefix(who);
  FRACGPU_RETURN_IF_ERROR(WriteClaimFiles(uid, *shares, options_.cdi));
  PreparedClaim pc{ns, name, uid, *shares};
  auto next = prepared_;
  next[uid] = pc;
  Status st = SaveLocked(next);
  if (!st.ok()) {
    (void)RemoveClaimFiles(uid, options_.cdi);
    return st.WithPrefix(who + ": checkpoint");
  }
  prepared_ = std::move(next);
  for (const auto& s : pc.shares) {
    spdlog::info("NodePrepareResources {}: {} {} memory={}MiB cores={}% share={}", who, s.device,
                 s.uuid, s.mem_mib, s.cores, s.share_id.empty() ? "-" : s.share_id);
  }
  return DevicesOf(pc);
}

Status Driver::Unprepare(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  FRACGPU_RETURN_IF_ERROR(RemoveClaimFiles(uid, options_.cdi));
  if (!prepared_.count(uid)) return Status::Ok();
  auto next = prepared_;
  next.erase(uid);
  FRACGPU_RETURN_IF_ERROR(SaveLocked(next).WithPrefix("claim " + uid + ": checkpoint"));
  prepared_ = std::move(next);
  spdlog::info("NodeUnprepareResources claim {}", uid);
  return Status::Ok();
}

std::map<std::string, PreparedClaim> Driver::Prepared() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prepared_;
}

}  // namespace fracgpu::dra
