// Fuzz target (issue 33 item 1): /filter, /prioritize, /bind and the webhook's AdmissionReview
// with JSON types swapped. The input picks a seed request (tests/scheduler/type_swap.h) and a
// chain of swaps, each a field of the request (by position in typeswap::Paths of the request
// as swapped so far) and a value of another JSON type; the request then goes through the same
// decoding and handler the HTTP routes call, against a state with one GPU node the seed pod
// does not fit (so /filter records FilteringFailed) and a fake API server holding the pod
// (so /bind reads it). Every recorded event is posted before the next input. Any exception
// or crash is a finding: every field read from outside JSON must be type-checked.
//
// Input: byte 0 = seed (mod the number of seeds); then 3 bytes per swap (at most 16): path
// position (2 bytes, little-endian, mod the number of paths) and value (mod the number of
// replacement values).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../scheduler/type_swap.h"
#include "core/codec.h"
#include "fake_apiserver.h"
#include "k8s/client.h"
#include "scheduler/events.h"
#include "scheduler/extender.h"
#include "scheduler/extender_args.h"
#include "scheduler/state.h"
#include "scheduler/webhook.h"

namespace {

using nlohmann::json;
using namespace fracgpu;             // NOLINT(google-build-using-namespace): a test
using namespace fracgpu::scheduler;  // NOLINT(google-build-using-namespace)
namespace typeswap = scheduler::typeswap;

// One GPU node of 1,000 MiB, as the device plugin registers it, labelled pool=gpu.
json Node(const std::string& name) {
  core::DeviceInfo d;
  d.uuid = "GPU-" + name;
  d.devmem_mib = 1000;
  d.type = "NVIDIA-NVIDIA A100-SXM4-80GB";
  return {{"metadata",
           {{"name", name},
            {"labels", {{"pool", "gpu"}}},  // the seed pod's nodeSelector: /bind goes on to fit
            {"annotations", {{core::kAnnotationNodeRegister, core::EncodeNodeRegister({d})}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "10"}}}}}};
}

struct World {
  fakes::FakeApiServer api;
  std::unique_ptr<k8s::Client> client;
  scheduler::ClusterState state;
  std::unique_ptr<EventRecorder> events;
  std::unique_ptr<Extender> extender;
  WebhookConfig webhook;

  World() {
    api.Put("nodes", Node("node-a"));
    json pod = typeswap::SeedPod("p");
    pod.erase("status");
    api.Put("pods", pod);
    k8s::Config config;
    config.server = api.url();
    auto c = k8s::Client::Create(config);
    if (!c.ok()) {
      std::fprintf(stderr, "no client: %s\n", c.status().ToString().c_str());
      std::abort();
    }
    client = std::move(*c);
    (void)state.UpsertNode(Node("node-a"));
    events = std::make_unique<EventRecorder>(client.get());
    extender = std::make_unique<Extender>(ExtenderConfig{}, &state, client.get(), events.get(),
                                          nullptr, nullptr);
  }
};

World& TheWorld() {
  static World* world = new World();  // never destroyed: the fuzzer exits without teardown
  return *world;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = TheWorld();
  static const std::vector<typeswap::Seed> kSeeds = typeswap::Seeds({"node-a", "node-b"});
  const typeswap::Seed& seed = kSeeds[data[0] % kSeeds.size()];
  json body = seed.body;
  const auto& values = typeswap::Replacements();
  for (size_t i = 1, swaps = 0; i + 3 <= size && swaps < 16; i += 3, ++swaps) {
    auto paths = typeswap::Paths(body);
    if (paths.empty()) break;
    const size_t at =
        (static_cast<size_t>(data[i]) | static_cast<size_t>(data[i + 1]) << 8) % paths.size();
    body = typeswap::Swapped(std::move(body), paths[at], values[data[i + 2] % values.size()]);
  }
  const std::string text = body.dump();
  switch (seed.endpoint) {
    case typeswap::Endpoint::kFilter: {
      auto args = DecodeExtenderArgs(text);
      if (args.ok()) (void)w.extender->Filter(*args);
      break;
    }
    case typeswap::Endpoint::kPrioritize: {
      auto args = DecodeExtenderArgs(text);
      if (args.ok()) (void)w.extender->Prioritize(*args).dump();
      break;
    }
    case typeswap::Endpoint::kBind: {
      auto args = DecodeExtenderBindingArgs(text);
      if (args.ok()) (void)w.extender->Bind(*args).dump();
      break;
    }
    case typeswap::Endpoint::kWebhook: {
      auto r = HandleAdmissionReview(text, w.webhook);
      if (r.ok()) (void)r->dump();
      break;
    }
  }
  if (!w.events->Flush()) {
    std::fprintf(stderr, "events did not drain\n");
    std::abort();
  }
  return 0;
}
