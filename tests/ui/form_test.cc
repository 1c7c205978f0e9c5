// The form body decoder (table of bad bodies), the Notebook built for each slice mode
// (limits and annotations computed by hand from docs/design/CONTRACT.md §1), and the YAML text.
#include "ui/form.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "ui/yaml.h"

namespace fracgpu::ui {
namespace {

using nlohmann::json;

json LimitsOf(const json& nb) {
  return nb["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
}

json Built(const std::string& body) {
  auto form = DecodeNotebookForm(body);
  EXPECT_TRUE(form.ok()) << form.status().message();
  return form.ok() ? BuildNotebook(*form) : json();
}

TEST(FormTest, FractionHalfWithTypesAndPolicies) {
  json nb = Built(
      R"({"name":"nb1","namespace":"team-a","image":"jupyter:1","cpu":"1","memory":"2Gi","gpus":1,
    "slice":{"mode":"fraction","memory_percent":50,"cores_percent":50},
    "use_types":["A100","H100"],"nouse_types":["T4"],"use_uuids":["GPU-a0"],"nouse_uuids":["GPU-x","GPU-y"],
    "node_policy":"spread","gpu_policy":"binpack"})");
  EXPECT_EQ(nb["apiVersion"], "kubeflow.org/v1");
  EXPECT_EQ(nb["kind"], "Notebook");
  EXPECT_EQ(nb["metadata"]["name"], "nb1");
  EXPECT_EQ(nb["metadata"]["namespace"], "team-a");
  EXPECT_EQ(LimitsOf(nb), json({{"cpu", "1"},
                                {"memory", "2Gi"},
                                {"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem-percentage", "50"},
                                {"nvidia.com/gpucores", "50"}}));
  EXPECT_EQ(nb["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"],
            json({{"cpu", "1"}, {"memory", "2Gi"}}));
  EXPECT_EQ(nb["spec"]["template"]["spec"]["containers"][0]["image"], "jupyter:1");
  EXPECT_EQ(nb["metadata"]["annotations"], json({{"nvidia.com/use-gputype", "A100,H100"},
                                                 {"nvidia.com/nouse-gputype", "T4"},
                                                 {"nvidia.com/use-gpuuuid", "GPU-a0"},
                                                 {"nvidia.com/nouse-gpuuuid", "GPU-x,GPU-y"},
                                                 {"hami.io/node-scheduler-policy", "spread"},
                                                 {"hami.io/gpu-scheduler-policy", "binpack"}}));
}

TEST(FormTest, MemoryInGibConvertsToMib) {
  json nb = Built(R"({"name":"nb","namespace":"ns","image":"i","gpus":1,
    "slice":{"mode":"memory","memory_value":8,"memory_unit":"GiB","cores_percent":30}})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem", "8192"},
                                {"nvidia.com/gpucores", "30"}}));
  EXPECT_FALSE(nb["metadata"].contains("annotations"));
  // 1.5 GiB = 1536 MiB; MiB without cores writes no gpucores.
  nb = Built(
      R"({"name":"nb","namespace":"ns","image":"i","gpus":1,"slice":{"mode":"memory","memory_value":1.5,"memory_unit":"GiB"}})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1536"}}));
  nb = Built(
      R"({"name":"nb","namespace":"ns","image":"i","gpus":2,"slice":{"mode":"memory","memory_value":3000}})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}}));
}

TEST(FormTest, CoresWithOptionalMemory) {
  json nb = Built(
      R"({"name":"nb","namespace":"ns","image":"i","gpus":1,"slice":{"mode":"cores","cores_percent":30}})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}}));
  nb = Built(R"({"name":"nb","namespace":"ns","image":"i","gpus":1,
    "slice":{"mode":"cores","cores_percent":30,"memory_value":2048,"memory_unit":"MiB"}})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem", "2048"},
                                {"nvidia.com/gpucores", "30"}}));
}

TEST(FormTest, WholeCardsAndNoGpu) {
  json nb = Built(R"({"name":"nb","namespace":"ns","image":"i","gpus":2})");
  EXPECT_EQ(LimitsOf(nb), json({{"nvidia.com/gpu", "2"}}));
  nb = Built(R"({"name":"nb","namespace":"ns","image":"i","cpu":"500m"})");
  EXPECT_EQ(LimitsOf(nb), json({{"cpu", "500m"}}));
}

TEST(FormTest, PodOfNotebookDropsControllerFilteredAnnotations) {
  json nb = {
      {"metadata",
       {{"name", "n"},
        {"namespace", "s"},
        {"annotations",
         {{"notebooks.kubeflow.org/x", "1"}, {"kubectl.kubernetes.io/y", "2"}, {"a", "b"}}}}},
      {"spec", {{"template", {{"spec", {{"containers", json::array()}}}}}}}};
  json pod = PodOfNotebook(nb);
  EXPECT_EQ(pod["metadata"]["annotations"], json({{"a", "b"}}));
  EXPECT_EQ(pod["spec"], json({{"containers", json::array()}}));
}

struct BadBody {
  const char* body;
  const char* message;  // the whole error message
};

TEST(FormTest, BadBodiesNameTheField) {
  const BadBody cases[] = {
      {"", "request body is not valid JSON"},
      {"{", "request body is not valid JSON"},
      {"[1]", "request body must be a JSON object, got [1]"},
      {R"({"namespace":"a","image":"i"})", "name is required"},
      {R"({"name":"n","image":"i"})", "namespace is required"},
      {R"({"name":"n","namespace":"a"})", "image is required"},
      {R"({"name":5,"namespace":"a","image":"i"})", "name must be a string, got 5"},
      {R"({"name":"n","namespace":"a","image":"i","gpus":"1"})",
       "gpus must be an integer, got \"1\""},
      {R"({"name":"n","namespace":"a","image":"i","gpus":1.5})",
       "gpus must be a whole number, got 1.5"},
      {R"({"name":"n","namespace":"a","image":"i","gpus":18446744073709551615})",
       "gpus is too large, got 18446744073709551615"},
      {R"({"name":"n","namespace":"a","image":"i","slice":"half"})",
       "slice must be an object, got \"half\""},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"half"}})",
       "slice.mode must be one of whole, fraction, memory, cores, got \"half\""},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"fraction"}})",
       "slice.memory_percent is required in fraction mode"},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"fraction","memory_percent":"50"}})",
       "slice.memory_percent must be an integer, got \"50\""},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"memory"}})",
       "slice.memory_value is required in memory mode"},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"memory","memory_value":"8"}})",
       "slice.memory_value must be a number, got \"8\""},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"memory","memory_value":8,"memory_unit":"GB"}})",
       "slice.memory_unit must be MiB or GiB, got \"GB\""},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"memory","memory_value":0.1,"memory_unit":"GiB"}})",
       "slice.memory_value 0.1 GiB is not a whole number of MiB"},
      {R"({"name":"n","namespace":"a","image":"i","slice":{"mode":"cores"}})",
       "slice.cores_percent is required in cores mode"},
      {R"({"name":"n","namespace":"a","image":"i","use_types":"A100"})",
       "use_types must be an array of strings, got \"A100\""},
      {R"({"name":"n","namespace":"a","image":"i","nouse_uuids":["GPU-1",2]})",
       "nouse_uuids[1] must be a string, got 2"},
      {R"({"name":"n","namespace":"a","image":"i","use_uuids":["GPU-1,GPU-2"]})",
       "use_uuids[0] must not contain a comma, got \"GPU-1,GPU-2\""},
      {R"({"name":"Nb","namespace":"a","image":"i"})",
       "name must start with a lower-case letter and hold only lower-case letters, digits and "
       "'-', not end with '-', at most 52 characters (Kubeflow names the notebook's Service and "
       "StatefulSet after it), got \"Nb\""},
      {R"({"name":"n","namespace":"../x","image":"i"})",
       "namespace must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got "
       "\"../x\""},
  };
  for (const auto& c : cases) {
    auto form = DecodeNotebookForm(c.body);
    ASSERT_FALSE(form.ok()) << c.body;
    EXPECT_EQ(form.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(form.status().message(), c.message) << c.body;
  }
}

TEST(YamlTest, QuotesStringsThatLookLikeOtherTypesAndParsesBack) {
  json v = {{"a", "1"},
            {"b", 1},
            {"c", "true"},
            {"d", true},
            {"e", ""},
            {"f", "jupyter:v1"},
            {"g", json::array({"x", "null"})},
            {"h", nullptr},
            {"i", json::object()}};
  std::string text = JsonToYaml(v);
  YAML::Node n = YAML::Load(text);
  // Quoted scalars carry the non-specific tag "!", plain ones "?" (YAML 1.2 §6.9.1).
  EXPECT_EQ(n["a"].Tag(), "!");
  EXPECT_EQ(n["a"].as<std::string>(), "1");
  EXPECT_EQ(n["b"].Tag(), "?");
  EXPECT_EQ(n["b"].as<int>(), 1);
  EXPECT_EQ(n["c"].Tag(), "!");
  EXPECT_EQ(n["d"].as<bool>(), true);
  EXPECT_EQ(n["e"].Tag(), "!");
  EXPECT_EQ(n["f"].as<std::string>(), "jupyter:v1");
  EXPECT_EQ(n["g"][1].Tag(), "!");
  EXPECT_TRUE(n["h"].IsNull());
  EXPECT_TRUE(n["i"].IsMap());
  EXPECT_EQ(n["i"].size(), 0u);
}

TEST(YamlTest, NotebookTextShowsLimits) {
  json nb = Built(
      R"({"name":"nb","namespace":"ns","image":"i","gpus":1,"slice":{"mode":"cores","cores_percent":30}})");
  std::string text = JsonToYaml(nb);
  EXPECT_NE(text.find("apiVersion: kubeflow.org/v1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia.com/gpucores: \"30\""), std::string::npos) << text;
  YAML::Node n = YAML::Load(text);
  EXPECT_EQ(n["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
                .as<std::string>(),
            "1");
}

// Issue 38 item 2: the fields the API server would refuse (Kubernetes quantities, names) are
// refused here too, each naming its field and value, every one at once; the web page checks the
// same rules, and a client that skips them is refused here.
TEST(FormTest, RefusesWhatTheApiServerWould) {
  const std::string kCpuHelp =
      "cpu must be a Kubernetes quantity (a number with an optional suffix m, k, M, G, T, P, E, "
      "Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>, no spaces; e.g. 500m or 2), got ";
  const std::string kMemHelp =
      "memory must be a Kubernetes quantity (a number with an optional suffix m, k, M, G, T, P, "
      "E, Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>, no spaces; e.g. 2Gi or 1.5G), got ";
  const std::string kName =
      "name must start with a lower-case letter and hold only lower-case letters, digits and "
      "'-', not end with '-', at most 52 characters (Kubeflow names the notebook's Service and "
      "StatefulSet after it), got ";
  struct Case {
    std::string name, ns, cpu, memory, message;
  };
  const std::vector<Case> cases = {
      {"nb", "a", "lots", "2Gi", kCpuHelp + "\"lots\""},
      {"nb", "a", "1", "2 GB", kMemHelp + "\"2 GB\""},
      {"nb", "a", "1", "2GB", kMemHelp + "\"2GB\""},
      {"nb", "a", "1", "2gi", kMemHelp + "\"2gi\""},
      {"nb", "a", " 1", "2Gi", kCpuHelp + "\" 1\""},
      {"nb", "a", "1.2.3", "2Gi", kCpuHelp + "\"1.2.3\""},
      {"nb", "a", "1e", "2Gi", kCpuHelp + "\"1e\""},
      {"nb", "a", "1e3m", "2Gi", kCpuHelp + "\"1e3m\""},
      {"nb", "a", "-1", "2Gi", "cpu must not be negative, got \"-1\""},
      {"nb", "a", "1", "-2Gi", "memory must not be negative, got \"-2Gi\""},
      {"9nb", "a", "1", "2Gi", kName + "\"9nb\""},
      {"nb-", "a", "1", "2Gi", kName + "\"nb-\""},
      {"nb.x", "a", "1", "2Gi", kName + "\"nb.x\""},
      {std::string(53, 'n'), "a", "1", "2Gi", kName + "\"" + std::string(53, 'n') + "\""},
      {"nb", "Team", "1", "2Gi",
       "namespace must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got "
       "\"Team\""},
      // Every error at once, in field order.
      {"Bad_Name", "team a", "lots", "2 GB",
       kName +
           "\"Bad_Name\"; namespace must be a DNS-1123 label (lower-case letters, digits and "
           "'-', at most 63), got \"team a\"; " +
           kCpuHelp + "\"lots\"; " + kMemHelp + "\"2 GB\""},
  };
  for (const auto& c : cases) {
    json body = {{"name", c.name},
                 {"namespace", c.ns},
                 {"image", "i"},
                 {"cpu", c.cpu},
                 {"memory", c.memory}};
    auto form = DecodeNotebookForm(body.dump());
    ASSERT_FALSE(form.ok()) << body.dump();
    EXPECT_EQ(form.status().code(), StatusCode::kInvalidArgument) << body.dump();
    EXPECT_EQ(form.status().message(), c.message) << body.dump();
  }
  // What the API server accepts is accepted (k8s.io/apimachinery resource.Quantity grammar).
  for (const auto& [cpu, memory] :
       std::vector<std::pair<std::string, std::string>>{{"500m", "2Gi"},
                                                        {"2", "1.5G"},
                                                        {"0.5", "512Mi"},
                                                        {"1e3", "1e9"},
                                                        {"+1", "2E"},
                                                        {".5", "1.Gi"},
                                                        {"", ""}}) {
    json body = {{"name", std::string(52, 'n')},
                 {"namespace", std::string(63, 'a')},
                 {"image", "i"},
                 {"cpu", cpu},
                 {"memory", memory}};
    auto form = DecodeNotebookForm(body.dump());
    EXPECT_TRUE(form.ok()) << body.dump() << ": " << form.status().message();
  }
}

// Issue 15: a depth bomb is refused while parsing (it used to reach Shown()'s recursive dump).
TEST(FormTest, DepthBombIsRefused) {
  for (const std::string& body :
       {std::string(100000, '[') + std::string(100000, ']'),
        "{\"name\":" + std::string(100000, '[') + std::string(100000, ']') + "}"}) {
    auto form = DecodeNotebookForm(body);
    ASSERT_FALSE(form.ok());
    EXPECT_EQ(form.status().message(), "request body nests objects/arrays deeper than 64 levels");
  }
}

}  // namespace
}  // namespace fracgpu::ui
