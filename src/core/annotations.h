#pragma once
// The annotation keys fracgpu's own components write on pods and nodes — docs/design/CONTRACT.md §2
// ("What the system writes (users must never set these)") — declared once, for the
// scheduler, the device plugin and the webhook's guard of them. HAMi's key names
// (docs/design/hami-behaviour.md), so a cluster can mix HAMi and fracgpu components.
//
// The signature key of §2 lock 3, `fracgpu.io/allocation-signature`, is declared with its
// signing functions in core/signature.h (core::kAnnotationAllocationSignature) and is
// reachable through this header.

#include <array>

#include "core/signature.h"

namespace fracgpu::core {

// ---- pod annotations (docs/design/CONTRACT.md §2, pod table) ----

/// Node name the scheduler chose.
inline constexpr char kAnnotationVgpuNode[] = "hami.io/vgpu-node";
/// Unix seconds of the scheduler's decision.
inline constexpr char kAnnotationVgpuTime[] = "hami.io/vgpu-time";
/// The allocation (core/codec.h PodGrants encoding, init containers first); the scheduler's
/// record, and what its signature covers.
inline constexpr char kAnnotationVgpuDevicesAllocated[] = "hami.io/vgpu-devices-allocated";
/// Same encoding; the device plugin blanks each container's entry as it serves it.
inline constexpr char kAnnotationVgpuDevicesToAllocate[] = "hami.io/vgpu-devices-to-allocate";
/// Bind phase: kBindPhaseAllocating (set at bind), then kBindPhaseSuccess or
/// kBindPhaseFailed (set by the device plugin).
inline constexpr char kAnnotationBindPhase[] = "hami.io/bind-phase";
/// Unix seconds of the bind.
inline constexpr char kAnnotationBindTime[] = "hami.io/bind-time";

/// Values of kAnnotationBindPhase (docs/design/CONTRACT.md §2).
inline constexpr char kBindPhaseAllocating[] = "allocating";
inline constexpr char kBindPhaseSuccess[] = "success";
inline constexpr char kBindPhaseFailed[] = "failed";

/// Every pod annotation of §2: removed on CREATE, and changed on UPDATE only by fracgpu's
/// service accounts (§2 locks 1–2).
inline constexpr std::array<const char*, 7> kSystemPodAnnotations = {
    kAnnotationVgpuNode,
    kAnnotationVgpuTime,
    kAnnotationVgpuDevicesAllocated,
    kAnnotationVgpuDevicesToAllocate,
    kAnnotationBindPhase,
    kAnnotationBindTime,
    kAnnotationAllocationSignature};
/// The subset the device plugin's service account may change (§2 lock 2).
inline constexpr std::array<const char*, 2> kDevicePluginPodAnnotations = {
    kAnnotationVgpuDevicesToAllocate, kAnnotationBindPhase};

// ---- node annotations (docs/design/CONTRACT.md §2, node table) ----

/// The node's GPUs, written by the device plugin on change and every 30 s (JSON array, or
/// HAMi's legacy colon format; core/codec.h).
inline constexpr char kAnnotationNodeRegister[] = "hami.io/node-nvidia-register";
/// `Requesting_<YYYY-MM-DD HH:MM:SS>`, written by the scheduler as HAMi's does.
inline constexpr char kAnnotationNodeHandshake[] = "hami.io/node-handshake";
/// The node lock `<RFC3339 time>,<namespace>,<pod name>`: set by the scheduler at bind,
/// released by the device plugin after Allocate; expires after 5 minutes.
inline constexpr char kAnnotationNodeLock[] = "hami.io/mutex.lock";
/// Memory the node agent lends to borrower pods while owners are parked (issue 36 item 2):
/// `<unix seconds>;<gpu uuid>:<MiB>,…`, written by the node agent (`fracgpu monitor --park`)
/// every 30 s while it lends; coded by core/lent.h; counts only while fresh (90 s).
inline constexpr char kAnnotationLentMemory[] = "fracgpu.io/lent-memory";
/// Pods holding GPU memory on the node while idle (issue 36 item 4, the dashboard's idle-holder
/// view): `<unix seconds>;<pod uid>:<gpu uuid>:<MiB>:<idle seconds>,…`, written by the node
/// agent (`fracgpu monitor`) on change and every 60 s while a pod is listed; coded by
/// core/idle_holders.h; shown only while fresh (180 s).
inline constexpr char kAnnotationIdleHolders[] = "fracgpu.io/idle-holders";

}  // namespace fracgpu::core
