// The wake trampolines (wake.h; docs/reclaim.md "Wake: calls libvgpu.so does not hook").
#include "vgpu/wake.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "vgpu/interpose.h"
#include "vgpu/platform.h"
#include "vgpu/region.h"
#include "vgpu/state.h"

// Names the assembly below refers to: C linkage, hidden (-fvisibility=hidden), so the
// RIP-relative references need no GOT and nothing outside libvgpu.so sees them.
namespace fracgpu::vgpu {
namespace {
const uint64_t kNeverParked = api::kParkRunning;
}  // namespace
}  // namespace fracgpu::vgpu

#define FRACGPU_HIDDEN __attribute__((visibility("hidden")))
// Referenced only from the assembly below: `used` keeps the compiler (and LTO) from dropping them.
#define FRACGPU_ASM_USED __attribute__((visibility("hidden"), used))
extern "C" {
// Set at load time, before any code runs (a constant initialiser).
FRACGPU_ASM_USED const void* fracgpu_wake_word = &fracgpu::vgpu::kNeverParked;
/// The driver's function of each slot (written once, before the slot's trampoline is handed out).
FRACGPU_ASM_USED void* fracgpu_wake_targets[fracgpu::vgpu::kWakeSlots];
/// The first trampoline; slot i's is 16 bytes further on per slot.
FRACGPU_HIDDEN extern const unsigned char fracgpu_wake_stubs[];
/// One past the last trampoline.
FRACGPU_HIDDEN extern const unsigned char fracgpu_wake_stubs_end[];
}

// The driver's function behind each exported stub (driver_exports.inc), null until ResolveCuda
// binds them (BindDriverExports) or when the driver lacks the name.
#define FRACGPU_DRIVER_EXPORT(name) FRACGPU_ASM_USED void* fracgpu_x_##name;
extern "C" {
#include "vgpu/driver_exports.inc"
}
#undef FRACGPU_DRIVER_EXPORT

namespace fracgpu::vgpu {
namespace {

struct DriverExport {
  const char* name;
  void** target;
};
#define FRACGPU_DRIVER_EXPORT(name) {#name, &fracgpu_x_##name},
const DriverExport kDriverExports[] = {
#include "vgpu/driver_exports.inc"
};
#undef FRACGPU_DRIVER_EXPORT

std::atomic<bool> g_full_logged{false};

}  // namespace
}  // namespace fracgpu::vgpu

extern "C" FRACGPU_ASM_USED void fracgpu_named_resolve() noexcept { fracgpu::vgpu::ResolveCuda(); }

extern "C" __attribute__((used)) void fracgpu_wake_slow() noexcept {
  using namespace fracgpu::vgpu;
  Region* r = SharedRegion();
  if (!r) return;
  const uint32_t n = r->device_count < static_cast<uint32_t>(kMaxDevices)
                         ? r->device_count
                         : static_cast<uint32_t>(kMaxDevices);
  for (uint32_t d = 0; d < n; ++d) {
    RegionDevice& dev = r->devices[d];
    if (std::atomic_ref<uint64_t>(dev.park_state).load(std::memory_order_relaxed) ==
        fracgpu::api::kParkRunning)
      continue;
    RequestWakeIfParked(dev);
    // The call that asks for the wake is activity: last_launch_ns moves to now, so that the
    // agent's idle clock (now − last_launch_ns) restarts at the wake instead of counting the
    // parked time, and a container just woken by a copy or a query (no launch) is not parked
    // again at the next poll (issue 36 review, ping-pong). Only while parked: one clock read.
    const uint64_t now = platform::MonotonicClockNs();
    uint64_t prev = dev.last_launch_ns.load(std::memory_order_relaxed);
    while (prev < now &&
           !dev.last_launch_ns.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
    }
  }
}

#if defined(__x86_64__)
// Slot i (16 bytes): endbr64 (IBT landing pad, a no-op without CET), r10 = &targets[i], jump to
// the common part. r10 and r11 carry no argument in the System V ABI and are caller-saved.
// Common: if *fracgpu_wake_word is 0 (not parked) jump to *r10 at once. Otherwise save every
// argument register (rdi, rsi, rdx, rcx, r8, r9, rax for varargs' vector count, xmm0-7) with
// the stack 16-byte aligned for the call (entry rsp = 8 mod 16; 8 pushes and 136 bytes make it
// 0), call fracgpu_wake_slow, restore them and jump to *r10: the driver's function returns
// straight to our caller.
asm(R"(
    # fracgpu_call_saving_args fn: calls fn with every argument register (rdi, rsi, rdx, rcx, r8,
    # r9, rax, xmm0-7) and r10 as they were, the stack 16-byte aligned at the call (entry
    # rsp = 8 mod 16; 8 pushes and 136 bytes make it 0). Both slow paths below use it; the CFI
    # lines keep the canonical frame address right while the registers are on the stack, so a
    # debugger or profiler unwinds through a call that waits for the wake.
    .macro fracgpu_call_saving_args fn
    pushq %r10
    .cfi_adjust_cfa_offset 8
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    pushq %r8
    .cfi_adjust_cfa_offset 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    pushq %rax
    .cfi_adjust_cfa_offset 8
    subq $136, %rsp
    .cfi_adjust_cfa_offset 136
    movdqu %xmm0, 0(%rsp)
    movdqu %xmm1, 16(%rsp)
    movdqu %xmm2, 32(%rsp)
    movdqu %xmm3, 48(%rsp)
    movdqu %xmm4, 64(%rsp)
    movdqu %xmm5, 80(%rsp)
    movdqu %xmm6, 96(%rsp)
    movdqu %xmm7, 112(%rsp)
    call \fn
    movdqu 0(%rsp), %xmm0
    movdqu 16(%rsp), %xmm1
    movdqu 32(%rsp), %xmm2
    movdqu 48(%rsp), %xmm3
    movdqu 64(%rsp), %xmm4
    movdqu 80(%rsp), %xmm5
    movdqu 96(%rsp), %xmm6
    movdqu 112(%rsp), %xmm7
    addq $136, %rsp
    .cfi_adjust_cfa_offset -136
    popq %rax
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    popq %r10
    .cfi_adjust_cfa_offset -8
    .endm
)");
#define FRACGPU_WAKE_STR2(x) #x
#define FRACGPU_WAKE_STR(x) FRACGPU_WAKE_STR2(x)
static_assert(FRACGPU_WAKE_SLOTS == fracgpu::vgpu::kWakeSlots &&
                  fracgpu::vgpu::kWakeStubBytes == 16,
              "the .rept count and .balign below are kWakeSlots and kWakeStubBytes");
// The stub table: FRACGPU_WAKE_SLOTS slots of 16 bytes (kWakeSlots, kWakeStubBytes; the
// `.rept` count is the same macro, and VgpuPackaging.WakeStubTableHoldsEverySlot reads the
// table's ELF size), one CFI frame: no slot moves the stack.
asm(R"(
    .text
    .p2align 4
    .globl fracgpu_wake_stubs
    .hidden fracgpu_wake_stubs
    .type fracgpu_wake_stubs, @function
fracgpu_wake_stubs:
    .cfi_startproc
    .set fracgpu_wake_i, 0
    .rept )" FRACGPU_WAKE_STR(FRACGPU_WAKE_SLOTS) R"(
    .balign 16
    endbr64
    leaq fracgpu_wake_targets+8*fracgpu_wake_i(%rip), %r10
    jmp fracgpu_wake_common
    .set fracgpu_wake_i, fracgpu_wake_i+1
    .endr
    .balign 16
    .cfi_endproc
    .globl fracgpu_wake_stubs_end
    .hidden fracgpu_wake_stubs_end
fracgpu_wake_stubs_end:
    .size fracgpu_wake_stubs, .-fracgpu_wake_stubs
    .p2align 4
    .type fracgpu_wake_common, @function
fracgpu_wake_common:
    .cfi_startproc
    movq fracgpu_wake_word(%rip), %r11
    cmpq $0, (%r11)
    jne 1f
    jmpq *(%r10)
1:
    fracgpu_call_saving_args fracgpu_wake_slow
    jmpq *(%r10)
    .cfi_endproc
    .size fracgpu_wake_common, .-fracgpu_wake_common
)");
// One exported stub per driver export, weak (a hook's strong definition wins): r10 = its
// target's slot, then the common part below. fracgpu_named_common: a null target means not
// bound yet: save the argument registers, ResolveCuda (fracgpu_named_resolve), restore; still
// null means the driver lacks the function: CUDA_ERROR_NOT_FOUND (500), as the hooks answer.
#define FRACGPU_DRIVER_EXPORT(name)                                               \
  asm(".text\n .p2align 4\n .weak " #name "\n .type " #name ", @function\n" #name \
      ":\n .cfi_startproc\n endbr64\n leaq fracgpu_x_" #name                      \
      "(%rip), %r10\n jmp fracgpu_named_common\n .cfi_endproc\n .size " #name ", .-" #name "\n");
#include "vgpu/driver_exports.inc"
#undef FRACGPU_DRIVER_EXPORT
asm(R"(
    .text
    .p2align 4
    .type fracgpu_named_common, @function
fracgpu_named_common:
    .cfi_startproc
    cmpq $0, (%r10)
    je 1f
    jmp fracgpu_wake_common
1:
    fracgpu_call_saving_args fracgpu_named_resolve
    cmpq $0, (%r10)
    je 2f
    jmp fracgpu_wake_common
2:
    movl $500, %eax
    ret
    .cfi_endproc
    .size fracgpu_named_common, .-fracgpu_named_common
)");
#else
// No trampolines and no exported stubs (wake.h kHaveWakeTrampolines): WakeWrap hands out the
// driver's functions as they are, and every process records kSlotUnwakeable at claim
// (region.cc), so the agent never parks it: fail closed.
// (Hidden by the declarations above: repeating the attribute here is an error under -Werror.)
extern "C" {
const unsigned char fracgpu_wake_stubs[1] = {0};
const unsigned char fracgpu_wake_stubs_end[1] = {0};
}
#endif

namespace fracgpu::vgpu {

void BindDriverExports(void* lib) noexcept {
  for (const DriverExport& e : kDriverExports)
    __atomic_store_n(e.target, lib ? RealDlsym(lib, e.name) : nullptr, __ATOMIC_RELEASE);
}

int DriverExportCount() noexcept { return static_cast<int>(std::size(kDriverExports)); }

bool KnownDriverFunction(const char* name) noexcept {
  // kDriverExports is in the byte order of data/cuda/libcuda_exports.txt (generated sorted;
  // VgpuPackaging.DriverStubsAreWeakAndHooksGlobal reads the list).
  size_t lo = 0, hi = std::size(kDriverExports);
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const int c = std::strcmp(kDriverExports[mid].name, name);
    if (c == 0) return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

void WakeWatch(const void* word) noexcept {
  __atomic_store_n(&fracgpu_wake_word, word ? word : &kNeverParked, __ATOMIC_RELEASE);
}

void* WakeWrap(void* real) noexcept {
  if (!real || !kHaveWakeTrampolines) return real;
  if (WakeTarget(real) != real) return real;  // already one of ours
  // Open addressing over the slots, probing from a hash of the address: a slot holding `real`
  // is its trampoline; a free one (null) is claimed with a compare-and-swap, which at most one
  // thread wins, and a loser that finds `real` there (another thread wrapping the same function
  // at the same moment) takes the same slot. Slots are never freed, so a probe stops at the
  // first free one: every function has exactly one slot.
  const uint64_t h = (reinterpret_cast<uintptr_t>(real) >> 4) * 0x9E3779B97F4A7C15ull;
  const unsigned start = static_cast<unsigned>(h >> 32) & (kWakeSlots - 1);
  for (unsigned k = 0; k < static_cast<unsigned>(kWakeSlots); ++k) {
    const unsigned i = (start + k) & (kWakeSlots - 1);
    void* cur = __atomic_load_n(&fracgpu_wake_targets[i], __ATOMIC_ACQUIRE);
    if (!cur && __atomic_compare_exchange_n(&fracgpu_wake_targets[i], &cur, real, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      cur = real;
    if (cur == real) return const_cast<unsigned char*>(fracgpu_wake_stubs) + kWakeStubBytes * i;
  }
  RecordUnwakeable();  // this process must not be parked: a call of `real` would not wake it
  if (!g_full_logged.exchange(true, std::memory_order_relaxed))
    Log(kLogError,
        "all %d wake trampolines taken: further driver functions are handed out unwrapped, and "
        "this process will not be parked",
        kWakeSlots);
  return real;
}

void* WakeTarget(void* p) noexcept {
  if (!kHaveWakeTrampolines) return p;
  auto a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(fracgpu_wake_stubs),
       hi = reinterpret_cast<uintptr_t>(fracgpu_wake_stubs_end);
  if (a < lo || a >= hi || (a - lo) % kWakeStubBytes != 0) return p;
  void* t = __atomic_load_n(&fracgpu_wake_targets[(a - lo) / kWakeStubBytes], __ATOMIC_ACQUIRE);
  return t ? t : p;
}

}  // namespace fracgpu::vgpu

/// Introspection for tools and tests (exported: docs/vgpu.md "Exported names"): the driver's
/// function a pointer handed out by libvgpu.so forwards to, or the pointer itself.
FRACGPU_EXPORT void* fracgpu_vgpu_wake_target(void* p) noexcept {
  return fracgpu::vgpu::WakeTarget(p);
}
