#include "notebook_controller.h"

#include <chrono>

#include "k8s/objects.h"
#include "ui/form.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
constexpr auto kSyncWait = std::chrono::seconds(30);
constexpr const char* kNotebookLabel = "notebook-name";

std::string NotebookPath(const std::string& ns, const std::string& name) {
  return "/apis/kubeflow.org/v1/namespaces/" + ns + "/notebooks/" + name;
}

// "k=v, k=v" of a container's limits whose key names an nvidia.com resource, in key order.
std::string GpuLimits(const json& container) {
  std::string out;
  if (!container.contains("resources") || !container["resources"].is_object()) return out;
  const json& r = container["resources"];
  if (!r.contains("limits") || !r["limits"].is_object()) return out;
  for (const auto& [k, v] : r["limits"].items()) {
    if (k.rfind("nvidia.com/", 0) != 0) continue;
    out += (out.empty() ? "" : ", ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

const json& Containers(const json& pod) {
  static const json kNone = json::array();
  if (!pod.contains("spec") || !pod["spec"].is_object()) return kNone;
  auto it = pod["spec"].find("containers");
  return it != pod["spec"].end() && it->is_array() ? *it : kNone;
}

// What admission changed between the pod as posted and as stored: schedulerName, each
// container's GPU limits, annotations added.
std::string AdmissionChanges(const json& posted, const json& stored) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  std::string before = k8s::PodSchedulerName(posted), after = k8s::PodSchedulerName(stored);
  if (before != after) add("spec.schedulerName=" + after);
  const json& pc = Containers(posted);
  const json& sc = Containers(stored);
  for (size_t i = 0; i < sc.size() && i < pc.size(); ++i) {
    std::string a = GpuLimits(pc[i]), b = GpuLimits(sc[i]);
    if (a != b) add("container " + sc[i].value("name", "") + " limits " + b);
  }
  json pa = posted["metadata"].value("annotations", json::object());
  json sa = stored.contains("metadata") ? stored["metadata"].value("annotations", json::object())
                                        : json::object();
  if (sa.is_object()) {
    for (const auto& [k, v] : sa.items()) {
      if (!pa.is_object() || !pa.contains(k) || pa[k] != v) {
        add("annotation " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
      }
    }
  }
  return out.empty() ? "nothing changed" : out;
}

}  // namespace

std::string NotebookPodName(const std::string& notebook) { return notebook + "-0"; }

NotebookController::NotebookController(std::string api_url, std::string token,
                                       NotebookControllerHooks hooks)
    : api_url_(std::move(api_url)), token_(std::move(token)), hooks_(std::move(hooks)) {}

NotebookController::~NotebookController() { Stop(); }

bool NotebookController::Start(std::string* error) {
  k8s::Config config;
  config.server = api_url_;
  config.token = token_;
  auto client = k8s::Client::Create(config);
  if (!client.ok()) {
    *error = client.status().ToString();
    return false;
  }
  client_ = std::move(*client);
  k8s::InformerOptions pods;
  pods.path = "/api/v1/pods";
  pods.label_selector = kNotebookLabel;
  k8s::InformerHandlers pod_handlers;
  pod_handlers.on_upsert = [this](const json& pod) { OnPod(pod); };
  pods_ = std::make_unique<k8s::Informer>(client_.get(), pods, pod_handlers);
  pods_->Start();
  k8s::InformerOptions notebooks;
  notebooks.path = "/apis/kubeflow.org/v1/notebooks";
  k8s::InformerHandlers nb_handlers;
  nb_handlers.on_upsert = [this](const json& nb) { OnNotebook(nb); };
  nb_handlers.on_delete = [this](const json& nb) { OnNotebookDeleted(nb); };
  notebooks_ = std::make_unique<k8s::Informer>(client_.get(), notebooks, nb_handlers);
  notebooks_->Start();
  if (!pods_->WaitForSync(kSyncWait) || !notebooks_->WaitForSync(kSyncWait)) {
    *error = "the notebook controller's watches (pods labelled " + std::string(kNotebookLabel) +
             ", /apis/kubeflow.org/v1/notebooks) did not sync within 30 s at " + api_url_;
    return false;
  }
  return true;
}

void NotebookController::Stop() {
  if (notebooks_) notebooks_->Stop();
  if (pods_) pods_->Stop();
}

void NotebookController::OnNotebook(const json& notebook) {
  const std::string uid = k8s::Uid(notebook), ns = k8s::Namespace(notebook),
                    name = k8s::Name(notebook);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!handled_.insert(uid).second) return;
  }
  auto say = [this](const std::string& line) {
    if (hooks_.say) hooks_.say(line);
  };
  json pod = ui::PodOfNotebook(notebook);
  const std::string pod_name = NotebookPodName(name);
  pod["metadata"]["name"] = pod_name;
  // generateStatefulSet: the template's labels, then the Notebook's copied over them.
  json labels = {{"statefulset", name}, {kNotebookLabel, name}};
  if (notebook.contains("metadata") && notebook["metadata"].contains("labels") &&
      notebook["metadata"]["labels"].is_object()) {
    labels.update(notebook["metadata"]["labels"]);
  }
  pod["metadata"]["labels"] = labels;
  // What it sets on the first container and the pod when absent: the working dir, the notebook
  // port, NB_PREFIX and fsGroup 100.
  if (pod["spec"].contains("containers") && pod["spec"]["containers"].is_array() &&
      !pod["spec"]["containers"].empty() && pod["spec"]["containers"][0].is_object()) {
    json& c = pod["spec"]["containers"][0];
    if (c.value("workingDir", "").empty()) c["workingDir"] = "/home/jovyan";
    if (!c.contains("ports") || c["ports"].is_null()) {
      c["ports"] =
          json::array({{{"containerPort", 8888}, {"name", "notebook-port"}, {"protocol", "TCP"}}});
    }
    bool has_prefix = false;
    if (c.contains("env") && c["env"].is_array()) {
      for (const auto& e : c["env"])
        has_prefix |= e.is_object() && e.value("name", "") == "NB_PREFIX";
    } else {
      c["env"] = json::array();
    }
    if (!has_prefix)
      c["env"].push_back({{"name", "NB_PREFIX"}, {"value", "/notebook/" + ns + "/" + name}});
  }
  if (!pod["spec"].contains("securityContext")) pod["spec"]["securityContext"] = {{"fsGroup", 100}};
  pod["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "kubeflow.org/v1"},
                                                     {"kind", "Notebook"},
                                                     {"name", name},
                                                     {"uid", uid},
                                                     {"controller", true},
                                                     {"blockOwnerDeletion", true}}});
  std::string limits;
  for (const auto& c : Containers(pod)) {
    std::string l = GpuLimits(c);
    if (!l.empty()) limits += (limits.empty() ? "" : "; ") + l;
  }
  say("notebook controller: Notebook " + ns + "/" + name + " → pod " + ns + "/" + pod_name +
      " from its spec.template.spec (" + (limits.empty() ? "no GPU limits" : limits) + ")");
  auto created = client_->Create("/api/v1/namespaces/" + ns + "/pods", pod);
  if (!created.ok()) {
    say("webhook: pod " + ns + "/" + pod_name + " refused: " + created.status().message());
    SetStatus(
        ns, name,
        {{"containerState",
          {{"waiting", {{"reason", "FailedCreate"}, {"message", created.status().message()}}}}}});
    return;
  }
  say("webhook: pod " + ns + "/" + pod_name + " admitted: " + AdmissionChanges(pod, *created));
}

void NotebookController::OnNotebookDeleted(const json& notebook) {
  const std::string ns = k8s::Namespace(notebook), name = k8s::Name(notebook);
  auto st = client_->Delete(k8s::PodPath(ns, NotebookPodName(name)));
  if (hooks_.say) {
    hooks_.say("notebook controller: Notebook " + ns + "/" + name + " deleted → pod " + ns + "/" +
               NotebookPodName(name) + (st.ok() ? " deleted" : " not deleted: " + st.message()));
  }
}

void NotebookController::OnPod(const json& pod) {
  auto notebook = k8s::Label(pod, kNotebookLabel);
  if (!notebook || notebook->empty()) return;
  const std::string phase = k8s::PodPhase(pod);
  json status;
  std::string report = phase;  // what was last written for this pod (one write per change)
  if (phase == "Pending" || phase.empty()) {
    // kube-scheduler's PodScheduled=False condition: the notebook waits, saying why.
    const json conditions =
        pod.contains("status") ? pod["status"].value("conditions", json::array()) : json::array();
    for (const auto& c : conditions) {
      if (c.is_object() && c.value("type", "") == "PodScheduled" &&
          c.value("status", "") == "False") {
        report = "Pending/" + c.value("message", "");
        status = {{"readyReplicas", 0},
                  {"containerState",
                   {{"waiting",
                     {{"reason", c.value("reason", "Unschedulable")},
                      {"message", c.value("message", "")}}}}}};
      }
    }
    if (status.is_null()) return;
  } else if (phase == "Running") {
    status = {{"readyReplicas", 1},
              {"containerState", {{"running", {{"startedAt", "2025-01-01T00:00:00Z"}}}}}};
  } else if (phase == "Failed" || phase == "Succeeded") {
    std::string reason = pod.contains("status") ? pod["status"].value("reason", phase) : phase;
    status = {{"readyReplicas", 0}, {"containerState", {{"terminated", {{"reason", reason}}}}}};
  } else {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reported_.insert(k8s::Uid(pod) + "/" + report).second) return;
  }
  // createNotebookStatus mirrors the pod's conditions on the Notebook.
  json conditions = json::array();
  if (pod.contains("status") && pod["status"].contains("conditions") &&
      pod["status"]["conditions"].is_array()) {
    for (const auto& c : pod["status"]["conditions"]) {
      if (!c.is_object()) continue;
      json nc = json::object();
      for (const char* k :
           {"type", "status", "reason", "message", "lastProbeTime", "lastTransitionTime"}) {
        if (c.contains(k) && c[k].is_string() && !c[k].get<std::string>().empty()) nc[k] = c[k];
      }
      conditions.push_back(nc);
    }
  }
  status["conditions"] = conditions;
  if (hooks_.on_pod) hooks_.on_pod(pod);
  SetStatus(k8s::Namespace(pod), *notebook, status);
}

void NotebookController::SetStatus(const std::string& ns, const std::string& notebook,
                                   const json& given) {
  // Kubeflow's CRD requires all three (NotebookStatus has no omitempty); the controller always
  // writes them.
  json status = given;
  if (!status.contains("conditions")) status["conditions"] = json::array();
  if (!status.contains("readyReplicas")) status["readyReplicas"] = 0;
  if (!status.contains("containerState")) status["containerState"] = json::object();
  auto r = client_->MergePatch(NotebookPath(ns, notebook) + "/status", {{"status", status}});
  if (!r.ok() && hooks_.say) {
    hooks_.say("notebook controller: cannot write the status of Notebook " + ns + "/" + notebook +
               ": " + r.status().message());
  }
}

}  // namespace fracgpu::e2e
