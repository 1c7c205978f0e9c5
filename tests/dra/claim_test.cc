// ParseClaimAllocation: the shares of a claim as kube-scheduler writes them, and a table of
// malformed results, each refused with the field named.
#include "dra/claim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace fracgpu::dra {
namespace {

using namespace testing;  // NOLINT

TEST(ClaimTest, SharesWithConsumedCapacityAndWholeDevices) {
  json claim =
      Claim("c", "uid-1",
            json::array({Result("gpu-0", "3000Mi", "30", "11111111-2222-3333-4444-555555555555"),
                         Result("gpu-1")}));
  auto shares = ParseClaimAllocation(claim, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_TRUE(shares.ok()) << shares.status().ToString();
  ASSERT_EQ(shares->size(), 2u);
  EXPECT_EQ((*shares)[0], (AllocatedShare{"gpu", kNode, "gpu-0", kUuid0, 3000, 30,
                                          "11111111-2222-3333-4444-555555555555"}));
  // No consumedCapacity: the whole card (16384 MiB, 100 %).
  EXPECT_EQ((*shares)[1], (AllocatedShare{"gpu", kNode, "gpu-1", kUuid1, 16384, 100, ""}));
}

TEST(ClaimTest, CanonicalQuantitiesQualifiedNamesAndOtherDrivers) {
  json r = Result("gpu-1", "", "", "s1");
  r["consumedCapacity"] = {{"gpu.fracgpu.io/memory", "3Gi"}, {"gpu.fracgpu.io/cores", "0"}};
  json other = {
      {"request", "nic"}, {"driver", "nic.example.com"}, {"pool", "elsewhere"}, {"device", "eth0"}};
  auto shares = ParseClaimAllocation(Claim("c", "u", json::array({other, r})), "gpu.fracgpu.io",
                                     kNode, TwoGpus());
  ASSERT_TRUE(shares.ok()) << shares.status().ToString();
  ASSERT_EQ(shares->size(), 1u);
  EXPECT_EQ((*shares)[0].mem_mib, 3072);
  EXPECT_EQ((*shares)[0].cores, 0);
}

TEST(ClaimTest, MalformedAllocationsAreRefusedNamingTheField) {
  struct Case {
    const char* what;
    json results;
    StatusCode code;
    const char* needle;
  };
  json many = json::array();
  for (int i = 0; i < 33; ++i) {
    std::string share = "s";
    share += std::to_string(i);
    many.push_back(Result("gpu-0", "1Mi", "0", share));
  }
  json no_request = Result("gpu-0");
  no_request.erase("request");
  json bad_share = Result("gpu-0", "1Mi", "0");
  bad_share["shareID"] = 7;
  json caps_list = Result("gpu-0");
  caps_list["consumedCapacity"] = json::array();
  json no_mem = Result("gpu-0");
  no_mem["consumedCapacity"] = {{"cores", "1"}};
  std::vector<Case> cases = {
      {"results not a list", json::object(), StatusCode::kInvalidArgument, "must be a list"},
      {"too many", many, StatusCode::kInvalidArgument, "at most 32"},
      {"entry not an object", json::array({"gpu-0"}), StatusCode::kInvalidArgument,
       "results[0] must be an object"},
      {"no request", json::array({no_request}), StatusCode::kInvalidArgument, "results[0].request"},
      {"other pool", json::array({[] {
         json r = Result("gpu-0");
         r["pool"] = "node-b";
         return r;
       }()}),
       StatusCode::kInvalidArgument, "not this node's pool"},
      {"unknown device", json::array({Result("gpu-7")}), StatusCode::kNotFound,
       "\"gpu-7\" is not a device of pool"},
      {"memory not a string", json::array({[] {
         json r = Result("gpu-0", "1Mi", "1");
         r["consumedCapacity"]["memory"] = 3000;
         return r;
       }()}),
       StatusCode::kInvalidArgument, "consumedCapacity.memory must be a quantity string"},
      {"memory garbage", json::array({Result("gpu-0", "lots", "1", "s")}),
       StatusCode::kInvalidArgument, "consumedCapacity.memory \"lots\""},
      {"memory fraction of MiB", json::array({Result("gpu-0", "1000", "1", "s")}),
       StatusCode::kInvalidArgument, "not a whole number of MiB"},
      {"memory beyond card", json::array({Result("gpu-0", "17Gi", "1", "s")}),
       StatusCode::kInvalidArgument, "17408 MiB; device gpu-0 has 16384 MiB"},
      {"memory zero", json::array({Result("gpu-0", "0", "1", "s")}), StatusCode::kInvalidArgument,
       "is 0 MiB"},
      {"cores over 100", json::array({Result("gpu-0", "1Gi", "101", "s")}),
       StatusCode::kInvalidArgument, "cores is 101"},
      {"cores negative", json::array({Result("gpu-0", "1Gi", "-1", "s")}),
       StatusCode::kInvalidArgument, "negative"},
      {"shareID not a string", json::array({bad_share}), StatusCode::kInvalidArgument,
       "shareID must be a UID"},
      {"consumedCapacity a list", json::array({caps_list}), StatusCode::kInvalidArgument,
       "must be a map"},
      {"no memory entry", json::array({no_mem}), StatusCode::kInvalidArgument,
       "no \"memory\" entry"},
      {"same device twice",
       json::array({Result("gpu-0", "1Gi", "1", "a"), Result("gpu-0", "1Gi", "1", "b")}),
       StatusCode::kInvalidArgument, "allocated twice"},
      {"no result of ours",
       json::array({{{"request", "x"}, {"driver", "other.io"}, {"pool", "p"}, {"device", "d"}}}),
       StatusCode::kInvalidArgument, "no device of driver gpu.fracgpu.io"},
  };
  for (const auto& c : cases) {
    auto r = ParseClaimAllocation(Claim("c", "u", c.results), "gpu.fracgpu.io", kNode, TwoGpus());
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.what << ": " << r.status().message();
  }
  json unallocated = Claim("c", "u", json::array());
  unallocated["status"] = json::object();
  auto r = ParseClaimAllocation(unallocated, "gpu.fracgpu.io", kNode, TwoGpus());
  EXPECT_NE(r.status().message().find("not allocated"), std::string::npos);
  EXPECT_EQ(ParseClaimAllocation(json("str"), "gpu.fracgpu.io", kNode, TwoGpus()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ClaimTest, UnhealthyDeviceIsUnavailable) {
  auto devices = TwoGpus();
  devices[0].health = false;
  auto r = ParseClaimAllocation(Claim("c", "u", json::array({Result("gpu-0", "1Gi", "1", "s")})),
                                "gpu.fracgpu.io", kNode, devices);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

TEST(ClaimTest, CapacityAskedButNotConsumedIsRefusedNotMadeWhole) {
  // kube-scheduler without DRAConsumableCapacity (or whole-card slices) allocates the device
  // whole and writes no consumedCapacity; the claim's spec still says what was asked.
  json asked = {{"requests", {{"memory", "3000Mi"}, {"cores", "30"}}}};
  json exact = Claim("c", "u", json::array({Result("gpu-0")}));
  exact["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = asked;
  auto r = ParseClaimAllocation(exact, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("results[0] (request \"gpu\") asks for capacity"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("3000Mi"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("does not serve consumable capacity"));
  // The same through a firstAvailable subrequest.
  json fa = Claim("c", "u", json::array({Result("gpu-1", "", "", "", "gpu/small")}));
  fa["spec"]["devices"]["requests"][0] = {
      {"name", "gpu"},
      {"firstAvailable",
       json::array({{{"name", "small"}, {"deviceClassName", "gpu.fracgpu.io"}, {"capacity", asked}},
                    {{"name", "whole"}, {"deviceClassName", "gpu.fracgpu.io"}}})}};
  r = ParseClaimAllocation(fa, "gpu.fracgpu.io", kNode, TwoGpus());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  // The "whole" alternative asked for no capacity: a whole GPU is what it asked for.
  fa["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/whole";
  r = ParseClaimAllocation(fa, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].cores, 100);
  // And with the capacity consumed, as a cluster serving it allocates, the share is taken.
  exact["status"]["allocation"]["devices"]["results"][0] = Result("gpu-0", "3000Mi", "30", "s-1");
  r = ParseClaimAllocation(exact, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].mem_mib, 3000);
}

TEST(ClaimTest, AdminAccessAndOpaqueConfigAreRefusedNotIgnored) {
  json admin = Claim("c", "u", json::array({Result("gpu-0", "3000Mi", "30", "s-1")}));
  admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = true;
  auto r = ParseClaimAllocation(admin, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("results[0].adminAccess"));
  admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = false;
  EXPECT_TRUE(ParseClaimAllocation(admin, "gpu.fracgpu.io", kNode, TwoGpus()).ok());

  json opaque = Claim("c", "u", json::array({Result("gpu-0", "3000Mi", "30", "s-1")}));
  opaque["status"]["allocation"]["devices"]["config"] = json::array(
      {{{"source", "FromClaim"},
        {"opaque", {{"driver", "other.example.com"}, {"parameters", {{"a", 1}}}}}},
       {{"source", "FromClass"},
        {"requests", {"gpu"}},
        {"opaque", {{"driver", "gpu.fracgpu.io"}, {"parameters", {{"sharing", "mps"}}}}}}});
  r = ParseClaimAllocation(opaque, "gpu.fracgpu.io", kNode, TwoGpus());
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("devices.config[1].opaque: gpu.fracgpu.io takes no opaque"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("mps"));
  // Another driver's opaque config is that driver's business.
  opaque["status"]["allocation"]["devices"]["config"].erase(1);
  EXPECT_TRUE(ParseClaimAllocation(opaque, "gpu.fracgpu.io", kNode, TwoGpus()).ok());
}

}  // namespace
}  // namespace fracgpu::dra
