// The fake API server's authentication, audit log and pod admission hook, which the e2e
// suite and its RBAC audit rely on: each request → the RBAC verb, group, resource,
// subresource and namespace the real authorizer would check (decided by hand from
// kubernetes.io "Determine the request verb"); unknown tokens → 401; a webhook's denial and
// patch applied as the API server does.
#include <gtest/gtest.h>
#include <httplib.h>

#include "fake_apiserver.h"

namespace fracgpu::fakes {
namespace {

using nlohmann::json;

class ApiServerAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.SetTokens({{"t-sched", "system:serviceaccount:fracgpu-system:fracgpu-scheduler"},
                    {"t-alice", "alice"}});
    api_.Put("nodes", {{"metadata", {{"name", "n1"}}}});
    api_.Put("pods",
             {{"metadata", {{"name", "p1"}, {"namespace", "ml"}}}, {"spec", json::object()}});
  }
  int Call(const std::string& method, const std::string& path, const std::string& token,
           const std::string& body = "", const std::string& content_type = "application/json") {
    httplib::Client http(api_.url());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    httplib::Result r = method == "GET"    ? http.Get(path.c_str(), h)
                        : method == "POST" ? http.Post(path.c_str(), h, body, content_type.c_str())
                        : method == "PUT"  ? http.Put(path.c_str(), h, body, content_type.c_str())
                        : method == "PATCH"
                            ? http.Patch(path.c_str(), h, body, content_type.c_str())
                            : http.Delete(path.c_str(), h);
    return r ? r->status : 0;
  }
  FakeApiServer api_;
};

TEST_F(ApiServerAuditTest, RecordsEachRequestInAuthorizationTerms) {
  struct Case {
    std::string method, path, body, content_type;
    AuditRecord want;
  } cases[] = {
      {"GET", "/api/v1/nodes/n1", "", "", {"", "get", "", "nodes", "", "", "n1", 200}},
      {"GET", "/api/v1/nodes", "", "", {"", "list", "", "nodes", "", "", "", 200}},
      {"GET",
       "/api/v1/pods?watch=true&timeoutSeconds=0",
       "",
       "",
       {"", "watch", "", "pods", "", "", "", 200}},
      {"GET", "/api/v1/namespaces/ml/pods", "", "", {"", "list", "", "pods", "", "ml", "", 200}},
      {"PATCH",
       "/api/v1/namespaces/ml/pods/p1",
       R"({"metadata":{"labels":{"a":"b"}}})",
       "application/merge-patch+json",
       {"", "patch", "", "pods", "", "ml", "p1", 200}},
      {"PATCH",
       "/api/v1/namespaces/ml/pods/p1/status",
       R"({"status":{"phase":"Running"}})",
       "application/merge-patch+json",
       {"", "patch", "", "pods", "status", "ml", "p1", 200}},
      {"POST",
       "/api/v1/namespaces/ml/pods/p1/binding",
       R"({"target":{"name":"n1"}})",
       "application/json",
       {"", "create", "", "pods", "binding", "ml", "p1", 201}},
      {"POST",
       "/api/v1/namespaces/ml/events",
       R"({"metadata":{"name":"e1"}})",
       "application/json",
       {"", "create", "", "events", "", "ml", "", 201}},
      {"POST",
       "/apis/coordination.k8s.io/v1/namespaces/fracgpu-system/leases",
       R"({"metadata":{"name":"l"}})",
       "application/json",
       {"", "create", "coordination.k8s.io", "leases", "", "fracgpu-system", "", 201}},
      {"PUT",
       "/apis/coordination.k8s.io/v1/namespaces/fracgpu-system/leases/l",
       R"({"metadata":{"name":"l"}})",
       "application/json",
       {"", "update", "coordination.k8s.io", "leases", "", "fracgpu-system", "l", 200}},
      {"DELETE",
       "/api/v1/namespaces/ml/pods/p1",
       "",
       "",
       {"", "delete", "", "pods", "", "ml", "p1", 200}},
      {"GET",
       "/apis/apps/v1/namespaces/ml/deployments/d",
       "",
       "",
       {"", "get", "apps", "deployments", "", "ml", "d", 404}},
  };
  for (const auto& c : cases) {
    size_t before = api_.AuditLog().size();
    EXPECT_EQ(Call(c.method, c.path, "t-sched", c.body, c.content_type), c.want.code)
        << c.method << " " << c.path;
    auto log = api_.AuditLog();
    ASSERT_EQ(log.size(), before + 1) << c.path;
    const AuditRecord& got = log.back();
    EXPECT_EQ(got.user, "system:serviceaccount:fracgpu-system:fracgpu-scheduler");
    EXPECT_EQ(got.verb, c.want.verb) << c.method << " " << c.path;
    EXPECT_EQ(got.api_group, c.want.api_group) << c.path;
    EXPECT_EQ(got.resource, c.want.resource) << c.path;
    EXPECT_EQ(got.subresource, c.want.subresource) << c.path;
    EXPECT_EQ(got.ns, c.want.ns) << c.path;
    EXPECT_EQ(got.name, c.want.name) << c.path;
    EXPECT_EQ(got.code, c.want.code) << c.path;
  }
}

TEST_F(ApiServerAuditTest, UnknownOrMissingTokensGet401) {
  EXPECT_EQ(Call("GET", "/api/v1/nodes/n1", ""), 401);
  EXPECT_EQ(Call("GET", "/api/v1/nodes/n1", "forged"), 401);
  EXPECT_EQ(Call("GET", "/api/v1/nodes/n1", "t-alice"), 200);
  auto log = api_.AuditLog();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].user, "system:anonymous");
  EXPECT_EQ(log[0].code, 401);
  EXPECT_EQ(log[2].user, "alice");
}

TEST_F(ApiServerAuditTest, PodAdmissionDeniesOrPatchesCreatesAndUpdates) {
  std::vector<AdmissionCall> calls;
  api_.SetPodAdmission([&](const AdmissionCall& c) {
    calls.push_back(c);
    AdmissionVerdict v;
    if (c.object["metadata"].value("name", "") == "bad" ||
        c.object["metadata"].contains("labels")) {
      v.allowed = false;
      v.code = 400;
      v.message = "no";
      return v;
    }
    v.patch = json::array({{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", "ours"}}});
    return v;
  });
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ml/pods", "t-alice",
                 R"({"metadata":{"name":"good"},"spec":{}})"),
            201);
  EXPECT_EQ(api_.Get("pods", "ml", "good")->at("spec").value("schedulerName", ""), "ours");
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ml/pods", "t-alice",
                 R"({"metadata":{"name":"bad"},"spec":{}})"),
            400);
  EXPECT_FALSE(api_.Get("pods", "ml", "bad").has_value());
  // UPDATE: old and new object, the caller's identity; a denial leaves the pod unchanged.
  EXPECT_EQ(Call("PATCH", "/api/v1/namespaces/ml/pods/good", "t-alice",
                 R"({"metadata":{"labels":{"x":"y"}}})", "application/merge-patch+json"),
            400);
  EXPECT_FALSE(api_.Get("pods", "ml", "good")->at("metadata").contains("labels"));
  // Status and binding subresources do not go through the webhook.
  EXPECT_EQ(Call("PATCH", "/api/v1/namespaces/ml/pods/good/status", "t-alice",
                 R"({"status":{"phase":"Running"}})", "application/merge-patch+json"),
            200);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].operation, "CREATE");
  EXPECT_EQ(calls[0].user, "alice");
  EXPECT_EQ(calls[0].ns, "ml");
  EXPECT_TRUE(calls[0].old_object.is_null());
  EXPECT_EQ(calls[2].operation, "UPDATE");
  EXPECT_EQ(calls[2].name, "good");
  EXPECT_EQ(calls[2].old_object["spec"].value("schedulerName", ""), "ours");
  EXPECT_EQ(calls[2].object["metadata"]["labels"]["x"], "y");
}

}  // namespace
}  // namespace fracgpu::fakes
