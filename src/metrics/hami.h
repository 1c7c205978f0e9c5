#pragma once
// What fracgpu's daemons share to expose HAMi v2.10's metric names next to their own
// (docs/design/hami-behaviour.md §6; docs/hami-migration.md "Metrics"): HAMi's build-info
// family and the constant `zone` label HAMi's collectors carry.

#include <string>

#include "metrics/registry.h"

namespace fracgpu::metrics {

/// The value of the `zone` label HAMi adds to every family of its scheduler and vGPUmonitor
/// collectors (prometheus.WrapRegistererWith({"zone": "vGPU"})); hami_build_info has none.
inline constexpr const char* kHamiZone = "vGPU";

/// Declares `hami_build_info` (a gauge, always 1) on `r`.
void DescribeHamiBuildInfo(Registry& r);
/// Sets `hami_build_info` with HAMi's labels, in HAMi's order: version (`version`, fracgpu's),
/// revision, build_date, go_version ("none": not a Go build), compiler (the C++ compiler) and
/// platform (`linux/amd64`, `linux/arm64`, … as Go's GOOS/GOARCH write it).
void SetHamiBuildInfo(Registry::Scrape& s, const std::string& version);

/// Checks the two name-set flags both daemons take (--hami-metrics, --legacy-metrics): the
/// legacy names are added to HAMi's, so --legacy-metrics needs --hami-metrics on. Returns ""
/// when they agree, else the error to print (naming both flags).
std::string CheckHamiMetricFlags(bool hami_metrics, bool legacy_metrics);

}  // namespace fracgpu::metrics
