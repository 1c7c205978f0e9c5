// The wake trampolines (wake.h; docs/reclaim.md "Wake: calls libvgpu.so does not hook").
#include "vgpu/wake.h"

#include <atomic>
#include <cstdint>
#include <iterator>

#include "vgpu/interpose.h"
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
extern "C" {
// Set at load time, before any code runs (a constant initialiser).
FRACGPU_HIDDEN const void* fracgpu_wake_word = &fracgpu::vgpu::kNeverParked;
/// The driver's function of each slot (written once, before the slot's trampoline is handed out).
FRACGPU_HIDDEN void* fracgpu_wake_targets[fracgpu::vgpu::kWakeSlots];
/// The first trampoline; slot i's is 16 bytes further on per slot.
FRACGPU_HIDDEN extern const unsigned char fracgpu_wake_stubs[];
/// One past the last trampoline.
FRACGPU_HIDDEN extern const unsigned char fracgpu_wake_stubs_end[];
}

// The driver's function behind each exported stub (driver_exports.inc), null until ResolveCuda
// binds them (BindDriverExports) or when the driver lacks the name.
#define FRACGPU_DRIVER_EXPORT(name) FRACGPU_HIDDEN void* fracgpu_x_##name;
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

std::atomic<int> g_used{0};
std::atomic<bool> g_full_logged{false};

}  // namespace
}  // namespace fracgpu::vgpu

extern "C" FRACGPU_HIDDEN void fracgpu_named_resolve() noexcept { fracgpu::vgpu::ResolveCuda(); }

extern "C" void fracgpu_wake_slow() noexcept {
  using namespace fracgpu::vgpu;
  Region* r = SharedRegion();
  if (!r) return;
  const uint32_t n = r->device_count < static_cast<uint32_t>(kMaxDevices)
                         ? r->device_count
                         : static_cast<uint32_t>(kMaxDevices);
  for (uint32_t d = 0; d < n; ++d) RequestWakeIfParked(r->devices[d]);
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
    # rsp = 8 mod 16; 8 pushes and 136 bytes make it 0). Both slow paths below use it.
    .macro fracgpu_call_saving_args fn
    pushq %r10
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %rcx
    pushq %r8
    pushq %r9
    pushq %rax
    subq $136, %rsp
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
    popq %rax
    popq %r9
    popq %r8
    popq %rcx
    popq %rdx
    popq %rsi
    popq %rdi
    popq %r10
    .endm
)");
asm(R"(
    .text
    .p2align 4
    .globl fracgpu_wake_stubs
    .hidden fracgpu_wake_stubs
    .type fracgpu_wake_stubs, @function
fracgpu_wake_stubs:
    .set fracgpu_wake_i, 0
    .rept 2048
    .balign 16
    endbr64
    leaq fracgpu_wake_targets+8*fracgpu_wake_i(%rip), %r10
    jmp fracgpu_wake_common
    .set fracgpu_wake_i, fracgpu_wake_i+1
    .endr
    .globl fracgpu_wake_stubs_end
    .hidden fracgpu_wake_stubs_end
fracgpu_wake_stubs_end:
    .size fracgpu_wake_stubs, .-fracgpu_wake_stubs
    .p2align 4
    .type fracgpu_wake_common, @function
fracgpu_wake_common:
    movq fracgpu_wake_word(%rip), %r11
    cmpq $0, (%r11)
    jne 1f
    jmpq *(%r10)
1:
    fracgpu_call_saving_args fracgpu_wake_slow
    jmpq *(%r10)
    .size fracgpu_wake_common, .-fracgpu_wake_common
)");
// One exported stub per driver export, weak (a hook's strong definition wins): r10 = its
// target's slot, then the common part below. fracgpu_named_common: a null target means not
// bound yet: save the argument registers, ResolveCuda (fracgpu_named_resolve), restore; still
// null means the driver lacks the function: CUDA_ERROR_NOT_FOUND (500), as the hooks answer.
#define FRACGPU_DRIVER_EXPORT(name)                                               \
  asm(".text\n .p2align 4\n .weak " #name "\n .type " #name ", @function\n" #name \
      ":\n endbr64\n leaq fracgpu_x_" #name                                       \
      "(%rip), %r10\n jmp fracgpu_named_common\n .size " #name ", .-" #name "\n");
#include "vgpu/driver_exports.inc"
#undef FRACGPU_DRIVER_EXPORT
asm(R"(
    .text
    .p2align 4
    .type fracgpu_named_common, @function
fracgpu_named_common:
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
    .size fracgpu_named_common, .-fracgpu_named_common
)");
inline constexpr bool kHaveTrampolines = true;
#else
extern "C" {
FRACGPU_HIDDEN const unsigned char fracgpu_wake_stubs[1] = {0};
FRACGPU_HIDDEN const unsigned char fracgpu_wake_stubs_end[1] = {0};
}
inline constexpr bool kHaveTrampolines = false;
#endif

namespace fracgpu::vgpu {

void BindDriverExports(void* lib) noexcept {
  for (const DriverExport& e : kDriverExports)
    __atomic_store_n(e.target, lib ? RealDlsym(lib, e.name) : nullptr, __ATOMIC_RELEASE);
}

int DriverExportCount() noexcept { return static_cast<int>(std::size(kDriverExports)); }

void WakeWatch(const void* word) noexcept {
  __atomic_store_n(&fracgpu_wake_word, word ? word : &kNeverParked, __ATOMIC_RELEASE);
}

void* WakeWrap(void* real) noexcept {
  if (!real || !kHaveTrampolines) return real;
  if (WakeTarget(real) != real) return real;  // already one of ours
  const int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used && i < kWakeSlots; ++i)
    if (__atomic_load_n(&fracgpu_wake_targets[i], __ATOMIC_ACQUIRE) == real)
      return const_cast<unsigned char*>(fracgpu_wake_stubs) + 16 * i;
  // Two threads wrapping the same function at once may take two slots: harmless.
  const int i = g_used.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kWakeSlots) {
    g_used.store(kWakeSlots, std::memory_order_relaxed);
    if (!g_full_logged.exchange(true, std::memory_order_relaxed))
      Log(kLogError,
          "all %d wake trampolines taken: further driver functions are handed out unwrapped, "
          "and a parked container's call to one of them waits until something else wakes it",
          kWakeSlots);
    return real;
  }
  __atomic_store_n(&fracgpu_wake_targets[i], real, __ATOMIC_RELEASE);
  return const_cast<unsigned char*>(fracgpu_wake_stubs) + 16 * i;
}

void* WakeTarget(void* p) noexcept {
  if (!kHaveTrampolines) return p;
  auto a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(fracgpu_wake_stubs),
       hi = reinterpret_cast<uintptr_t>(fracgpu_wake_stubs_end);
  if (a < lo || a >= hi || (a - lo) % 16 != 0) return p;
  void* t = __atomic_load_n(&fracgpu_wake_targets[(a - lo) / 16], __ATOMIC_ACQUIRE);
  return t ? t : p;
}

}  // namespace fracgpu::vgpu

/// Introspection for tools and tests (exported: docs/vgpu.md "Exported names"): the driver's
/// function a pointer handed out by libvgpu.so forwards to, or the pointer itself.
FRACGPU_EXPORT void* fracgpu_vgpu_wake_target(void* p) noexcept {
  return fracgpu::vgpu::WakeTarget(p);
}
