#pragma once
// `fracgpu kube-scheduler-manifest`: deploy/kube-scheduler.yaml with the upstream
// kube-scheduler image of the cluster's own version. kube-scheduler must be within the
// version-skew policy of the API server (https://kubernetes.io/releases/version-skew-policy/:
// kube-scheduler may be at most one minor version older, never newer), so the safest choice is
// the API server's own version. KubeSchedulerConfiguration kubescheduler.config.k8s.io/v1 (the
// config in the manifest) exists from Kubernetes 1.25 on and is unchanged up to 1.35.

#include <cstdint>
#include <string>

#include "base/status.h"

namespace fracgpu::cli {

/// A Kubernetes release version, e.g. 1.31.2 (patch -1 when only "1.31" was given).
struct KubeVersion {
  int32_t major = 0;
  int32_t minor = 0;
  int32_t patch = -1;
  bool operator==(const KubeVersion&) const = default;
};

/// The oldest and newest minor versions the manifest is tested with (tests/cli).
inline constexpr int32_t kOldestTestedMinor = 28;
inline constexpr int32_t kNewestTestedMinor = 35;
/// The oldest minor with kubescheduler.config.k8s.io/v1: older ones are refused.
inline constexpr int32_t kOldestSupportedMinor = 25;

/// Parses a server version: "v1.31.2", "1.31", vendor builds ("v1.30.4-eks-a737599",
/// "v1.29.3+k3s1": the suffix is dropped, upstream publishes the base release), or the JSON of
/// `kubectl get --raw /version` (`gitVersion`) or `kubectl version -o json`
/// (`serverVersion.gitVersion`). Input is bounded to 64 KiB. Errors: kInvalidArgument quoting
/// the value and the forms accepted.
Result<KubeVersion> ParseServerVersion(const std::string& text);

/// The image for `v`: "registry.k8s.io/kube-scheduler:v<major>.<minor>.<patch>" (patch 0 when
/// not given: every minor's .0 is published).
std::string KubeSchedulerImage(const KubeVersion& v);

/// `manifest` (deploy/kube-scheduler.yaml's text) with its one
/// `image: registry.k8s.io/kube-scheduler:<tag>` line set to KubeSchedulerImage(v); the rest is
/// unchanged. Errors: kInvalidArgument for major != 1 or a minor older than
/// kOldestSupportedMinor (no KubeSchedulerConfiguration v1); kInternal when the manifest has no
/// or several such image lines.
Result<std::string> KubeSchedulerManifest(const std::string& manifest, const KubeVersion& v);

/// deploy/kube-scheduler.yaml as built into the binary (the file at build time).
const std::string& BuiltInKubeSchedulerManifest();

}  // namespace fracgpu::cli
