// `fracgpu simulate` through its CLI11 registration (as src/cli/main.cc runs it): bad flags and
// inputs are refused before anything is simulated, with exit 2 and one line naming the flag and
// the value; a small valid run still runs.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "cli/usage.h"

namespace fracgpu::cli {
void RegisterSimulateCommand(CLI::App& app);
}  // namespace fracgpu::cli

namespace fracgpu::sim {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int rc = 0;
  std::string out, err;
};

class SimulateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ + "/expected");
    std::ofstream(dir_ + "/nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\n"
                                          "n0,32000,131072,2,T4\n"
                                          "n1,32000,131072,2,V100M16\n";
    WriteTrace("T4");
  }

  void WriteTrace(const std::string& spec_of_p2) {
    std::ofstream(dir_ + "/pods.csv") << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                         "pod_phase,creation_time,deletion_time,"
                                         "scheduled_time\n"
                                         "p0,1000,1024,1,500,,LS,Running,0,10,0\n"
                                         "p1,1000,1024,1,300,V100M16|T4,LS,Running,1,10,1\n"
                                         "p2,1000,1024,1,200,"
                                      << spec_of_p2 << ",LS,Running,2,10,2\n";
  }

  // `fracgpu simulate` on the small inputs; `flags` replace the defaults below (CLI11 refuses a
  // flag given twice).
  Outcome Simulate(const std::map<std::string, std::string>& flags) {
    std::map<std::string, std::string> all = {{"--trace", dir_ + "/pods.csv"},
                                              {"--nodes", dir_ + "/nodes.csv"},
                                              {"--expected", dir_ + "/expected"},
                                              {"--out", dir_ + "/out"},
                                              {"--seeds", "1"},
                                              {"--policies", "FGD,BestFit"},
                                              {"-j", "1"}};
    for (const auto& [flag, value] : flags) all[flag] = value;
    std::vector<std::string> args = {"simulate", "-q"};
    if (!with_bound_) args.push_back("--no-bound");
    for (const std::string& flag : extra_flags_) args.push_back(flag);
    for (const auto& [flag, value] : all) {
      args.push_back(flag);
      args.push_back(value);
    }
    CLI::App app("fracgpu");
    app.require_subcommand(1);
    fracgpu::cli::RegisterSimulateCommand(app);
    std::reverse(args.begin(), args.end());  // CLI11 takes the vector reversed
    Outcome o;
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    try {
      app.parse(args);
    } catch (const CLI::Error& e) {
      o.rc = cli::ExitFor(app, "simulate", e);  // what fracgpu prints and returns
    }
    o.out = ::testing::internal::GetCapturedStdout();
    o.err = ::testing::internal::GetCapturedStderr();
    return o;
  }

  std::vector<std::string> extra_flags_;  // flags without a value, e.g. --no-parking
  bool with_bound_ = false;  // compute the packing bound (one small LP per 5 % of arrived)
  ::fracgpu::test_support::TempDir tmp_{"fracgpu-simcmd-"};
  std::string dir_ = tmp_.path();
};

TEST_F(SimulateCommandTest, SmallValidRunRuns) {
  Outcome o = Simulate({});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("trace pods: 3 pods (3 GPU pods)"), std::string::npos) << o.out;
  EXPECT_TRUE(fs::exists(dir_ + "/out/allocation_pods.csv"));
}

// The notebook parking table (src/sim/parking.h) follows the packing table: one row without
// parking and one per --park-idle threshold, and the same rows in OUT/parking_<trace>.csv.
TEST_F(SimulateCommandTest, PrintsTheParkingTableWithAndWithout) {
  Outcome o = Simulate({{"--park-idle", "5,45"}});
  ASSERT_EQ(o.rc, 0) << o.err;
  const size_t table = o.out.find("\nnotebook parking");
  ASSERT_NE(table, std::string::npos) << o.out;
  EXPECT_NE(o.out.find("FGD's packing at 100 % arrived", table), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\nwithout parking ", table), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\npark, idle >= 5 min ", table), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\npark, idle >= 45 min ", table), std::string::npos) << o.out;
  std::ifstream in(dir_ + "/out/parking_pods.csv");
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.substr(0, header.find(",work_per_gpu")), "setting,idle_threshold_min");
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 3);
  // --no-parking leaves the table and its file out.
  fs::remove(dir_ + "/out/parking_pods.csv");
  extra_flags_ = {"--no-parking"};
  o = Simulate({});
  EXPECT_EQ(o.out.find("notebook parking"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/out/parking_pods.csv"));
}

TEST_F(SimulateCommandTest, ThePapersMeansAreWrittenForTheChart) {
  // The authors' table for this trace ("pods"): FGD at 100 % is (80 + 82) / 2 = 81, at 130 %
  // (90 + 91) / 2 = 90.5; BestFit has no row, so its points are empty.
  std::ofstream(dir_ + "/expected/analysis_allo_discrete.csv")
      << "workload,sc_policy,tune,seed,total_gpus,100,130\n"
         "pods,06-FGD,1.3,42,4,80.0,90.0\n"
         "pods,06-FGD,1.3,43,4,82.0,91.0\n"
         "other,06-FGD,1.3,42,4,10.0,10.0\n";
  Outcome o = Simulate({});
  ASSERT_EQ(o.rc, 0) << o.err;
  std::ifstream in(dir_ + "/out/paper_pods.csv");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "arrived_pct,FGD,BestFit\n100,81.00,\n130,90.50,\n");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The charts' gnuplot scripts: the key outside the plot area (it can cross no curve), axes
// with their unit, the arrived line drawn solid enough to see, the bound its own series with
// its own key entry, and gnuplot (when installed) renders both to non-empty PNGs.
TEST_F(SimulateCommandTest, ChartsKeepTheKeyOutsideAndDrawTheBound) {
  with_bound_ = true;
  Outcome o = Simulate({});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("bound100"), std::string::npos) << o.out;
  const std::string csv = ReadAll(dir_ + "/out/allocation_pods.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "arrived_pct,FGD,BestFit,upper_bound,upper_bound_any_policy");
  // Each bucket of 5 % from 80: the placing policies' bound never above the any-policy one.
  std::istringstream rows(csv);
  std::string row;
  int bound_rows = 0;
  while (std::getline(rows, row)) {
    const size_t b = row.rfind(',', row.rfind(',') - 1);
    const std::string placing = row.substr(b + 1, row.rfind(',') - b - 1);
    const std::string any = row.substr(row.rfind(',') + 1);
    if (placing.empty() || any.empty() || placing == "upper_bound") continue;
    EXPECT_LE(std::stod(placing), std::stod(any) + 1e-9) << row;
    ++bound_rows;
  }
  EXPECT_GT(bound_rows, 0) << csv;
  for (const std::string stem : {"allocation_pods", "allocation_pods_knee"}) {
    const std::string gp = ReadAll(dir_ + "/out/" + stem + ".gp");
    ASSERT_FALSE(gp.empty()) << stem;
    EXPECT_NE(gp.find("\nset key outside right top"), std::string::npos) << gp;
    // No later "set key" moves it back inside.
    EXPECT_EQ(gp.find("set key", gp.find("set key outside") + 1), std::string::npos) << gp;
    EXPECT_NE(gp.find("set xlabel 'arrived GPU request (% of the cluster GPU capacity)'"),
              std::string::npos);
    EXPECT_NE(gp.find("set ylabel 'GPU allocated (% of the cluster GPU capacity)'"),
              std::string::npos);
    // The arrived line is drawn after (on top of) the policies' curves, dashed.
    const size_t arrived =
        gp.find(", x title 'arrived (all placed)' with lines lw 2 dashtype (8,6)");
    EXPECT_NE(arrived, std::string::npos) << gp;
    EXPECT_LT(gp.find("title 'BestFit'"), arrived) << gp;
    // The bounds: columns 4 and 5 of the CSV (after the two policies), each titled.
    EXPECT_NE(gp.find("using 1:4 with linespoints lw 3 dashtype 3 pt 5 ps 1 lc rgb 'black' "
                      "title 'upper bound, placing policies (LP)'"),
              std::string::npos)
        << gp;
    EXPECT_NE(gp.find("using 1:5 with linespoints lw 2 dashtype 2 pt 4 ps 1 lc rgb '#606060' "
                      "title 'upper bound, any policy (LP)'"),
              std::string::npos)
        << gp;
    if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
      std::error_code ec;
      EXPECT_GT(fs::file_size(dir_ + "/out/" + stem + ".png", ec), 1000u) << stem << ec.message();
    }
  }
}

// The table's bound100 / bound130 are the bound for placing policies, the any-policy bound its
// own line. One node of two GPUs; seed 7 brings two 0.6-GPU pods, then two 0.5-GPU pods. A
// placing policy must put the 0.6 pods on both cards, and then no 0.5 pod fits: 1.2 of 2 GPUs,
// 60 %. A policy free to refuse one 0.6 pod places 0.6 + 0.5 + 0.5: 80 %.
TEST_F(SimulateCommandTest, TheTableBoundIsThePlacingPoliciesOne) {
  with_bound_ = true;
  std::ofstream(dir_ + "/nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\n"
                                        "n0,32000,131072,2,T4\n";
  std::ofstream(dir_ + "/pods.csv") << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                       "pod_phase,creation_time,deletion_time,scheduled_time\n"
                                       "a0,1000,1024,1,600,,LS,Running,0,10,0\n"
                                       "a1,1000,1024,1,600,,LS,Running,1,10,1\n"
                                       "b0,1000,1024,1,500,,LS,Running,2,10,2\n"
                                       "b1,1000,1024,1,500,,LS,Running,3,10,3\n";
  Outcome o = Simulate({{"--seeds", "7"}, {"--policies", "FGD"}});
  ASSERT_EQ(o.rc, 0) << o.err;
  const size_t row = o.out.find("\nFGD ");
  ASSERT_NE(row, std::string::npos) << o.out;
  const std::string line = o.out.substr(row + 1, o.out.find('\n', row + 1) - row - 1);
  // ... | failed | bound100 gap | bound130 gap: the two pods of 0.5 failed (four pods leave
  // buckets 100 and 130 without a sample of their own, so no gap).
  EXPECT_NE(line.find("|       2 |    60.00      n/a |    60.00      n/a"), std::string::npos)
      << line;
  EXPECT_NE(o.out.find("upper bound by arrived %, placing policies: 80%: 60.00"), std::string::npos)
      << o.out;
  const size_t any = o.out.find("upper bound by arrived %, any policy (may refuse pods):");
  ASSERT_NE(any, std::string::npos) << o.out;
  EXPECT_NE(o.out.find("130%: 80.00", any), std::string::npos) << o.out;
}

TEST_F(SimulateCommandTest, BadFlagsAreRefusedUpFrontNamingFlagAndValue) {
  struct Case {
    std::map<std::string, std::string> flags;
    std::string message;
  };
  const std::string missing = dir_ + "/no-expected";
  const Case cases[] = {
      {{{"--tune", "0"}},
       "fracgpu simulate: --tune: 0 is not in (0, 10] (a multiple of capacity)\n"},
      {{{"--tune", "-1.5"}},
       "fracgpu simulate: --tune: -1.5 is not in (0, 10] (a multiple of capacity)\n"},
      {{{"-j", "-3"}},
       "fracgpu simulate: -j/--jobs: -3 is not a number of runs (>= 0; 0 = one per CPU)\n"},
      {{{"--policies", "FGD,,BestFit"}},
       "fracgpu simulate: --policies: \"FGD,,BestFit\" has an empty entry\n"},
      {{{"--policies", "FGD,"}}, "fracgpu simulate: --policies: \"FGD,\" has an empty entry\n"},
      {{{"--park-idle", "10,x"}},
       "fracgpu simulate: --park-idle: \"x\" is not a number of minutes > 0\n"},
      {{{"--park-idle", "0"}},
       "fracgpu simulate: --park-idle: \"0\" is not a number of minutes > 0\n"},
      {{{"--notebook-share", "1.5"}},
       "fracgpu simulate: --notebook-share: 1.5 is not in [0, 1] (a fraction)\n"},
      {{{"--park-hours", "0"}}, "fracgpu simulate: --park-hours: 0 is not in (0, 8760]\n"},
      {{{"--park-bandwidth", "-2"}},
       "fracgpu simulate: --park-bandwidth: -2 is not in (0, 10000] GiB/s\n"},
      {{{"--expected", missing}},
       "fracgpu simulate: --expected: \"" + missing +
           "\" is not a directory (no such file or directory)\n"},
      {{{"--expected", dir_ + "/nodes.csv"}},
       "fracgpu simulate: --expected: \"" + dir_ + "/nodes.csv\" is not a directory\n"},
      {{{"--out", dir_ + "/nodes.csv/out"}},
       "fracgpu simulate: --out: \"" + dir_ +
           "/nodes.csv/out\": cannot create the directory: Not a directory\n"},
      {{{"--out", dir_ + "/nodes.csv"}},
       "fracgpu simulate: --out: \"" + dir_ +
           "/nodes.csv\": cannot create the directory: Not a directory\n"},
  };
  for (const Case& c : cases) {
    Outcome o = Simulate(c.flags);
    const std::string what = c.flags.begin()->first + " " + c.flags.begin()->second;
    EXPECT_EQ(o.rc, 2) << what << ": " << o.err;
    EXPECT_EQ(o.err, c.message) << what;
    EXPECT_EQ(o.out, "") << what << ": simulated before refusing";
  }
  EXPECT_FALSE(fs::exists(dir_ + "/out")) << "refused runs wrote nothing";
}

TEST_F(SimulateCommandTest, UnwritableOutIsRefusedBeforeTheRun) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes in a read-only directory";
  fs::create_directories(dir_ + "/ro");
  ::chmod((dir_ + "/ro").c_str(), 0555);
  Outcome o = Simulate({{"--out", dir_ + "/ro"}});
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err,
            "fracgpu simulate: --out: \"" + dir_ + "/ro\": cannot write in this directory\n");
  EXPECT_EQ(o.out, "");
  ::chmod((dir_ + "/ro").c_str(), 0755);
}

TEST_F(SimulateCommandTest, UnknownGpuSpecIsRefusedNamingTheLineAndTheModels) {
  WriteTrace("A100");
  Outcome o = Simulate({});
  EXPECT_EQ(o.rc, 2) << o.err;
  EXPECT_EQ(o.err, "fracgpu simulate: --trace " + dir_ +
                       "/pods.csv:4: gpu_spec: \"A100\" (of \"A100\") is no GPU model of "
                       "--nodes " +
                       dir_ + "/nodes.csv (its models: T4, V100M16)\n");
  EXPECT_EQ(o.out, "");
  // One unknown entry in a list is refused too; a known one matches by the use-gputype token rule.
  WriteTrace("T4|V100M64");
  o = Simulate({});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find(":4: gpu_spec: \"V100M64\" (of \"T4|V100M64\")"), std::string::npos)
      << o.err;
}

}  // namespace
}  // namespace fracgpu::sim
