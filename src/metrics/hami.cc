#include "metrics/hami.h"

namespace fracgpu::metrics {
namespace {

#ifndef FRACGPU_GIT_REVISION
#define FRACGPU_GIT_REVISION "unknown"
#endif

std::string HamiCompilerLabel() {
#if defined(__clang__)
  return "clang-" + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__);
#elif defined(__GNUC__)
  return "gcc-" + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__);
#else
  return "unknown";
#endif
}

const char* HamiPlatformLabel() {
#if defined(__x86_64__)
  return "linux/amd64";
#elif defined(__aarch64__)
  return "linux/arm64";
#elif defined(__powerpc64__)
  return "linux/ppc64le";
#else
  return "linux/unknown";
#endif
}

}  // namespace

std::string CheckHamiMetricFlags(bool hami_metrics, bool legacy_metrics) {
  if (legacy_metrics && !hami_metrics) {
    return "--legacy-metrics needs HAMi's names on (it adds HAMi's pre-v2.10 names to them); drop "
           "--hami-metrics=false";
  }
  return "";
}

void DescribeHamiBuildInfo(Registry& r) {
  r.Describe("hami_build_info", Type::kGauge,
             "HAMi-compatible: this build (always 1; its facts are the labels).");
}

void SetHamiBuildInfo(Registry::Scrape& s, const std::string& version) {
  s.Set("hami_build_info",
        {{"version", version},
         {"revision", FRACGPU_GIT_REVISION},
         {"build_date", "unknown"},
         {"go_version", "none"},
         {"compiler", HamiCompilerLabel()},
         {"platform", HamiPlatformLabel()}},
        1);
}

}  // namespace fracgpu::metrics
