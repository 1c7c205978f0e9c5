#pragma once
// The one encoder/decoder of the node lock annotation `hami.io/mutex.lock`
// (core::kAnnotationNodeLock; docs/design/CONTRACT.md §2, docs/design/hami-behaviour.md §3.7).
// The scheduler writes it at bind and reads it to decide contention; the device plugin reads
// it to find the pod in the bind → Allocate window and to release it. Like the decoders of
// core/codec.h it takes outside input: it validates everything, returns kInvalidArgument
// naming the field and value (without the annotation key: callers add it with
// Status::WithPrefix), and never crashes (fuzzed: tests/fuzz/node_lock_fuzz.cc).

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"

namespace fracgpu::core {

/// A node lock value: when it was taken (UTC, whole seconds since the Unix epoch) and by which
/// pod. Namespace and name are both empty for HAMi's legacy bare-time value.
struct NodeLock {
  std::chrono::sys_seconds time{};
  std::string pod_namespace;
  std::string pod_name;

  /// Whether the value names a pod (namespace and name both non-empty), as HAMi's LockNode
  /// requires before it looks the owner up; a legacy value names none and only expires.
  bool names_pod() const { return !pod_namespace.empty() && !pod_name.empty(); }
  bool operator==(const NodeLock&) const = default;
};

/// Encodes `<time>,<namespace>,<pod name>` with the time as RFC3339 UTC in whole seconds
/// ("2026-03-02T10:15:04Z,default,gpu-pod"), as HAMi's GenerateNodeLockKeyByPod writes it
/// (time.Now().Format(time.RFC3339) in a UTC container). Preconditions: the time lies in years
/// 0000..9999 (RFC3339's four-digit year) and neither name contains ',' (Kubernetes names never
/// do); both hold for every value DecodeNodeLock returns.
std::string EncodeNodeLock(const NodeLock& lock);

/// Decodes a node lock value by HAMi's own rule (pkg/util/nodelock ParseNodeLock, HAMi v2.x):
///  * no ',' at all: HAMi's legacy bare time; namespace and name are empty (names no pod);
///  * otherwise exactly three ','-separated fields `<time>,<namespace>,<pod name>`; a fourth
///    field is an error, as in HAMi ("expected 3 parts"), never folded into the name. The
///    namespace and the name are taken as written and may be empty (then names_pod() is false).
/// The time is RFC3339 as Go's time.Parse(time.RFC3339, …) reads it:
/// `YYYY-MM-DDTHH:MM:SS[.digits](Z|+HH:MM|-HH:MM)`, upper-case T and Z, year 0000..9999, a real
/// calendar day, hour 0..23, minute 0..59, second 0..59, zone hour 0..23, zone minute 0..59;
/// the fraction is dropped (time is in whole seconds) and the zone offset applied (→ UTC).
/// Errors (kInvalidArgument): a field count other than 1 or 3 ("\"t,ml,train,x\" has 4
/// ','-separated fields, want <time>,<namespace>,<pod name> or a bare time"), or a time that is
/// not RFC3339 ("time \"yesterday\" is not RFC3339 (YYYY-MM-DDTHH:MM:SS[.frac] then Z or
/// ±HH:MM)", "time \"2026-13-02T10:15:04Z\": month 13 is out of range 1..12").
Result<NodeLock> DecodeNodeLock(std::string_view value);

}  // namespace fracgpu::core
