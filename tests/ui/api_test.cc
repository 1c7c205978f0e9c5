// The UI's JSON API over real HTTP: `fracgpu ui`'s service on port 0, talking to the fake
// API server (nodes, pods) through a small in-test handler that adds what the fake does not
// serve: SubjectAccessReviews (authorization.k8s.io/v1) and Notebooks (kubeflow.org/v1).
// Expected figures are computed by hand from the fixture below (docs/design/CONTRACT.md §1 fit
// rules).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <tuple>

#include "../support/files.h"
#include "scheduler/webhook.h"
#include "ui/form.h"
#include "ui_fixture.h"

namespace fracgpu::ui {
namespace {

using nlohmann::json;
using uitest::UiApiTest;

json Limits(const json& preview) {
  return preview["notebook"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
}

// The fixture's node-b is cordoned (spec.unschedulable); tests of GPU-b0's own checks lift that.
void Uncordon(fakes::FakeApiServer& fake) {
  ASSERT_TRUE(fake.Patch("nodes", "", "node-b", {{"spec", {{"unschedulable", false}}}}));
}

TEST_F(UiApiTest, PreviewFractionHalf) {
  json p =
      Preview(R"("gpus":1,"slice":{"mode":"fraction","memory_percent":50,"cores_percent":50})");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "1"},
                             {"nvidia.com/gpumem-percentage", "50"},
                             {"nvidia.com/gpucores", "50"}}));
  EXPECT_EQ(p["errors"], json::array());
  EXPECT_NE(p["yaml"].get<std::string>().find("nvidia.com/gpumem-percentage: \"50\""),
            std::string::npos);
  // 50 % of 40960 = 20480: GPU-a0 (40960 free) yes, GPU-a1 (10240 free) no;
  // node-b is cordoned (and 50 % of 15360 = 7680 > 5360 free on GPU-b0 anyway).
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (1 candidate GPU)");
  EXPECT_EQ(p["fit"]["gpus"], 1);
  EXPECT_EQ(p["fit"]["nodes"], 1);
  EXPECT_EQ(p["fit"]["total_nodes"], 2);
  ASSERT_EQ(p["fit"]["per_node"].size(), 2u);
  EXPECT_EQ(p["fit"]["per_node"][0]["node"], "node-a");
  EXPECT_EQ(p["fit"]["per_node"][0]["gpus"], json({"GPU-a0"}));
  // What 50 % means on the candidate card: 20480 of its 40960 MiB (all 40960 free).
  EXPECT_EQ(p["fit"]["per_node"][0]["candidates"],
            json::parse(
                R"([{"uuid":"GPU-a0","mem_mib":20480,"devmem_mib":40960,"free_mem_mib":40960}])"));
  EXPECT_EQ(p["fit"]["per_node"][1]["node"], "node-b");
  EXPECT_EQ(p["fit"]["per_node"][1]["fits"], false);
  EXPECT_EQ(p["fit"]["per_node"][1]["reason"], kCordonedNodeReason);
  EXPECT_EQ(p["fit"]["per_node"][1]["eligible"], json::array());
  // Uncordoned, GPU-b0 is judged on its own: too little memory.
  Uncordon(fake_);
  p = Preview(R"("gpus":1,"slice":{"mode":"fraction","memory_percent":50,"cores_percent":50})");
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (1 candidate GPU)");
  EXPECT_EQ(p["fit"]["per_node"][1]["reason"], "1/1 CardInsufficientMemory")
      << p["fit"]["per_node"][1]["reason"];
}

TEST_F(UiApiTest, CordonedNodeNeverFits) {
  // 4096 MiB, time-shared: GPU-b0 passes every per-GPU check (5360 MiB free), but node-b is
  // cordoned: kube-scheduler would not place the pod there.
  json p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096,"memory_unit":"MiB"})");
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (2 candidate GPUs)");
  EXPECT_EQ(p["fit"]["per_node"][1]["node"], "node-b");
  EXPECT_EQ(p["fit"]["per_node"][1]["fits"], false);
  EXPECT_EQ(p["fit"]["per_node"][1]["eligible"], json({"GPU-b0"}));
  EXPECT_EQ(p["fit"]["per_node"][1]["gpus"], json::array());
  EXPECT_EQ(p["fit"]["per_node"][1]["reason"],
            "node is cordoned (spec.unschedulable): no new pods are scheduled there");
  p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096},"use_uuids":["GPU-b0"])");
  EXPECT_EQ(p["fit"]["fits"], false);
  EXPECT_EQ(p["fit"]["message"], "fits on no node");
  Uncordon(fake_);
  p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096,"memory_unit":"MiB"})");
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 2 nodes of 2 can take it (3 candidate GPUs)");
}

TEST_F(UiApiTest, PreviewMemoryModes) {
  // 8 GiB = 8192 MiB, cores 30: GPU-a0 and GPU-a1 (10240 free); GPU-b0 has 5360 free.
  json p = Preview(
      R"("gpus":1,"slice":{"mode":"memory","memory_value":8,"memory_unit":"GiB","cores_percent":30})");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "1"},
                             {"nvidia.com/gpumem", "8192"},
                             {"nvidia.com/gpucores", "30"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (2 candidate GPUs)");
  Uncordon(fake_);
  // 4096 MiB, no cores (time-shared): every GPU; GPU-b0's 50 % booked cores do not matter.
  p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096,"memory_unit":"MiB"})");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 2 nodes of 2 can take it (3 candidate GPUs)");
  // Never T4 → the two A100s only.
  p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096},"nouse_types":["T4"])");
  EXPECT_EQ(p["notebook"]["metadata"]["annotations"], json({{"nvidia.com/nouse-gputype", "T4"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (2 candidate GPUs)");
  // Only GPU-b0.
  p = Preview(R"("gpus":1,"slice":{"mode":"memory","memory_value":4096},"use_uuids":["GPU-b0"])");
  EXPECT_EQ(p["notebook"]["metadata"]["annotations"], json({{"nvidia.com/use-gpuuuid", "GPU-b0"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (1 candidate GPU)");
  EXPECT_EQ(p["fit"]["per_node"][1]["gpus"], json({"GPU-b0"}));
}

TEST_F(UiApiTest, PreviewCoresModes) {
  Uncordon(fake_);
  // Cores 30 alone: memory is the whole card; only GPU-a0 has all its memory free.
  json p = Preview(R"("gpus":1,"slice":{"mode":"cores","cores_percent":30})");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (1 candidate GPU)");
  // Cores 30 + 2048 MiB: a0, a1 (10240 free, 0 cores used), b0 (5360 free, 50 + 30 ≤ 100).
  p = Preview(R"("gpus":1,"slice":{"mode":"cores","cores_percent":30,"memory_value":2048})");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "1"},
                             {"nvidia.com/gpumem", "2048"},
                             {"nvidia.com/gpucores", "30"}}));
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 2 nodes of 2 can take it (3 candidate GPUs)");
  // Cores 60 + 2048 MiB: b0 has 50 % free cores → a0 and a1 only.
  p = Preview(R"("gpus":1,"slice":{"mode":"cores","cores_percent":60,"memory_value":2048})");
  EXPECT_EQ(p["fit"]["message"],
            "fits now: takes 1 GPU on one node; 1 node of 2 can take it (2 candidate GPUs)");
  EXPECT_NE(p["fit"]["per_node"][1]["reason"].get<std::string>().find("CardInsufficientCore"),
            std::string::npos);
}

TEST_F(UiApiTest, PreviewFitsNowhereSaysWhy) {
  Uncordon(fake_);
  // Two whole cards: node-a has one untouched card (GPU-a1 is shared), node-b has one GPU.
  json p = Preview(R"("gpus":2,"node_policy":"spread","gpu_policy":"binpack")");
  EXPECT_EQ(Limits(p), json({{"nvidia.com/gpu", "2"}}));
  EXPECT_EQ(p["notebook"]["metadata"]["annotations"],
            json({{"hami.io/node-scheduler-policy", "spread"},
                  {"hami.io/gpu-scheduler-policy", "binpack"}}));
  EXPECT_EQ(p["fit"]["fits"], false);
  EXPECT_EQ(p["fit"]["message"], "fits on no node");
  EXPECT_EQ(p["fit"]["per_node"][1]["reason"], "2/1 NodeInsufficientDevice");
  EXPECT_NE(p["fit"]["per_node"][0]["reason"].get<std::string>().find(
                "AllocatedCardsInsufficientRequest"),
            std::string::npos)
      << p["fit"]["per_node"][0]["reason"];
}

// The same pod, built by hand, through the scheduler's admission webhook: the preview's
// message must be the webhook's denial message.
std::string WebhookMessage(const json& limits, const json& annotations = json::object()) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "nb1"}, {"namespace", "team-a"}, {"annotations", annotations}}},
      {"spec",
       {{"containers", json::array({{{"name", "nb1"},
                                     {"image", "jupyter-scipy:v1"},
                                     {"resources", {{"limits", limits}}}}})}}}};
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "u1"},
                   {"operation", "CREATE"},
                   {"kind", {{"kind", "Pod"}}},
                   {"namespace", "team-a"},
                   {"object", pod}}}};
  auto r = scheduler::HandleAdmissionReview(review.dump(), {});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return "";
  EXPECT_EQ((*r)["response"]["allowed"], false) << r->dump();
  return (*r)["response"]["status"]["message"];
}

TEST_F(UiApiTest, BadValuesGiveTheWebhooksMessages) {
  struct Case {
    std::string form;
    json limits;
    json annotations = json::object();
  };
  const Case cases[] = {
      {R"("gpus":1,"slice":{"mode":"cores","cores_percent":150})",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}},
      {R"("gpus":1,"slice":{"mode":"fraction","memory_percent":101,"cores_percent":0})",
       {{"nvidia.com/gpu", "1"},
        {"nvidia.com/gpumem-percentage", "101"},
        {"nvidia.com/gpucores", "0"}}},
      {R"("gpus":1,"slice":{"mode":"memory","memory_value":-1})",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-1"}}},
      {R"("gpus":-2)", {{"nvidia.com/gpu", "-2"}}},
      {R"("gpus":0,"slice":{"mode":"cores","cores_percent":30})",
       {{"nvidia.com/gpu", "0"}, {"nvidia.com/gpucores", "30"}}},
      {R"("gpus":1,"gpu_policy":"binpack,nuna")",
       {{"nvidia.com/gpu", "1"}},
       {{"hami.io/gpu-scheduler-policy", "binpack,nuna"}}},
  };
  for (const auto& c : cases) {
    json p = Preview(c.form);
    EXPECT_EQ(Limits(p), c.limits) << c.form;
    std::string expected = WebhookMessage(c.limits, c.annotations);
    ASSERT_FALSE(expected.empty());
    ASSERT_EQ(p["errors"].size(), 1u) << c.form << " " << p.dump();
    EXPECT_EQ(p["errors"][0], expected) << c.form;
    EXPECT_TRUE(p["fit"].is_null());
  }
}

TEST_F(UiApiTest, BadBodiesAre400NamingTheField) {
  auto [s1, b1] = Post("/api/preview", "{not json");
  EXPECT_EQ(s1, 400);
  EXPECT_EQ(b1["error"], "request body is not valid JSON");
  auto [s2, b2] = Post("/api/preview", R"({"name":"nb","namespace":"a","image":"i","gpus":"two"})");
  EXPECT_EQ(s2, 400);
  EXPECT_EQ(b2["error"], "gpus must be an integer, got \"two\"");
  auto [s3, b3] =
      Post("/api/notebooks", R"({"name":"nb","namespace":"a","image":"i","slice":{"mode":"x"}})",
           "alice");
  EXPECT_EQ(s3, 400);
  EXPECT_EQ(b3["error"], "slice.mode must be one of whole, fraction, memory, cores, got \"x\"");
  auto [s4, b4] = Get("/api/notebooks?namespace=Bad_NS", "alice");
  EXPECT_EQ(s4, 400);
  EXPECT_EQ(b4["error"], "query parameter namespace must be a DNS-1123 label, got \"Bad_NS\"");
  EXPECT_TRUE(authz_.created().empty());
}

// Every POST endpoint refuses a body that is not the form's JSON object with 400 naming the
// field (the decoder's full table is in form_test.cc); nothing reaches the API server.
TEST_F(UiApiTest, BadBodiesOnEveryPostEndpoint) {
  authz_.Allow("alice", "create", "team-a");
  struct Case {
    std::string body;
    std::string error;
  };
  const Case cases[] = {
      {"", "request body is not valid JSON"},
      {"{not json", "request body is not valid JSON"},
      {"[]", "request body must be a JSON object, got []"},
      {R"("nb1")", "request body must be a JSON object, got \"nb1\""},
      {R"({"namespace":"team-a","image":"i"})", "name is required"},
      {R"({"name":"nb1","namespace":"team-a","image":"i","gpus":1.5})",
       "gpus must be a whole number, got 1.5"},
      {R"({"name":"nb1","namespace":"team-a","image":"i","slice":{"mode":"memory","memory_value":8,"memory_unit":"GB"}})",
       "slice.memory_unit must be MiB or GiB, got \"GB\""},
      {R"({"name":"nb1","namespace":"team-a","image":"i","use_types":"A100"})",
       "use_types must be an array of strings, got \"A100\""},
  };
  for (const char* path : {"/api/preview", "/api/notebooks"}) {
    for (const auto& c : cases) {
      auto [status, body] = Post(path, c.body, "alice");
      EXPECT_EQ(status, 400) << path << " " << c.body;
      EXPECT_EQ(body["error"], c.error) << path << " " << c.body;
    }
  }
  // A bad body is refused before any access review or creation.
  EXPECT_TRUE(authz_.reviews().empty());
  EXPECT_TRUE(authz_.created().empty());
  // GET /api/notebooks without a namespace, or with a bad one.
  EXPECT_EQ(Get("/api/notebooks", "alice").second["error"],
            "query parameter namespace must be a DNS-1123 label, got \"\"");
  EXPECT_EQ(Get("/api/notebooks?namespace=a%2Fb", "alice").second["error"],
            "query parameter namespace must be a DNS-1123 label, got \"a/b\"");
}

const char kCreateBody[] =
    R"({"name":"nb1","namespace":"team-a","image":"jupyter-scipy:v1","cpu":"1","memory":"2Gi","gpus":1,
        "slice":{"mode":"fraction","memory_percent":25,"cores_percent":25},"use_types":["A100"],
        "nouse_uuids":["GPU-a1"],"node_policy":"binpack","gpu_policy":"spread"})";

TEST_F(UiApiTest, CreatePostsTheNotebookAfterAnAllowedReview) {
  authz_.Allow("alice", "create", "team-a");
  auto [status, body] = Post("/api/notebooks", kCreateBody, "alice");
  ASSERT_EQ(status, 201) << body.dump();
  auto reviews = authz_.reviews();
  ASSERT_EQ(reviews.size(), 1u);
  EXPECT_EQ(reviews[0], json({{"apiVersion", "authorization.k8s.io/v1"},
                              {"kind", "SubjectAccessReview"},
                              {"spec",
                               {{"user", "alice"},
                                {"resourceAttributes",
                                 {{"namespace", "team-a"},
                                  {"verb", "create"},
                                  {"group", "kubeflow.org"},
                                  {"resource", "notebooks"}}}}}}));
  auto created = authz_.created();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].first, "team-a");
  json container = {{"name", "nb1"},
                    {"image", "jupyter-scipy:v1"},
                    {"resources",
                     {{"requests", {{"cpu", "1"}, {"memory", "2Gi"}}},
                      {"limits",
                       {{"cpu", "1"},
                        {"memory", "2Gi"},
                        {"nvidia.com/gpu", "1"},
                        {"nvidia.com/gpumem-percentage", "25"},
                        {"nvidia.com/gpucores", "25"}}}}}};
  json expected = {
      {"apiVersion", "kubeflow.org/v1"},
      {"kind", "Notebook"},
      {"metadata",
       {{"name", "nb1"},
        {"namespace", "team-a"},
        {"labels", {{"app", "nb1"}}},
        {"annotations",
         {{"nvidia.com/use-gputype", "A100"},
          {"nvidia.com/nouse-gpuuuid", "GPU-a1"},
          {"hami.io/node-scheduler-policy", "binpack"},
          {"hami.io/gpu-scheduler-policy", "spread"}}}}},
      {"spec", {{"template", {{"spec", {{"containers", json::array({container})}}}}}}}};
  EXPECT_EQ(created[0].second, expected);
  EXPECT_EQ(body["notebook"], expected);

  // The list, checked with a `list` review, shows its state.
  authz_.Allow("alice", "list", "team-a");
  auto [ls, lb] = Get("/api/notebooks?namespace=team-a", "alice");
  ASSERT_EQ(ls, 200) << lb.dump();
  ASSERT_EQ(lb["notebooks"].size(), 1u);
  EXPECT_EQ(lb["notebooks"][0]["name"], "nb1");
  EXPECT_EQ(lb["notebooks"][0]["state"], "Pending");
  EXPECT_EQ(lb["notebooks"][0]["limits"]["nvidia.com/gpucores"], "25");
  authz_.SetStatus(0, {{"readyReplicas", 1}});
  EXPECT_EQ(Get("/api/notebooks?namespace=team-a", "alice").second["notebooks"][0]["state"],
            "Ready");
  authz_.SetStatus(0, {{"readyReplicas", 0},
                       {"containerState", {{"waiting", {{"reason", "ContainerCreating"}}}}}});
  EXPECT_EQ(Get("/api/notebooks?namespace=team-a", "alice").second["notebooks"][0]["state"],
            "Waiting: ContainerCreating");
}

TEST_F(UiApiTest, CreatingAnExistingNotebookIsTheApiServersConflict) {
  authz_.Allow("alice", "create", "team-a");
  EXPECT_EQ(Post("/api/notebooks", kCreateBody, "alice").first, 201);
  auto [status, body] = Post("/api/notebooks", kCreateBody, "alice");
  EXPECT_EQ(status, 409);
  EXPECT_EQ(body["error"],
            "POST /apis/kubeflow.org/v1/namespaces/team-a/notebooks: HTTP 409: "
            "notebooks.kubeflow.org \"nb1\" already exists");
  EXPECT_EQ(authz_.created().size(), 1u);
}

TEST_F(UiApiTest, RefusedUserCreatesNothing) {
  authz_.Allow("alice", "create", "team-a");
  auto [status, body] = Post("/api/notebooks", kCreateBody, "mallory");
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body["error"],
            "user \"mallory\" may not create notebooks (kubeflow.org) in namespace \"team-a\": no "
            "RBAC policy matched");
  EXPECT_TRUE(authz_.created().empty());
  // Allowed elsewhere is not allowed here.
  authz_.Allow("mallory", "create", "team-b");
  EXPECT_EQ(Post("/api/notebooks", kCreateBody, "mallory").first, 403);
  auto [ls, lb] = Get("/api/notebooks?namespace=team-a", "mallory");
  EXPECT_EQ(ls, 403);
  EXPECT_EQ(lb["error"],
            "user \"mallory\" may not list notebooks (kubeflow.org) in namespace \"team-a\": no "
            "RBAC policy matched");
  EXPECT_TRUE(authz_.created().empty());
}

TEST_F(UiApiTest, MissingUserHeaderIsRefusedWithoutAReview) {
  auto [status, body] = Post("/api/notebooks", kCreateBody);
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body["error"],
            "no user identity: the request has no kubeflow-userid header (sign in through the "
            "Kubeflow gateway)");
  EXPECT_EQ(Get("/api/notebooks?namespace=team-a").first, 403);
  EXPECT_TRUE(authz_.reviews().empty());
  EXPECT_TRUE(authz_.created().empty());
}

// Issue 33: with a gateway secret, kubeflow-userid is trusted only on requests that carry the
// secret the gateway sets; without it (a caller that reached the Service directly) the answer is
// 401 and nothing is reviewed or created, and /api/options names no user.
TEST_F(UiApiTest, TheUserHeaderIsTrustedOnlyFromTheGateway) {
  UiOptions options = Options();
  options.gateway_secret = "0123456789abcdef-gateway";
  StartUi(options);
  authz_.Allow("alice", "create", "team-a");
  auto [status, body] = Post("/api/notebooks", kCreateBody, "alice");
  EXPECT_EQ(status, 401) << body.dump();
  EXPECT_EQ(body["error"],
            "the request did not come through the gateway (no valid x-fracgpu-gateway-secret "
            "header or gateway client certificate), so its kubeflow-userid header is not trusted: "
            "sign in through the Kubeflow gateway");
  EXPECT_EQ(Get("/api/notebooks?namespace=team-a", "alice").first, 401);
  httplib::Headers wrong = {{"kubeflow-userid", "alice"},
                            {"x-fracgpu-gateway-secret", "0123456789abcdef-gatewaX"}};
  auto r = http_->Post("/api/notebooks", wrong, kCreateBody, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  auto o = http_->Get("/api/options", wrong);
  ASSERT_TRUE(o);
  EXPECT_TRUE(json::parse(o->body)["user"].is_null()) << o->body;
  EXPECT_TRUE(authz_.reviews().empty());
  EXPECT_TRUE(authz_.created().empty());
  // Through the gateway: reviewed and created.
  httplib::Headers right = {{"kubeflow-userid", "alice"},
                            {"x-fracgpu-gateway-secret", "0123456789abcdef-gateway"}};
  r = http_->Post("/api/notebooks", right, kCreateBody, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(authz_.created().size(), 1u);
  o = http_->Get("/api/options", right);
  ASSERT_TRUE(o);
  EXPECT_EQ(json::parse(o->body)["user"], "alice");
}

TEST_F(UiApiTest, InvalidGpuValuesAreNotCreated) {
  authz_.Allow("alice", "create", "team-a");
  auto [status, body] = Post(
      "/api/notebooks",
      R"({"name":"nb1","namespace":"team-a","image":"i","gpus":1,"slice":{"mode":"cores","cores_percent":150}})",
      "alice");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"],
            WebhookMessage({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}}));
  EXPECT_TRUE(authz_.created().empty());
}

TEST_F(UiApiTest, ClusterShowsGpusUsageAndSlices) {
  auto [status, c] = Get("/api/cluster");
  ASSERT_EQ(status, 200) << c.dump();
  ASSERT_EQ(c["nodes"].size(), 3u);
  const json& a = c["nodes"][0];
  EXPECT_EQ(a["name"], "node-a");
  EXPECT_EQ(a["gpu_ready"], true);
  EXPECT_EQ(a["unschedulable"], false);
  ASSERT_EQ(a["gpus"].size(), 2u);
  EXPECT_EQ(a["gpus"][0]["uuid"], "GPU-a0");
  EXPECT_EQ(a["gpus"][0]["used_mem_mib"], 0);
  EXPECT_EQ(a["gpus"][0]["slices"], json::array());
  EXPECT_EQ(a["gpus"][1]["used_mem_mib"], 30720);
  EXPECT_EQ(a["gpus"][1]["used_cores"], 0);
  EXPECT_EQ(a["gpus"][1]["used"], 1);
  EXPECT_EQ(a["gpus"][1]["devmem_mib"], 40960);
  EXPECT_EQ(a["gpus"][1]["type"], "NVIDIA-A100-SXM4-40GB");
  // Nobody signed in: the slice without its pod and namespace (tests/ui/scoping_test.cc).
  EXPECT_EQ(
      a["gpus"][1]["slices"],
      json::array({{{"pod", nullptr}, {"namespace", nullptr}, {"mem_mib", 30720}, {"cores", 0}}}));
  const json& b = c["nodes"][1];
  EXPECT_EQ(b["unschedulable"], true);
  EXPECT_EQ(b["gpus"][0]["used_cores"], 50);
  EXPECT_EQ(b["gpus"][0]["health"], true);
  EXPECT_EQ(b["gpus"][0]["cordoned"], false);
  EXPECT_EQ(c["nodes"][2]["name"], "node-c");
  EXPECT_EQ(c["nodes"][2]["gpu_ready"], false);
  EXPECT_EQ(
      c["totals"],
      json(
          {{"nodes", 3}, {"gpus", 3}, {"devmem_mib", 40960 * 2 + 15360}, {"used_mem_mib", 40720}}));

  // A GPU cordon and an unhealthy GPU show up at once (no cache in this test).
  fake_.Patch("nodes", "", "node-a",
              {{"metadata", {{"annotations", {{"hami.io/device-cordon", "GPU-a0"}}}}}});
  c = Get("/api/cluster").second;
  EXPECT_EQ(c["nodes"][0]["gpus"][0]["cordoned"], true);
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["cordoned"], false);
}

// Lending (docs/reclaim.md "Lending"): per GPU, what it lends while the node's record is fresh
// and what borrower pods hold on it.
TEST_F(UiApiTest, ClusterShowsLentAndBorrowedMemoryPerGpu) {
  auto [status, c] = Get("/api/cluster");
  ASSERT_EQ(status, 200) << c.dump();
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["lent_mib"], 0);
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["borrowed_mib"], 0);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // Written 60 s ahead: fresh for 150 s, whatever the machine's speed within this test.
  fake_.Patch("nodes", "", "node-a",
              {{"metadata",
                {{"annotations",
                  {{"fracgpu.io/lent-memory", std::to_string(now + 60) + ";GPU-a1:8192"}}}}}});
  fake_.Patch("pods", "team-b", "train",
              {{"metadata", {{"annotations", {{"fracgpu.io/borrower", "true"}}}}}});
  c = Get("/api/cluster").second;
  const json& a = c["nodes"][0];
  EXPECT_EQ(a["gpus"][0]["lent_mib"], 0);
  EXPECT_EQ(a["gpus"][0]["borrowed_mib"], 0);
  EXPECT_EQ(a["gpus"][1]["lent_mib"], 8192);
  EXPECT_EQ(a["gpus"][1]["borrowed_mib"], 30720);
  // A stale record (the agent stopped 91 s ago) shows nothing lent.
  fake_.Patch("nodes", "", "node-a",
              {{"metadata",
                {{"annotations",
                  {{"fracgpu.io/lent-memory", std::to_string(now - 91) + ";GPU-a1:8192"}}}}}});
  c = Get("/api/cluster").second;
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["lent_mib"], 0);
  EXPECT_EQ(c["nodes"][0]["gpus"][1]["borrowed_mib"], 30720);
}

TEST_F(UiApiTest, OptionsListImagesTypesAndGpus) {
  auto [status, o] = Get("/api/options", "alice");
  ASSERT_EQ(status, 200);
  EXPECT_EQ(o["images"], json({"jupyter-scipy:v1", "jupyter-pytorch-cuda:v1"}));
  EXPECT_EQ(o["gpu_types"], json({"NVIDIA-A100-SXM4-40GB", "NVIDIA-Tesla T4"}));
  ASSERT_EQ(o["gpus"].size(), 3u);
  EXPECT_EQ(
      o["gpus"][2],
      json({{"uuid", "GPU-b0"}, {"node", "node-b"}, {"type", "NVIDIA-Tesla T4"}, {"index", 0}}));
  EXPECT_EQ(o["user"], "alice");
  EXPECT_EQ(Get("/api/options").second["user"], nullptr);
}

TEST_F(UiApiTest, ApiServerDownGives503ForClusterAndAFitMessageForPreview) {
  fake_.FailNext("GET", "/api/v1/nodes", 500, 2);
  auto [status, body] = Get("/api/cluster");
  EXPECT_EQ(status, 503);
  EXPECT_NE(body["error"].get<std::string>().find("cluster state unavailable"), std::string::npos)
      << body.dump();
  json p = Preview(R"("gpus":1)");
  EXPECT_EQ(p["fit"]["fits"], false);
  EXPECT_NE(p["fit"]["message"].get<std::string>().find("cluster state unavailable"),
            std::string::npos);
}

}  // namespace

namespace {

// The web pages themselves (GET /…): files of the web folder with their content types; "/"
// is the form; anything outside the folder or absent is 404.
class UiStaticTest : public uitest::UiApiTest {
 protected:
  UiOptions Options() const override {
    UiOptions o;
    o.web_dir = FRACGPU_WEB_DIR;
    return o;
  }
  std::tuple<int, std::string, std::string> Fetch(const std::string& path) {
    auto r = http_->Get(path.c_str());
    if (!r) return {0, "", ""};
    return {r->status, r->get_header_value("Content-Type"), r->body};
  }
};

TEST_F(UiStaticTest, ServesTheWebFolder) {
  struct Case {
    std::string path, file, type;
  };
  const Case cases[] = {
      {"/", "index.html", "text/html; charset=utf-8"},
      {"/index.html", "index.html", "text/html; charset=utf-8"},
      {"/dashboard.html", "dashboard.html", "text/html; charset=utf-8"},
      {"/form.js", "form.js", "text/javascript; charset=utf-8"},
      {"/dashboard.js", "dashboard.js", "text/javascript; charset=utf-8"},
      {"/style.css", "style.css", "text/css; charset=utf-8"},
  };
  for (const auto& c : cases) {
    auto [status, type, body] = Fetch(c.path);
    EXPECT_EQ(status, 200) << c.path;
    EXPECT_EQ(type, c.type) << c.path;
    std::string want = test_support::ReadWholeFile(std::string(FRACGPU_WEB_DIR) + "/" + c.file);
    ASSERT_FALSE(want.empty()) << c.file;
    EXPECT_EQ(body, want) << c.path;
  }
}

TEST_F(UiStaticTest, NothingOutsideTheWebFolder) {
  for (const char* path : {"/missing.js", "/../CMakeLists.txt", "/%2e%2e/CMakeLists.txt",
                           "/..%2fCMakeLists.txt", "/web/../../CMakeLists.txt", "/a\\..\\b"}) {
    auto [status, type, body] = Fetch(path);
    EXPECT_EQ(status, 404) << path;
    EXPECT_EQ(body.find("cmake_minimum_required"), std::string::npos) << path;
  }
}

TEST_F(UiApiTest, NoWebFolderServesTheApiOnly) {
  auto r = http_->Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"], "no web folder configured");
  EXPECT_EQ(Get("/api/options").first, 200);
}

}  // namespace
// Without Kubeflow: "/" is the dashboard, the notebook endpoints say what they need, the
// cluster view and the preview work with no user header.
class UiDashboardOnlyTest : public UiStaticTest {
 protected:
  UiOptions Options() const override {
    UiOptions o = UiStaticTest::Options();
    o.dashboard_only = true;
    return o;
  }
};

TEST_F(UiDashboardOnlyTest, ServesTheDashboardAndRefusesNotebooks) {
  auto [status, type, body] = Fetch("/");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, test_support::ReadWholeFile(std::string(FRACGPU_WEB_DIR) + "/dashboard.html"));
  auto [cs, cluster] = Get("/api/cluster");
  EXPECT_EQ(cs, 200);
  EXPECT_EQ(cluster["totals"]["nodes"], 3);
  auto [os, options] = Get("/api/options");
  EXPECT_EQ(os, 200);
  EXPECT_EQ(options["dashboard_only"], true);
  auto [ls, list] = Get("/api/notebooks?namespace=team-a", "alice");
  EXPECT_EQ(ls, 404);
  EXPECT_EQ(list["error"], kDashboardOnlyMessage);
  auto [ps, created] =
      Post("/api/notebooks",
           R"({"name":"nb1","namespace":"team-a","image":"jupyter-scipy:v1","gpus":1})", "alice");
  EXPECT_EQ(ps, 404);
  EXPECT_EQ(created["error"], kDashboardOnlyMessage);
  EXPECT_TRUE(authz_.created().empty());
}

TEST_F(UiApiTest, NotebookCrdCheck) {
  // The authz front serves kubeflow.org/v1 discovery: the CRD is there.
  EXPECT_TRUE(CheckNotebookCrd(*client_).ok());
  // The bare fake API server has no kubeflow.org group: NotFound, saying what to do.
  k8s::Config config;
  config.server = fake_.url();
  auto bare = k8s::Client::Create(config);
  ASSERT_TRUE(bare.ok());
  Status st = CheckNotebookCrd(**bare);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("or run fracgpu ui --dashboard-only"), std::string::npos)
      << st.message();
}

}  // namespace fracgpu::ui
