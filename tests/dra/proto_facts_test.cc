// The kubelet protos compiled into fracgpu have the field numbers, labels, types, package
// names and methods of the upstream files (recorded in testdata/upstream_proto_fields.txt from
// kubernetes staging/src/k8s.io/kubelet/pkg/apis/{pluginregistration/v1,dra/v1,dra/v1beta1}/
// api.proto by scripts/proto-facts/kubelet_proto_fields.py), and nothing more.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "dra/api.h"

namespace fracgpu::dra {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct Row {
  std::vector<std::string> cols;
};

std::vector<Row> ReadTable() {
  std::ifstream in(std::string(FRACGPU_DRA_TESTDATA) + "/upstream_proto_fields.txt");
  std::vector<Row> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ss(line);
    Row r;
    for (std::string w; ss >> w;) r.cols.push_back(w);
    rows.push_back(r);
  }
  return rows;
}

std::string TypeWord(const FieldDescriptor* f) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_STRING:
      return "string";
    case FieldDescriptor::TYPE_BOOL:
      return "bool";
    case FieldDescriptor::TYPE_MESSAGE:
      return "message";
    default:
      return "other";
  }
}

TEST(ProtoFactsTest, EveryRecordedFieldAndMethodMatchesTheCompiledProtos) {
  // Make sure the generated files are linked in (their descriptors register on load).
  drav1::Claim a;
  drav1beta1::Claim b;
  regv1::PluginInfo c;
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  auto rows = ReadTable();
  ASSERT_EQ(rows.size(), 41u) << "the recorded table changed size";
  std::map<std::string, std::set<std::string>> recorded_fields;
  for (const auto& r : rows) {
    if (r.cols[0] == "service") {
      ASSERT_EQ(r.cols.size(), 5u);
      auto* svc = pool->FindServiceByName(r.cols[1]);
      ASSERT_NE(svc, nullptr) << r.cols[1];
      auto* m = svc->FindMethodByName(r.cols[2]);
      ASSERT_NE(m, nullptr) << r.cols[1] << "." << r.cols[2];
      EXPECT_EQ(m->input_type()->full_name(), r.cols[3]);
      EXPECT_EQ(m->output_type()->full_name(), r.cols[4]);
      EXPECT_FALSE(m->client_streaming() || m->server_streaming());
      continue;
    }
    ASSERT_EQ(r.cols.size(), 5u);
    const Descriptor* msg = pool->FindMessageTypeByName(r.cols[0]);
    ASSERT_NE(msg, nullptr) << r.cols[0];
    const FieldDescriptor* f = msg->FindFieldByName(r.cols[1]);
    ASSERT_NE(f, nullptr) << r.cols[0] << "." << r.cols[1];
    EXPECT_EQ(std::to_string(f->number()), r.cols[2]) << r.cols[0] << "." << r.cols[1];
    EXPECT_EQ(f->is_repeated() ? "repeated" : "optional", r.cols[3])
        << r.cols[0] << "." << r.cols[1];
    EXPECT_EQ(TypeWord(f), r.cols[4]) << r.cols[0] << "." << r.cols[1];
    recorded_fields[r.cols[0]].insert(r.cols[1]);
  }
  // No field of ours is missing from the table.
  for (const auto& [name, fields] : recorded_fields) {
    const Descriptor* msg = pool->FindMessageTypeByName(name);
    EXPECT_EQ(msg->field_count(), static_cast<int>(fields.size())) << name;
  }
}

TEST(ProtoFactsTest, MapsAndMethodPathsAreTheUpstreamOnes) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  for (const char* v : {"v1", "v1beta1"}) {
    std::string p = std::string("k8s.io.kubelet.pkg.apis.dra.") + v;
    auto* resp = pool->FindMessageTypeByName(p + ".NodePrepareResourcesResponse");
    ASSERT_NE(resp, nullptr);
    const FieldDescriptor* claims = resp->FindFieldByName("claims");
    ASSERT_TRUE(claims->is_map());
    EXPECT_EQ(claims->message_type()->map_key()->type(), FieldDescriptor::TYPE_STRING);
    EXPECT_EQ(claims->message_type()->map_value()->message_type()->full_name(),
              p + ".NodePrepareResourceResponse");
    // The gRPC method path kubelet dials (api_grpc.pb.go
    // DRAPlugin_NodePrepareResources_FullMethodName).
    auto* svc = pool->FindServiceByName(p + ".DRAPlugin");
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ("/" + svc->full_name() + "/" + svc->method(0)->name(),
              "/" + p + ".DRAPlugin/NodePrepareResources");
  }
  // "This should have been v1" (upstream comment): the registration package is bare.
  EXPECT_NE(pool->FindServiceByName("pluginregistration.Registration"), nullptr);
  EXPECT_STREQ(kServiceV1, "v1.DRAPlugin");
  EXPECT_STREQ(kServiceV1beta1, "v1beta1.DRAPlugin");
  EXPECT_STREQ(kPluginTypeDra, "DRAPlugin");
}

}  // namespace
}  // namespace fracgpu::dra
