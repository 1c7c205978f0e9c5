// Trace CSV loaders (src/sim/trace.h): good files in both layouts and a table of bad rows,
// each failing the whole load with `file:line: column: problem`.
#include "sim/trace.h"

#include <gtest/gtest.h>

namespace fracgpu::sim {
namespace {

constexpr char kNodeHeader[] = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
constexpr char kShortHeader[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

TEST(ParseNodeCsv, ReadsRows) {
  auto nodes = ParseNodeCsv(std::string(kNodeHeader) +
                                "openb-node-0000,64000,262144,2,P100\r\n"
                                "openb-node-0001,96000,393216,0,\n",
                            "n.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "openb-node-0000");
  EXPECT_EQ((*nodes)[0].cpu_milli, 64000);
  EXPECT_EQ((*nodes)[0].memory_mib, 262144);
  EXPECT_EQ((*nodes)[0].gpus, 2);
  EXPECT_EQ((*nodes)[0].model, "P100");
  EXPECT_EQ((*nodes)[0].line, 2);
  EXPECT_EQ((*nodes)[1].gpus, 0);
  EXPECT_EQ((*nodes)[1].model, "");
}

TEST(ParsePodCsv, ReadsBothLayouts) {
  auto full = ParsePodCsv(std::string(kPodHeader) +
                              "p0,12000,16384,1,470,V100M16|V100M32,LS,Running,0,12537496,0\n"
                              "p1,4000,8192,0,0,,BE,Pending,5,,\n",
                          "p.csv");
  ASSERT_TRUE(full.ok()) << full.status().message();
  ASSERT_EQ(full->size(), 2u);
  EXPECT_EQ((*full)[0].cpu_milli, 12000);
  EXPECT_EQ((*full)[0].memory_mib, 16384);
  EXPECT_EQ((*full)[0].num_gpus, 1);
  EXPECT_EQ((*full)[0].gpu_milli, 470);
  EXPECT_EQ((*full)[0].gpu_spec, "V100M16|V100M32");
  EXPECT_EQ((*full)[1].TotalGpuMilli(), 0);
  auto short_layout = ParsePodCsv(std::string(kShortHeader) + "p0,1000,100,8,1000\n", "m.csv");
  ASSERT_TRUE(short_layout.ok()) << short_layout.status().message();
  EXPECT_EQ((*short_layout)[0].TotalGpuMilli(), 8000);
  EXPECT_EQ((*short_layout)[0].gpu_spec, "");
}

struct BadCase {
  const char* name;
  std::string text;
  std::string want;  // the whole error message
};

TEST(ParseNodeCsv, BadCases) {
  const std::string h = kNodeHeader;
  const BadCase cases[] = {
      {"empty", "", "n.csv:1: header: empty file"},
      {"header", "sn,cpu,memory_mib,gpu,model\n",
       "n.csv:1: header: expected \"sn,cpu_milli,memory_mib,gpu,model\", got "
       "\"sn,cpu,memory_mib,gpu,model\""},
      {"columns", h + "a,1,1,1\n", "n.csv:2: row: expected 5 columns, got 4"},
      {"name", h + ",1,1,1,T4\n", "n.csv:2: sn: empty node name"},
      {"duplicate", h + "a,1,1,1,T4\na,1,1,1,T4\n", "n.csv:3: sn: duplicate node name \"a\""},
      {"cpu", h + "a,1.5,1,1,T4\n",
       "n.csv:2: cpu_milli: must be an integer 0..1099511627776, got \"1.5\""},
      {"negative mem", h + "a,1,-1,1,T4\n",
       "n.csv:2: memory_mib: must be an integer 0..1099511627776, got \"-1\""},
      {"gpus", h + "a,1,1,17,T4\n", "n.csv:2: gpu: must be an integer 0..16, got \"17\""},
      {"model missing", h + "a,1,1,2,\n", "n.csv:2: model: missing on a node with 2 GPUs"},
      {"model on cpu node", h + "a,1,1,0,T4\n",
       "n.csv:2: model: \"T4\" given on a node with 0 GPUs"},
      {"blank line", h + "a,1,1,0,\n\nb,1,1,0,\n", "n.csv:3: row: empty line"},
      {"quoted", h + "\"a\",1,1,0,\n", "n.csv:2: row: quoted fields are not supported"},
  };
  for (const auto& c : cases) {
    auto r = ParseNodeCsv(c.text, "n.csv");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(r.status().message(), c.want) << c.name;
  }
}

TEST(ParsePodCsv, BadCases) {
  const std::string h = kPodHeader;
  const std::string s = kShortHeader;
  const BadCase cases[] = {
      {"header", "name,cpu_milli\n",
       "p.csv:1: header: expected \"" + h.substr(0, h.size() - 1) + "\" or \"" +
           s.substr(0, s.size() - 1) + "\", got \"name,cpu_milli\""},
      {"columns", h + "p,1,1,0,0\n", "p.csv:2: row: expected 11 columns, got 5"},
      {"name", s + ",1,1,0,0\n", "p.csv:2: name: empty pod name"},
      {"duplicate", s + "p,1,1,0,0\np,1,1,0,0\n", "p.csv:3: name: duplicate pod name \"p\""},
      {"cpu", s + "p,x,1,0,0\n",
       "p.csv:2: cpu_milli: must be an integer 0..1099511627776, got \"x\""},
      {"mem empty", s + "p,1,,0,0\n",
       "p.csv:2: memory_mib: must be an integer 0..1099511627776, got an empty value"},
      {"num_gpu", s + "p,1,1,32,1000\n", "p.csv:2: num_gpu: must be an integer 0..16, got \"32\""},
      {"milli range", s + "p,1,1,1,1010\n",
       "p.csv:2: gpu_milli: must be an integer 0..1000, got \"1010\""},
      {"milli on cpu pod", s + "p,1,1,0,500\n",
       "p.csv:2: gpu_milli: must be 0 when num_gpu is 0, got \"500\""},
      {"zero milli", s + "p,1,1,2,0\n",
       "p.csv:2: gpu_milli: must be 10..1000 when num_gpu is 2, got \"0\""},
      {"milli step", s + "p,1,1,1,455\n",
       "p.csv:2: gpu_milli: must be a multiple of 10 (gpucores are whole percent), got \"455\""},
      {"spec", h + "p,1,1,1,500,T4||P100,LS,Running,0,1,0\n",
       "p.csv:2: gpu_spec: empty model in \"T4||P100\""},
      {"time", h + "p,1,1,1,500,,LS,Running,soon,1,0\n",
       "p.csv:2: creation_time: must be an integer 0..1099511627776, got \"soon\""},
      // A bad row after good ones still fails the whole load.
      {"late row", s + "a,1,1,0,0\nb,1,1,0,0\nc,1,1,1,5\n",
       "p.csv:4: gpu_milli: must be a multiple of 10 (gpucores are whole percent), got \"5\""},
  };
  for (const auto& c : cases) {
    auto r = ParsePodCsv(c.text, "p.csv");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().message(), c.want) << c.name;
  }
}

TEST(LoadPodCsv, MissingFileNamesThePath) {
  auto r = LoadPodCsv("/nonexistent/pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/pods.csv"), std::string::npos);
}

}  // namespace
}  // namespace fracgpu::sim
