#include "fake_apiserver.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>
#include <string_view>
#include <thread>

namespace fracgpu::fakes {
namespace {

using nlohmann::json;

json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", code < 300 ? "Success" : "Failure"},
          {"message", message},
          {"reason", reason},
          {"code", code}};
}

std::string ReasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    default:
      return "Unknown";
  }
}

void Reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void Fail(httplib::Response& res, int code, const std::string& message) {
  Reply(res, code, StatusBody(code, ReasonFor(code), message));
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

// The parts of an API path.
struct Target {
  std::string group;       // the path's API group: "" for /api/v1
  std::string version;     // the path's version
  std::string resource;    // the path segment (also when not served, for the audit)
  std::string ns;          // "" = all namespaces (collections) or cluster-scoped
  std::string name;        // "" = collection
  std::string sub;         // binding | eviction | status | ""
  ResourceType type;       // the served row (when ok)
  bool ok = false;         // a served resource
  bool discovery = false;  // /api/v1 or /apis/<group>/<version> itself
};

Target ParsePath(const std::string& path, const std::vector<ResourceType>& types) {
  Target t;
  auto parts = Split(path, '/');  // "", "api", "v1", ...
  size_t i = 0;
  if (parts.size() >= 3 && parts[1] == "api" && parts[2] == "v1") {
    t.version = "v1";
    i = 3;
  } else if (parts.size() >= 4 && parts[1] == "apis") {
    t.group = parts[2];
    t.version = parts[3];
    i = 4;
  } else {
    return t;
  }
  if (i == parts.size()) {
    t.discovery = true;
    return t;
  }
  if (i + 1 < parts.size() && parts[i] == "namespaces") {
    t.ns = parts[i + 1];
    i += 2;
  }
  if (i >= parts.size()) return t;
  t.resource = parts[i++];
  if (i < parts.size()) t.name = parts[i++];
  if (i < parts.size()) t.sub = parts[i++];
  if (i < parts.size()) return t;
  for (const auto& type : types) {
    if (type.resource == t.resource && type.group == t.group && type.version == t.version) {
      t.type = type;
      t.ok = true;
    }
  }
  return t;
}

// Equality-based label selectors: k=v, k==v, k!=v, k, !k (comma = AND).
bool MatchLabels(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  json labels = json::object();
  if (obj.contains("metadata") && obj["metadata"].contains("labels") &&
      obj["metadata"]["labels"].is_object()) {
    labels = obj["metadata"]["labels"];
  }
  for (const auto& term : Split(selector, ',')) {
    if (term.empty()) continue;
    auto ne = term.find("!=");
    auto eq = term.find('=');
    if (ne != std::string::npos) {
      std::string k = term.substr(0, ne), v = term.substr(ne + 2);
      if (labels.contains(k) && labels[k] == v) return false;
    } else if (eq != std::string::npos) {
      std::string k = term.substr(0, eq);
      std::string v = term.substr(term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1);
      if (!labels.contains(k) || labels[k] != v) return false;
    } else if (term[0] == '!') {
      if (labels.contains(term.substr(1))) return false;
    } else if (!labels.contains(term)) {
      return false;
    }
  }
  return true;
}

std::string FieldValue(const json& obj, const std::string& field) {
  std::string ptr = "/" + field;
  std::replace(ptr.begin(), ptr.end(), '.', '/');
  json::json_pointer p(ptr);
  if (!obj.contains(p)) return "";
  const json& v = obj.at(p);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool MatchFields(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  for (const auto& term : Split(selector, ',')) {
    if (term.empty()) continue;
    auto ne = term.find("!=");
    auto eq = term.find('=');
    if (ne != std::string::npos) {
      if (FieldValue(obj, term.substr(0, ne)) == term.substr(ne + 2)) return false;
    } else if (eq != std::string::npos) {
      std::string v = term.substr(term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1);
      if (FieldValue(obj, term.substr(0, eq)) != v) return false;
    }
  }
  return true;
}

bool ValidField(const std::string& selector) {
  for (const auto& term : Split(selector, ',')) {
    if (term.empty()) continue;
    auto pos = term.find_first_of("!=");
    std::string f = term.substr(0, pos);
    if (f != "spec.nodeName" && f != "metadata.name" && f != "metadata.namespace" &&
        f != "status.phase" && f != "spec.schedulerName" && f != "spec.driver" &&
        f != "spec.pool.name") {
      return false;
    }
  }
  return true;
}

std::string Md(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const json& md = obj["metadata"];
  return md.contains(key) && md[key].is_string() ? md[key].get<std::string>() : "";
}

// The RBAC verb of a request (kubernetes.io/docs/reference/access-authn-authz/authorization/
// "Determine the request verb").
std::string VerbOf(const httplib::Request& req, const Target& t) {
  if (req.method == "GET" || req.method == "HEAD") {
    if (!t.name.empty()) return "get";
    std::string w = req.get_param_value("watch");
    return w == "true" || w == "1" ? "watch" : "list";
  }
  if (req.method == "POST") return "create";
  if (req.method == "PUT") return "update";
  if (req.method == "PATCH") return "patch";
  if (req.method == "DELETE") return t.name.empty() ? "deletecollection" : "delete";
  return req.method;
}

// The token of an "Authorization: Bearer <token>" header, or "".
std::string BearerToken(const httplib::Request& req) {
  std::string h = req.get_header_value("Authorization");
  constexpr std::string_view kPrefix = "Bearer ";
  if (h.size() <= kPrefix.size() || h.compare(0, kPrefix.size(), kPrefix) != 0) return "";
  return h.substr(kPrefix.size());
}

constexpr const char* kAnonymous = "system:anonymous";

}  // namespace

// Request handlers (a friend, so they can reach the store).
class FakeApiServerRoutes {
 public:
  explicit FakeApiServerRoutes(FakeApiServer* s) : s_(s) {}

  void Handle(const httplib::Request& req, httplib::Response& res) {
    Target t = ParsePath(req.path, s_->Types());
    if (t.ok && !t.type.namespaced) t.ns.clear();
    AuditRecord rec{kAnonymous, VerbOf(req, t), t.group, t.resource, t.sub, t.ns, t.name, 0};
    if (req.method == "POST" && t.sub.empty()) rec.name.clear();
    bool handled = false;
    std::function<void(const std::string&, const std::string&)> hook;
    {
      std::lock_guard<std::mutex> lock(s_->mu_);
      hook = s_->request_hook_;
      std::string query;
      for (const auto& [k, v] : req.params) query += (query.empty() ? "" : "&") + k + "=" + v;
      s_->requests_.push_back({req.method, req.path, query, req.body,
                               req.get_header_value("Content-Type"), req.remote_port});
      if (!s_->tokens_.empty()) {
        auto it = s_->tokens_.find(BearerToken(req));
        if (it == s_->tokens_.end()) {
          Fail(res, 401, "Unauthorized");
          handled = true;
        } else {
          rec.user = it->second;
        }
      }
      for (auto& f : s_->failures_) {
        if (handled) break;
        if (f.count > 0 && (f.method.empty() || f.method == req.method) &&
            req.path.rfind(f.prefix, 0) == 0) {
          --f.count;
          Fail(res, f.status, f.message);
          handled = true;
        }
      }
    }
    if (!handled && hook) hook(req.method, req.path);
    if (!handled) Dispatch(t, req, res, rec.user);
    std::lock_guard<std::mutex> lock(s_->mu_);
    rec.code = res.status == -1 ? 200 : res.status;  // a streaming watch: httplib sends 200 later
    s_->audit_.push_back(std::move(rec));
  }

 private:
  void Dispatch(const Target& t, const httplib::Request& req, httplib::Response& res,
                const std::string& user) {
    if (t.discovery && req.method == "GET") return Discovery(t, req, res);
    if (!t.ok)
      return Fail(res, 404, "the server could not find the requested resource: " + req.path);
    if (!t.type.stored) return Review(t, req, res);
    if (req.method == "GET") {
      if (!t.name.empty()) return GetOne(t, res);
      if (req.get_param_value("watch") == "true" || req.get_param_value("watch") == "1")
        return Watch(t, req, res);
      return ListAll(t, req, res);
    }
    if (req.method == "POST") {
      if (t.resource == "pods" && t.sub == "binding") return Bind(t, req, res);
      if (t.resource == "pods" && t.sub == "eviction") return Evict(t, req, res);
      if (!t.name.empty()) return Fail(res, 405, "POST on an object");
      return Create(t, req, res, user);
    }
    if (req.method == "PUT") return Modify(t, req, res, user);
    if (req.method == "PATCH") return Modify(t, req, res, user);
    if (req.method == "DELETE") return DeleteOne(t, res);
    Fail(res, 405, "method not allowed");
  }

  // GET /api/v1, /apis/<group>/<version>: the APIResourceList of the served rows of that
  // group/version (404 when none, as for a group nothing installed).
  void Discovery(const Target& t, const httplib::Request& req, httplib::Response& res) {
    json resources = json::array();
    for (const auto& type : s_->Types()) {
      if (type.group != t.group || type.version != t.version) continue;
      json verbs =
          type.stored ? json::array({"create", "delete", "get", "list", "patch", "update", "watch"})
                      : json::array({"create"});
      resources.push_back({{"name", type.resource},
                           {"singularName", ""},
                           {"namespaced", type.namespaced},
                           {"kind", type.kind},
                           {"verbs", verbs}});
    }
    if (resources.empty())
      return Fail(res, 404, "the server could not find the requested resource: " + req.path);
    std::string gv = t.group.empty() ? t.version : t.group + "/" + t.version;
    Reply(res, 200,
          {{"kind", "APIResourceList"},
           {"apiVersion", "v1"},
           {"groupVersion", gv},
           {"resources", resources}});
  }

  // A review row (SubjectAccessReview): create only, answered by the reviewer, not stored.
  void Review(const Target& t, const httplib::Request& req, httplib::Response& res) {
    if (req.method != "POST" || !t.name.empty()) {
      return Fail(res, 405, "only create (POST to the collection) is served for " + t.resource);
    }
    std::function<AccessDecision(const json&)> reviewer;
    {
      std::lock_guard<std::mutex> lock(s_->mu_);
      reviewer = s_->reviewer_;
    }
    if (!reviewer)
      return Fail(res, 404, "the server could not find the requested resource: " + req.path);
    json review = json::parse(req.body, nullptr, false);
    if (!review.is_object() || !review.contains("spec") || !review["spec"].is_object()) {
      return Fail(
          res, 400,
          t.type.kind + ": spec must be an object, got " +
              (review.is_object() && review.contains("spec") ? review["spec"].dump() : "none"));
    }
    AccessDecision d = reviewer(review["spec"]);
    review["apiVersion"] = t.type.api_version();
    review["kind"] = t.type.kind;
    review["status"] = {{"allowed", d.allowed}};
    if (!d.reason.empty()) review["status"]["reason"] = d.reason;
    Reply(res, 201, review);
  }

  // Runs the pod admission webhook (when installed and `t` is the pod resource itself) on
  // `obj`; false (with `res` set) when denied or the patch does not apply.
  bool Admit(const Target& t, const std::string& operation, const std::string& user,
             const json& old_obj, json* obj, httplib::Response& res) {
    if (t.resource != "pods" || !t.sub.empty()) return true;
    std::function<AdmissionVerdict(const AdmissionCall&)> webhook;
    {
      std::lock_guard<std::mutex> lock(s_->mu_);
      webhook = s_->admission_;
    }
    if (!webhook) return true;
    AdmissionVerdict v = webhook(
        {operation, user, t.ns, operation == "CREATE" ? Md(*obj, "name") : t.name, *obj, old_obj});
    if (!v.allowed) {
      Fail(res, v.code, "admission webhook \"fracgpu\" denied the request: " + v.message);
      return false;
    }
    if (!v.patch.is_null()) {
      try {
        *obj = obj->patch(v.patch);
      } catch (const std::exception& e) {
        Fail(res, 500,
             std::string("Internal error occurred: the admission webhook's JSON patch could not be "
                         "applied: ") +
                 e.what());
        return false;
      }
    }
    return true;
  }

  json* Find(const Target& t) {
    auto& objs = s_->store_[t.resource];
    auto it = objs.find(s_->KeyOf(t.resource, t.ns, t.name));
    return it == objs.end() ? nullptr : &it->second;
  }

  void GetOne(const Target& t, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(s_->mu_);
    json* obj = Find(t);
    if (obj == nullptr) return Fail(res, 404, t.resource + " \"" + t.name + "\" not found");
    Reply(res, 200, *obj);
  }

  void ListAll(const Target& t, const httplib::Request& req, httplib::Response& res) {
    std::string fs = req.get_param_value("fieldSelector");
    if (!ValidField(fs)) return Fail(res, 400, "field label not supported: " + fs);
    std::string ls = req.get_param_value("labelSelector");
    std::lock_guard<std::mutex> lock(s_->mu_);
    json items = json::array();
    for (const auto& [key, obj] : s_->store_[t.resource]) {
      if (!t.ns.empty() && Md(obj, "namespace") != t.ns) continue;
      if (!MatchLabels(obj, ls) || !MatchFields(obj, fs)) continue;
      items.push_back(obj);
    }
    // Paging with limit/continue (continue = index of the next item).
    size_t start = 0;
    if (auto c = req.get_param_value("continue"); !c.empty()) start = std::stoul(c);
    size_t limit = items.size();
    if (auto l = req.get_param_value("limit"); !l.empty())
      limit = std::max<size_t>(1, std::stoul(l));
    json page = json::array();
    for (size_t i = start; i < items.size() && page.size() < limit; ++i) page.push_back(items[i]);
    json md = {{"resourceVersion", std::to_string(s_->rv_)}};
    if (start + page.size() < items.size()) md["continue"] = std::to_string(start + page.size());
    Reply(res, 200,
          {{"kind", t.type.kind + "List"},
           {"apiVersion", t.type.api_version()},
           {"metadata", md},
           {"items", page}});
  }

  void Create(const Target& t, const httplib::Request& req, httplib::Response& res,
              const std::string& user) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Fail(res, 400, "body is not a JSON object");
    if (!body.contains("metadata") || !body["metadata"].is_object())
      body["metadata"] = json::object();
    if (t.type.namespaced) body["metadata"]["namespace"] = t.ns.empty() ? "default" : t.ns;
    Target at = t;
    at.ns = Md(body, "namespace");
    if (!Admit(at, "CREATE", user, nullptr, &body, res)) return;
    if (!body.is_object() || !body.contains("metadata") || !body["metadata"].is_object()) {
      return Fail(res, 500, "the admission webhook's patch left no metadata");
    }
    std::lock_guard<std::mutex> lock(s_->mu_);
    if (t.type.namespaced) body["metadata"]["namespace"] = at.ns;
    std::string name = Md(body, "name");
    if (name.empty()) {
      std::string gen = Md(body, "generateName");
      if (gen.empty()) return Fail(res, 422, "metadata.name or generateName is required");
      name = gen + std::to_string(s_->next_uid_);
      body["metadata"]["name"] = name;
    }
    Target key = t;
    key.name = name;
    key.ns = Md(body, "namespace");
    if (Find(key) != nullptr)
      return Fail(res, 409, t.resource + " \"" + name + "\" already exists");
    if (t.resource == "pods" && (!body.contains("status") || !body["status"].contains("phase"))) {
      body["status"]["phase"] = "Pending";
    }
    Reply(res, 201, s_->StoreLocked(t.resource, body, "ADDED"));
  }

  // The object a PUT or PATCH would store, computed from the current one; sets `res` and
  // returns nullopt on a client error.
  std::optional<json> Compute(const Target& t, const httplib::Request& req, const json& cur,
                              httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    auto conflict = [&] {
      Fail(res, 409,
           "Operation cannot be fulfilled on " + t.resource + " \"" + t.name +
               "\": the object has been modified; please apply your changes to the latest version "
               "and try again");
      return std::nullopt;
    };
    json updated;
    if (req.method == "PUT") {
      if (!body.is_object()) return Fail(res, 400, "body is not a JSON object"), std::nullopt;
      std::string rv = Md(body, "resourceVersion");
      if (!rv.empty() && rv != Md(cur, "resourceVersion")) return conflict();
      if (t.sub == "status") {
        updated = cur;
        updated["status"] = body.value("status", json::object());
      } else {
        updated = body;
      }
    } else {
      if (body.is_discarded()) return Fail(res, 400, "patch body is not JSON"), std::nullopt;
      std::string ct = req.get_header_value("Content-Type");
      if (ct.rfind("application/json-patch+json", 0) == 0) {
        try {
          updated = cur.patch(body);
        } catch (const std::exception& e) {
          return Fail(res, 422, std::string("the JSON patch could not be applied: ") + e.what()),
                 std::nullopt;
        }
      } else if (ct.rfind("application/merge-patch+json", 0) == 0 ||
                 ct.rfind("application/strategic-merge-patch+json", 0) == 0) {
        if (!body.is_object())
          return Fail(res, 400, "a merge patch must be a JSON object"), std::nullopt;
        std::string rv = Md(body, "resourceVersion");
        if (!rv.empty() && rv != Md(cur, "resourceVersion")) return conflict();
        if (body.contains("metadata") && body["metadata"].is_object())
          body["metadata"].erase("resourceVersion");
        updated = cur;
        updated.merge_patch(body);
      } else {
        return Fail(res, 415, "unsupported patch Content-Type \"" + ct + "\""), std::nullopt;
      }
      if (!updated.is_object())
        return Fail(res, 422, "patched object is not an object"), std::nullopt;
    }
    if (t.sub == "status" && t.type.group == kNotebookResource.group &&
        t.type.resource == kNotebookResource.resource) {
      // Kubeflow's Notebook CRD requires these three in status (its NotebookStatus fields have no
      // omitempty); the real API server refuses a status without them (tests/realcluster).
      std::vector<std::string> missing;
      const json& st = updated.contains("status") ? updated["status"] : json();
      for (const char* f : {"conditions", "containerState", "readyReplicas"}) {
        if (!st.is_object() || !st.contains(f))
          missing.push_back("status." + std::string(f) + ": Required value");
      }
      if (!missing.empty()) {
        std::string list = missing[0];
        for (size_t i = 1; i < missing.size(); ++i) list += ", " + missing[i];
        if (missing.size() > 1) list = "[" + list + "]";
        return Fail(res, 422, "Notebook.kubeflow.org \"" + t.name + "\" is invalid: " + list),
               std::nullopt;
      }
    }
    if (!updated.contains("metadata") || !updated["metadata"].is_object())
      updated["metadata"] = json::object();
    updated["metadata"]["name"] = t.name;
    if (t.type.namespaced) updated["metadata"]["namespace"] = t.ns;
    updated["metadata"]["uid"] = Md(cur, "uid");
    return updated;
  }

  // PUT and PATCH: compute, admit (outside the lock), then store if nothing changed in
  // between; otherwise start over, as the API server's update loop does (GuaranteedUpdate).
  void Modify(const Target& t, const httplib::Request& req, httplib::Response& res,
              const std::string& user) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      json cur;
      std::optional<json> updated;
      {
        std::lock_guard<std::mutex> lock(s_->mu_);
        json* found = Find(t);
        if (found == nullptr) return Fail(res, 404, t.resource + " \"" + t.name + "\" not found");
        cur = *found;
        updated = Compute(t, req, cur, res);
        if (!updated) return;
      }
      if (!Admit(t, "UPDATE", user, cur, &*updated, res)) return;
      std::lock_guard<std::mutex> lock(s_->mu_);
      json* found = Find(t);
      if (found == nullptr) return Fail(res, 404, t.resource + " \"" + t.name + "\" not found");
      if (Md(*found, "resourceVersion") != Md(cur, "resourceVersion")) continue;
      if (!updated->is_object() || !updated->contains("metadata") ||
          !(*updated)["metadata"].is_object()) {
        return Fail(res, 500, "the admission webhook's patch left no metadata");
      }
      return Reply(res, 200, s_->StoreLocked(t.resource, *updated, "MODIFIED"));
    }
    Fail(res, 409,
         "Operation cannot be fulfilled on " + t.resource + " \"" + t.name +
             "\": too many concurrent changes");
  }

  void DeleteOne(const Target& t, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(s_->mu_);
    json* cur = Find(t);
    if (cur == nullptr) return Fail(res, 404, t.resource + " \"" + t.name + "\" not found");
    json last = *cur;
    s_->RemoveLocked(t.resource, s_->KeyOf(t.resource, t.ns, t.name));
    Reply(res, 200, last);
  }

  // POST pods/<name>/eviction (policy/v1 Eviction; the real API server checks the pod's
  // PodDisruptionBudgets, none here, and deletes it gracefully): the body must name the pod;
  // deleteOptions.preconditions.uid must match; the pod is removed; 201 with a Success Status.
  void Evict(const Target& t, const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || body.value("kind", "") != "Eviction" ||
        body.value("apiVersion", "") != "policy/v1") {
      return Fail(res, 400, "the body of an eviction must be a policy/v1 Eviction");
    }
    if (Md(body, "name") != t.name) return Fail(res, 400, "name in the Eviction does not match");
    std::lock_guard<std::mutex> lock(s_->mu_);
    json* pod = Find(t);
    if (pod == nullptr) return Fail(res, 404, "pods \"" + t.name + "\" not found");
    std::string uid;
    if (body.contains("deleteOptions") && body["deleteOptions"].is_object() &&
        body["deleteOptions"].contains("preconditions") &&
        body["deleteOptions"]["preconditions"].is_object())
      uid = body["deleteOptions"]["preconditions"].value("uid", "");
    if (!uid.empty() && uid != Md(*pod, "uid")) {
      return Fail(res, 409,
                  "Precondition failed: UID in precondition: " + uid +
                      ", UID in object meta: " + Md(*pod, "uid"));
    }
    s_->RemoveLocked(t.resource, s_->KeyOf(t.resource, t.ns, t.name));
    Reply(res, 201, json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}});
  }

  void Bind(const Target& t, const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("target") || !body["target"].is_object() ||
        !body["target"].contains("name") || !body["target"]["name"].is_string()) {
      return Fail(res, 400, "Binding must carry target.name");
    }
    std::lock_guard<std::mutex> lock(s_->mu_);
    json* pod = Find(t);
    if (pod == nullptr) return Fail(res, 404, "pods \"" + t.name + "\" not found");
    std::string uid = Md(body, "uid");
    if (!uid.empty() && uid != Md(*pod, "uid")) {
      return Fail(res, 409,
                  "Precondition failed: UID in precondition: " + uid +
                      ", UID in object meta: " + Md(*pod, "uid"));
    }
    // As BindingREST.setPodNodeAndMetadata (k8s.io/kubernetes pkg/registry/core/pod/storage/
    // storage.go, v1.34.4 and v1.37.2): resourceVersion is a precondition like the UID; a pod
    // being deleted, already bound or gated is refused (409); the Binding's annotations are
    // merged into the pod's, its labels too where PodTopologyLabelsAdmission is on
    // (SetBindingCopiesLabels), all in the one update that sets spec.nodeName.
    std::string rv = Md(body, "resourceVersion");
    if (!rv.empty() && rv != Md(*pod, "resourceVersion")) {
      return Fail(res, 409,
                  "Operation cannot be fulfilled on pods/binding \"" + t.name +
                      "\": Precondition failed: ResourceVersion in precondition: " + rv +
                      ", ResourceVersion in object meta: " + Md(*pod, "resourceVersion"));
    }
    if (!Md(*pod, "deletionTimestamp").empty()) {
      return Fail(res, 409, "pod " + t.name + " is being deleted, cannot be assigned to a host");
    }
    if (pod->contains("spec") && (*pod)["spec"].contains("nodeName") &&
        (*pod)["spec"]["nodeName"].is_string() &&
        !(*pod)["spec"]["nodeName"].get<std::string>().empty()) {
      return Fail(res, 409,
                  "pod " + t.name + " is already assigned to node \"" +
                      (*pod)["spec"]["nodeName"].get<std::string>() + "\"");
    }
    if (pod->contains("spec") && (*pod)["spec"].contains("schedulingGates") &&
        (*pod)["spec"]["schedulingGates"].is_array() &&
        !(*pod)["spec"]["schedulingGates"].empty()) {
      return Fail(res, 409, "pod " + t.name + " has non-empty .spec.schedulingGates");
    }
    json updated = *pod;
    updated["spec"]["nodeName"] = body["target"]["name"];
    const json md = body.value("metadata", json::object());
    auto merge = [&](const char* field) {
      if (!md.is_object() || !md.contains(field) || !md[field].is_object()) return;
      for (const auto& [k, v] : md[field].items()) {
        if (v.is_string()) updated["metadata"][field][k] = v;
      }
    };
    merge("annotations");
    if (s_->binding_copies_labels_) merge("labels");
    s_->StoreLocked("pods", updated, "MODIFIED");
    Reply(res, 201, StatusBody(201, "", ""));
  }

  struct WatchState {
    std::string resource, ns, labels, fields;
    int64_t rv = 0;
    int64_t drop_gen = 0, bookmark_gen = 0, expire_before = 0;
    bool bookmarks = false;
    bool initial_sent = false;
    bool initial_synthetic = false;
    std::chrono::steady_clock::time_point deadline;
  };

  bool Matches(const WatchState& w, const std::string& resource, const json& obj) {
    if (resource != w.resource) return false;
    if (!w.ns.empty() && Md(obj, "namespace") != w.ns) return false;
    return MatchLabels(obj, w.labels) && MatchFields(obj, w.fields);
  }

  void Watch(const Target& t, const httplib::Request& req, httplib::Response& res) {
    auto w = std::make_shared<WatchState>();
    w->resource = t.resource;
    w->ns = t.ns;
    w->labels = req.get_param_value("labelSelector");
    w->fields = req.get_param_value("fieldSelector");
    if (!ValidField(w->fields)) return Fail(res, 400, "field label not supported: " + w->fields);
    w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    int64_t timeout = 300;
    if (auto ts = req.get_param_value("timeoutSeconds"); !ts.empty()) timeout = std::stol(ts);
    w->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    std::string rv = req.get_param_value("resourceVersion");
    {
      std::unique_lock<std::mutex> lock(s_->mu_);
      s_->changed_.wait(lock, [this] { return !s_->hold_watches_ || s_->stopping_; });
      if (s_->reject_watches_ > 0) {
        --s_->reject_watches_;
        return Fail(res, 410,
                    "too old resource version: " + rv + " (" + std::to_string(s_->rv_) + ")");
      }
      w->drop_gen = s_->drop_generation_;
      w->bookmark_gen = s_->bookmark_generation_;
      w->expire_before = s_->expired_before_;
      if (rv.empty() || rv == "0") {
        w->initial_synthetic = true;
        w->rv = s_->rv_;
      } else {
        w->rv = std::stoll(rv);
      }
      ++s_->open_watches_;
    }
    FakeApiServer* s = s_;
    res.set_chunked_content_provider(
        "application/json",
        [this, w, s](size_t, httplib::DataSink& sink) -> bool {
          std::unique_lock<std::mutex> lock(s->mu_);
          auto send = [&](const std::string& type, const json& obj) {
            std::string line = json{{"type", type}, {"object", obj}}.dump() + "\n";
            lock.unlock();
            bool ok = sink.write(line.data(), line.size());
            lock.lock();
            return ok;
          };
          if (!w->initial_sent) {
            w->initial_sent = true;
            if (w->initial_synthetic) {
              std::vector<json> objs;
              for (const auto& [k, obj] : s->store_[w->resource]) {
                if (Matches(*w, w->resource, obj)) objs.push_back(obj);
              }
              for (const auto& obj : objs) {
                if (!send("ADDED", obj)) return false;
              }
            } else if (w->rv < s->expired_before_) {
              send("ERROR", StatusBody(410, "Expired",
                                       "too old resource version: " + std::to_string(w->rv) + " (" +
                                           std::to_string(s->rv_) + ")"));
              lock.unlock();
              sink.done();
              return true;
            }
          }
          for (;;) {
            if (s->stopping_) {
              lock.unlock();
              sink.done();
              return true;
            }
            if (w->drop_gen != s->drop_generation_) return false;  // abrupt close
            if (w->expire_before != s->expired_before_) {
              w->expire_before = s->expired_before_;
              send("ERROR", StatusBody(410, "Expired", "too old resource version"));
              lock.unlock();
              sink.done();
              return true;
            }
            // Pending events after w->rv.
            std::vector<std::pair<std::string, json>> out;
            for (const auto& ev : s->history_) {
              if (ev.rv <= w->rv) continue;
              if (Matches(*w, ev.resource, ev.object)) out.emplace_back(ev.type, ev.object);
              w->rv = ev.rv;
            }
            if (w->rv < s->rv_ && s->history_.empty()) w->rv = s->rv_;
            if (!out.empty()) {
              for (const auto& [type, obj] : out) {
                if (!send(type, obj)) return false;
              }
              return true;
            }
            if (w->bookmark_gen != s->bookmark_generation_) {
              w->bookmark_gen = s->bookmark_generation_;
              if (w->bookmarks) {
                auto type = s->TypeOf(w->resource);
                json bm = {{"kind", type ? type->kind : ""},
                           {"apiVersion", type ? type->api_version() : "v1"},
                           {"metadata", {{"resourceVersion", std::to_string(s->rv_)}}}};
                if (!send("BOOKMARK", bm)) return false;
                return true;
              }
            }
            if (std::chrono::steady_clock::now() >= w->deadline) {
              lock.unlock();
              sink.done();
              return true;
            }
            if (!sink.is_writable()) return false;
            // Wake on any store change; the bounded wait lets the server notice a closed peer.
            s->changed_.wait_for(lock, std::chrono::milliseconds(200));
          }
        },
        [s](bool) {
          std::lock_guard<std::mutex> lock(s->mu_);
          --s->open_watches_;
          s->changed_.notify_all();
        });
  }

  FakeApiServer* s_;
};

const std::vector<ResourceType>& BuiltinResources() {
  // k8s.io/api: core/v1 Node, Pod, Event, ResourceQuota; coordination/v1 Lease;
  // admissionregistration/v1 ValidatingAdmissionPolicy and its Binding, cluster-scoped (stored
  // and served only: the fake evaluates no CEL); resource/v1
  // (Kubernetes 1.34+, types.go): DeviceClass and ResourceSlice cluster-scoped, ResourceClaim and
  // ResourceClaimTemplate namespaced.
  static const std::vector<ResourceType> kRows = {
      {"", "v1", "nodes", "Node", false},
      {"", "v1", "pods", "Pod", true},
      {"", "v1", "events", "Event", true},
      {"", "v1", "resourcequotas", "ResourceQuota", true},
      {"coordination.k8s.io", "v1", "leases", "Lease", true},
      {"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
       "ValidatingAdmissionPolicy", false},
      {"admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
       "ValidatingAdmissionPolicyBinding", false},
      {"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false},
      {"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false},
      {"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true},
      {"resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", true},
  };
  return kRows;
}

// github.com/kubeflow/kubeflow components/notebook-controller config/crd: group kubeflow.org,
// served version v1, plural notebooks, namespaced.
const ResourceType kNotebookResource = {"kubeflow.org", "v1", "notebooks", "Notebook", true};

namespace {
// k8s.io/api/authorization/v1: SubjectAccessReview, cluster-scoped, create only.
const ResourceType kSubjectAccessReviewResource = {
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", false, false};
}  // namespace

FakeApiServer::FakeApiServer(int port)
    : server_(std::make_unique<httplib::Server>()), types_(BuiltinResources()) {
  auto routes = std::make_shared<FakeApiServerRoutes>(this);
  auto handler = [routes](const httplib::Request& req, httplib::Response& res) {
    routes->Handle(req, res);
  };
  server_->Get(R"(/.*)", handler);
  server_->Post(R"(/.*)", handler);
  server_->Put(R"(/.*)", handler);
  server_->Patch(R"(/.*)", handler);
  server_->Delete(R"(/.*)", handler);
  // Watches hold a worker each; leave room for many concurrent calls besides them.
  server_->new_task_queue = [] { return new httplib::ThreadPool(64); };
  server_->set_keep_alive_max_count(1000);
  server_->set_tcp_nodelay(true);
  // Deep listen backlog (httplib's is 5) for bursts of concurrent clients.
  auto listen_fd = std::make_shared<int>(-1);
  server_->set_socket_options([listen_fd](int sock) {
    httplib::default_socket_options(sock);
    *listen_fd = sock;
  });
  if (port == 0) {
    port_ = server_->bind_to_any_port("127.0.0.1");
  } else {
    port_ = server_->bind_to_port("127.0.0.1", port) ? port : -1;
  }
  if (*listen_fd >= 0) ::listen(*listen_fd, 1024);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  if (port_ > 0) WaitUntilRunning(*server_);
}

void WaitUntilRunning(httplib::Server& server) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string FakeApiServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::optional<ResourceType> FakeApiServer::TypeOf(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(types_mu_);
  for (const auto& type : types_) {
    if (type.resource == resource) return type;
  }
  return std::nullopt;
}

std::vector<ResourceType> FakeApiServer::Types() const {
  std::lock_guard<std::mutex> lock(types_mu_);
  return types_;
}

bool FakeApiServer::AddResource(const ResourceType& type) {
  if (type.group.empty() || type.version.empty() || type.resource.empty() || type.kind.empty())
    return false;
  std::lock_guard<std::mutex> lock(types_mu_);
  for (const auto& t : types_) {
    if (t.resource == type.resource) return false;
  }
  types_.push_back(type);
  return true;
}

void FakeApiServer::SetAccessReviewer(std::function<AccessDecision(const json& spec)> reviewer) {
  const bool serve = static_cast<bool>(reviewer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    reviewer_ = std::move(reviewer);
  }
  std::lock_guard<std::mutex> lock(types_mu_);
  std::erase_if(types_, [](const ResourceType& t) {
    return t.resource == kSubjectAccessReviewResource.resource;
  });
  if (serve) types_.push_back(kSubjectAccessReviewResource);
}

// Objects of a resource that is not served (direct store access only) count as namespaced.
std::string FakeApiServer::KeyOf(const std::string& resource, const std::string& ns,
                                 const std::string& name) const {
  auto type = TypeOf(resource);
  return !type || type->namespaced ? ns + "/" + name : name;
}

namespace {

// The real API server stores quantities in canonical form (apimachinery resource.Quantity
// MarshalJSON → CanonicalizeBytes): a whole binary-SI value takes the largest suffix that keeps
// it whole, so "16384Mi" reads back as "16Gi" and "81920Mi" as "80Gi". This covers the
// quantities fracgpu writes (whole numbers with a binary suffix); others are kept as written.
std::string CanonicalQuantity(const std::string& q) {
  static const char* kSuffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (q.size() < 3) return q;
  std::string suffix = q.substr(q.size() - 2);
  int level = -1;
  for (int i = 0; i < 6; ++i) {
    if (suffix == kSuffixes[i]) level = i;
  }
  std::string digits = q.substr(0, q.size() - 2);
  if (level < 0 || digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return q;
  }
  uint64_t n = std::stoull(digits);
  if (n == 0) return "0";
  while (level < 5 && n % 1024 == 0) {
    n /= 1024;
    ++level;
  }
  return std::to_string(n) + kSuffixes[level];
}

void CanonicalizeSliceQuantities(json* slice) {
  if (!slice->contains("spec") || !(*slice)["spec"].contains("devices")) return;
  for (auto& d : (*slice)["spec"]["devices"]) {
    if (!d.is_object() || !d.contains("capacity") || !d["capacity"].is_object()) continue;
    for (auto& [name, cap] : d["capacity"].items()) {
      auto fix = [](json& v) {
        if (v.is_string()) v = CanonicalQuantity(v.get<std::string>());
      };
      if (cap.contains("value")) fix(cap["value"]);
      if (!cap.contains("requestPolicy")) continue;
      json& p = cap["requestPolicy"];
      if (p.contains("default")) fix(p["default"]);
      if (p.contains("validRange")) {
        for (const char* k : {"min", "max", "step"}) {
          if (p["validRange"].contains(k)) fix(p["validRange"][k]);
        }
      }
      if (p.contains("validValues") && p["validValues"].is_array()) {
        for (auto& v : p["validValues"]) fix(v);
      }
    }
  }
}

}  // namespace

json FakeApiServer::StoreLocked(const std::string& resource, json obj, const std::string& type) {
  if (resource == "resourceslices") CanonicalizeSliceQuantities(&obj);
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  json& md = obj["metadata"];
  auto served = TypeOf(resource);
  const bool namespaced = !served || served->namespaced;
  if (namespaced && (!md.contains("namespace") || md["namespace"] == ""))
    md["namespace"] = "default";
  if (!namespaced) md.erase("namespace");
  if (!md.contains("uid") || md["uid"] == "") {
    std::ostringstream uid;
    uid << "00000000-0000-4000-8000-" << std::setw(12) << std::setfill('0') << next_uid_++;
    md["uid"] = uid.str();
  }
  if (!md.contains("creationTimestamp")) md["creationTimestamp"] = "2025-01-01T00:00:00Z";
  if (served) {
    obj["kind"] = served->kind;
    obj["apiVersion"] = served->api_version();
  }
  md["resourceVersion"] = std::to_string(++rv_);
  std::string key = KeyOf(resource, md.value("namespace", ""), md.value("name", ""));
  auto& objs = store_[resource];
  std::string ev_type = objs.count(key) ? "MODIFIED" : type;
  objs[key] = obj;
  history_.push_back({rv_, ev_type, resource, obj});
  changed_.notify_all();
  return obj;
}

void FakeApiServer::RemoveLocked(const std::string& resource, const std::string& key) {
  auto& objs = store_[resource];
  auto it = objs.find(key);
  if (it == objs.end()) return;
  json last = it->second;
  objs.erase(it);
  last["metadata"]["resourceVersion"] = std::to_string(++rv_);
  history_.push_back({rv_, "DELETED", resource, last});
  changed_.notify_all();
}

json FakeApiServer::Put(const std::string& resource, json obj) {
  std::lock_guard<std::mutex> lock(mu_);
  if (resource == "pods" && obj.is_object() &&
      (!obj.contains("status") || !obj["status"].contains("phase"))) {
    obj["status"]["phase"] = "Pending";
  }
  return StoreLocked(resource, std::move(obj), "ADDED");
}

std::optional<json> FakeApiServer::Get(const std::string& resource, const std::string& ns,
                                       const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto rit = store_.find(resource);
  if (rit == store_.end()) return std::nullopt;
  auto it = rit->second.find(KeyOf(resource, ns, name));
  if (it == rit->second.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeApiServer::List(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  auto rit = store_.find(resource);
  if (rit == store_.end()) return out;
  for (const auto& [k, v] : rit->second) out.push_back(v);
  return out;
}

bool FakeApiServer::Remove(const std::string& resource, const std::string& ns,
                           const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = KeyOf(resource, ns, name);
  if (!store_[resource].count(key)) return false;
  RemoveLocked(resource, key);
  return true;
}

bool FakeApiServer::Patch(const std::string& resource, const std::string& ns,
                          const std::string& name, const json& merge_patch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& objs = store_[resource];
  auto it = objs.find(KeyOf(resource, ns, name));
  if (it == objs.end()) return false;
  json updated = it->second;
  updated.merge_patch(merge_patch);
  StoreLocked(resource, updated, "MODIFIED");
  return true;
}

bool FakeApiServer::WaitFor(const std::function<bool()>& pred,
                            std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    lock.unlock();
    if (pred()) return true;
    lock.lock();
    if (std::chrono::steady_clock::now() >= deadline) break;
    // Bounded wait: the predicate may depend on state outside the store (e.g. a consumer's
    // cache updated after it read the store).
    changed_.wait_for(lock, std::chrono::milliseconds(20));
  }
  lock.unlock();
  return pred();
}

void FakeApiServer::FailNext(const std::string& method, const std::string& path_prefix, int status,
                             int count, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back({method, path_prefix, status, count, message});
}

void FakeApiServer::ClearFailures() {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.clear();
}

void FakeApiServer::ExpireHistory() {
  std::lock_guard<std::mutex> lock(mu_);
  // A compaction: every version up to now is gone; the next version is valid to watch from.
  history_.clear();
  ++rv_;
  expired_before_ = rv_;
  changed_.notify_all();
}

void FakeApiServer::RejectNextWatches(int count) {
  std::lock_guard<std::mutex> lock(mu_);
  reject_watches_ += count;
}

void FakeApiServer::DropWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  ++drop_generation_;
  changed_.notify_all();
}

void FakeApiServer::HoldWatches(bool hold) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_watches_ = hold;
  changed_.notify_all();
}

void FakeApiServer::SendBookmarks() {
  std::lock_guard<std::mutex> lock(mu_);
  ++bookmark_generation_;
  changed_.notify_all();
}

void FakeApiServer::SetTokens(std::map<std::string, std::string> token_to_user) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::move(token_to_user);
}

void FakeApiServer::SetRequestHook(
    std::function<void(const std::string& method, const std::string& path)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  request_hook_ = std::move(hook);
}

void FakeApiServer::SetBindingCopiesLabels(bool copy) {
  std::lock_guard<std::mutex> lock(mu_);
  binding_copies_labels_ = copy;
}

void FakeApiServer::SetPodAdmission(std::function<AdmissionVerdict(const AdmissionCall&)> webhook) {
  std::lock_guard<std::mutex> lock(mu_);
  admission_ = std::move(webhook);
}

std::vector<AuditRecord> FakeApiServer::AuditLog() const {
  std::lock_guard<std::mutex> lock(mu_);
  return audit_;
}

std::vector<RecordedRequest> FakeApiServer::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

int FakeApiServer::CountRequests(const std::string& method, const std::string& path_prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& r : requests_) {
    if ((method.empty() || r.method == method) && r.path.rfind(path_prefix, 0) == 0) ++n;
  }
  return n;
}

int FakeApiServer::OpenWatches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_watches_;
}

int64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

}  // namespace fracgpu::fakes
