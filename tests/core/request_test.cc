#include "core/request.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace fracgpu::core {
namespace {

using nlohmann::json;

// A pod with one app container "train" whose resources are `resources`.
json PodWith(json resources, json annotations = nullptr) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "default"}}},
              {"spec", {{"containers", json::array({{{"name", "train"}, {"image", "cuda"}}})}}}};
  if (!resources.is_null()) pod["spec"]["containers"][0]["resources"] = resources;
  if (!annotations.is_null()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

json Limits(json limits) { return {{"limits", limits}}; }

// The container fields a case checks; everything else keeps its default.
struct Want {
  int32_t num_gpus;
  int64_t mem_mib;
  int32_t mem_percent;
  int32_t cores_percent;
  int32_t priority = 1;
};

struct GoodCase {
  std::string name;
  json resources;
  Want want;
  std::vector<std::string> warnings = {};
};

// docs/design/CONTRACT.md §1 "Defaults"; expected values derived by hand from the rules.
TEST(ParsePodRequestTest, DefaultsTable) {
  const std::vector<GoodCase> cases = {
      {"no resources", nullptr, {0, 0, 100, 0}},
      {"unrelated resources", Limits({{"cpu", "1"}, {"memory", "1Gi"}}), {0, 0, 100, 0}},
      {"bare gpu 1 = one whole exclusive card",
       Limits({{"nvidia.com/gpu", "1"}}),
       {1, 0, 100, 100}},
      {"bare gpu 2 = two whole cards", Limits({{"nvidia.com/gpu", "2"}}), {2, 0, 100, 100}},
      {"gpumem alone → gpu 1, cores 0", Limits({{"nvidia.com/gpumem", "3000"}}), {1, 3000, 100, 0}},
      {"gpumem canonical 3k", Limits({{"nvidia.com/gpumem", "3k"}}), {1, 3000, 100, 0}},
      {"gpumem canonical 1M", Limits({{"nvidia.com/gpumem", "1M"}}), {1, 1000000, 100, 0}},
      {"percentage 50 alone → partial, cores 0",
       Limits({{"nvidia.com/gpumem-percentage", "50"}}),
       {1, 0, 50, 0}},
      {"percentage 100 alone → whole card, cores 100",
       Limits({{"nvidia.com/gpumem-percentage", "100"}}),
       {1, 0, 100, 100}},
      // HAMi v2.10.0: percentage 0 is "not set" (whole memory) and adds no exclusive cores.
      {"percentage 0 → whole memory, time-shared (HAMi)",
       Limits({{"nvidia.com/gpumem-percentage", "0"}}),
       {1, 0, 100, 0}},
      {"percentage 0 with gpu 1 → whole memory, cores 0",
       Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", 0}}),
       {1, 0, 100, 0}},
      {"percentage 0 with gpumem → gpumem",
       Limits({{"nvidia.com/gpumem", "2000"}, {"nvidia.com/gpumem-percentage", "0"}}),
       {1, 2000, 100, 0},
       {"container \"train\": both nvidia.com/gpumem and nvidia.com/gpumem-percentage are set; "
        "nvidia.com/gpumem (2000 MiB) wins"}},
      {"cores alone → gpu 1, whole memory",
       Limits({{"nvidia.com/gpucores", "30"}}),
       {1, 0, 100, 30}},
      {"explicit cores 0 on a whole card is kept",
       Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "0"}}),
       {1, 0, 100, 0}},
      {"explicit cores 100 on a slice is kept",
       Limits({{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "100"}}),
       {1, 3000, 100, 100}},
      {"full slice spec",
       Limits({{"nvidia.com/gpu", "2"},
               {"nvidia.com/gpumem", "5000"},
               {"nvidia.com/gpucores", "30"},
               {"nvidia.com/priority", "0"}}),
       {2, 5000, 100, 30, 0}},
      {"gpu 0 = no GPU, no defaults", Limits({{"nvidia.com/gpu", "0"}}), {0, 0, 100, 0}},
      {"requests only (fallback)", {{"requests", {{"nvidia.com/gpu", "1"}}}}, {1, 0, 100, 100}},
      {"limits win over requests",
       {{"limits", {{"nvidia.com/gpu", "2"}}}, {"requests", {{"nvidia.com/gpu", "1"}}}},
       {2, 0, 100, 100}},
      {"per resource fallback",
       {{"limits", {{"nvidia.com/gpumem", "4000"}}}, {"requests", {{"nvidia.com/gpucores", "20"}}}},
       {1, 4000, 100, 20}},
      {"null limits value falls back",
       {{"limits", {{"nvidia.com/gpu", nullptr}}}, {"requests", {{"nvidia.com/gpu", "3"}}}},
       {3, 0, 100, 100}},
      {"JSON numbers",
       Limits({{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}}),
       {1, 3000, 100, 0}},
      {"whole JSON float", Limits({{"nvidia.com/gpu", 2.0}}), {2, 0, 100, 100}},
      {"exponent form", Limits({{"nvidia.com/gpumem", "1e3"}}), {1, 1000, 100, 0}},
      {"gpumem wins over percentage, with a warning",
       Limits({{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpumem-percentage", "50"}}),
       {1, 3000, 100, 0},
       {"container \"train\": both nvidia.com/gpumem and nvidia.com/gpumem-percentage are set; "
        "nvidia.com/gpumem (3000 MiB) wins"}},
      {"priority alone warns and uses no GPU",
       Limits({{"nvidia.com/priority", "0"}}),
       {0, 0, 100, 0, 0},
       {"container \"train\": nvidia.com/priority has no effect without a GPU (nvidia.com/gpu >= "
        "1, "
        "or nvidia.com/gpumem, nvidia.com/gpumem-percentage or nvidia.com/gpucores)"}},
      {"priority with gpu 0 warns",
       Limits({{"nvidia.com/gpu", "0"}, {"nvidia.com/priority", "1"}}),
       {0, 0, 100, 0, 1},
       {"container \"train\": nvidia.com/priority has no effect without a GPU (nvidia.com/gpu >= "
        "1, "
        "or nvidia.com/gpumem, nvidia.com/gpumem-percentage or nvidia.com/gpucores)"}},
  };
  for (const GoodCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<PodRequest> r = ParsePodRequest(PodWith(c.resources));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->containers.size(), 1u);
    const ContainerRequest& got = r->containers[0];
    EXPECT_EQ(got.name, "train");
    EXPECT_FALSE(got.init);
    EXPECT_EQ(got.num_gpus, c.want.num_gpus);
    EXPECT_EQ(got.mem_mib, c.want.mem_mib);
    EXPECT_EQ(got.mem_percent, c.want.mem_percent);
    EXPECT_EQ(got.cores_percent, c.want.cores_percent);
    EXPECT_EQ(got.priority, c.want.priority);
    EXPECT_EQ(got.disable_control, std::nullopt);
    EXPECT_EQ(r->UsesGpu(), c.want.num_gpus > 0);
    EXPECT_EQ(r->warnings, c.warnings);
  }
}

struct BadCase {
  std::string name;
  json pod;
  std::string message;
};

void ExpectBad(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<PodRequest> r = ParsePodRequest(c.pod);
    ASSERT_FALSE(r.ok()) << "accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

// docs/design/CONTRACT.md §1 "(stricter)": malformed and out-of-range values are denied, naming the
// container, the resource and the value.
TEST(ParsePodRequestTest, BadResourceValuesTable) {
  auto lim = [](const char* k, json v) { return PodWith(Limits({{k, v}})); };
  const std::string c = "container \"train\": ";
  ExpectBad({
      {"cores 150", lim("nvidia.com/gpucores", "150"),
       c + "nvidia.com/gpucores must be an integer 0..100, got \"150\""},
      {"cores -1", lim("nvidia.com/gpucores", "-1"),
       c + "nvidia.com/gpucores must be an integer 0..100, got \"-1\""},
      {"cores 3k", lim("nvidia.com/gpucores", "3k"),
       c + "nvidia.com/gpucores must be an integer 0..100, got \"3k\""},
      {"cores fraction", lim("nvidia.com/gpucores", "1.5"),
       c + "nvidia.com/gpucores is a whole percentage of the card's SMs, got \"1.5\""},
      {"cores JSON 150", lim("nvidia.com/gpucores", 150),
       c + "nvidia.com/gpucores must be an integer 0..100, got 150"},
      {"percentage -1", lim("nvidia.com/gpumem-percentage", "-1"),
       c + "nvidia.com/gpumem-percentage must be an integer 0..100, got \"-1\""},
      {"percentage 101", lim("nvidia.com/gpumem-percentage", "101"),
       c + "nvidia.com/gpumem-percentage must be an integer 0..100, got \"101\""},
      {"percentage 500m", lim("nvidia.com/gpumem-percentage", "500m"),
       c + "nvidia.com/gpumem-percentage is a whole percentage of the card's memory, got \"500m\""},
      {"gpumem -1", lim("nvidia.com/gpumem", "-1"),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"-1\""},
      {"gpumem 0", lim("nvidia.com/gpumem", "0"),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"0\""},
      {"gpumem 3Gi suggests MiB", lim("nvidia.com/gpumem", "3Gi"),
       c + "nvidia.com/gpumem is MiB as a whole number, got \"3Gi\" (did you mean 3072?)"},
      {"gpumem 512Mi suggests MiB", lim("nvidia.com/gpumem", "512Mi"),
       c + "nvidia.com/gpumem is MiB as a whole number, got \"512Mi\" (did you mean 512?)"},
      {"gpumem 1500Ki is not whole MiB", lim("nvidia.com/gpumem", "1500Ki"),
       c + "nvidia.com/gpumem is MiB as a whole number, got \"1500Ki\""},
      {"gpumem 0Gi has no suggestion", lim("nvidia.com/gpumem", "0Gi"),
       c + "nvidia.com/gpumem is MiB as a whole number, got \"0Gi\""},
      {"gpumem 500m", lim("nvidia.com/gpumem", "500m"),
       c + "nvidia.com/gpumem is MiB as a whole number, got \"500m\""},
      {"gpumem above int32", lim("nvidia.com/gpumem", "3G"),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"3G\""},
      {"gpumem beyond int64", lim("nvidia.com/gpumem", "1e400"),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"1e400\""},
      {"gpumem trailing space", lim("nvidia.com/gpumem", "3000 "),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"3000 \""},
      {"gpumem JSON fraction", lim("nvidia.com/gpumem", 0.5),
       c + "nvidia.com/gpumem is MiB as a whole number, got 0.5"},
      {"gpumem huge JSON unsigned", lim("nvidia.com/gpumem", 18446744073709551615ULL),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got 18446744073709551615"},
      {"gpumem huge JSON float", lim("nvidia.com/gpumem", 1e300),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got 1e+300"},
      {"gpu 0.5 string", lim("nvidia.com/gpu", "0.5"),
       c + "nvidia.com/gpu is a whole number of GPUs, got \"0.5\""},
      {"gpu 0.5 JSON", lim("nvidia.com/gpu", 0.5),
       c + "nvidia.com/gpu is a whole number of GPUs, got 0.5"},
      {"gpu 500m", lim("nvidia.com/gpu", "500m"),
       c + "nvidia.com/gpu is a whole number of GPUs, got \"500m\""},
      {"gpu 1Ki", lim("nvidia.com/gpu", "1Ki"),
       c + "nvidia.com/gpu is a whole number of GPUs, got \"1Ki\""},
      {"gpu -1", lim("nvidia.com/gpu", "-1"),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got \"-1\""},
      {"gpu above int32", lim("nvidia.com/gpu", "3G"),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got \"3G\""},
      {"gpu non-numeric", lim("nvidia.com/gpu", "abc"),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got \"abc\""},
      {"gpu empty string", lim("nvidia.com/gpu", ""),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got \"\""},
      {"gpu boolean", lim("nvidia.com/gpu", true),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got true"},
      {"gpu object", lim("nvidia.com/gpu", json::object()),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got an object"},
      {"gpu array", lim("nvidia.com/gpu", json::array({1})),
       c + "nvidia.com/gpu must be an integer 0..2147483647, got an array"},
      {"priority 2", lim("nvidia.com/priority", "2"),
       c + "nvidia.com/priority must be 0 (high) or 1 (low), got \"2\""},
      {"priority -1", lim("nvidia.com/priority", -1),
       c + "nvidia.com/priority must be 0 (high) or 1 (low), got -1"},
      {"priority fraction", lim("nvidia.com/priority", "500m"),
       c + "nvidia.com/priority must be 0 (high) or 1 (low), got \"500m\""},
      {"long value is cut", lim("nvidia.com/gpumem", "1" + std::string(99, 'x')),
       c + "nvidia.com/gpumem must be an integer 1..2147483647 (MiB), got \"1" +
           std::string(63, 'x') + "…\""},
      {"bad value in requests", PodWith({{"requests", {{"nvidia.com/gpucores", "150"}}}}),
       c + "nvidia.com/gpucores must be an integer 0..100, got \"150\""},
  });
}

TEST(ParsePodRequestTest, ZeroGpuWithSliceIsContradictory) {
  const std::string c = "container \"train\": ";
  ExpectBad({
      {"gpu 0 + gpumem", PodWith(Limits({{"nvidia.com/gpu", "0"}, {"nvidia.com/gpumem", "3000"}})),
       c + "nvidia.com/gpu is 0 (no GPU) but nvidia.com/gpumem is \"3000\"; remove one of them"},
      {"gpu 0 + percentage",
       PodWith(Limits({{"nvidia.com/gpu", "0"}, {"nvidia.com/gpumem-percentage", "50"}})),
       c + "nvidia.com/gpu is 0 (no GPU) but nvidia.com/gpumem-percentage is \"50\"; remove one of "
           "them"},
      {"gpu 0 + cores 0", PodWith(Limits({{"nvidia.com/gpu", 0}, {"nvidia.com/gpucores", 0}})),
       c + "nvidia.com/gpu is 0 (no GPU) but nvidia.com/gpucores is 0; remove one of them"},
      {"gpu 0 in requests + cores in limits",
       PodWith(
           {{"limits", {{"nvidia.com/gpucores", "10"}}}, {"requests", {{"nvidia.com/gpu", "0"}}}}),
       c + "nvidia.com/gpu is 0 (no GPU) but nvidia.com/gpucores is \"10\"; remove one of them"},
  });
}

// Wrong JSON types anywhere on the path are errors naming the path; never a throw.
TEST(ParsePodRequestTest, BadShapesTable) {
  json pod = PodWith(nullptr);
  auto with = [&pod](const json::json_pointer& ptr, json v) {
    json p = pod;
    p[ptr] = std::move(v);
    return p;
  };
  const std::string c = "container \"train\": ";
  ExpectBad({
      {"pod array", json::array(), "pod must be a JSON object, got an array"},
      {"pod string", "pod", "pod must be a JSON object, got \"pod\""},
      {"pod null", nullptr, "pod must be a JSON object, got null"},
      {"metadata array", with("/metadata"_json_pointer, json::array()),
       "metadata must be an object, got an array"},
      {"annotations string", with("/metadata/annotations"_json_pointer, "x"),
       "metadata.annotations must be an object, got \"x\""},
      {"spec string", with("/spec"_json_pointer, "x"), "spec must be an object, got \"x\""},
      {"containers object", with("/spec/containers"_json_pointer, json::object()),
       "spec.containers must be an array, got an object"},
      {"initContainers number", with("/spec/initContainers"_json_pointer, 3),
       "spec.initContainers must be an array, got 3"},
      {"init container not object", with("/spec/initContainers"_json_pointer, json::array({1})),
       "spec.initContainers[0] must be an object, got 1"},
      {"container name number", with("/spec/containers/0/name"_json_pointer, 5),
       "spec.containers[0].name must be a string, got 5"},
      {"resources array", with("/spec/containers/0/resources"_json_pointer, json::array()),
       c + "resources must be an object, got an array"},
      {"limits string", with("/spec/containers/0/resources"_json_pointer, {{"limits", "x"}}),
       c + "resources.limits must be an object, got \"x\""},
      {"requests number", with("/spec/containers/0/resources"_json_pointer, {{"requests", 1}}),
       c + "resources.requests must be an object, got 1"},
      {"env object", with("/spec/containers/0/env"_json_pointer, json::object()),
       c + "env must be an array, got an object"},
      {"env entry string", with("/spec/containers/0/env"_json_pointer, json::array({"x"})),
       c + "env[0] must be an object, got \"x\""},
      {"env entry without name",
       with("/spec/containers/0/env"_json_pointer, json::array({{{"value", "1"}}})),
       c + "env[0].name must be a string, got nothing"},
      {"env name number", with("/spec/containers/0/env"_json_pointer, json::array({{{"name", 1}}})),
       c + "env[0].name must be a string, got 1"},
      {"unnamed container",
       with("/spec/containers/0"_json_pointer, {{"resources", Limits({{"nvidia.com/gpu", "x"}})}}),
       "spec.containers[0]: nvidia.com/gpu must be an integer 0..2147483647, got \"x\""},
  });
}

TEST(ParsePodRequestTest, AbsentAndNullMapsAreEmpty) {
  for (const json& pod :
       {json::object(), json{{"metadata", nullptr}, {"spec", nullptr}},
        json{{"spec", {{"containers", nullptr}, {"initContainers", nullptr}}}},
        json{{"metadata", {{"annotations", nullptr}}}, {"spec", json::object()}},
        json{{"spec", {{"containers", json::array({{{"name", "a"}, {"resources", nullptr}}})}}}}}) {
    SCOPED_TRACE(pod.dump());
    Result<PodRequest> r = ParsePodRequest(pod);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->UsesGpu());
    EXPECT_TRUE(r->warnings.empty());
  }
}

TEST(ParsePodRequestTest, InitContainersFirstEphemeralNever) {
  json pod = {
      {"spec",
       {{"containers",
         json::array({{{"name", "app1"}, {"resources", Limits({{"nvidia.com/gpumem", "5000"}})}},
                      {{"name", "app2"}}})},
        {"initContainers", json::array({{{"name", "init1"}},
                                        {{"name", "sidecar"},
                                         {"restartPolicy", "Always"},
                                         {"resources", Limits({{"nvidia.com/gpucores", "20"}})}}})},
        // Ephemeral containers never get GPUs and are not read at all, even when malformed.
        {"ephemeralContainers",
         json::array({{{"name", "debug"}, {"resources", Limits({{"nvidia.com/gpu", "abc"}})}}})}}}};
  Result<PodRequest> r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->containers.size(), 4u);
  EXPECT_EQ(r->containers[0].name, "init1");
  EXPECT_TRUE(r->containers[0].init);
  EXPECT_FALSE(r->containers[0].UsesGpu());
  EXPECT_EQ(r->containers[1].name, "sidecar");
  EXPECT_TRUE(r->containers[1].init);
  EXPECT_EQ(r->containers[1].num_gpus, 1);
  EXPECT_EQ(r->containers[1].cores_percent, 20);
  EXPECT_EQ(r->containers[2].name, "app1");
  EXPECT_FALSE(r->containers[2].init);
  EXPECT_EQ(r->containers[2].mem_mib, 5000);
  EXPECT_EQ(r->containers[3].name, "app2");
  EXPECT_FALSE(r->containers[3].UsesGpu());
  EXPECT_TRUE(r->UsesGpu());
}

TEST(ParsePodRequestTest, ErrorNamesTheOffendingContainer) {
  json pod = {{"spec",
               {{"initContainers",
                 json::array({{{"name", "setup"},
                               {"resources", Limits({{"nvidia.com/gpucores", "101"}})}}})},
                {"containers", json::array({{{"name", "train"}}})}}}};
  Result<PodRequest> r = ParsePodRequest(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "container \"setup\": nvidia.com/gpucores must be an integer 0..100, got \"101\"");

  json pod2 = {
      {"spec",
       {{"containers",
         json::array({{{"name", "ok"}},
                      {{"name", "bad"}, {"resources", Limits({{"nvidia.com/gpu", "-2"}})}}})}}}};
  r = ParsePodRequest(pod2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "container \"bad\": nvidia.com/gpu must be an integer 0..2147483647, got \"-2\"");
}

TEST(ParsePodRequestTest, Annotations) {
  json pod = PodWith(Limits({{"nvidia.com/gpu", "1"}}),
                     {{"nvidia.com/use-gputype", " A100, ,H100 ,-"},
                      {"nvidia.com/nouse-gputype", "A100-40GB"},
                      {"nvidia.com/use-gpuuuid", "GPU-a,GPU-b"},
                      {"nvidia.com/nouse-gpuuuid", " GPU-c "},
                      {"nvidia.com/numa-bind", "true"},
                      {"hami.io/node-scheduler-policy", "spread"},
                      {"hami.io/gpu-scheduler-policy", "topology-aware"},
                      {"unrelated", "x"}});
  Result<PodRequest> r = ParsePodRequest(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->use_types, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(r->nouse_types, (std::vector<std::string>{"A100-40GB"}));
  EXPECT_EQ(r->use_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(r->nouse_uuids, (std::vector<std::string>{"GPU-c"}));
  EXPECT_TRUE(r->numa_bind);
  EXPECT_EQ(r->node_policy, NodePolicy::kSpread);
  EXPECT_EQ(r->gpu_policy, GpuPolicy::kTopologyAware);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_TRUE(GpuTypeAllowed(*r, "NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(GpuTypeAllowed(*r, "NVIDIA A100-PCIE-40GB"));
  EXPECT_FALSE(GpuTypeAllowed(*r, "NVIDIA A10"));
  EXPECT_TRUE(GpuUuidAllowed(*r, "GPU-b"));
  EXPECT_FALSE(GpuUuidAllowed(*r, "GPU-c"));

  // Defaults: no lists, no NUMA binding, policies unset (the cluster default applies).
  Result<PodRequest> plain =
      ParsePodRequest(PodWith(nullptr, {{"hami.io/gpu-scheduler-policy", ""}}));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->use_types.empty());
  EXPECT_FALSE(plain->numa_bind);
  EXPECT_EQ(plain->node_policy, std::nullopt);
  EXPECT_EQ(plain->gpu_policy, std::nullopt);
}

TEST(ParsePodRequestTest, NumaBindValues) {
  // HAMi reads it with Go's strconv.ParseBool; the same spellings are accepted.
  for (const char* t : {"true", "True", "TRUE", "t", "T", "1"}) {
    Result<PodRequest> r = ParsePodRequest(PodWith(nullptr, {{"nvidia.com/numa-bind", t}}));
    ASSERT_TRUE(r.ok()) << t;
    EXPECT_TRUE(r->numa_bind) << t;
  }
  for (const char* f : {"false", "False", "FALSE", "f", "F", "0", ""}) {
    Result<PodRequest> r = ParsePodRequest(PodWith(nullptr, {{"nvidia.com/numa-bind", f}}));
    ASSERT_TRUE(r.ok()) << f;
    EXPECT_FALSE(r->numa_bind) << f;
  }
}

// HAMi v2.10.0's gpu-scheduler-policy values (pkg/scheduler/policy/gpu_policy.go).
TEST(ParsePodRequestTest, HamiGpuPolicyChains) {
  using K = GpuSortKey;
  struct Case {
    std::string value;
    GpuPolicySpec want;
  };
  const std::vector<Case> cases = {
      {"mutex", {GpuPolicy::kSpread, false, {}, true}},
      {"numa", {GpuPolicy::kSpread, true, {K::kNuma}, false}},
      {"binpack,numa", {GpuPolicy::kBinpack, true, {K::kBinpack, K::kNuma}, false}},
      {"spread,numa,mutex", {GpuPolicy::kSpread, true, {K::kSpread, K::kNuma}, true}},
      {"numa, binpack", {GpuPolicy::kBinpack, true, {K::kNuma, K::kBinpack}, false}},
      {"binpack,binpack,numa", {GpuPolicy::kBinpack, true, {K::kBinpack, K::kNuma}, false}},
      {"mutex,topology-aware", {GpuPolicy::kTopologyAware, true, {}, true}},
      {"binpack,", {GpuPolicy::kBinpack, true, {K::kBinpack}, false}},
      {"topology-aware", {GpuPolicy::kTopologyAware, false, {}, false}},
      {"fragmentation-aware", {GpuPolicy::kFragmentationAware, false, {}, false}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    Result<PodRequest> r = ParsePodRequest(
        PodWith(Limits({{"nvidia.com/gpu", "1"}}), {{"hami.io/gpu-scheduler-policy", c.value}}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->gpu_policy_spec.has_value());
    EXPECT_EQ(*r->gpu_policy_spec, c.want);
    EXPECT_EQ(r->gpu_policy, c.want.policy);
  }
}

TEST(ParsePodRequestTest, UnparsableBooleansWarnLikeHami) {
  // HAMi treats a value strconv.ParseBool rejects as false; fracgpu does the same, loudly.
  Result<PodRequest> r = ParsePodRequest(PodWith(nullptr, {{"nvidia.com/numa-bind", "yes"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->numa_bind);
  EXPECT_EQ(r->warnings,
            (std::vector<std::string>{
                "annotation nvidia.com/numa-bind \"yes\" is not a boolean (1, t, true, 0, "
                "f, false, …); it counts as false, as in HAMi"}));
}

TEST(ParsePodRequestTest, VgpuModeAndWeights) {
  Result<PodRequest> r = ParsePodRequest(
      PodWith(nullptr, {{"nvidia.com/vgpu-mode", "hami-core"},
                        {"hami.io/device-scoring-weights", " slot=1, core=0 ,memory=3"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vgpu_mode, "hami-core");
  EXPECT_EQ(r->scoring_weights, (ScoringWeights{1, 0, 3}));
  EXPECT_TRUE(r->warnings.empty());
  Result<PodRequest> mig = ParsePodRequest(PodWith(nullptr, {{"nvidia.com/vgpu-mode", "mig"}}));
  ASSERT_TRUE(mig.ok());
  EXPECT_EQ(mig->vgpu_mode, "mig");
  EXPECT_EQ(mig->warnings,
            (std::vector<std::string>{
                "annotation nvidia.com/vgpu-mode \"mig\": fracgpu GPUs run in hami-core "
                "mode only, so no GPU matches and the pod will stay Pending"}));
}

TEST(ParsePodRequestTest, BadAnnotationsTable) {
  auto ann = [](const char* k, json v) { return PodWith(nullptr, {{k, v}}); };
  ExpectBad({
      {"numa-bind bool", ann("nvidia.com/numa-bind", true),
       "annotation nvidia.com/numa-bind must be a string, got true"},
      {"node policy unknown", ann("hami.io/node-scheduler-policy", "foo"),
       "annotation hami.io/node-scheduler-policy: unknown node policy \"foo\" (want binpack or "
       "spread)"},
      {"node policy topology", ann("hami.io/node-scheduler-policy", "topology-aware"),
       "annotation hami.io/node-scheduler-policy: unknown node policy \"topology-aware\" (want "
       "binpack or spread)"},
      {"gpu policy unknown in a chain", ann("hami.io/gpu-scheduler-policy", "binpack,nuna"),
       "annotation hami.io/gpu-scheduler-policy: unknown GPU policy \"nuna\" in \"binpack,nuna\" "
       "(a list "
       "takes binpack, spread, numa, mutex and topology-aware)"},
      {"gpu policy fragmentation-aware in a chain",
       ann("hami.io/gpu-scheduler-policy", "fragmentation-aware,numa"),
       "annotation hami.io/gpu-scheduler-policy: GPU policy \"fragmentation-aware,numa\": "
       "fragmentation-aware is a policy of its own and cannot be part of a comma list"},
      {"gpu policy case", ann("hami.io/gpu-scheduler-policy", "Binpack"),
       "annotation hami.io/gpu-scheduler-policy: unknown GPU policy \"Binpack\" (want binpack, "
       "spread, "
       "topology-aware, fragmentation-aware, mutex, numa, or a comma list of binpack, spread, "
       "numa, "
       "mutex and topology-aware)"},
      // HAMi v2.10.0 ParseDeviceScoringWeights fails Filter on each of these.
      {"weights two entries", ann("hami.io/device-scoring-weights", "slot=1,core=1"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=1,core=1\" (three entries are needed)"},
      {"weights negative", ann("hami.io/device-scoring-weights", "slot=1,core=-1,memory=3"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=1,core=-1,memory=3\" (\"core\" weight must not be negative)"},
      {"weights all zero", ann("hami.io/device-scoring-weights", "slot=0,core=0,memory=0"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=0,core=0,memory=0\" (at least one weight must be positive)"},
      {"weights duplicate", ann("hami.io/device-scoring-weights", "slot=1,slot=1,memory=3"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=1,slot=1,memory=3\" (duplicate \"slot\")"},
      {"weights unknown key", ann("hami.io/device-scoring-weights", "slot=1,core=1,mem=3"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=1,core=1,mem=3\" (unknown weight \"mem\")"},
      {"weights not a number", ann("hami.io/device-scoring-weights", "slot=1,core=x,memory=3"),
       "annotation hami.io/device-scoring-weights: must be slot=<int>,core=<int>,memory=<int>, got "
       "\"slot=1,core=x,memory=3\" (\"core\" weight must be an integer)"},
      {"use-gputype number", ann("nvidia.com/use-gputype", 5),
       "annotation nvidia.com/use-gputype must be a string, got 5"},
      {"nouse-gpuuuid array", ann("nvidia.com/nouse-gpuuuid", json::array()),
       "annotation nvidia.com/nouse-gpuuuid must be a string, got an array"},
  });
}

TEST(ParsePodRequestTest, SliceKeysAsAnnotationsWarn) {
  Result<PodRequest> r =
      ParsePodRequest(PodWith(nullptr, {{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->UsesGpu());
  EXPECT_EQ(
      r->warnings,
      (std::vector<std::string>{
          "annotation nvidia.com/gpu has no effect: GPU resources belong in each container's "
          "resources.limits",
          "annotation nvidia.com/gpumem has no effect: GPU resources belong in each container's "
          "resources.limits"}));
}

json PodWithEnv(json resources, json env) {
  json pod = PodWith(std::move(resources));
  pod["spec"]["containers"][0]["env"] = std::move(env);
  return pod;
}

TEST(ParsePodRequestTest, DisableControlLiteralOnly) {
  const json gpu = Limits({{"nvidia.com/gpu", "1"}});
  struct Case {
    std::string name;
    json resources;
    json env;
    std::optional<bool> want;
  };
  const json from_secret = {{"name", "CUDA_DISABLE_CONTROL"},
                            {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "k"}}}}}};
  const std::vector<Case> cases = {
      {"absent", gpu, json::array({{{"name", "OTHER"}, {"value", "x"}}}), std::nullopt},
      {"true", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}}), true},
      {"TRUE", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "TRUE"}}}), true},
      {"False", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "False"}}}), false},
      // Go strconv.ParseBool forms, as HAMi v2.10.0's device plugin reads the value.
      {"1", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "1"}}}), true},
      {"t", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "t"}}}), true},
      {"T", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "T"}}}), true},
      {"0", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "0"}}}), false},
      {"f", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "f"}}}), false},
      {"F", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "F"}}}), false},
      // Not a boolean: isolation stays on (HAMi ignores it too), with a warning.
      {"yes", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "yes"}}}), false},
      {"empty", gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", ""}}}), false},
      {"valueFrom ignored", gpu, json::array({from_secret}), std::nullopt},
      {"last entry wins", gpu,
       json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}},
                    {{"name", "CUDA_DISABLE_CONTROL"}, {"value", "false"}}}),
       false},
      {"later valueFrom hides a literal", gpu,
       json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}, from_secret}),
       std::nullopt},
      {"no GPU: anything goes", nullptr,
       json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "yes"}}}), std::nullopt},
      {"no GPU: valid value kept", nullptr,
       json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}}), true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<PodRequest> r = ParsePodRequest(PodWithEnv(c.resources, c.env));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->containers[0].disable_control, c.want);
  }
  Result<PodRequest> w = ParsePodRequest(
      PodWithEnv(gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "yes"}}})));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->warnings,
            (std::vector<std::string>{
                "container \"train\": env CUDA_DISABLE_CONTROL \"yes\" is not a boolean "
                "(1, t, true, 0, f, false, …); isolation stays on"}));
  const std::string p = "container \"train\": ";
  ExpectBad({
      {"number", PodWithEnv(gpu, json::array({{{"name", "CUDA_DISABLE_CONTROL"}, {"value", 1}}})),
       p + "env[0]: CUDA_DISABLE_CONTROL value must be a string, got 1"},
  });
}

TEST(ParsePodRequestTest, CustomResourceNames) {
  ResourceNames names;
  names.gpu = "example.com/vgpu";
  names.gpumem = "example.com/vmem";
  names.gpucores = "example.com/vcores";
  Result<PodRequest> r = ParsePodRequest(
      PodWith(Limits({{"example.com/vmem", "2000"}, {"nvidia.com/gpu", "4"}})), names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].num_gpus, 1);  // nvidia.com/gpu is not a resource of this cluster
  EXPECT_EQ(r->containers[0].mem_mib, 2000);
  Result<PodRequest> bad = ParsePodRequest(PodWith(Limits({{"example.com/vcores", "101"}})), names);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "container \"train\": example.com/vcores must be an integer 0..100, got \"101\"");
}

// The device config's request defaults, applied as HAMi v2.10 applies them
// (pkg/device/nvidia/device.go GenerateResourceRequests, mutateContainerResource,
// defaultExclusiveCoreIfNeeded); expected values derived by hand from those rules.
TEST(ParsePodRequestTest, DeviceConfigRequestDefaultsTable) {
  ResourceNames names;
  names.defaults.default_memory_mib = 4096;
  names.defaults.default_cores = 25;
  names.defaults.default_gpu_num = 2;
  names.defaults.memory_factor = 1024;
  const std::vector<GoodCase> cases = {
      // defaultMemory when neither memory key is given; a bare count is still exclusive
      // (HAMi decides cores 100 on the keys given, before the memory default).
      {"bare gpu: defaultMemory, cores 100",
       Limits({{"nvidia.com/gpu", "1"}}),
       {1, 4096, 100, 100}},
      {"cores only: defaultGPUNum, defaultMemory",
       Limits({{"nvidia.com/gpucores", "30"}}),
       {2, 4096, 100, 30}},
      // memoryFactor: gpumem is in units of 1024 MiB; defaultCores for a partial slice.
      {"gpumem 3 × 1024",
       Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3"}}),
       {1, 3072, 100, 25}},
      {"percentage 50: no defaultMemory, defaultCores",
       Limits({{"nvidia.com/gpumem-percentage", "50"}}),
       {2, 0, 50, 25}},
      {"percentage 100: whole memory, exclusive",
       Limits({{"nvidia.com/gpumem-percentage", "100"}}),
       {2, 0, 100, 100}},
      {"percentage 0 (not set): whole memory, defaultCores",
       Limits({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "0"}}),
       {1, 0, 100, 25}},
      {"no GPU stays no GPU", Limits({{"cpu", "1"}}), {0, 0, 100, 0}},
  };
  for (const GoodCase& c : cases) {
    SCOPED_TRACE(c.name);
    Result<PodRequest> r = ParsePodRequest(PodWith(c.resources), names);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const ContainerRequest& got = r->containers.at(0);
    EXPECT_EQ(got.num_gpus, c.want.num_gpus);
    EXPECT_EQ(got.mem_mib, c.want.mem_mib);
    EXPECT_EQ(got.mem_percent, c.want.mem_percent);
    EXPECT_EQ(got.cores_percent, c.want.cores_percent);
  }
  // gpumem × memoryFactor past int32 MiB is refused (HAMi refuses it too), naming the factor.
  Result<PodRequest> big =
      ParsePodRequest(PodWith(Limits({{"nvidia.com/gpumem", "2097152"}})), names);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "container \"train\": nvidia.com/gpumem \"2097152\" × memoryFactor 1024 MiB exceeds "
            "2147483647 MiB");
  // The webhook writes the defaulted count into limits (defaultGPUNum), not 1.
  Result<std::vector<LimitDefault>> lim =
      ComputeLimitDefaults(PodWith(Limits({{"nvidia.com/gpucores", "30"}})), names);
  ASSERT_TRUE(lim.ok()) << lim.status().ToString();
  ASSERT_EQ(lim->size(), 1u);
  EXPECT_EQ((*lim)[0].resource, "nvidia.com/gpu");
  EXPECT_EQ((*lim)[0].value, "2");
}

TEST(ContainerRequestTest, MemOnAndWholeCards) {
  ContainerRequest pct;
  pct.num_gpus = 1;
  pct.mem_percent = 33;
  EXPECT_EQ(pct.MemOn(40536), 13376);  // floor(40536 × 33 / 100) = floor(13376.88)
  EXPECT_FALSE(pct.WholeCards());
  ContainerRequest mem;
  mem.mem_mib = 3000;
  EXPECT_EQ(mem.MemOn(40536), 3000);
  ContainerRequest whole;
  whole.num_gpus = 1;
  whole.cores_percent = 100;
  EXPECT_EQ(whole.MemOn(81920), 81920);
  EXPECT_TRUE(whole.WholeCards());
}

TEST(PolicyNamesTest, RoundTripAndErrors) {
  for (NodePolicy p : {NodePolicy::kBinpack, NodePolicy::kSpread}) {
    Result<NodePolicy> back = ParseNodePolicy(NodePolicyName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  for (GpuPolicy p : {GpuPolicy::kBinpack, GpuPolicy::kSpread, GpuPolicy::kTopologyAware,
                      GpuPolicy::kFragmentationAware}) {
    Result<GpuPolicy> back = ParseGpuPolicy(GpuPolicyName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  EXPECT_STREQ(NodePolicyName(NodePolicy::kBinpack), "binpack");
  EXPECT_STREQ(GpuPolicyName(GpuPolicy::kTopologyAware), "topology-aware");
  EXPECT_STREQ(GpuPolicyName(GpuPolicy::kFragmentationAware), "fragmentation-aware");
  for (const char* bad : {"", " binpack", "SPREAD", "numa", "mutex"}) {
    EXPECT_FALSE(ParseNodePolicy(bad).ok()) << bad;
    EXPECT_FALSE(ParseGpuPolicy(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseNodePolicy("x").status().message(),
            "unknown node policy \"x\" (want binpack or spread)");
}

// Issue 33 item 7: each list annotation is capped at kMaxAnnotationListEntries, the cap named
// in the error; at the cap it parses, and its UUIDs are matched through the request's hash set
// (case ignored, as GpuUuidEquals) with the same answers as a scan of the list.
TEST(ParsePodRequestTest, ListAnnotationsAreCappedAndUuidsMatchedBySet) {
  auto list = [](size_t n, const std::string& prefix) {
    std::string v;
    for (size_t i = 0; i < n; ++i) v += (i ? "," : "") + prefix + std::to_string(i);
    return v;
  };
  const json gpu = Limits({{"nvidia.com/gpu", "1"}});
  for (const char* key : {"nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid",
                          "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"}) {
    auto over = ParsePodRequest(PodWith(gpu, {{key, list(kMaxAnnotationListEntries + 1, "GPU-")}}));
    ASSERT_FALSE(over.ok()) << key;
    EXPECT_EQ(over.status().message(),
              std::string("annotation ") + key + " lists 1025 entries; at most 1024 are allowed")
        << key;
    EXPECT_TRUE(
        ParsePodRequest(PodWith(gpu, {{key, list(kMaxAnnotationListEntries, "GPU-")}})).ok())
        << key;
  }
  auto r = ParsePodRequest(PodWith(gpu, {{"nvidia.com/use-gpuuuid", list(1024, "gpu-u")},
                                         {"nvidia.com/nouse-gpuuuid", "GPU-U7, gpu-x"}}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->use_uuid_index.Covers(r->use_uuids));
  EXPECT_EQ(r->use_uuid_index.set.size(), 1024u);
  PodRequest scanned = *r;  // the same lists without their sets: GpuUuidAllowed scans them
  scanned.use_uuid_index = GpuUuidIndex{};
  scanned.nouse_uuid_index = GpuUuidIndex{};
  EXPECT_FALSE(scanned.use_uuid_index.Covers(scanned.use_uuids));
  for (const std::string uuid :
       {"GPU-U0", "gpu-u1023", "Gpu-U512", "GPU-U1024", "GPU-U7", "gpu-u7", "GPU-X", "GPU-U"}) {
    const bool want = uuid != "GPU-U1024" && uuid != "GPU-U7" && uuid != "gpu-u7" &&
                      uuid != "GPU-X" && uuid != "GPU-U";
    EXPECT_EQ(GpuUuidAllowed(*r, uuid), want) << uuid;
    EXPECT_EQ(GpuUuidAllowed(scanned, uuid), want) << uuid;
  }
}

}  // namespace
}  // namespace fracgpu::core
