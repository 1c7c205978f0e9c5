// ExtenderArgs decoding (streaming NodeNames, extender_args.cc) and the /filter reply written
// without a DOM (extender.cc): bad cases with their messages, key-case rules, and agreement
// with the plain DOM decoder (extender_args_reference.h) on a generated family of bodies.
#include "scheduler/extender_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/annotations.h"
#include "core/codec.h"
#include "extender_args_reference.h"
#include "scheduler/extender.h"
#include "scheduler/state.h"

namespace fracgpu::scheduler {
namespace {

using nlohmann::json;

TEST(ExtenderArgsTest, BadBodiesNameTheFieldAndType) {
  struct Case {
    std::string body, want;
  } cases[] = {
      {"", "ExtenderArgs body is not valid JSON"},
      {R"({"Pod":{"metadata":)", "ExtenderArgs body is not valid JSON"},
      {R"({"Pod":{},"NodeNames":["a"]} trailing)", "ExtenderArgs body is not valid JSON"},
      {R"({"Pod":{},"NodeNames":["a)", "ExtenderArgs body is not valid JSON"},
      {"{\"Pod\":{},\"NodeNames\":[\"\xff\"]}",
       "ExtenderArgs body is not valid JSON"},  // not UTF-8
      {R"([1,2])", "ExtenderArgs must be a JSON object, got array"},
      {R"("x")", "ExtenderArgs must be a JSON object, got string"},
      {R"({"NodeNames":[]})", "ExtenderArgs.Pod must be an object, got nothing"},
      {R"({"Pod":"x","NodeNames":[]})", "ExtenderArgs.Pod must be an object, got string"},
      {R"({"Pod":null,"NodeNames":[]})", "ExtenderArgs.Pod must be an object, got null"},
      {R"({"Pod":{},"NodeNames":[1]})", "ExtenderArgs.NodeNames[0] must be a string, got number"},
      {R"({"Pod":{},"NodeNames":["a",true,3]})",
       "ExtenderArgs.NodeNames[1] must be a string, got boolean"},
      {R"({"Pod":{},"NodeNames":["a","b",{"x":["y"]},null]})",
       "ExtenderArgs.NodeNames[2] must be a string, got object"},
      {R"({"Pod":{},"NodeNames":[["a"],"b"]})",
       "ExtenderArgs.NodeNames[0] must be a string, got array"},
      {R"({"Pod":{},"NodeNames":["a",null]})",
       "ExtenderArgs.NodeNames[1] must be a string, got null"},
      {R"({"Pod":{},"NodeNames":"a"})",
       "ExtenderArgs.NodeNames must be an array of strings, got string"},
      {R"({"Pod":{},"NodeNames":{"a":1}})",
       "ExtenderArgs.NodeNames must be an array of strings, got object"},
      {R"({"Pod":{}})", "ExtenderArgs carries neither NodeNames nor Nodes"},
      {R"({"Pod":{},"NodeNames":null,"Nodes":null})",
       "ExtenderArgs carries neither NodeNames nor Nodes"},
      {R"({"Pod":{},"Nodes":[]})", "ExtenderArgs.Nodes must be a NodeList with an items array"},
      {R"({"Pod":{},"Nodes":{"items":{}}})",
       "ExtenderArgs.Nodes must be a NodeList with an items array"},
      {R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})",
       "ExtenderArgs.Nodes.items[0].metadata.name must be a string"},
      {R"({"Pod":{},"Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":5}}]}})",
       "ExtenderArgs.Nodes.items[1].metadata.name must be a string"},
  };
  for (const auto& c : cases) {
    auto r = DecodeExtenderArgs(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(r.status().message(), c.want) << c.body;
    EXPECT_EQ(reference::CompareDecoders(c.body), "") << c.body;
  }
}

TEST(ExtenderArgsTest, KeysMatchIgnoringCaseExactFirst) {
  auto r = DecodeExtenderArgs(R"({"pod":{"metadata":{"name":"p"}},"nodenames":["a","b"]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pod["metadata"]["name"], "p");
  EXPECT_EQ(r->node_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(r->had_nodes_list);

  // The exact spelling wins over another case; among other cases the first in key order.
  r = DecodeExtenderArgs(R"({"Pod":{},"nodeNames":["x"],"NodeNames":["y"],"NODENAMES":["z"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_names, std::vector<std::string>{"y"});
  r = DecodeExtenderArgs(R"({"Pod":{},"nodeNames":["x"],"NODENAMES":["z"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_names, std::vector<std::string>{"z"});  // "NODENAMES" < "nodeNames"

  // A repeated key: the last value counts, array or not.
  r = DecodeExtenderArgs(R"({"Pod":{},"NodeNames":["x"],"NodeNames":["y","z"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_names, (std::vector<std::string>{"y", "z"}));
  r = DecodeExtenderArgs(
      R"({"Pod":{},"NodeNames":["x"],"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"n"}}]}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_names, std::vector<std::string>{"n"});
  EXPECT_TRUE(r->had_nodes_list);
  r = DecodeExtenderArgs(R"({"Pod":{},"NodeNames":7,"NodeNames":["q"]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_names, std::vector<std::string>{"q"});

  // NodeNames inside the Pod is just part of the Pod.
  r = DecodeExtenderArgs(R"({"Pod":{"NodeNames":["in-pod"]},"NodeNames":[]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pod["NodeNames"], json::array({"in-pod"}));
  EXPECT_TRUE(r->node_names.empty());

  // Escaped and non-ASCII names decode, and are then refused: node names are DNS-1123
  // subdomains (issue 15), and the error names the element.
  r = DecodeExtenderArgs(R"({"Pod":{},"NodeNames":["ok-1","a\"b","\u00e9\n","\ud83d\ude00"]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "ExtenderArgs.NodeNames[1] \"a?b\" is not a DNS-1123 subdomain (at most 253 "
            "characters: DNS-1123 "
            "labels joined by '.')");
}

// Every body of a generated family — key spellings, value types, order, repeats, nesting —
// decodes exactly as the DOM reference does.
TEST(ExtenderArgsTest, AgreesWithTheDomDecoder) {
  const std::vector<std::string> pods = {
      R"({"metadata":{"name":"p","uid":"u"},"spec":{"containers":[]}})", "{}", "null", R"("pod")",
      "[1]"};
  const std::vector<std::string> name_values = {"[]",
                                                R"(["a"])",
                                                R"(["a","b","a"])",
                                                "null",
                                                "7",
                                                R"("a")",
                                                "{}",
                                                R"([1])",
                                                R"(["a",{}])",
                                                R"(["a",[["b"]],"c"])",
                                                R"([null])",
                                                R"(["x",true])",
                                                R"(["\u0041\t"])"};
  const std::vector<std::string> node_lists = {
      "", R"("Nodes":null)", R"("Nodes":{"items":[{"metadata":{"name":"n1"}}]})",
      R"("nodes":{"Items":[{"Metadata":{"Name":"n2"}}]})", R"("Nodes":{"items":5})"};
  const std::vector<std::string> name_keys = {"NodeNames", "nodenames", "NODENAMES", "nodeNames"};
  int bodies = 0;
  for (const auto& pod : pods) {
    for (const auto& names : name_values) {
      for (const auto& list : node_lists) {
        for (size_t k = 0; k < name_keys.size(); ++k) {
          std::vector<std::string> members = {"\"Pod\":" + pod,
                                              "\"" + name_keys[k] + "\":" + names};
          if (!list.empty()) members.push_back(list);
          // Second NodeNames member under another spelling, then a repeat of the first.
          std::string other = "\"" + name_keys[(k + 1) % name_keys.size()] +
                              "\":" + name_values[(k * 5) % name_values.size()];
          for (int variant = 0; variant < 4; ++variant) {
            std::vector<std::string> m = members;
            if (variant == 1) m.push_back(other);
            if (variant == 2) m.insert(m.begin(), other);
            if (variant == 3) m.push_back(m[1]);
            if (variant % 2 == 1) std::swap(m[0], m.back());
            std::string body = "{";
            for (size_t i = 0; i < m.size(); ++i) body += (i ? "," : "") + m[i];
            body += "}";
            ASSERT_EQ(reference::CompareDecoders(body), "") << body;
            // The same with JSON whitespace around every separator (none of the strings
            // above contains ',' or ':').
            std::string spaced;
            for (char c : body) {
              if (c == ',' || c == ':') {
                spaced += std::string(" \n") + c + "\t\r ";
              } else {
                spaced += c;
              }
            }
            ASSERT_EQ(reference::CompareDecoders(spaced), "") << spaced;
            ++bodies;
          }
        }
      }
    }
  }
  EXPECT_EQ(bodies, 5 * 13 * 5 * 4 * 4);
}

// Every truncation and every one-byte change of a kube-scheduler-shaped body decodes as
// the DOM reference does (the fast NodeNames scanner must hand anything unusual over).
TEST(ExtenderArgsTest, MutatedBodiesAgreeWithTheDomDecoder) {
  const std::string base =
      R"({"Pod":{"metadata":{"name":"p","annotations":{"a":"x\"y"}},"spec":{}},"Nodes":null,)"
      R"("NodeNames":["node-1","node-2", "n3"],"nodenames":["z"]})";
  ASSERT_EQ(reference::CompareDecoders(base), "");
  ASSERT_TRUE(DecodeExtenderArgs(base).ok());
  const std::string replacements[] = {"\"",       "\\", "]", "[", ",", " ", "\x01",
                                      "\xc3\xa9", "1",  "}", "{", ":", ""};
  int compared = 0;
  for (size_t i = 0; i <= base.size(); ++i) {
    ASSERT_EQ(reference::CompareDecoders(base.substr(0, i)), "") << base.substr(0, i);
    if (i == base.size()) break;
    for (const auto& r : replacements) {
      std::string body = base.substr(0, i) + r + base.substr(i + 1);
      ASSERT_EQ(reference::CompareDecoders(body), "") << body;
      std::string inserted = base.substr(0, i) + r + base.substr(i);
      ASSERT_EQ(reference::CompareDecoders(inserted), "") << inserted;
      compared += 2;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(base.size()) * 26);
}

// ---- the /filter reply ----

json Node(const std::string& name, int64_t mem_mib) {
  core::DeviceInfo d;
  d.uuid = "GPU-" + name;
  d.devmem_mib = mem_mib;
  d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
  return {{"metadata",
           {{"name", name},
            {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister({d})}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}};
}

json Pod(json limits) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u1"}}},
          {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", limits}}}}}}}}};
}

TEST(ExtenderFilterReplyTest, FitNodesInOrderFailedNodesWithReasons) {
  ClusterState state;
  // Names that need escaping in JSON, and one with non-ASCII bytes.
  const std::vector<std::string> names = {"big-\"quoted\"", "small\\back", "tab\tnode",
                                          "caf\xc3\xa9", "big-2"};
  const std::vector<int64_t> mem = {40000, 1000, 2000, 40000, 40000};
  for (size_t i = 0; i < names.size(); ++i)
    ASSERT_TRUE(state.UpsertNode(Node(names[i], mem[i])).ok());
  ExtenderConfig every;
  every.filter_returns_every_fitting_node = true;
  Extender extender(every, &state, nullptr, nullptr, nullptr, nullptr);
  ExtenderArgs args;
  args.pod = Pod({{"nvidia.com/gpumem", "30000"}});
  args.node_names = {"big-2", names[1], "unknown\x01", names[0], names[2], names[3]};
  // By default only the node /prioritize ranks first: the three fitting nodes are empty and
  // tie under binpack, and the first in the request's order keeps the top score.
  json picked = json::parse(Extender({}, &state, nullptr, nullptr, nullptr, nullptr).Filter(args));
  EXPECT_EQ(picked["NodeNames"], json::array({"big-2"})) << picked.dump();
  EXPECT_EQ(picked["FailedNodes"].size(), 2u);
  EXPECT_EQ(picked["FailedAndUnresolvableNodes"].size(), 1u);
  std::string text = extender.Filter(args);
  json reply = json::parse(text);  // throws (fails the test) when not valid JSON
  EXPECT_EQ(reply["NodeNames"], json::array({"big-2", names[0], names[3]}));
  EXPECT_TRUE(reply["Nodes"].is_null()) << text;  // a NodeNames request gets NodeNames only
  EXPECT_EQ(reply["Error"], "");
  ASSERT_EQ(reply["FailedNodes"].size(), 2u);
  EXPECT_EQ(reply["FailedNodes"][names[1]], "1/1 CardInsufficientMemory");
  EXPECT_EQ(reply["FailedNodes"][names[2]], "1/1 CardInsufficientMemory");
  // A node with no GPUs at all: preemption cannot help, so it is unresolvable.
  ASSERT_EQ(reply["FailedAndUnresolvableNodes"].size(), 1u) << text;
  EXPECT_NE(reply["FailedAndUnresolvableNodes"]["unknown\x01"].get<std::string>().find(
                "no fracgpu GPUs registered"),
            std::string::npos);
  // Control bytes are escaped as \u00XX, as nlohmann's dump() writes them.
  EXPECT_NE(text.find(R"("unknown\u0001")"), std::string::npos) << text;
}

TEST(ExtenderFilterReplyTest, NonGpuPodPassesEveryNodeAndBadRequestIsAnError) {
  ClusterState state;
  Extender extender({}, &state, nullptr, nullptr, nullptr, nullptr);
  ExtenderArgs args;
  args.pod = Pod({{"cpu", "1"}});
  args.node_names = {"x", "y\"z"};
  json reply = json::parse(extender.Filter(args));
  EXPECT_EQ(reply, json({{"Nodes", nullptr},
                         {"NodeNames", {"x", "y\"z"}},
                         {"FailedNodes", json::object()},
                         {"FailedAndUnresolvableNodes", json::object()},
                         {"Error", ""}}));

  args.pod = Pod({{"nvidia.com/gpucores", "150"}});  // over 100: the request does not parse
  reply = json::parse(extender.Filter(args));
  EXPECT_TRUE(reply["NodeNames"].is_null());
  EXPECT_TRUE(reply["Nodes"].is_null());
  EXPECT_EQ(reply["FailedNodes"], json::object());
  EXPECT_EQ(reply["FailedAndUnresolvableNodes"], json::object());
  EXPECT_NE(reply["Error"].get<std::string>(), "");
}

// kube-scheduler with nodeCacheCapable: false sends Nodes (a v1.NodeList) and reads only
// Nodes of the reply (HTTPExtender.Filter): the passing node objects, each as received.
TEST(ExtenderFilterReplyTest, NodesRequestIsAnsweredWithThePassingNodeObjects) {
  ClusterState state;
  ASSERT_TRUE(state.UpsertNode(Node("big", 40000)).ok());
  ASSERT_TRUE(state.UpsertNode(Node("small", 1000)).ok());
  ASSERT_TRUE(state.UpsertNode(Node("big-2", 40000)).ok());
  Extender extender({}, &state, nullptr, nullptr, nullptr, nullptr);
  // What Go's json.Marshal writes for the NodeList (fields beyond the name must come back).
  auto item = [](const std::string& name, const std::string& zone) {
    json n = Node(name, 40000);
    n["kind"] = "Node";
    n["metadata"]["labels"] = {{"topology.kubernetes.io/zone", zone}};
    n["metadata"]["resourceVersion"] = "17";
    n["status"]["capacity"] = {{"cpu", "64"}};
    return n;
  };
  json list = {
      {"kind", "NodeList"},
      {"apiVersion", "v1"},
      {"metadata", {{"resourceVersion", "99"}}},
      {"items", {item("big", "a"), item("small", "b"), item("cpu-only", "c"), item("big-2", "d")}}};
  list["items"][2]["metadata"].erase("annotations");  // cpu-only: no fracgpu GPUs registered
  const std::string body = json{
      {"Pod", Pod({{"nvidia.com/gpumem", "30000"}})},
      {"Nodes", list},
      {"NodeNames", nullptr}}.dump();
  auto args = DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_TRUE(args->had_nodes_list);
  EXPECT_EQ(args->nodes, list);
  const std::string text = extender.Filter(*args);
  json reply = json::parse(text);
  EXPECT_TRUE(reply["NodeNames"].is_null()) << text;
  // The node /prioritize ranks first (big and big-2 tie empty; big comes first), as received.
  json want = list;
  want["items"] = json::array({list["items"][0]});
  EXPECT_EQ(reply["Nodes"], want) << text;
  // Every passing node, when so configured.
  ExtenderConfig every;
  every.filter_returns_every_fitting_node = true;
  json all = json::parse(Extender(every, &state, nullptr, nullptr, nullptr, nullptr).Filter(*args));
  want["items"] = json::array({list["items"][0], list["items"][3]});
  EXPECT_EQ(all["Nodes"], want) << all.dump();
  EXPECT_EQ(reply["FailedNodes"], json({{"small", "1/1 CardInsufficientMemory"}})) << text;
  ASSERT_EQ(reply["FailedAndUnresolvableNodes"].size(), 1u) << text;
  EXPECT_TRUE(reply["FailedAndUnresolvableNodes"].contains("cpu-only")) << text;
  EXPECT_EQ(reply["Error"], "");

  // A pod without fracgpu resources gets the whole list back, untouched.
  auto plain = DecodeExtenderArgs(json{{"Pod", Pod({{"cpu", "1"}})}, {"Nodes", list}}.dump());
  ASSERT_TRUE(plain.ok());
  reply = json::parse(extender.Filter(*plain));
  EXPECT_EQ(reply["Nodes"], list);
  EXPECT_TRUE(reply["NodeNames"].is_null());

  // Nothing fits: an empty items array (not null: kube-scheduler then keeps no node).
  auto huge = DecodeExtenderArgs(
      json{{"Pod", Pod({{"nvidia.com/gpumem", "90000"}})}, {"Nodes", list}}.dump());
  ASSERT_TRUE(huge.ok());
  reply = json::parse(extender.Filter(*huge));
  EXPECT_EQ(reply["Nodes"]["items"], json::array());
  EXPECT_EQ(reply["FailedNodes"].size(), 3u);
  EXPECT_EQ(reply["FailedAndUnresolvableNodes"].size(), 1u);
}

// Go writes an empty NodeList as {"metadata":{},"items":null}: an empty candidate list.
TEST(ExtenderArgsTest, NodeListWithNullItemsIsEmpty) {
  const std::string body = R"({"Pod":{},"Nodes":{"metadata":{},"items":null},"NodeNames":null})";
  auto args = DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_TRUE(args->had_nodes_list);
  EXPECT_TRUE(args->node_names.empty());
  EXPECT_EQ(reference::CompareDecoders(body), "");
  auto bad = DecodeExtenderArgs(R"({"Pod":{},"Nodes":{"items":3}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "ExtenderArgs.Nodes must be a NodeList with an items array");
}

}  // namespace
}  // namespace fracgpu::scheduler

namespace fracgpu::scheduler {
namespace {

// Depth bombs in every field kind, non-string annotation/label values, bad names, missing UID:
// each refused with the field named (issue 15). Expected messages are written out here.
TEST(ExtenderArgsHostileTest, TableOfBadBodies) {
  std::string deep_array = std::string(100000, '[') + std::string(100000, ']');
  std::string deep_object;
  for (int i = 0; i < 20000; ++i) deep_object += "{\"a\":";
  deep_object += "1" + std::string(20000, '}');
  const std::string too_deep = "ExtenderArgs body nests objects/arrays deeper than 64 levels";
  struct Case {
    std::string body, want;
  } cases[] = {
      {R"({"Pod":{"metadata":{"annotations":{"x":)" + deep_array + "}}},\"NodeNames\":[]}",
       too_deep},
      {R"({"Pod":{"metadata":{"labels":{"x":)" + deep_object + "}}},\"NodeNames\":[]}", too_deep},
      {R"({"Pod":{},"NodeNames":[)" + deep_array + "]}", too_deep},
      {R"({"Pod":{},"Unknown":)" + deep_array + ",\"NodeNames\":[]}", too_deep},
      {deep_array, too_deep},
      {R"({"Pod":{"metadata":{"annotations":{"hami.io/vgpu-node":["a"]}}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.annotations[\"hami.io/vgpu-node\"] must be a string (Kubernetes "
       "map[string]string), got an array"},
      {R"({"Pod":{"metadata":{"labels":{"app":{"x":1}}}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.labels[\"app\"] must be a string (Kubernetes map[string]string), "
       "got an object"},
      {R"({"Pod":{"metadata":{"annotations":[1]}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.annotations must be an object of strings, got an array"},
      {R"({"Pod":{"metadata":{"name":"../x"}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.name \"../x\" is not a DNS-1123 subdomain (at most 253 "
       "characters: DNS-1123 "
       "labels joined by '.')"},
      {R"({"Pod":{"metadata":{"namespace":"a.b"}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.namespace \"a.b\" is not a DNS-1123 label (at most 63 characters "
       "a-z, 0-9 and "
       "'-', starting and ending with a letter or digit)"},
      {R"({"Pod":{"metadata":{"uid":"a/b"}},"NodeNames":[]})",
       "ExtenderArgs.Pod.metadata.uid \"a/b\" is not a UID (1 to 128 characters a-z, A-Z, 0-9, "
       "'-', '_' and '.')"},
      {R"({"Pod":{},"NodeNames":["node-a","../../api/v1/secrets"]})",
       "ExtenderArgs.NodeNames[1] \"../../api/v1/secrets\" is not a DNS-1123 subdomain (at most "
       "253 characters: "
       "DNS-1123 labels joined by '.')"},
      {R"({"Pod":{},"Nodes":{"items":[{"metadata":{"name":"Node-A"}}]}})",
       "ExtenderArgs.Nodes.items[0] \"Node-A\" is not a DNS-1123 subdomain (at most 253 "
       "characters: DNS-1123 "
       "labels joined by '.')"},
  };
  for (const auto& c : cases) {
    auto r = DecodeExtenderArgs(c.body);
    ASSERT_FALSE(r.ok()) << c.body.substr(0, 120);
    EXPECT_EQ(r.status().message(), c.want) << c.body.substr(0, 120);
  }
  // 64 levels are accepted (the top-level object is level 1).
  std::string ok64 =
      R"({"Pod":{"x":)" + std::string(62, '[') + std::string(62, ']') + R"(},"NodeNames":["n"]})";
  EXPECT_TRUE(DecodeExtenderArgs(ok64).ok());
  std::string bad65 =
      R"({"Pod":{"x":)" + std::string(63, '[') + std::string(63, ']') + R"(},"NodeNames":["n"]})";
  EXPECT_EQ(DecodeExtenderArgs(bad65).status().message(), too_deep);
}

TEST(ExtenderArgsHostileTest, BindArgsNamesAndUid) {
  const std::string sub =
      " is not a DNS-1123 subdomain (at most 253 characters: DNS-1123 labels joined by '.')";
  struct Case {
    std::string body, want;
  } cases[] = {
      {R"({"PodName":"p","PodNamespace":"ml","Node":"n"})",
       "ExtenderBindingArgs.PodUID is missing"},
      {R"({"PodName":"p","PodNamespace":"ml","PodUID":"","Node":"n"})",
       "ExtenderBindingArgs.PodUID is empty"},
      {R"({"PodName":"../../../nodes/n","PodNamespace":"ml","PodUID":"u","Node":"n"})",
       "ExtenderBindingArgs.PodName \"../../../nodes/n\"" + sub},
      {R"({"PodName":"p","PodNamespace":"ml/x","PodUID":"u","Node":"n"})",
       "ExtenderBindingArgs.PodNamespace \"ml/x\" is not a DNS-1123 label (at most 63 characters "
       "a-z, 0-9 and '-', "
       "starting and ending with a letter or digit)"},
      {R"({"PodName":"p","PodNamespace":"ml","PodUID":"u","Node":"n?x=1"})",
       "ExtenderBindingArgs.Node \"n?x=1\"" + sub},
      {R"({"PodName":"p","PodNamespace":"ml","PodUID":"u/../x","Node":"n"})",
       "ExtenderBindingArgs.PodUID \"u/../x\" is not a UID (1 to 128 characters a-z, A-Z, 0-9, "
       "'-', '_' and '.')"},
      {R"({"PodName":")" + std::string(254, 'a') +
           R"(","PodNamespace":"ml","PodUID":"u","Node":"n"})",
       "ExtenderBindingArgs.PodName \"" + std::string(80, 'a') + "…\"" + sub},
      {R"({"PodName":"p","PodNamespace":"ml","PodUID":"u","Node":"n","X":)" +
           std::string(1000, '[') + std::string(1000, ']') + "}",
       "ExtenderBindingArgs body nests objects/arrays deeper than 64 levels"},
  };
  for (const auto& c : cases) {
    auto r = DecodeExtenderBindingArgs(c.body);
    ASSERT_FALSE(r.ok()) << c.body.substr(0, 120);
    EXPECT_EQ(r.status().message(), c.want);
  }
  auto ok = DecodeExtenderBindingArgs(
      R"({"PodName":"p-1.a","PodNamespace":"ml","PodUID":"0f3c-9a","Node":"gpu-1.x"})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->pod_name, "p-1.a");
  // The DNS-1123 rules at their edges (k8s.io/apimachinery validation).
  EXPECT_TRUE(IsDns1123Label(std::string(63, 'a')));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'a')));
  EXPECT_FALSE(IsDns1123Label("-a"));
  EXPECT_FALSE(IsDns1123Label("a-"));
  EXPECT_FALSE(IsDns1123Label("A"));
  EXPECT_TRUE(IsDns1123Label("0"));
  EXPECT_TRUE(IsDns1123Subdomain("a.b-c.d"));
  EXPECT_FALSE(IsDns1123Subdomain("a..b"));
  EXPECT_FALSE(IsDns1123Subdomain(".a"));
  EXPECT_FALSE(IsDns1123Subdomain("a."));
  std::string s253 = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                     std::string(63, 'c') + "." + std::string(61, 'd');
  ASSERT_EQ(s253.size(), 253u);
  EXPECT_TRUE(IsDns1123Subdomain(s253));
  EXPECT_FALSE(IsDns1123Subdomain(s253 + "d"));
}

}  // namespace
}  // namespace fracgpu::scheduler
