// The checker of deploy/ (manifest_check.h). What it checks:
//  1. kustomization.yaml lists exactly the *.yaml files of deploy/, maps image "fracgpu".
//  2. Every object has apiVersion/kind/name; namespaced objects name an existing namespace.
//  3. Pod templates (Deployment, DaemonSet, Job, CronJob): the service account exists; every
//     ConfigMap / Secret volume exists (Secrets: defined here, or written by the `fracgpu certs`
//     Job, with the keys it writes) with the keys its items name; every mount names a volume;
//     probes name declared ports.
//  4. `fracgpu <sub>` containers: args parse with the subcommand's real CLI11 definition; every
//     file flag points into a mount that provides that file; listening ports are declared;
//     host directories are hostPath mounts at the same path; cross-component names agree
//     (scheduler name, service-account users, lease names, Service/SANs of `fracgpu certs`).
//  5. Services select a pod template and their targetPorts are ports of it.
//  6. The webhook: Service, port and path /webhook of the scheduler; pods CREATE+UPDATE;
//     sideEffects None, admissionReviewVersions v1, timeout, failurePolicy, and the
//     hami.io/webhook NotIn [ignore] selectors (docs/design/CONTRACT.md §1).
//  7. The KubeSchedulerConfiguration (docs/design/CONTRACT.md §5).
//  8. RBAC: bindings name existing accounts and roles; every pod's account is bound.
//  9. The ValidatingAdmissionPolicy's CEL lists agree with the C++ constants: variable `system`
//     is core::kSystemPodAnnotations, the device plugin's rule lists exactly
//     core::kDevicePluginPodAnnotations, variable `devicePlugin` names the device plugin's
//     account; and the webhook skips the device plugin's UPDATEs only beside that rule.
#include "manifest_check.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "api/limits.h"
#include "base/strings.h"
#include "core/annotations.h"
#include "core/request.h"
#include "node/config.h"
#include "scheduler/webhook.h"

namespace fracgpu::cli {
void RegisterSchedulerCommand(CLI::App& app);
void RegisterDevicePluginCommand(CLI::App& app);
void RegisterUiCommand(CLI::App& app);
void RegisterCertsCommand(CLI::App& app);
#ifdef FRACGPU_HAVE_MONITOR
void RegisterMonitorCommand(CLI::App& app);
#endif
}  // namespace fracgpu::cli

namespace fracgpu::deploytest {
namespace fs = std::filesystem;
namespace {

const std::set<std::string> kClusterScoped = {"Namespace",
                                              "ClusterRole",
                                              "ClusterRoleBinding",
                                              "MutatingWebhookConfiguration",
                                              "ValidatingAdmissionPolicy",
                                              "ValidatingAdmissionPolicyBinding",
                                              "PriorityClass"};

std::string S(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return "";
  return n.as<std::string>();
}
std::string S(const YAML::Node& n, const std::string& key) {
  if (!n.IsDefined() || !n.IsMap()) return "";
  return S(n[key]);
}
YAML::Node At(YAML::Node n, std::initializer_list<const char*> path) {
  for (const char* k : path) {
    if (!n.IsDefined() || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& c = n;
    YAML::Node next = c[k];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(next);  // never `n = ...`: yaml-cpp's assignment overwrites the referenced node
  }
  return n;
}
std::string Name(const YAML::Node& o) { return S(At(o, {"metadata", "name"})); }
std::string Ns(const YAML::Node& o) { return S(At(o, {"metadata", "namespace"})); }
std::string Kind(const YAML::Node& o) { return S(o, "kind"); }
std::vector<std::string> Strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n.IsDefined() && n.IsSequence()) {
    for (const auto& e : n) out.push_back(S(e));
  }
  return out;
}
bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// host:port → port ("" when malformed).
std::string PortOf(const std::string& bind) {
  auto c = bind.rfind(':');
  return c == std::string::npos ? "" : bind.substr(c + 1);
}

// A pod template found in a workload.
struct Pod {
  std::string file, owner;  // "Deployment/fracgpu-scheduler"
  std::string ns;
  YAML::Node labels;
  YAML::Node spec;
};

std::vector<Pod> Pods(const Bundle& b) {
  std::vector<Pod> out;
  for (const auto& m : b.objects) {
    std::string kind = Kind(m.node);
    YAML::Node tmpl(YAML::NodeType::Undefined);
    if (kind == "Deployment" || kind == "DaemonSet" || kind == "Job")
      tmpl.reset(At(m.node, {"spec", "template"}));
    if (kind == "CronJob") tmpl.reset(At(m.node, {"spec", "jobTemplate", "spec", "template"}));
    if (!tmpl.IsDefined() || tmpl.IsNull()) continue;
    out.push_back({m.file, kind + "/" + Name(m.node), Ns(m.node), At(tmpl, {"metadata", "labels"}),
                   At(tmpl, {"spec"})});
  }
  return out;
}

std::vector<YAML::Node> Containers(const YAML::Node& spec, bool with_init = true) {
  std::vector<YAML::Node> out;
  for (const char* key : {"initContainers", "containers"}) {
    if (!with_init && std::string(key) == "initContainers") continue;
    const YAML::Node list = At(spec, {key});
    if (list.IsDefined() && list.IsSequence()) {
      for (const auto& c : list) out.push_back(c);
    }
  }
  return out;
}

std::vector<std::string> Args(const YAML::Node& c) { return Strings(At(c, {"args"})); }
bool IsFracgpu(const YAML::Node& c) {
  return S(c, "image") == "fracgpu" && !At(c, {"command"}).IsDefined();
}

// The keys each Secret the `fracgpu certs` Job writes carries (src/certs/reconcile.h).
std::map<std::string, std::set<std::string>> ProducedSecrets(const Bundle& b) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& pod : Pods(b)) {
    for (const auto& c : Containers(pod.spec)) {
      if (!IsFracgpu(c)) continue;
      auto args = Args(c);
      if (args.empty() || args[0] != "certs") continue;
      auto parsed = ParseFracgpuArgs(args);
      if (!parsed.ok()) continue;
      out[pod.ns + "/" + parsed->Get("--secret-name")] = {"tls.crt", "tls.key", "ca.crt", "ca.key"};
      if (!parsed->Get("--signing-key-secret").empty())
        out[pod.ns + "/" + parsed->Get("--signing-key-secret")] = {"key"};
    }
  }
  // Made by the operator (docs/install.md "Authentication", issue 33): fracgpu's client CA and
  // the client certificate fracgpu's kube-scheduler presents to the extender.
  out["fracgpu-system/fracgpu-client-ca"] = {"ca.crt"};
  out["fracgpu-system/fracgpu-kube-scheduler-client"] = {"tls.crt", "tls.key"};
  out["fracgpu-system/fracgpu-ui-gateway"] = {"secret"};  // the UI's gateway secret
  for (const auto& s : ObjectsOfKind(b, "Secret")) {
    auto& keys = out[Ns(s) + "/" + Name(s)];
    for (const char* field : {"data", "stringData"}) {
      if (s[field].IsMap()) {
        for (const auto& kv : s[field]) keys.insert(kv.first.as<std::string>());
      }
    }
  }
  return out;
}

// The file content a mount provides at `path` in container `c` of `pod`: "" with *ok=false
// when no mount provides it; for Secrets the content is unknown ("" with *ok=true).
std::string ProvidedFile(const Bundle& b, const Pod& pod, const YAML::Node& c,
                         const std::string& path, bool* ok, std::string* why) {
  *ok = false;
  const YAML::Node mounts = At(c, {"volumeMounts"});
  for (const auto& m : mounts.IsSequence() ? mounts : YAML::Node(YAML::NodeType::Sequence)) {
    std::string dir = S(m, "mountPath");
    if (path.rfind(dir + "/", 0) != 0) continue;
    std::string rel = path.substr(dir.size() + 1);
    if (At(m, {"subPath"}).IsDefined()) continue;
    const YAML::Node vols = At(pod.spec, {"volumes"});
    for (const auto& v : vols.IsSequence() ? vols : YAML::Node(YAML::NodeType::Sequence)) {
      if (S(v, "name") != S(m, "name")) continue;
      // Which key lands at `rel`?
      std::string key = rel;
      const YAML::Node source = v["configMap"].IsDefined() ? v["configMap"] : v["secret"];
      if (!source.IsDefined()) {
        if (v["hostPath"].IsDefined()) {
          *ok = true;  // a host file: not ours to check
          return "";
        }
        *why = "volume " + S(v, "name") + " is neither a ConfigMap, a Secret nor a hostPath";
        return "";
      }
      if (source["items"].IsDefined()) {
        key.clear();
        for (const auto& item : source["items"]) {
          if (S(item, "path") == rel) key = S(item, "key");
        }
        if (key.empty()) {
          *why = "no item of volume " + S(v, "name") + " has path " + rel;
          return "";
        }
      }
      if (v["configMap"].IsDefined()) {
        YAML::Node cm = FindObject(b, "ConfigMap", S(source, "name"));
        if (!cm.IsDefined() || !At(cm, {"data", key.c_str()}).IsDefined()) {
          *why = "ConfigMap " + S(source, "name") + " has no key " + key;
          return "";
        }
        *ok = true;
        return S(At(cm, {"data", key.c_str()}));
      }
      auto produced = ProducedSecrets(b);
      auto it = produced.find(pod.ns + "/" + S(source, "secretName"));
      if (it == produced.end() || !it->second.count(key)) {
        *why = "Secret " + S(source, "secretName") + " has no key " + key;
        return "";
      }
      *ok = true;
      return "";
    }
    *why = "mount " + S(m, "name") + " names no volume";
    return "";
  }
  *why = "no volumeMount covers it";
  return "";
}

// The hostPath behind the mount at exactly `dir` in container `c` ("" = none).
std::string HostPathAt(const Pod& pod, const YAML::Node& c, const std::string& dir) {
  const YAML::Node mounts = At(c, {"volumeMounts"});
  if (!mounts.IsSequence()) return "";
  for (const auto& m : mounts) {
    if (S(m, "mountPath") != dir) continue;
    for (const auto& v : pod.spec["volumes"]) {
      if (S(v, "name") == S(m, "name") && v["hostPath"].IsDefined())
        return S(v["hostPath"], "path");
    }
  }
  return "";
}

bool DeclaresPort(const YAML::Node& c, const std::string& port) {
  const YAML::Node ports = At(c, {"ports"});
  if (!ports.IsSequence()) return false;
  for (const auto& p : ports) {
    if (S(p, "name") == port || S(p, "containerPort") == port) return true;
  }
  return false;
}

std::string PortName(const YAML::Node& c, const std::string& number) {
  for (const auto& p : At(c, {"ports"})) {
    if (S(p, "containerPort") == number) return S(p, "name");
  }
  return "";
}

bool LabelsMatch(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector.IsMap() || selector.size() == 0) return false;
  for (const auto& kv : selector) {
    if (S(labels, kv.first.as<std::string>()) != S(kv.second)) return false;
  }
  return true;
}

// A pod running `fracgpu <sub>`, with that container and its parsed args.
struct Running {
  Pod pod;
  YAML::Node container;
  ParsedArgs args;
};

std::vector<Running> RunningSub(const Bundle& b, const std::string& sub) {
  std::vector<Running> out;
  for (const auto& pod : Pods(b)) {
    for (const auto& c : Containers(pod.spec)) {
      auto args = Args(c);
      if (!IsFracgpu(c) || args.empty() || args[0] != sub) continue;
      auto parsed = ParseFracgpuArgs(args);
      if (parsed.ok()) out.push_back({pod, c, *parsed});
    }
  }
  return out;
}

class Checker {
 public:
  explicit Checker(const Bundle& b) : b_(b) {}

  std::vector<std::string> Run() {
    Kustomization();
    Objects();
    for (const auto& pod : Pods(b_)) PodTemplate(pod);
    FracgpuContainers();
    Services();
    Webhook();
    SchedulerConfig();
    BorrowerPriorityClass();
    Rbac();
    AnnotationPolicy();
    return problems_;
  }

 private:
  void Problem(const std::string& where, const std::string& what) {
    problems_.push_back(where + ": " + what);
  }

  void Kustomization() {
    auto listed = Strings(b_.kustomization["resources"]);
    for (const auto& f : b_.yaml_files) {
      if (!Has(listed, f)) Problem("kustomization.yaml", "resources does not list " + f);
    }
    for (const auto& f : listed) {
      if (!Has(b_.yaml_files, f))
        Problem("kustomization.yaml", "resources lists " + f + ", which is not a file of deploy/");
    }
    bool image = false;
    for (const auto& i : b_.kustomization["images"])
      image |= S(i, "name") == "fracgpu" && !S(i, "newName").empty();
    if (!image)
      Problem("kustomization.yaml", "images does not map image \"fracgpu\" to a registry name");
  }

  // The class the webhook gives borrowers must exist as the webhook writes it: the Priority
  // admission plugin refuses a pod whose priority or preemptionPolicy differs from its class's.
  void BorrowerPriorityClass() {
    const std::string where = std::string("PriorityClass/") + scheduler::kBorrowerPriorityClass;
    for (const auto& pc : ObjectsOfKind(b_, "PriorityClass")) {
      if (Name(pc) != scheduler::kBorrowerPriorityClass) continue;
      if (S(pc, "value") != std::to_string(scheduler::kBorrowerPriority))
        Problem(where, "value " + S(pc, "value") + " is not the webhook's " +
                           std::to_string(scheduler::kBorrowerPriority));
      if (S(pc, "preemptionPolicy") != "Never")
        Problem(where, "preemptionPolicy \"" + S(pc, "preemptionPolicy") + "\" is not Never");
      return;
    }
    Problem(where, "does not exist, and the webhook gives it to every borrower naming no class");
  }

  void Objects() {
    std::set<std::string> namespaces = {"kube-system"};
    for (const auto& n : ObjectsOfKind(b_, "Namespace")) namespaces.insert(Name(n));
    for (const auto& m : b_.objects) {
      std::string where = m.file + ": " + Kind(m.node) + "/" + Name(m.node);
      if (S(m.node, "apiVersion").empty() || Kind(m.node).empty() || Name(m.node).empty()) {
        Problem(where, "apiVersion, kind and metadata.name are required");
      }
      if (kClusterScoped.count(Kind(m.node))) continue;
      if (Ns(m.node).empty()) {
        Problem(where, "metadata.namespace is missing");
      } else if (!namespaces.count(Ns(m.node))) {
        Problem(where, "namespace " + Ns(m.node) + " is not created by deploy/");
      }
    }
  }

  void PodTemplate(const Pod& pod) {
    const std::string where = pod.file + ": " + pod.owner;
    std::string sa = S(pod.spec, "serviceAccountName");
    bool sa_found = false;
    for (const auto& a : ObjectsOfKind(b_, "ServiceAccount"))
      sa_found |= Name(a) == sa && Ns(a) == pod.ns;
    if (!sa_found)
      Problem(where, "serviceAccountName \"" + sa + "\" is not a ServiceAccount in " + pod.ns);
    if (S(pod.labels, "hami.io/webhook") != "ignore") {
      Problem(where,
              "pod label hami.io/webhook: ignore is missing (fracgpu's own pods opt out of its "
              "webhook)");
    }
    auto produced = ProducedSecrets(b_);
    std::set<std::string> volumes;
    const YAML::Node vols = At(pod.spec, {"volumes"});
    for (const auto& v : vols.IsSequence() ? vols : YAML::Node(YAML::NodeType::Sequence)) {
      volumes.insert(S(v, "name"));
      if (v["configMap"].IsDefined()) {
        std::string name = S(v["configMap"], "name");
        YAML::Node cm(YAML::NodeType::Undefined);
        for (const auto& o : ObjectsOfKind(b_, "ConfigMap")) {
          if (Name(o) == name && Ns(o) == pod.ns) cm.reset(o);
        }
        if (!cm.IsDefined()) {
          Problem(where, "volume " + S(v, "name") + ": ConfigMap " + name + " does not exist in " +
                             pod.ns);
          continue;
        }
        for (const auto& item : v["configMap"]["items"]) {
          if (!At(cm, {"data", S(item, "key").c_str()}).IsDefined()) {
            Problem(where, "volume " + S(v, "name") + ": ConfigMap " + name + " has no key " +
                               S(item, "key"));
          }
        }
      }
      if (v["secret"].IsDefined()) {
        std::string name = S(v["secret"], "secretName");
        auto it = produced.find(pod.ns + "/" + name);
        if (it == produced.end()) {
          Problem(where,
                  "volume " + S(v, "name") + ": Secret " + name +
                      " is neither defined in deploy/ nor written by the `fracgpu certs` Job");
          continue;
        }
        for (const auto& item : v["secret"]["items"]) {
          if (!it->second.count(S(item, "key"))) {
            Problem(where, "volume " + S(v, "name") + ": Secret " + name + " has no key " +
                               S(item, "key"));
          }
        }
      }
    }
    for (const auto& c : Containers(pod.spec)) {
      const std::string cw = where + " container " + S(c, "name");
      for (const auto& m : At(c, {"volumeMounts"})) {
        if (!volumes.count(S(m, "name")))
          Problem(cw, "volumeMount " + S(m, "name") + " names no volume");
      }
      for (const char* probe : {"readinessProbe", "livenessProbe", "startupProbe"}) {
        for (const char* kind : {"httpGet", "tcpSocket", "grpc"}) {
          YAML::Node port = At(c, {probe, kind, "port"});
          if (!port.IsDefined()) continue;
          std::string p = S(port);
          bool numeric = !p.empty() && std::all_of(p.begin(), p.end(), ::isdigit);
          if (!numeric && !DeclaresPort(c, p))
            Problem(cw, std::string(probe) + " uses port " + p + ", not declared");
          if (numeric && IsFracgpu(c) && !DeclaresPort(c, p)) {
            Problem(cw, std::string(probe) + " uses port " + p + ", not declared");
          }
        }
      }
      if (IsFracgpu(c)) {
        auto args = Args(c);
        auto parsed = ParseFracgpuArgs(args);
        if (!parsed.ok())
          Problem(cw, "args do not parse as `fracgpu` flags: " + parsed.status().message());
      }
      if (S(c, "image") == "fracgpu" && At(c, {"command"}).IsDefined())
        InstallContainer(pod, c, cw);
    }
  }

  // The init container that runs fracgpu-install-vgpu SOURCE DEST.
  void InstallContainer(const Pod& pod, const YAML::Node& c, const std::string& cw) {
    auto cmd = Strings(c["command"]);
    if (cmd.size() != 3 || cmd[0] != "/usr/local/bin/fracgpu-install-vgpu") {
      Problem(cw, "command must be /usr/local/bin/fracgpu-install-vgpu SOURCE DEST");
      return;
    }
    if (HostPathAt(pod, c, cmd[2]).empty())
      Problem(cw, "install destination " + cmd[2] + " is not a hostPath mount");
    install_dest_ = cmd[2];
    install_source_ = cmd[1];
  }

  void FileFlag(const Running& r, const std::string& flag) {
    std::string path = r.args.Get(flag);
    const std::string cw = r.pod.file + ": " + r.pod.owner + " container " + S(r.container, "name");
    if (path.empty()) {
      Problem(cw, flag + " is not set");
      return;
    }
    bool ok = false;
    std::string why;
    ProvidedFile(b_, r.pod, r.container, path, &ok, &why);
    if (!ok) Problem(cw, flag + "=" + path + " is not provided by a mount: " + why);
  }

  void ListenPort(const Running& r, const std::string& port, const std::string& flag) {
    const std::string cw = r.pod.file + ": " + r.pod.owner + " container " + S(r.container, "name");
    if (port.empty() || !DeclaresPort(r.container, port)) {
      Problem(cw,
              flag + " listens on port \"" + port + "\", which is not a declared containerPort");
    }
  }

  void HostDir(const Running& r, const std::string& dir, const std::string& flag) {
    const std::string cw = r.pod.file + ": " + r.pod.owner + " container " + S(r.container, "name");
    std::string host = HostPathAt(r.pod, r.container, dir);
    if (host != dir) {
      Problem(cw, flag + " needs host directory " + dir + " mounted at the same path (found \"" +
                      host + "\")");
    }
  }

  std::string Sa(const Pod& pod) {
    return "system:serviceaccount:" + pod.ns + ":" + S(pod.spec, "serviceAccountName");
  }

  void FracgpuContainers() {
    auto schedulers = RunningSub(b_, "scheduler");
    auto plugins = RunningSub(b_, "device-plugin");
    if (schedulers.size() != 1)
      Problem("deploy", "expected one `fracgpu scheduler` container, found " +
                            std::to_string(schedulers.size()));
    if (plugins.size() != 1)
      Problem("deploy", "expected one `fracgpu device-plugin` container, found " +
                            std::to_string(plugins.size()));
    for (const auto& r : schedulers) {
      const std::string cw = r.pod.file + ": " + r.pod.owner;
      ListenPort(r, PortOf(r.args.Get("--listen")), "--listen");
      FileFlag(r, "--cert-file");
      FileFlag(r, "--key-file");
      FileFlag(r, "--signing-key-file");
      // Issue 33: the extender and webhook need client certificates of a mounted client CA,
      // and /metrics (pod names) is not on the extender's port.
      if (r.args.Get("--client-ca-file").empty()) {
        Problem(cw, "no --client-ca-file: anyone reaching the port could bind pods");
      } else {
        FileFlag(r, "--client-ca-file");
      }
      if (!r.args.Get("--metrics-port").empty()) {
        ListenPort(r, r.args.Get("--metrics-port"), "--metrics-port");
      }
      // Issue 34: the webhook and the extender read the device plugin's device config.
      FileFlag(r, "--device-config-file");
      std::string unused_why;
      scheduler_device_config_ =
          ProvidedFile(b_, r.pod, r.container, r.args.Get("--device-config-file"),
                       &scheduler_has_device_config_, &unused_why);
      scheduler_name_ = r.args.Get("--scheduler-name");
      scheduler_pod_ = r.pod;
      scheduler_port_ = PortOf(r.args.Get("--listen"));
      scheduler_port_name_ = PortName(r.container, scheduler_port_);
      if (r.args.Get("--scheduler-user") != Sa(r.pod)) {
        Problem(cw, "--scheduler-user \"" + r.args.Get("--scheduler-user") +
                        "\" is not this pod's account " + Sa(r.pod));
      }
      device_plugin_user_ = r.args.Get("--device-plugin-user");
      for (const auto& p : plugins) {
        if (r.args.Get("--device-plugin-user") != Sa(p.pod)) {
          Problem(cw, "--device-plugin-user \"" + r.args.Get("--device-plugin-user") +
                          "\" is not the device plugin's account " + Sa(p.pod));
        }
      }
      if (r.args.values.count("--leader-elect") &&
          !Allowed(b_, r.pod.ns, S(r.pod.spec, "serviceAccountName"),
                   {"update", "coordination.k8s.io", "leases",
                    r.args.Get("--leader-elect-resource-namespace"),
                    r.args.Get("--leader-elect-resource-name")})) {
        Problem(cw, "--leader-elect: the account may not update Lease " +
                        r.args.Get("--leader-elect-resource-namespace") + "/" +
                        r.args.Get("--leader-elect-resource-name"));
      }
    }
    for (const auto& r : plugins) {
      const std::string cw =
          r.pod.file + ": " + r.pod.owner + " container " + S(r.container, "name");
      FileFlag(r, "--config-file");
      FileFlag(r, "--node-config");
      FileFlag(r, "--signing-key-file");
      HostDir(r, r.args.Get("--socket-dir"), "--socket-dir");
      const std::string vgpu = api::HostVgpuDir(r.args.Get("--hook-path"));
      HostDir(r, vgpu, "--hook-path");
      if (!install_dest_.empty() && install_dest_ != vgpu) {
        Problem(cw, "libvgpu.so is installed into " + install_dest_ + " but --hook-path expects " +
                        vgpu);
      }
      if (install_dest_.empty()) Problem(cw, "no init container installs libvgpu.so into " + vgpu);
      if (S(At(r.container, {"securityContext", "privileged"})) != "true")
        Problem(cw, "must be privileged");
      if (r.args.Get("--scheduler-name") != scheduler_name_) {
        Problem(cw, "--scheduler-name \"" + r.args.Get("--scheduler-name") +
                        "\" differs from the scheduler's \"" + scheduler_name_ + "\"");
      }
      if (r.args.values.count("--allow-unsigned"))
        Problem(cw, "--allow-unsigned turns the signature lock off");
      bool ok = false;
      std::string why;
      std::string yaml =
          ProvidedFile(b_, r.pod, r.container, r.args.Get("--config-file"), &ok, &why);
      if (ok && scheduler_has_device_config_ && yaml != scheduler_device_config_) {
        Problem(cw, "device config differs from the scheduler's --device-config-file");
      }
      if (ok) {
        auto config = node::ParseDeviceConfigYaml(yaml);
        if (!config.ok()) {
          Problem(cw, "device config does not parse: " + config.status().message());
        } else {
          device_config_ok_ = true;
          resources_ = config->resources;
          std::string node_json =
              ProvidedFile(b_, r.pod, r.container, r.args.Get("--node-config"), &ok, &why);
          if (ok) {
            auto applied = node::ApplyNodeOverrides(*config, node_json, "any-node");
            if (!applied.ok())
              Problem(cw, "per-node config does not parse: " + applied.status().message());
          }
        }
      }
      if (S(At(r.pod.spec, {"nodeSelector", "gpu"})) != "on")
        Problem(r.pod.file + ": " + r.pod.owner, "nodeSelector gpu: \"on\" is missing");
    }
    for (const auto& r : RunningSub(b_, "ui"))
      ListenPort(r, PortOf(r.args.Get("--listen")), "--listen");
    for (const auto& r : RunningSub(b_, "monitor")) {
      ListenPort(r, PortOf(r.args.Get("--listen")), "--listen");
      HostDir(r, api::HostVgpuDir(r.args.Get("--hook-path")), "--hook-path");
      const std::string node_dir = r.args.Get("--node-dir");
      if (!node_dir.empty()) {
        HostDir(r, node_dir, "--node-dir");
        // The device plugin keeps the SM limiter's per-GPU files in <hook>/vgpu/node
        // (api/limits.h HostNodeDir, the builder the device plugin uses).
        const std::string want = api::HostNodeDir(r.args.Get("--hook-path"));
        if (node_dir != want) {
          Problem(
              r.pod.file + ": " + r.pod.owner,
              "--node-dir \"" + node_dir + "\" is not the device plugin's node directory " + want);
        }
      }
    }
    auto certs = RunningSub(b_, "certs");
    if (certs.empty()) Problem("deploy", "no `fracgpu certs` Job");
    for (const auto& r : certs) {
      const std::string cw = r.pod.file + ": " + r.pod.owner;
      if (r.args.Get("--namespace") != r.pod.ns)
        Problem(cw, "--namespace \"" + r.args.Get("--namespace") + "\" is not " + r.pod.ns);
      if (!certs_service_.empty() && certs_service_ != r.args.Get("--service")) {
        Problem(cw, "--service \"" + r.args.Get("--service") +
                        "\" differs from the other `fracgpu certs` run's \"" + certs_service_ +
                        "\"");
      }
      if (certs_service_.empty()) certs_service_ = r.args.Get("--service");
      for (const auto& hook : ObjectsOfKind(b_, "MutatingWebhookConfiguration")) {
        for (const auto& w : hook["webhooks"]) {
          if (S(At(w, {"clientConfig", "service", "name"})) != r.args.Get("--service")) {
            Problem(cw,
                    "--service \"" + r.args.Get("--service") +
                        "\" is not the webhook's Service: the certificate's SANs would not match");
          }
        }
      }
      certs_webhook_ = r.args.Get("--webhook-config");
      if (!FindObject(b_, "MutatingWebhookConfiguration", certs_webhook_).IsDefined()) {
        Problem(cw, "--webhook-config \"" + certs_webhook_ +
                        "\" is not a MutatingWebhookConfiguration of deploy/");
      }
    }
  }

  void Services() {
    for (const auto& svc : ObjectsOfKind(b_, "Service")) {
      const std::string where = "Service/" + Name(svc);
      std::vector<Pod> selected;
      for (const auto& pod : Pods(b_)) {
        if (pod.ns == Ns(svc) && LabelsMatch(At(svc, {"spec", "selector"}), pod.labels))
          selected.push_back(pod);
      }
      if (selected.empty()) {
        Problem(where, "selector matches no pod template");
        continue;
      }
      for (const auto& port : At(svc, {"spec", "ports"})) {
        std::string target =
            S(port, "targetPort").empty() ? S(port, "port") : S(port, "targetPort");
        for (const auto& pod : selected) {
          bool found = false;
          for (const auto& c : Containers(pod.spec, false)) found |= DeclaresPort(c, target);
          if (!found) Problem(where, "targetPort " + target + " is not a port of " + pod.owner);
        }
      }
    }
  }

  // The Service port (number) that reaches the scheduler's listener, or "" when `svc` does not.
  std::string SchedulerServicePort(const YAML::Node& svc) {
    if (!scheduler_pod_.spec.IsDefined() || Ns(svc) != scheduler_pod_.ns ||
        !LabelsMatch(At(svc, {"spec", "selector"}), scheduler_pod_.labels)) {
      return "";
    }
    for (const auto& port : At(svc, {"spec", "ports"})) {
      std::string t = S(port, "targetPort");
      if (t == scheduler_port_ || (!scheduler_port_name_.empty() && t == scheduler_port_name_))
        return S(port, "port");
    }
    return "";
  }

  void Webhook() {
    auto hooks = ObjectsOfKind(b_, "MutatingWebhookConfiguration");
    if (hooks.size() != 1) Problem("deploy", "expected one MutatingWebhookConfiguration");
    for (const auto& cfg : hooks) {
      for (const auto& w : cfg["webhooks"]) {
        const std::string where =
            "MutatingWebhookConfiguration/" + Name(cfg) + " webhook " + S(w, "name");
        const YAML::Node svc_ref = At(w, {"clientConfig", "service"});
        YAML::Node svc(YAML::NodeType::Undefined);
        for (const auto& s : ObjectsOfKind(b_, "Service")) {
          if (Name(s) == S(svc_ref, "name") && Ns(s) == S(svc_ref, "namespace")) svc.reset(s);
        }
        if (!svc.IsDefined()) {
          Problem(where, "clientConfig.service " + S(svc_ref, "namespace") + "/" +
                             S(svc_ref, "name") + " does not exist");
        } else {
          std::string port = S(svc_ref, "port").empty() ? "443" : S(svc_ref, "port");
          if (SchedulerServicePort(svc) != port) {
            Problem(where, "clientConfig.service port " + port +
                               " does not reach `fracgpu scheduler`'s listener");
          }
          if (!certs_service_.empty() && Name(svc) != certs_service_) {
            Problem(where, "Service " + Name(svc) +
                               " is not the one `fracgpu certs --service` names (" +
                               certs_service_ + "): the certificate's SANs would not match");
          }
        }
        if (S(svc_ref, "path") != "/webhook")
          Problem(where,
                  "clientConfig.service.path \"" + S(svc_ref, "path") + "\" is not /webhook");
        if (At(w, {"clientConfig", "url"}).IsDefined())
          Problem(where, "clientConfig.url set: use the Service");
        bool create = false, update = false, pods = false;
        for (const auto& rule : w["rules"]) {
          auto ops = Strings(rule["operations"]);
          create |= Has(ops, "CREATE");
          update |= Has(ops, "UPDATE");
          pods |= Has(Strings(rule["resources"]), "pods") && Has(Strings(rule["apiGroups"]), "") &&
                  Has(Strings(rule["apiVersions"]), "v1");
        }
        if (!create || !update || !pods)
          Problem(where, "rules must cover pods (group \"\", v1) on CREATE and UPDATE");
        if (S(w, "sideEffects") != "None") Problem(where, "sideEffects must be None");
        if (!Has(Strings(w["admissionReviewVersions"]), "v1"))
          Problem(where, "admissionReviewVersions must include v1");
        std::string policy = S(w, "failurePolicy");
        if (policy != "Ignore" && policy != "Fail")
          Problem(where, "failurePolicy must be Ignore or Fail, got \"" + policy + "\"");
        std::string timeout = S(w, "timeoutSeconds");
        if (timeout.empty() || std::stoi(timeout) < 1 || std::stoi(timeout) > 30) {
          Problem(where, "timeoutSeconds must be 1..30, got \"" + timeout + "\"");
        }
        for (const char* sel : {"namespaceSelector", "objectSelector"}) {
          bool ok = false;
          for (const auto& e : At(w, {sel, "matchExpressions"})) {
            ok |= S(e, "key") == "hami.io/webhook" && S(e, "operator") == "NotIn" &&
                  Has(Strings(e["values"]), "ignore");
          }
          if (!ok)
            Problem(where,
                    std::string(sel) +
                        " lacks hami.io/webhook NotIn [ignore] (docs/design/CONTRACT.md §1)");
        }
      }
    }
  }

  // The single-quoted string literals of a CEL expression, in order (the policy's lists and
  // account names are written that way; no escapes in them).
  static std::vector<std::string> CelStrings(const std::string& expr) {
    std::vector<std::string> out;
    for (size_t i = expr.find('\''); i != std::string::npos; i = expr.find('\'', i + 1)) {
      size_t end = expr.find('\'', i + 1);
      if (end == std::string::npos) break;
      out.push_back(expr.substr(i + 1, end - i - 1));
      i = end;
    }
    return out;
  }

  void AnnotationPolicy() {
    const std::string plugin_user = "'" + device_plugin_user_ + "'";
    bool skips_plugin = false;
    for (const auto& cfg : ObjectsOfKind(b_, "MutatingWebhookConfiguration")) {
      for (const auto& w : cfg["webhooks"]) {
        for (const auto& m : w["matchConditions"]) {
          skips_plugin |= S(m, "expression").find(plugin_user) != std::string::npos;
        }
      }
    }
    const std::string where = "ValidatingAdmissionPolicy/fracgpu-pod-annotations";
    YAML::Node policy(YAML::NodeType::Undefined);
    for (const auto& p : ObjectsOfKind(b_, "ValidatingAdmissionPolicy")) {
      if (Name(p) == "fracgpu-pod-annotations") policy.reset(p);
    }
    if (!policy.IsDefined()) {
      if (skips_plugin)
        Problem(where,
                "missing, and the webhook skips the device plugin's UPDATEs: nothing would "
                "hold the device plugin to its annotations");
      return;
    }
    auto sorted = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    const auto system_keys = sorted(std::vector<std::string>(core::kSystemPodAnnotations.begin(),
                                                             core::kSystemPodAnnotations.end()));
    const auto plugin_keys = sorted(std::vector<std::string>(
        core::kDevicePluginPodAnnotations.begin(), core::kDevicePluginPodAnnotations.end()));
    auto joined = [](const std::vector<std::string>& v) { return base::Join(v, ", "); };
    bool plugin_var = false;
    for (const auto& v : policy["spec"]["variables"]) {
      const std::string expr = S(v, "expression");
      if (S(v, "name") == "system" && sorted(CelStrings(expr)) != system_keys) {
        Problem(where, "variable system lists " + joined(sorted(CelStrings(expr))) +
                           ", not core::kSystemPodAnnotations (" + joined(system_keys) + ")");
      }
      if (S(v, "name") == "devicePlugin") {
        plugin_var = true;
        if (expr.find(plugin_user) == std::string::npos)
          Problem(where, "variable devicePlugin does not name the device plugin's account " +
                             device_plugin_user_);
      }
    }
    int plugin_rules = 0;
    for (const auto& v : policy["spec"]["validations"]) {
      const std::string expr = S(v, "expression");
      if (expr.find("variables.devicePlugin") == std::string::npos) continue;
      ++plugin_rules;
      if (sorted(CelStrings(expr)) != plugin_keys) {
        Problem(where, "the device plugin's rule lists " + joined(sorted(CelStrings(expr))) +
                           ", not core::kDevicePluginPodAnnotations (" + joined(plugin_keys) + ")");
      }
    }
    if (skips_plugin && (!plugin_var || plugin_rules != 1)) {
      Problem(where,
              "the webhook skips the device plugin's UPDATEs but the policy has no rule "
              "holding the device plugin to its annotations");
    }
  }

  void SchedulerConfig() {
    // kube-scheduler: the container whose image is kube-scheduler, with --config=<file>.
    int found = 0;
    for (const auto& pod : Pods(b_)) {
      for (const auto& c : Containers(pod.spec)) {
        if (S(c, "image").find("kube-scheduler") == std::string::npos) continue;
        ++found;
        const std::string cw = pod.file + ": " + pod.owner + " container " + S(c, "name");
        std::string config_path;
        auto cmd = Strings(c["command"]);
        auto args = Strings(c["args"]);
        cmd.insert(cmd.end(), args.begin(), args.end());
        for (const auto& a : cmd) {
          if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
        }
        bool ok = false;
        std::string why;
        std::string text = ProvidedFile(b_, pod, c, config_path, &ok, &why);
        if (config_path.empty() || !ok) {
          Problem(cw, "--config=" + config_path + " is not provided by a ConfigMap mount: " + why);
          continue;
        }
        YAML::Node config;
        try {
          config.reset(YAML::Load(text));
        } catch (const YAML::Exception& e) {
          Problem(cw, std::string("KubeSchedulerConfiguration does not parse: ") + e.what());
          continue;
        }
        KubeSchedulerConfiguration(pod, c, cw, config);
      }
    }
    if (found != 1)
      Problem("deploy", "expected one kube-scheduler container, found " + std::to_string(found));
  }

  void KubeSchedulerConfiguration(const Pod& pod, const YAML::Node& c, const std::string& cw,
                                  const YAML::Node& config) {
    const std::string where = cw + " KubeSchedulerConfiguration";
    if (S(config, "apiVersion") != "kubescheduler.config.k8s.io/v1" ||
        S(config, "kind") != "KubeSchedulerConfiguration") {
      Problem(where,
              "must be kind KubeSchedulerConfiguration, apiVersion kubescheduler.config.k8s.io/v1");
    }
    std::vector<std::string> profiles;
    for (const auto& p : config["profiles"]) profiles.push_back(S(p, "schedulerName"));
    if (!Has(profiles, scheduler_name_)) {
      Problem(where, "no profile named \"" + scheduler_name_ +
                         "\" (the scheduler name the webhook writes)");
    }
    if (S(At(config, {"leaderElection", "leaderElect"})) == "true" &&
        S(At(config, {"leaderElection", "resourceNamespace"})) != pod.ns) {
      Problem(where, "leaderElection.resourceNamespace must be " + pod.ns +
                         " (not kube-system's default scheduler lease)");
    }
    const YAML::Node extenders = config["extenders"];
    if (!extenders.IsSequence() || extenders.size() != 1) {
      Problem(where, "must have exactly one extender");
      return;
    }
    const YAML::Node e = extenders[0];
    auto expect = [&](const std::string& key, const std::string& want) {
      if (S(e, key) != want)
        Problem(where, "extender " + key + " is \"" + S(e, key) + "\", want \"" + want + "\"");
    };
    expect("filterVerb", "filter");
    expect("prioritizeVerb", "prioritize");
    expect("bindVerb", "bind");
    expect("nodeCacheCapable", "true");
    expect("enableHTTPS", "true");
    if (S(e, "weight").empty() || std::stoi(S(e, "weight")) < 1)
      Problem(where, "extender weight must be >= 1 with a prioritizeVerb");
    // urlPrefix: https://<service>.<ns>.svc[.cluster.local]:<port reaching the scheduler>.
    std::string url = S(e, "urlPrefix");
    bool url_ok = false;
    for (const auto& svc : ObjectsOfKind(b_, "Service")) {
      std::string port = SchedulerServicePort(svc);
      if (port.empty()) continue;
      for (const std::string& host :
           {Name(svc) + "." + Ns(svc) + ".svc", Name(svc) + "." + Ns(svc) + ".svc.cluster.local"}) {
        url_ok |= url == "https://" + host + ":" + port;
      }
      if (!certs_service_.empty() && Name(svc) != certs_service_) url_ok = false;
    }
    if (!url_ok)
      Problem(where, "extender urlPrefix \"" + url +
                         "\" is not https://<the scheduler's Service>.<ns>.svc:<its port>");
    std::string ca = S(At(e, {"tlsConfig", "caFile"}));
    if (S(At(e, {"tlsConfig", "insecure"})) == "true")
      Problem(where, "tlsConfig.insecure: verify with the CA instead");
    bool ok = false;
    std::string why;
    ProvidedFile(b_, pod, c, ca, &ok, &why);
    if (ca.empty() || !ok) Problem(where, "tlsConfig.caFile \"" + ca + "\" is not mounted: " + why);
    // managedResources: every resource of docs/design/CONTRACT.md §1, ignoredByScheduler.
    std::set<std::string> want;
    if (device_config_ok_) {
      want = {resources_.gpu, resources_.gpumem, resources_.gpumem_percentage, resources_.gpucores,
              resources_.priority};
    }
    // The scheduler reads the same device config (checked above), so its names are the
    // config's; without a readable config, HAMi's defaults.
    core::ResourceNames defaults;
    std::set<std::string> scheduler_names = {defaults.gpu, defaults.gpumem,
                                             defaults.gpumem_percentage, defaults.gpucores,
                                             defaults.priority};
    if (device_config_ok_) scheduler_names = want;
    std::set<std::string> managed;
    for (const auto& r : e["managedResources"]) {
      managed.insert(S(r, "name"));
      if (S(r, "ignoredByScheduler") != "true")
        Problem(where, "managedResources " + S(r, "name") + " needs ignoredByScheduler: true");
    }
    for (const auto& r : scheduler_names) {
      if (!managed.count(r)) Problem(where, "managedResources lacks " + r);
    }
    for (const auto& r : managed) {
      if (!scheduler_names.count(r))
        Problem(where,
                "managedResources has " + r + ", not a resource of docs/design/CONTRACT.md §1");
    }
  }

  void Rbac() {
    std::set<std::string> accounts;
    for (const auto& a : ObjectsOfKind(b_, "ServiceAccount"))
      accounts.insert(Ns(a) + "/" + Name(a));
    std::set<std::string> bound;
    for (const char* kind : {"RoleBinding", "ClusterRoleBinding"}) {
      for (const auto& rb : ObjectsOfKind(b_, kind)) {
        const std::string where = std::string(kind) + "/" + Name(rb);
        std::string role_kind = S(rb["roleRef"], "kind"), role = S(rb["roleRef"], "name");
        bool builtin =
            role.rfind("system:", 0) == 0 || role == "extension-apiserver-authentication-reader";
        bool defined = false;
        for (const auto& r : ObjectsOfKind(b_, role_kind)) {
          defined |= Name(r) == role && (role_kind == "ClusterRole" || Ns(r) == Ns(rb));
        }
        if (!defined && !builtin)
          Problem(where, "roleRef " + role_kind + "/" + role + " is not defined");
        for (const auto& s : rb["subjects"]) {
          if (S(s, "kind") != "ServiceAccount") continue;
          std::string key = S(s, "namespace") + "/" + S(s, "name");
          if (!accounts.count(key))
            Problem(where, "subject ServiceAccount " + key + " does not exist");
          bound.insert(key);
        }
      }
    }
    for (const auto& pod : Pods(b_)) {
      std::string key = pod.ns + "/" + S(pod.spec, "serviceAccountName");
      if (!bound.count(key))
        Problem(pod.file + ": " + pod.owner, "service account " + key + " has no role binding");
    }
  }

  const Bundle& b_;
  std::vector<std::string> problems_;
  std::string scheduler_name_, scheduler_port_, scheduler_port_name_;
  std::string device_plugin_user_;  // the scheduler's --device-plugin-user
  Pod scheduler_pod_;
  std::string install_dest_, install_source_;
  std::string certs_service_, certs_webhook_;
  bool device_config_ok_ = false;
  bool scheduler_has_device_config_ = false;
  std::string scheduler_device_config_;  // the file the scheduler's --device-config-file names
  core::ResourceNames resources_;
};

// Whether `rule` grants `a`.
bool RuleMatches(const YAML::Node& rule, const Access& a) {
  auto in = [](const YAML::Node& list, const std::string& x) {
    auto v = Strings(list);
    return Has(v, x) || Has(v, "*");
  };
  if (!in(rule["apiGroups"], a.group) || !in(rule["resources"], a.resource) ||
      !in(rule["verbs"], a.verb))
    return false;
  auto names = Strings(rule["resourceNames"]);
  return names.empty() || Has(names, a.name);
}

// Calls `fn(role kind, role, binding namespace ("" for cluster))` for every role bound to ns/sa.
void ForEachBoundRole(
    const Bundle& b, const std::string& ns, const std::string& sa,
    const std::function<void(const YAML::Node& role, const std::string& scope)>& fn) {
  for (const char* kind : {"RoleBinding", "ClusterRoleBinding"}) {
    for (const auto& rb : ObjectsOfKind(b, kind)) {
      bool subject = false;
      for (const auto& s : rb["subjects"]) {
        subject |=
            S(s, "kind") == "ServiceAccount" && S(s, "name") == sa && S(s, "namespace") == ns;
      }
      if (!subject) continue;
      std::string role_kind = S(rb["roleRef"], "kind"), role = S(rb["roleRef"], "name");
      for (const auto& r : ObjectsOfKind(b, role_kind)) {
        if (Name(r) != role || (role_kind == "Role" && Ns(r) != Ns(rb))) continue;
        fn(r, std::string(kind) == "RoleBinding" ? Ns(rb) : "");
      }
    }
  }
}

}  // namespace

Result<Bundle> LoadDeploy(const std::string& dir) {
  Bundle b;
  auto load_all = [](const std::string& path) -> Result<std::vector<YAML::Node>> {
    if (!fs::exists(path)) return NotFound(path + " does not exist");
    try {
      return YAML::LoadAllFromFile(path);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(path + ": " + e.what());
    }
  };
  auto k = load_all(dir + "/kustomization.yaml");
  if (!k.ok()) return k.status();
  if (k->size() != 1) return InvalidArgument("kustomization.yaml must hold one document");
  b.kustomization = (*k)[0];
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && entry.path().extension() == ".yaml" &&
        name != "kustomization.yaml") {
      b.yaml_files.push_back(name);
    }
  }
  std::sort(b.yaml_files.begin(), b.yaml_files.end());
  for (const auto& file : Strings(b.kustomization["resources"])) {
    auto docs = load_all(dir + "/" + file);
    if (!docs.ok()) return docs.status();
    for (const auto& d : *docs) {
      if (d.IsDefined() && !d.IsNull()) b.objects.push_back({file, d});
    }
  }
  return b;
}

Bundle CloneBundle(const Bundle& b) {
  Bundle out;
  out.kustomization = YAML::Clone(b.kustomization);
  out.yaml_files = b.yaml_files;
  for (const auto& m : b.objects) out.objects.push_back({m.file, YAML::Clone(m.node)});
  return out;
}

Result<ParsedArgs> ParseFracgpuArgs(const std::vector<std::string>& args) {
  CLI::App app{"fracgpu"};
  app.require_subcommand(1);
  cli::RegisterSchedulerCommand(app);
  cli::RegisterDevicePluginCommand(app);
  cli::RegisterUiCommand(app);
  cli::RegisterCertsCommand(app);
#ifdef FRACGPU_HAVE_MONITOR
  cli::RegisterMonitorCommand(app);
#endif
  // Parse only, never run: the main app's parse-complete callback runs after every option was
  // stored and checked and before any subcommand's callback, and stops there. (Replacing the
  // subcommands' callbacks instead would free the flag structs their options write into.)
  struct ParsedOnly {};
  app.parse_complete_callback([] { throw ParsedOnly{}; });
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's vector form
  try {
    app.parse(reversed);
    return Internal("the parse-complete callback did not run");
  } catch (const ParsedOnly&) {
  } catch (const CLI::Error& e) {
    return InvalidArgument(std::string(e.get_name()) + ": " + e.what());
  }
  ParsedArgs out;
  for (auto* sub : app.get_subcommands()) {
    out.sub = sub->get_name();
    for (const auto* opt : sub->get_options()) {
      if (opt->get_lnames().empty()) continue;
      std::string name = "--" + opt->get_lnames()[0];
      if (name == "--help") continue;
      if (opt->count() > 0) {
        auto results = opt->results();
        out.values[name] =
            opt->get_type_size() == 0 ? "true" : (results.empty() ? "" : results.back());
      } else if (!opt->get_default_str().empty()) {
        out.values[name] = opt->get_default_str();
      }
    }
  }
  // The deprecated spellings (docs/development.md "The command line") checked as their
  // current names: --http-bind, --signature-key-file, the monitor's --listen HOST --port PORT.
  for (const auto& [old_name, name] :
       {std::pair<std::string, std::string>{"--http-bind", "--listen"},
        {"--signature-key-file", "--signing-key-file"}}) {
    if (auto it = out.values.find(old_name); it != out.values.end()) out.values[name] = it->second;
  }
  if (auto port = out.values.find("--port"); out.sub == "monitor" && port != out.values.end()) {
    std::string& listen = out.values["--listen"];
    listen = listen.substr(0, listen.find(':')) + ":" + port->second;
  }
  return out;
}

std::vector<std::string> Check(const Bundle& b) { return Checker(b).Run(); }

std::vector<YAML::Node> ObjectsOfKind(const Bundle& b, const std::string& kind) {
  std::vector<YAML::Node> out;
  for (const auto& m : b.objects) {
    if (Kind(m.node) == kind) out.push_back(m.node);
  }
  return out;
}

YAML::Node FindObject(const Bundle& b, const std::string& kind, const std::string& name) {
  for (const auto& m : b.objects) {
    if (Kind(m.node) == kind && Name(m.node) == name) return m.node;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool Allowed(const Bundle& b, const std::string& ns, const std::string& sa, const Access& a,
             std::set<std::string>* used) {
  bool allowed = false;
  ForEachBoundRole(b, ns, sa, [&](const YAML::Node& role, const std::string& scope) {
    if (!scope.empty() && scope != a.ns) return;  // a RoleBinding grants only in its namespace
    int i = 0;
    for (const auto& rule : role["rules"]) {
      if (RuleMatches(rule, a)) {
        allowed = true;
        if (used) used->insert(Kind(role) + "/" + Name(role) + "#" + std::to_string(i));
      }
      ++i;
    }
  });
  return allowed;
}

std::set<std::string> RulesOf(const Bundle& b, const std::string& ns, const std::string& sa) {
  std::set<std::string> out;
  ForEachBoundRole(b, ns, sa, [&](const YAML::Node& role, const std::string&) {
    for (size_t i = 0; i < role["rules"].size(); ++i)
      out.insert(Kind(role) + "/" + Name(role) + "#" + std::to_string(i));
  });
  return out;
}

}  // namespace fracgpu::deploytest
