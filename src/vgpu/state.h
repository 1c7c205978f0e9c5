#pragma once
// libvgpu.so's process state: configuration (limits.h), the shared region (region.h), the
// mapping from CUDA ordinals to the container's devices (by UUID), and charging.
#include <atomic>
#include <cstdint>

#include "vgpu/cuda_api.h"
#include "vgpu/region.h"

namespace fracgpu::vgpu {

/// Loads the configuration and opens the region once per process (thread-safe; a forked
/// child re-claims its own slot lazily). Cheap after the first call (one acquire load).
void EnsureInit() noexcept;
/// True when the limits file exists but breaks its grammar or cannot be read (limits.h
/// ParseLimitsFile): the cuInit hook then refuses to start CUDA (issue 32 item 4).
bool LimitsFileRefused() noexcept;
/// True when some limit is configured (the process is accounted and enforced).
bool ProcessManaged() noexcept;

/// DeviceIndexForOrdinal results besides a region device index >= 0.
inline constexpr int kUnmanaged = -1;  ///< not limited: pass through uncounted
inline constexpr int kDenied = -2;     ///< not one of the container's devices: refuse

/// Region device index of CUDA ordinal `ordinal`, matched by UUID (cuDeviceGetUuid_v2), never
/// by position, so a reordered or narrowed CUDA_VISIBLE_DEVICES cannot move a limit.
/// Returns kUnmanaged when this process runs without any limit configured, kDenied for a
/// device outside a configured container. Cached per ordinal; no lock after the first call.
int DeviceIndexForOrdinal(CUdevice ordinal) noexcept;

/// Device index of the calling thread's current context (cuCtxGetDevice); sets *ordinal.
/// Returns kUnmanaged when there is no current context (the driver will report that itself).
int CurrentDeviceIndex(CUdevice* ordinal) noexcept;

/// What a charge pays for: the slot's breakdown field it lands in (region.h version 2,
/// RegionSlot::context_bytes / module_bytes / data_bytes).
enum class ChargeKind { kContext, kModule, kData };

/// Charges `bytes` to device `dev` for this process if the container's total stays within the
/// limit; otherwise (or if the device fails closed) returns CUDA_ERROR_OUT_OF_MEMORY and
/// changes nothing. The bytes count in the slot's `used` and in the breakdown field of `kind`.
/// Dead processes' charges are reclaimed first when they are in the way (only then: the
/// steady state makes no system call). Takes the region lock (robust, uncontended: no system
/// call); allocates nothing. A refusal for the limit with `api` given (the call being refused,
/// e.g. "cuMemAlloc_v2") is said once on stderr, in MiB, unless LIBCUDA_LOG_LEVEL is 0:
/// "fracgpu: <api> of <n> MiB refused: <used> MiB used of the <limit> MiB limit on GPU <dev>".
/// Pass no `api` for an attempt that is retried: only the final refusal is reported.
CUresult Charge(int dev, uint64_t bytes, ChargeKind kind = ChargeKind::kData,
                const char* api = nullptr) noexcept;
/// Returns `bytes` of device `dev` charged as `kind` (never below zero: at most what this
/// process holds of that kind). Takes the region lock.
void Uncharge(int dev, uint64_t bytes, ChargeKind kind = ChargeKind::kData) noexcept;

/// How long an allocation on `dev` that libvgpu.so charged within the limit and the driver
/// refused with CUDA_ERROR_OUT_OF_MEMORY may wait for the node agent's reclaim, ns
/// (FRACGPU_RECLAIM_WAIT_MS); 0 when it must fail at once as before: no region or slot, the
/// wait configured to 0, or the agent does not mark `dev` in Region::reclaim_lending (it lends
/// nothing there, so no borrower holds the slice's memory). One relaxed load of the region;
/// called on the failure path only.
uint64_t ReclaimWaitNs(int dev) noexcept;
/// Counts a reclaim request of `bytes` in this process's slot (api::RaiseReclaimRequest): the
/// agent evicts borrowers of the GPU for them at its next poll (docs/reclaim.md "The fallback").
/// No lock, no system call.
void RequestReclaim(uint64_t bytes) noexcept;

/// Container-wide bytes charged on `dev`, after reclaiming dead slots if a second passed.
uint64_t DeviceUsed(int dev) noexcept;
/// UUID of region device `dev` ("" if unknown).
const char* DeviceUuid(int dev) noexcept;
/// Bytes this process has charged on `dev`.
uint64_t ProcessCharged(int dev) noexcept;
/// Bytes this process has charged on `dev` as `kind`.
uint64_t ProcessCharged(int dev, ChargeKind kind) noexcept;
/// Effective limit of `dev` in bytes (0 = unlimited).
uint64_t DeviceLimit(int dev) noexcept;

/// True when some device has an SM limit (the launch hooks' one relaxed load).
extern std::atomic<bool> g_sm_limit_active;

/// Bumped whenever a context of this process goes away (destroy, last primary release, reset),
/// so per-thread context → device caches (sm_limiter.cc) never outlive their context.
extern std::atomic<uint64_t> g_context_epoch;

/// The container's shared region, or nullptr when unmanaged or failed (after EnsureInit).
Region* SharedRegion() noexcept;

/// This process's slot in the region, claimed on first call (the SM limiter needs every
/// launching process listed, so NVML samples can be matched to the container). One acquire
/// load after the first call; nullptr when unmanaged or no slot is free.
RegionSlot* ClaimOwnSlot() noexcept;

/// Records in this process's slot that it did `bit` (api/region.h kSlotUses*: managed memory,
/// IPC, shared VMM handles or pools), for the node agent's checkpoint eligibility. Once the bit
/// is set: two acquire loads (initialised, slot claimed) and one relaxed load; the first time
/// an atomic OR. No lock, no system call, no allocation (the slot's claim, on a process's first
/// charge or use, takes the region lock).
/// Does nothing in a process without a limit (no region) or without a slot.
void RecordUse(uint32_t bit) noexcept;

/// Region device index whose UUID is `uuid` ("GPU-…"), or -1.
int DeviceIndexForUuid(const char* uuid) noexcept;

/// Formats 16 UUID bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with NUL).
void FormatUuid(const unsigned char bytes[16], char out[kUuidSize]) noexcept;

}  // namespace fracgpu::vgpu
