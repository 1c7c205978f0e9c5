// The sandbox's notebook controller (notebook_controller.h) in a one-node Cluster: a Notebook as
// `fracgpu ui` builds it (ui::BuildNotebook) becomes the pod Kubeflow's StatefulSet would make,
// admitted by the fracgpu webhook, scheduled and allocated; its state comes back on the
// Notebook's status (ui::NotebookState); a refused pod, a pod no node fits and a deleted Notebook
// are reported or cleaned up as the controller does.
#include "notebook_controller.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <string>
#include <vector>

#include "cluster.h"
#include "k8s/objects.h"
#include "ui/form.h"
#include "ui/service.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;

constexpr const char* kGpu = "GPU-0d000000-0000-4000-8000-00000000d000";
constexpr int64_t kGpuMiB = 16384;
constexpr const char* kControllerToken = "token-controller";

class NotebookControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.nodes = {{"node-a", {{kGpu, kGpuMiB}}}};
    options.extra_tokens = {
        {kControllerToken, "system:serviceaccount:kubeflow:notebook-controller-service-account"}};
    options.default_container_args = {"init", "info", "wait"};
    cluster_ = std::make_unique<Cluster>(options);
    ASSERT_TRUE(cluster_->api().AddResource(fakes::kNotebookResource));
    std::string error;
    ASSERT_TRUE(cluster_->Start(&error)) << error;
    NotebookControllerHooks hooks;
    hooks.say = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    };
    controller_ =
        std::make_unique<NotebookController>(cluster_->api().url(), kControllerToken, hooks);
    ASSERT_TRUE(controller_->Start(&error)) << error;
  }
  void TearDown() override {
    if (HasFailure()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& l : lines_) std::cout << "controller: " << l << "\n";
    }
    controller_.reset();
    cluster_.reset();
  }
  // Creates a Notebook as alice, as `fracgpu ui` posts it.
  int CreateNotebook(const json& notebook) {
    httplib::Client http(cluster_->api().url());
    auto r = http.Post(
        ("/apis/kubeflow.org/v1/namespaces/" + k8s::Namespace(notebook) + "/notebooks").c_str(),
        httplib::Headers{{"Authorization", std::string("Bearer ") + kAliceToken}}, notebook.dump(),
        "application/json");
    return r ? r->status : 0;
  }
  static json Form(const std::string& name, const std::string& slice) {
    auto form = ui::DecodeNotebookForm(R"({"name":")" + name +
                                       R"(","namespace":"ml","image":"jupyter:1","gpus":1,)" +
                                       R"("slice":)" + slice + "}");
    EXPECT_TRUE(form.ok()) << form.status().message();
    return form.ok() ? ui::BuildNotebook(*form) : json();
  }
  // Waits until ui::NotebookState of the stored Notebook is `state`.
  bool WaitState(const std::string& name, const std::string& state) {
    return cluster_->api().WaitFor(
        [&] {
          auto nb = cluster_->api().Get("notebooks", "ml", name);
          return nb && ui::NotebookState(*nb) == state;
        },
        kWait);
  }
  std::string NotebookStateOf(const std::string& name) {
    auto nb = cluster_->api().Get("notebooks", "ml", name);
    return nb ? ui::NotebookState(*nb) : "(none)";
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<NotebookController> controller_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(NotebookControllerTest, ANotebookBecomesItsStatefulSetPodWithItsSliceAndReportsReady) {
  json notebook = Form("nb1", R"({"mode":"fraction","memory_percent":25,"cores_percent":30})");
  ASSERT_EQ(CreateNotebook(notebook), 201);
  ASSERT_TRUE(cluster_->WaitRunning("ml", "nb1-0"))
      << (cluster_->Pod("ml", "nb1-0") ? cluster_->Pod("ml", "nb1-0")->dump() : "no pod");
  json pod = *cluster_->Pod("ml", "nb1-0");
  // What the StatefulSet's pod carries: labels, the owner, the template's container.
  EXPECT_EQ(k8s::Label(pod, "statefulset").value_or(""), "nb1");
  EXPECT_EQ(k8s::Label(pod, "notebook-name").value_or(""), "nb1");
  EXPECT_EQ(k8s::Label(pod, "app").value_or(""), "nb1");  // the Notebook's labels, copied
  // What Kubeflow's generateStatefulSet adds to the template (as on the real cluster,
  // tests/realcluster/test_notebook.py).
  const json& c0 = pod["spec"]["containers"][0];
  EXPECT_EQ(c0.value("workingDir", ""), "/home/jovyan");
  EXPECT_EQ(c0["ports"],
            json::parse(R"([{"containerPort":8888,"name":"notebook-port","protocol":"TCP"}])"));
  EXPECT_EQ(c0["env"], json::parse(R"([{"name":"NB_PREFIX","value":"/notebook/ml/nb1"}])"));
  EXPECT_EQ(pod["spec"]["securityContext"], json::parse(R"({"fsGroup":100})"));
  auto stored_nb = cluster_->api().Get("notebooks", "ml", "nb1");
  ASSERT_TRUE(stored_nb.has_value());
  ASSERT_EQ(pod["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["kind"], "Notebook");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], k8s::Uid(*stored_nb));
  ASSERT_EQ(pod["spec"]["containers"].size(), 1u);
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "jupyter:1");
  // Created through admission: the webhook named our scheduler; the decision is 25 % of the card.
  EXPECT_EQ(k8s::PodSchedulerName(pod), kSchedulerName);
  auto parts = ParseAllocation(AnnotationOf(pod, "hami.io/vgpu-devices-allocated"));
  ASSERT_EQ(parts.size(), 1u) << AnnotationOf(pod, "hami.io/vgpu-devices-allocated");
  ASSERT_EQ(parts[0].size(), 1u);
  EXPECT_EQ(parts[0][0].uuid, kGpu);
  EXPECT_EQ(parts[0][0].mib, kGpuMiB * 25 / 100);
  EXPECT_EQ(parts[0][0].cores, 30);
  // The container got the limit and sees it.
  auto view = cluster_->node("node-a").Container("ml", "nb1-0", "nb1");
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->allocate_env["CUDA_DEVICE_MEMORY_LIMIT_0"],
            std::to_string(kGpuMiB * 25 / 100) + "m");
  EXPECT_EQ(view->allocate_env["CUDA_DEVICE_SM_LIMIT"], "30");
  constexpr int64_t kMiB = 1024 * 1024;
  const int64_t limit = kGpuMiB * 25 / 100 * kMiB;
  EXPECT_EQ(
      view->lines,
      (std::vector<std::string>{
          "init 0", "info 0 " + std::to_string(limit) + " " + std::to_string(limit), "ready"}));
  EXPECT_TRUE(WaitState("nb1", "Ready")) << NotebookStateOf("nb1");
  // The status as Kubeflow's CRD requires it, with the pod's conditions mirrored.
  stored_nb = cluster_->api().Get("notebooks", "ml", "nb1");
  ASSERT_TRUE(stored_nb.has_value());
  const json& status = (*stored_nb)["status"];
  EXPECT_EQ(status["readyReplicas"], 1);
  ASSERT_TRUE(status["conditions"].is_array()) << status.dump();
  // (The fake kubelet sets no conditions on a running pod, so here they mirror none; the
  // unschedulable case below mirrors kube-scheduler's PodScheduled=False.)
  json now = *cluster_->Pod("ml", "nb1-0");
  EXPECT_EQ(status["conditions"].size(), now["status"].value("conditions", json::array()).size())
      << status.dump();
  // Deleting the Notebook deletes its pod (the owner reference's garbage collection).
  httplib::Client http(cluster_->api().url());
  auto r = http.Delete("/apis/kubeflow.org/v1/namespaces/ml/notebooks/nb1",
                       httplib::Headers{{"Authorization", std::string("Bearer ") + kAliceToken}});
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_TRUE(
      cluster_->api().WaitFor([&] { return !cluster_->Pod("ml", "nb1-0").has_value(); }, kWait));
}

TEST_F(NotebookControllerTest, ARefusedPodAndAPodNoNodeFitsAreReportedOnTheNotebook) {
  // gpucores over 100: the webhook denies the pod (the UI would have refused it; kubectl would
  // not).
  json refused = Form(
      "bad", R"({"mode":"memory","memory_value":1000,"memory_unit":"MiB","cores_percent":150})");
  ASSERT_EQ(CreateNotebook(refused), 201);
  EXPECT_TRUE(WaitState("bad", "Waiting: FailedCreate")) << NotebookStateOf("bad");
  auto nb = cluster_->api().Get("notebooks", "ml", "bad");
  ASSERT_TRUE(nb.has_value());
  EXPECT_EQ((*nb)["status"]["conditions"], json::array());
  EXPECT_EQ((*nb)["status"]["readyReplicas"], 0);
  const std::string message = (*nb)["status"]["containerState"]["waiting"].value("message", "");
  EXPECT_NE(message.find("admission webhook \"fracgpu\" denied the request"), std::string::npos)
      << message;
  EXPECT_NE(message.find("gpucores"), std::string::npos) << message;
  EXPECT_FALSE(cluster_->Pod("ml", "bad-0").has_value());

  // More memory than the only card has: admitted, never bound, waiting with kube-scheduler's word.
  json big = Form("big", R"({"mode":"memory","memory_value":20000,"memory_unit":"MiB"})");
  ASSERT_EQ(CreateNotebook(big), 201);
  EXPECT_TRUE(WaitState("big", "Waiting: Unschedulable")) << NotebookStateOf("big");
  nb = cluster_->api().Get("notebooks", "ml", "big");
  ASSERT_TRUE(nb.has_value());
  EXPECT_EQ((*nb)["status"]["containerState"]["waiting"]
                .value("message", "")
                .rfind("0/1 nodes are available: ", 0),
            0u)
      << nb->dump();
  EXPECT_TRUE(k8s::PodNodeName(*cluster_->Pod("ml", "big-0")).empty());
  bool unscheduled = false;
  for (const auto& c : (*nb)["status"]["conditions"]) {
    unscheduled |= c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
                   c.value("reason", "") == "Unschedulable";
  }
  EXPECT_TRUE(unscheduled) << nb->dump();
}

}  // namespace
}  // namespace fracgpu::e2e
