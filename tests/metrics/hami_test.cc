// The HAMi name-set helpers both daemons share (src/metrics/hami.h).
#include "metrics/hami.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/registry.h"

namespace fracgpu::metrics {
namespace {

TEST(HamiMetricFlags, LegacyNamesNeedHamiNamesOn) {
  EXPECT_EQ(CheckHamiMetricFlags(true, false), "");
  EXPECT_EQ(CheckHamiMetricFlags(true, true), "");
  EXPECT_EQ(CheckHamiMetricFlags(false, false), "");
  const std::string bad = CheckHamiMetricFlags(false, true);
  EXPECT_NE(bad.find("--legacy-metrics"), std::string::npos) << bad;
  EXPECT_NE(bad.find("--hami-metrics=false"), std::string::npos) << bad;
}

TEST(HamiBuildInfo, OneSeriesOfValueOneWithHamisLabelsInOrderAndNoZone) {
  Registry r;
  DescribeHamiBuildInfo(r);
  r.AddCollector([](Registry::Scrape& s) { SetHamiBuildInfo(s, "1.2.3"); });
  const std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE hami_build_info gauge\n"), std::string::npos) << text;
  const size_t at = text.find("hami_build_info{version=\"1.2.3\",revision=\"");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string line = text.substr(at, text.find('\n', at) - at);
  size_t last = 0;
  for (const char* label :
       {"version=", "revision=", "build_date=", "go_version=\"none\"", "compiler=", "platform="}) {
    const size_t pos = line.find(label);
    ASSERT_NE(pos, std::string::npos) << label << " in " << line;
    EXPECT_GE(pos, last) << label << " out of HAMi's order in " << line;
    last = pos;
  }
  EXPECT_EQ(line.find("zone="), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 2), " 1") << line;
}

}  // namespace
}  // namespace fracgpu::metrics
