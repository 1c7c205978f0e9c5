// The node registration annotation (docs/design/CONTRACT.md §2): patched only when its value
// changes, health included.
#include "deviceplugin/registrar.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "fake_cluster.h"
#include "node/device_state.h"
#include "test_support.h"

namespace fracgpu::deviceplugin {
namespace {

using namespace testing;  // NOLINT
using node::DeviceConfig;
using node::DeviceState;

TEST(Registrar, PatchesOnlyWhenTheValueChanges) {
  FakeCluster cluster;
  cluster.PutNode(MakeNode());
  DeviceState state(TwoGpus(), DeviceConfig{});
  NodeRegistrar registrar(kNode, &cluster);
  auto first = registrar.Sync(state.Devices());
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  std::string value =
      cluster.Node(kNode)["metadata"]["annotations"]["hami.io/node-nvidia-register"];
  auto decoded = core::DecodeNodeRegister(value);
  ASSERT_TRUE(decoded.ok()) << value;
  EXPECT_EQ(*decoded, state.Devices());
  auto again = registrar.Sync(state.Devices());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(cluster.node_patches(), 1);
  ASSERT_TRUE(state.MarkUnhealthy(kUuidA));
  auto changed = registrar.Sync(state.Devices());
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(cluster.node_patches(), 2);
  auto after = core::DecodeNodeRegister(
      cluster.Node(kNode)["metadata"]["annotations"]["hami.io/node-nvidia-register"]);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE((*after)[0].health);
  EXPECT_TRUE((*after)[1].health);
  cluster.FailNext("patch_node", 1, Unavailable("503"));
  auto down = registrar.Sync(state.Devices());
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fracgpu::deviceplugin
