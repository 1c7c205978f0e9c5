// The fake API server's resource table (tests/fakes/apiserver): discovery of the built-in rows,
// a CRD added with AddResource (Kubeflow's kubeflow.org/v1 notebooks, served like any row:
// create, get, list, watch, status patch, delete, audit), and SubjectAccessReviews answered by
// SetAccessReviewer. Expected shapes are the API server's (k8s.io/apimachinery APIResourceList,
// k8s.io/api/authorization/v1 SubjectAccessReview), written out here by hand.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>

#include "fake_apiserver.h"

namespace fracgpu::fakes {
namespace {

using nlohmann::json;

struct Answer {
  int status = 0;
  json body;
};

class ApiServerResourcesTest : public ::testing::Test {
 protected:
  Answer Call(const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& content_type = "application/json") {
    httplib::Client http(api_.url());
    httplib::Result r = method == "GET"     ? http.Get(path.c_str())
                        : method == "POST"  ? http.Post(path.c_str(), body, content_type.c_str())
                        : method == "PATCH" ? http.Patch(path.c_str(), body, content_type.c_str())
                                            : http.Delete(path.c_str());
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static std::set<std::string> Names(const json& list) {
    std::set<std::string> out;
    for (const auto& r : list["resources"]) out.insert(r["name"].get<std::string>());
    return out;
  }
  FakeApiServer api_;
};

TEST_F(ApiServerResourcesTest, DiscoveryListsTheBuiltinRowsOfEachGroupVersion) {
  Answer core = Call("GET", "/api/v1");
  ASSERT_EQ(core.status, 200);
  EXPECT_EQ(core.body["kind"], "APIResourceList");
  EXPECT_EQ(core.body["groupVersion"], "v1");
  EXPECT_EQ(Names(core.body), (std::set<std::string>{"events", "nodes", "pods", "resourcequotas"}));
  for (const auto& r : core.body["resources"]) {
    EXPECT_EQ(r["namespaced"], r["name"] != "nodes") << r.dump();
  }
  Answer dra = Call("GET", "/apis/resource.k8s.io/v1");
  ASSERT_EQ(dra.status, 200);
  EXPECT_EQ(dra.body["groupVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(Names(dra.body), (std::set<std::string>{"deviceclasses", "resourceclaims",
                                                    "resourceclaimtemplates", "resourceslices"}));
  EXPECT_EQ(Call("GET", "/apis/coordination.k8s.io/v1").status, 200);
  // Nothing installed the Notebook CRD: its group is unknown, as on a cluster without Kubeflow.
  EXPECT_EQ(Call("GET", "/apis/kubeflow.org/v1").status, 404);
  EXPECT_EQ(Call("GET", "/apis/kubeflow.org/v1/namespaces/team-a/notebooks").status, 404);
  EXPECT_EQ(Call("GET", "/apis/authorization.k8s.io/v1").status, 404);
}

TEST_F(ApiServerResourcesTest, AnAddedCrdIsServedLikeTheBuiltinRows) {
  ASSERT_TRUE(api_.AddResource(kNotebookResource));
  EXPECT_FALSE(api_.AddResource(kNotebookResource));  // the plural is taken
  EXPECT_FALSE(api_.AddResource({"kubeflow.org", "v1", "pods", "Pod", true}));
  EXPECT_FALSE(api_.AddResource({"", "v1", "widgets", "Widget", true}));  // no group
  Answer group = Call("GET", "/apis/kubeflow.org/v1");
  ASSERT_EQ(group.status, 200);
  ASSERT_EQ(group.body["resources"].size(), 1u);
  EXPECT_EQ(group.body["resources"][0]["name"], "notebooks");
  EXPECT_EQ(group.body["resources"][0]["kind"], "Notebook");
  EXPECT_EQ(group.body["resources"][0]["namespaced"], true);
  EXPECT_EQ(group.body["resources"][0]["verbs"],
            json::array({"create", "delete", "get", "list", "patch", "update", "watch"}));

  const std::string path = "/apis/kubeflow.org/v1/namespaces/team-a/notebooks";
  Answer created =
      Call("POST", path, R"({"metadata":{"name":"nb1"},"spec":{"template":{"spec":{}}}})");
  ASSERT_EQ(created.status, 201) << created.body.dump();
  EXPECT_EQ(created.body["kind"], "Notebook");
  EXPECT_EQ(created.body["apiVersion"], "kubeflow.org/v1");
  EXPECT_EQ(created.body["metadata"]["namespace"], "team-a");
  EXPECT_EQ(Call("POST", path, R"({"metadata":{"name":"nb1"}})").status, 409);
  // The same plural under another group or version is not this row.
  EXPECT_EQ(Call("GET", "/apis/kubeflow.org/v1beta1/namespaces/team-a/notebooks").status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/team-a/notebooks").status, 404);

  Answer list = Call("GET", path);
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body["kind"], "NotebookList");
  EXPECT_EQ(list.body["apiVersion"], "kubeflow.org/v1");
  ASSERT_EQ(list.body["items"].size(), 1u);
  EXPECT_EQ(Call("GET", "/apis/kubeflow.org/v1/namespaces/team-b/notebooks").body["items"].size(),
            0u);

  Answer watch = Call("GET", "/apis/kubeflow.org/v1/notebooks?watch=true&timeoutSeconds=0");
  ASSERT_EQ(watch.status, 200);  // one ADDED line per stored object
  // Kubeflow's CRD requires status.conditions, containerState and readyReplicas: the real API
  // server refuses a status without them (tests/realcluster/test_notebook.py), so does the fake.
  Answer partial = Call("PATCH", path + "/nb1/status", R"({"status":{"readyReplicas":1}})",
                        "application/merge-patch+json");
  EXPECT_EQ(partial.status, 422) << partial.body.dump();
  EXPECT_EQ(partial.body["message"],
            "Notebook.kubeflow.org \"nb1\" is invalid: [status.conditions: Required value, "
            "status.containerState: Required value]");
  Answer patched =
      Call("PATCH", path + "/nb1/status",
           R"({"status":{"readyReplicas":1,"conditions":[],"containerState":{"running":{}}}})",
           "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body.dump();
  EXPECT_EQ(api_.Get("notebooks", "team-a", "nb1").value()["status"]["readyReplicas"], 1);
  EXPECT_EQ(Call("DELETE", path + "/nb1").status, 200);
  EXPECT_FALSE(api_.Get("notebooks", "team-a", "nb1").has_value());

  bool audited = false;
  for (const auto& r : api_.AuditLog()) {
    if (r.verb == "create" && r.resource == "notebooks") {
      audited = true;
      EXPECT_EQ(r.api_group, "kubeflow.org");
      EXPECT_EQ(r.ns, "team-a");
    }
  }
  EXPECT_TRUE(audited);
}

TEST_F(ApiServerResourcesTest, SubjectAccessReviewsAreAnsweredByTheReviewerAndNotStored) {
  const std::string path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
  const std::string review =
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"alice",)"
      R"("resourceAttributes":{"namespace":"team-a","verb":"create","group":"kubeflow.org","resource":"notebooks"}}})";
  EXPECT_EQ(Call("POST", path, review).status, 404);  // not served before a reviewer is set

  std::vector<json> seen;
  api_.SetAccessReviewer([&seen](const json& spec) {
    seen.push_back(spec);
    AccessDecision d;
    d.allowed = spec.value("user", "") == "alice";
    if (!d.allowed) d.reason = "not alice";
    return d;
  });
  Answer allowed = Call("POST", path, review);
  ASSERT_EQ(allowed.status, 201) << allowed.body.dump();
  EXPECT_EQ(allowed.body["status"], json({{"allowed", true}}));
  EXPECT_EQ(allowed.body["spec"]["resourceAttributes"]["verb"], "create");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["user"], "alice");

  json bob = json::parse(review);
  bob["spec"]["user"] = "bob";
  Answer denied = Call("POST", path, bob.dump());
  ASSERT_EQ(denied.status, 201);
  EXPECT_EQ(denied.body["status"], json({{"allowed", false}, {"reason", "not alice"}}));

  Answer bad = Call("POST", path, R"({"kind":"SubjectAccessReview","spec":"alice"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["message"], "SubjectAccessReview: spec must be an object, got \"alice\"")
      << bad.body.dump();
  EXPECT_EQ(Call("GET", path).status, 405);  // reviews are only created
  EXPECT_TRUE(api_.List("subjectaccessreviews").empty());
  Answer group = Call("GET", "/apis/authorization.k8s.io/v1");
  ASSERT_EQ(group.status, 200);
  EXPECT_EQ(group.body["resources"][0]["verbs"], json::array({"create"}));

  api_.SetAccessReviewer(nullptr);
  EXPECT_EQ(Call("POST", path, review).status, 404);
}

}  // namespace
}  // namespace fracgpu::fakes
