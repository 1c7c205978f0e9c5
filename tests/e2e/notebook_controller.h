#pragma once
// Kubeflow's notebook controller (github.com/kubeflow/kubeflow, components/notebook-controller),
// reduced to what the sandbox (tests/e2e/fake_cluster_main.cc, docs/e2e.md "Sandbox") needs:
//
//  * for each Notebook (kubeflow.org/v1) it creates the pod its StatefulSet would, named
//    `<notebook>-0`: metadata and spec from ui::PodOfNotebook (spec.template.spec; the
//    Notebook's annotations except keys containing "kubectl" or "notebook"), labels
//    `statefulset: <notebook>` and `notebook-name: <notebook>`, an owner reference to the
//    Notebook. It is POSTed over HTTP with the controller's own token, so admission (the fracgpu
//    webhook) runs on it as on any pod;
//  * it reports the pod on the Notebook's status as the controller does: `readyReplicas: 1` and
//    `containerState.running` once the pod is Running, `containerState.terminated` (reason) when
//    it failed, `containerState.waiting` with reason FailedCreate and the API server's message
//    when the pod was refused, and (a simplification: Kubeflow copies the pod's conditions)
//    `containerState.waiting` with the PodScheduled=False condition's reason and message while
//    no node fits (ui::NotebookState reads these);
//  * it deletes the pod when its Notebook is deleted (the owner reference's garbage collection).
//
// No StatefulSet, Service or VirtualService objects; a pod deleted by hand is not recreated.
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "k8s/client.h"
#include "k8s/informer.h"

namespace fracgpu::e2e {

/// The pod name Kubeflow's StatefulSet gives a notebook's only replica.
std::string NotebookPodName(const std::string& notebook);

/// Hooks of the controller. Each runs on one of the controller's informer threads; may be empty.
struct NotebookControllerHooks {
  /// A line for the user (what the controller did: the pod it made, what admission changed).
  std::function<void(const std::string& line)> say;
  /// A pod of a Notebook changed; called before the Notebook's status is written from it.
  std::function<void(const nlohmann::json& pod)> on_pod;
};

/// The controller. Thread-safe; Stop() or the destructor ends its watches.
class NotebookController {
 public:
  /// `api_url` and `token`: the API server and the controller's bearer token.
  NotebookController(std::string api_url, std::string token, NotebookControllerHooks hooks);
  ~NotebookController();
  NotebookController(const NotebookController&) = delete;
  NotebookController& operator=(const NotebookController&) = delete;

  /// Starts watching Notebooks and their pods; false (with `error`) when a watch does not sync
  /// within 30 s (e.g. the API server does not serve kubeflow.org/v1 notebooks).
  bool Start(std::string* error);
  void Stop();

 private:
  void OnNotebook(const nlohmann::json& notebook);
  void OnNotebookDeleted(const nlohmann::json& notebook);
  void OnPod(const nlohmann::json& pod);
  void SetStatus(const std::string& ns, const std::string& notebook, const nlohmann::json& status);

  std::string api_url_, token_;
  NotebookControllerHooks hooks_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Informer> notebooks_, pods_;
  std::mutex mu_;
  std::set<std::string> handled_;   // Notebook UIDs whose pod was created (or refused)
  std::set<std::string> reported_;  // "<pod uid>/<state>" already written to a Notebook
};

}  // namespace fracgpu::e2e
