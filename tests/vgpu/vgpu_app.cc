// A small CUDA driver-API program that the vgpu tests run with libvgpu.so preloaded over the
// fake driver. It executes the operations given as arguments, in order, and prints one line
// per operation: "<op> <CUresult> [values]". Not sanitized (it hosts libvgpu.so).
//
// Ops: init | ctx:<ordinal> | alloc:<bytes> | free | freeall | managed:<bytes> |
//   pitch:<width>:<height> | async:<bytes> | poolcreate | poolalloc:<bytes> | freeasync |
//   sync | threshold:<bytes> | trim:<bytes> | vmm:<bytes> | vmmhost:<bytes> | unmap | release |
//   array:<w>:<h> | array3d:<w>:<h>:<d> | mipmap:<w>:<h>:<levels> | arrayfree | info |
//   total:<ordinal> | nvml:<index> | uuid:<ordinal> | dlsym:<bytes> |
//   gpa:<version>:<flags>:<v2>:<bytes> | module | moduleunload | library | libraryunload |
//   region:<dev> | proc:<symbol>:<version>:<flags> | primary_v1:<release|reset> |
//   v1:<d|g>:<name>[:args] | launch:<count> | nosyscall:<pairs>:<bytes>:<path d|g>[:<graph bytes>]
//   | cost:<ps> | sleepto:<ms> | smrun:<grid>:<block>:<path>:<until_ms>:<sync_every> |
//   cudart:<path to libcudart.so> | wallsleep:<ms> | release_primary |
//   stress:<threads>:<iterations>:<seed>:<region> | wait | poolcreate:<handle types> | poolimport
//   (export g_pool as a POSIX fd, import it) | ipoolalloc:<bytes> | ipoolreserved | ipooldestroy
//   | poolexport (export g_pool as a POSIX fd only) | uses (this process's slot's
//   RegionSlot::uses word: "uses <decimal>", "uses -1" without a slot)
//   (on the imported pool) | vmm:<bytes>:<handle types> | vmmexport |
//   vmmimport:<pid|self>:<fd>:<bytes> | the graph ops of vgpu_app_graph.cc (g…) | the green-context
//   and IPC ops of vgpu_app_share.cc | the issue-32 ops of vgpu_app_attack.cc |
//   lookup:<g|d|l> | copy | poke | peek (after lookup) | dlsymdata | samefn:<threads>:<iterations>
//   | ctorrace:<path to vgpu_ctor_plugin> (first op)
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/nvml.h"
#include "vgpu/cuda_api.h"
#include "vgpu/region.h"
#include "vgpu_app_attack.h"
#include "vgpu_app_graph.h"
#include "vgpu_app_share.h"

// Test-only entry points of the fake driver (tests/fakes/cuda/fake_cuda.cc).
extern "C" {
void fakeCudaSetKernelCostPs(uint64_t ps) noexcept;
uint64_t fakeClockNowNs() noexcept;
void fakeClockSleepUntilNs(uint64_t t) noexcept;
uint64_t fakeClockBusyNs(uint64_t from, uint64_t to) noexcept;
void fakeClockLeave() noexcept;
}

namespace {

std::vector<CUdeviceptr> g_ptrs, g_async;
// "lookup" / "copy": the copy functions as the program was handed them, and their buffer.
void* g_copy_fns[2] = {nullptr, nullptr};
CUdeviceptr g_copy_buf = 0;
std::vector<CUarray> g_arrays;
std::vector<CUmipmappedArray> g_mipmaps;
std::vector<CUmemGenericAllocationHandle> g_handles;
std::vector<std::pair<CUdeviceptr, size_t>> g_maps;
CUmemoryPool g_pool = nullptr;
CUmemoryPool g_imported_pool = nullptr;  // poolimport
int g_export_fd = -1;                    // vmmexport
CUstream g_stream = nullptr;
CUcontext g_ctx = nullptr;
int g_ordinal = 0;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t c = s.find(':', pos);
    out.push_back(s.substr(pos, c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}
unsigned long long Num(const std::vector<std::string>& a, size_t i) {
  return i < a.size() ? std::strtoull(a[i].c_str(), nullptr, 10) : 0;
}

// Stress: threads interleave random allocations and frees over several paths; after each
// successful allocation the container's charged total must be <= the limit (read from the
// region); at the end everything is freed. Prints "stress <violations> <successes> <ooms>".
void Stress(int threads, int iterations, unsigned seed, const char* region_path) {
  int fd = open(region_path, O_RDONLY);
  const fracgpu::vgpu::Region* region = nullptr;
  if (fd >= 0) {
    void* p = mmap(nullptr, sizeof(fracgpu::vgpu::Region), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) region = static_cast<const fracgpu::vgpu::Region*>(p);
  }
  std::atomic<int> violations{0}, ok{0}, ooms{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cuCtxSetCurrent(g_ctx);
      std::mt19937_64 rng(seed * 1000 + static_cast<unsigned>(t));
      std::vector<std::pair<int, CUdeviceptr>> mine;
      std::vector<CUarray> arrays;
      for (int i = 0; i < iterations; ++i) {
        if (!mine.empty() && rng() % 3 == 0) {
          size_t k = rng() % mine.size();
          auto [kind, p] = mine[k];
          mine.erase(mine.begin() + static_cast<long>(k));
          if (kind == 2)
            cuMemFreeAsync(p, nullptr);
          else
            cuMemFree_v2(p);
          continue;
        }
        size_t bytes = (rng() % 64 + 1) * 64 * 1024;
        CUdeviceptr p = 0;
        int kind = static_cast<int>(rng() % 4);
        CUresult r;
        if (kind == 0)
          r = cuMemAlloc_v2(&p, bytes);
        else if (kind == 1)
          r = cuMemAllocManaged(&p, bytes, 1);
        else if (kind == 2)
          r = cuMemAllocAsync(&p, bytes, nullptr);
        else {
          size_t pitch = 0;
          r = cuMemAllocPitch_v2(&p, &pitch, bytes / 16, 16, 4);
        }
        if (r == CUDA_SUCCESS) {
          ok++;
          mine.push_back({kind == 2 ? 2 : 0, p});
          if (region && region->devices[0].memory_limit != 0 &&
              region->devices[0].used.load() > region->devices[0].memory_limit) {
            violations++;
          }
        } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
          ooms++;
        } else {
          violations++;  // any other error is unexpected
        }
      }
      for (auto [kind, p] : mine) {
        if (kind == 2)
          cuMemFreeAsync(p, nullptr);
        else
          cuMemFree_v2(p);
      }
    });
  }
  for (auto& th : pool) th.join();
  cuCtxSynchronize();
  std::printf("stress %d %d %d\n", violations.load(), ok.load(), ooms.load());
}

typedef CUresult (*AllocFn)(CUdeviceptr*, size_t);

// Where a function pointer a program was handed lives: "vgpu" (a hook of libvgpu.so), "wake"
// (libvgpu.so's wake trampoline to the driver's function: *target is that function), "driver"
// or "null". *target is the pointer itself otherwise.
const char* Where(void* fn, void** target) {
  *target = fn;
  Dl_info info{};
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "null";
  if (!std::strstr(info.dli_fname, "libvgpu")) return "driver";
  using Unwrap = void* (*)(void*);
  if (auto unwrap = reinterpret_cast<Unwrap>(dlsym(RTLD_DEFAULT, "fracgpu_vgpu_wake_target"))) {
    void* t = unwrap(fn);
    if (t != fn) {
      *target = t;
      return "wake";
    }
  }
  return "vgpu";
}

// The legacy v1 entry point `name` as a program finds it: dlsym from a dlopen'd libcuda.so.1
// (path "d") or cuGetProcAddress_v2 at CUDA 2.0 (path "g"). *where: "vgpu", "driver" or "null".
void* LegacyEntry(const std::string& path, const std::string& name, const char** where) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  void* fn = nullptr;
  if (lib && path == "g") {
    auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa && gpa(name.c_str(), &fn, 2000, 0, nullptr) != CUDA_SUCCESS) fn = nullptr;
  } else if (lib) {
    fn = dlsym(lib, name.c_str());
  }
  void* target = nullptr;
  *where = Where(fn, &target);
  return fn;
}

std::vector<CUmodule> g_modules;
std::vector<CUlibrary> g_libraries;

// Prints this process's RegionSlot::uses (checkpoint eligibility facts) from the region named by
// CUDA_DEVICE_MEMORY_SHARED_CACHE: "uses <decimal>", or "uses -1" without a slot.
void PrintUses() {
  using fracgpu::vgpu::Region;
  const char* path = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = path ? open(path, O_RDONLY) : -1;
  void* p = fd >= 0 ? mmap(nullptr, sizeof(Region), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  long long uses = -1;
  if (p != MAP_FAILED) {
    for (const auto& s : static_cast<const Region*>(p)->slots)
      if (s.state.load() == fracgpu::vgpu::kSlotActive && s.pid == getpid()) uses = s.uses.load();
    munmap(p, sizeof(Region));
  }
  std::printf("uses %lld\n", uses);
}

// Prints this process's slot and device `dev` of the region named by
// CUDA_DEVICE_MEMORY_SHARED_CACHE: "region 0 <host_pid> <used> <context> <module> <data>
// <last_launch_ns> <now_ns CLOCK_MONOTONIC> <device used>", or "region 1" without a slot.
void PrintRegion(int dev) {
  using fracgpu::vgpu::Region;
  const char* path = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = path ? open(path, O_RDONLY) : -1;
  void* p = fd >= 0 ? mmap(nullptr, sizeof(Region), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED) {
    std::printf("region 1\n");
    return;
  }
  const Region* r = static_cast<const Region*>(p);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long now = static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull +
                           static_cast<unsigned long long>(ts.tv_nsec);
  for (const auto& s : r->slots) {
    if (s.state.load() != fracgpu::vgpu::kSlotActive || s.pid != getpid()) continue;
    std::printf("region 0 %d %llu %llu %llu %llu %llu %llu %llu\n", s.host_pid,
                static_cast<unsigned long long>(s.used[dev].load()),
                static_cast<unsigned long long>(s.context_bytes[dev].load()),
                static_cast<unsigned long long>(s.module_bytes[dev].load()),
                static_cast<unsigned long long>(s.data_bytes[dev].load()),
                static_cast<unsigned long long>(r->devices[dev].last_launch_ns.load()), now,
                static_cast<unsigned long long>(r->devices[dev].used.load()));
    munmap(p, sizeof(Region));
    return;
  }
  std::printf("region 1\n");
  munmap(p, sizeof(Region));
}

// SM-limit run on the fake driver's virtual clock: launches kernels of grid x block through
// `path` (k = cuLaunchKernel, p = _ptsz, e = cuLaunchKernelEx, c = cooperative, g = graph)
// until virtual time `until_ms`, synchronising every `sync_every` launches. Prints
// "smrun 0 <launches> <busy ns in [2 s, 12 s)> <busy ns per second 0..11>".
void SmRun(unsigned grid, unsigned block, const std::string& path, uint64_t until_ms,
           uint64_t sync_every) {
  auto f = reinterpret_cast<CUfunction>(0x1);
  uint64_t launches = 0;
  CUresult r = CUDA_SUCCESS;
  CUgraphExec graph = path == "g" ? MakeGraphExec(0, g_ordinal) : nullptr;  // one empty node
  while (fakeClockNowNs() < until_ms * 1'000'000ull && r == CUDA_SUCCESS) {
    if (path == "p") {
      r = cuLaunchKernel_ptsz(f, grid, 1, 1, block, 1, 1, 0, nullptr, nullptr, nullptr);
    } else if (path == "e") {
      CUlaunchConfig cfg{};
      cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
      cfg.blockDimX = block, cfg.blockDimY = 1, cfg.blockDimZ = 1;
      r = cuLaunchKernelEx(&cfg, f, nullptr, nullptr);
    } else if (path == "c") {
      r = cuLaunchCooperativeKernel(f, grid, 1, 1, block, 1, 1, 0, nullptr, nullptr);
    } else if (path == "g") {
      r = cuGraphLaunch(graph, nullptr);
    } else if (path == "L") {  // the legacy launches (issue 32 item 7)
      r = cuLaunch(f);
    } else if (path == "G") {
      r = cuLaunchGrid(f, static_cast<int>(grid), 1);
    } else if (path == "A") {
      r = cuLaunchGridAsync(f, static_cast<int>(grid), 1, nullptr);
    } else if (path == "M") {
      CUDA_LAUNCH_PARAMS p{f, grid, 1, 1, block, 1, 1, 0, nullptr, nullptr};
      r = cuLaunchCooperativeKernelMultiDevice(&p, 1, 0);
    } else {
      r = cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, nullptr, nullptr, nullptr);
    }
    if (++launches % sync_every == 0) cuCtxSynchronize();
  }
  cuCtxSynchronize();
  fakeClockLeave();
  std::printf(
      "smrun %d %llu %llu", r, static_cast<unsigned long long>(launches),
      static_cast<unsigned long long>(fakeClockBusyNs(2'000'000'000ull, 12'000'000'000ull)));
  for (uint64_t sec = 0; sec < 12; ++sec)
    std::printf(" %llu", static_cast<unsigned long long>(fakeClockBusyNs(
                             sec * 1'000'000'000ull, (sec + 1) * 1'000'000'000ull)));
  std::printf("\n");
}

// ---- nosyscall: no system call on the steady-state paths (libvgpu.so hot-path rule) ----
// A forked child warms up (context, slot, table, the fake's heap), then installs a seccomp
// filter that traps every system call but rt_sigreturn and exit_group, and runs `pairs`
// cuMemAlloc_v2 + cuMemFree_v2 of `bytes` and launches for 25 ms of coarse time (so the 10 ms
// launch stamp, hooks_launch.cc, falls due at least twice), each kernel launch followed by a
// cuGraphLaunch of a graph holding `graph_bytes` of graph memory (0: one empty node), already
// launched once so that its memory is reserved and charged. The SIGSYS handler records each
// trapped call in memory shared with the parent (a trapped call is not executed).
// Path d: the linked symbols (interposed by LD_PRELOAD); g: dlopen + cuGetProcAddress_v2
// at 13000, as the CUDA runtime does. Errors count failed calls and allocations the region
// did not show as charged. Prints "nosyscall <installed 1|0> <trapped> <errors>
// <first trapped numbers...>" (installed 0: seccomp unavailable, errno follows).
struct SyscallLog {
  std::atomic<int> trapped;
  std::atomic<int> errors;
  int installed;
  int nr[8];
};
SyscallLog* g_syslog = nullptr;

void OnSigsys(int, siginfo_t* si, void*) {
  int n = g_syslog->trapped.fetch_add(1, std::memory_order_relaxed);
  if (n < 8) g_syslog->nr[n] = si->si_syscall;
}

uint64_t CoarseNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // vDSO: never a system call
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void NoSyscall(unsigned long long pairs, unsigned long long bytes, const std::string& path,
               unsigned long long graph_bytes) {
  void* shared =
      mmap(nullptr, sizeof(SyscallLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    std::printf("nosyscall 1 -1 -1\n");
    return;
  }
  g_syslog = new (shared) SyscallLog{};
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    decltype(&cuMemAlloc_v2) alloc = &cuMemAlloc_v2;
    decltype(&cuMemFree_v2) mem_free = &cuMemFree_v2;
    decltype(&cuLaunchKernel) launch = &cuLaunchKernel;
    decltype(&cuGraphLaunch) graph_launch = &cuGraphLaunch;
    if (path == "g") {
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      auto gpa =
          lib ? reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"))
              : nullptr;
      void *a = nullptr, *f = nullptr, *l = nullptr, *gl = nullptr;
      if (!gpa || gpa("cuMemAlloc", &a, 13000, 0, nullptr) != CUDA_SUCCESS ||
          gpa("cuMemFree", &f, 13000, 0, nullptr) != CUDA_SUCCESS ||
          gpa("cuLaunchKernel", &l, 13000, 0, nullptr) != CUDA_SUCCESS ||
          gpa("cuGraphLaunch", &gl, 13000, 0, nullptr) != CUDA_SUCCESS || !a || !f || !l || !gl) {
        g_syslog->errors.store(-2);
        _exit(0);
      }
      alloc = reinterpret_cast<decltype(alloc)>(a);
      mem_free = reinterpret_cast<decltype(mem_free)>(f);
      launch = reinterpret_cast<decltype(launch)>(l);
      graph_launch = reinterpret_cast<decltype(graph_launch)>(gl);
    }
    // The fake backs device memory with heap memory: keep glibc from mmap/munmap or trimming
    // per allocation, so only libvgpu.so's own system calls (and the fake's, which has none
    // on these paths) can show.
    // (32 MiB is glibc's largest M_MMAP_THRESHOLD on 64-bit.)
    if (mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 512 << 20) != 1 ||
        mallopt(M_TOP_PAD, 64 << 20) != 1) {
      g_syslog->errors.store(-3);
      _exit(0);
    }
    auto fn = reinterpret_cast<CUfunction>(0x1);
    CUgraphExec graph = MakeGraphExec(graph_bytes, 0);
    if (!graph) g_syslog->errors++;
    for (int w = 0; w < 8; ++w) {  // warm-up: slot claim, table mapping, heap growth, graph memory
      CUdeviceptr p = 0;
      if (alloc(&p, bytes) != CUDA_SUCCESS || mem_free(p) != CUDA_SUCCESS) g_syslog->errors++;
      launch(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
      if (graph_launch(graph, nullptr) != CUDA_SUCCESS) g_syslog->errors++;
    }
    // The charges must be real: the region's device 0 shows the pair's bytes while it lives.
    const fracgpu::vgpu::Region* region = nullptr;
    if (const char* rp = std::getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE")) {
      int fd = open(rp, O_RDONLY);
      void* m = fd >= 0 ? mmap(nullptr, sizeof(fracgpu::vgpu::Region), PROT_READ, MAP_SHARED, fd, 0)
                        : MAP_FAILED;
      if (m != MAP_FAILED) region = static_cast<const fracgpu::vgpu::Region*>(m);
    }
    if (!region) g_syslog->errors++;
    // The graph's memory is charged (and stays so: checked with every pair below).
    if (region && region->devices[0].used.load(std::memory_order_relaxed) < graph_bytes)
      g_syslog->errors++;
    struct sigaction sa {};
    sa.sa_sigaction = OnSigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, nullptr);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      g_syslog->installed = -errno;
      _exit(0);
    }
    g_syslog->installed = 1;
    for (unsigned long long i = 0; i < pairs; ++i) {
      CUdeviceptr p = 0;
      if (alloc(&p, bytes) != CUDA_SUCCESS) {
        g_syslog->errors++;
        continue;
      }
      if (region && region->devices[0].used.load(std::memory_order_relaxed) < bytes + graph_bytes)
        g_syslog->errors++;
      if (mem_free(p) != CUDA_SUCCESS) g_syslog->errors++;
    }
    uint64_t until = CoarseNs() + 25'000'000ull;
    while (CoarseNs() < until) {
      for (int k = 0; k < 1000; ++k) {
        if (launch(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
          g_syslog->errors++;
        if (graph_launch(graph, nullptr) != CUDA_SUCCESS) g_syslog->errors++;
      }
    }
    syscall(SYS_exit_group, 0);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  const SyscallLog& log = *g_syslog;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("nosyscall 1 -1 -1 child-status-%d\n", status);
    return;
  }
  if (log.installed != 1) {
    std::printf("nosyscall 0 %d\n", -log.installed);
    return;
  }
  std::printf("nosyscall 1 %d %d", log.trapped.load(), log.errors.load());
  for (int k = 0; k < log.trapped.load() && k < 8; ++k) std::printf(" %d", log.nr[k]);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> a = Split(argv[i]);
    const std::string& op = a[0];
    CUresult r = CUDA_SUCCESS;
    if (op == "init") {
      r = cuInit(0);
      if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&g_ctx, 0);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(g_ctx);
      std::printf("init %d\n", r);
    } else if (op == "ctx") {
      g_ordinal = static_cast<int>(Num(a, 1));
      r = cuDevicePrimaryCtxRetain(&g_ctx, g_ordinal);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(g_ctx);
      std::printf("ctx %d\n", r);
    } else if (op == "release_primary") {
      r = cuDevicePrimaryCtxRelease_v2(g_ordinal);
      g_ptrs.clear();
      std::printf("release_primary %d\n", r);
    } else if (op == "alloc" || op == "managed") {
      CUdeviceptr p = 0;
      r = op == "alloc" ? cuMemAlloc_v2(&p, Num(a, 1)) : cuMemAllocManaged(&p, Num(a, 1), 1);
      if (r == CUDA_SUCCESS) g_ptrs.push_back(p);
      std::printf("%s %d\n", op.c_str(), r);
    } else if (op == "pitch") {
      CUdeviceptr p = 0;
      size_t pitch = 0;
      r = cuMemAllocPitch_v2(&p, &pitch, Num(a, 1), Num(a, 2), 4);
      if (r == CUDA_SUCCESS) g_ptrs.push_back(p);
      std::printf("pitch %d %zu\n", r, pitch);
    } else if (op == "free") {
      if (!g_ptrs.empty()) {
        r = cuMemFree_v2(g_ptrs.back());
        g_ptrs.pop_back();
      }
      std::printf("free %d\n", r);
    } else if (op == "freeall") {
      for (CUdeviceptr p : g_ptrs)
        if (cuMemFree_v2(p) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
      g_ptrs.clear();
      std::printf("freeall %d\n", r);
    } else if (op == "freeforeign") {
      r = cuMemFree_v2(0x1234);  // never allocated: the driver's own answer must come back
      std::printf("freeforeign %d\n", r);
    } else if (op == "async" || op == "poolalloc") {
      CUdeviceptr p = 0;
      r = op == "async" ? cuMemAllocAsync(&p, Num(a, 1), g_stream)
                        : cuMemAllocFromPoolAsync(&p, Num(a, 1), g_pool, g_stream);
      if (r == CUDA_SUCCESS) g_async.push_back(p);
      std::printf("%s %d\n", op.c_str(), r);
    } else if (op == "poolcreate") {
      CUmemPoolProps props{};
      props.allocType = 1;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      props.location.id = g_ordinal;
      props.handleTypes = static_cast<int>(Num(a, 1));  // poolcreate:1: exportable as a POSIX fd
      r = cuMemPoolCreate(&g_pool, &props);
      std::printf("poolcreate %d\n", r);
    } else if (op == "poolexport") {  // g_pool as a POSIX fd, closed again
      int fd = -1;
      r = cuMemPoolExportToShareableHandle(&fd, g_pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                           0);
      if (fd >= 0) close(fd);
      std::printf("poolexport %d\n", r);
    } else if (op == "poolimport") {
      // Exports g_pool as a POSIX fd and imports it back (the fake allows its own process).
      int fd = -1;
      r = cuMemPoolExportToShareableHandle(&fd, g_pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                           0);
      CUresult ri = r == CUDA_SUCCESS
                        ? cuMemPoolImportFromShareableHandle(
                              &g_imported_pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
                        : r;
      if (fd >= 0) close(fd);
      std::printf("poolimport %d %d\n", r, ri);
    } else if (op == "ipoolalloc") {
      CUdeviceptr p = 0;
      r = cuMemAllocFromPoolAsync(&p, Num(a, 1), g_imported_pool, g_stream);
      std::printf("ipoolalloc %d\n", r);
    } else if (op == "ipoolreserved") {
      cuuint64_t v = 0;
      r = cuMemPoolGetAttribute(g_imported_pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
      std::printf("ipoolreserved %d %llu\n", r, static_cast<unsigned long long>(v));
    } else if (op == "ipooldestroy") {
      std::printf("ipooldestroy %d\n", cuMemPoolDestroy(g_imported_pool));
    } else if (op == "freeasync") {
      if (!g_async.empty()) {
        r = cuMemFreeAsync(g_async.back(), g_stream);
        g_async.pop_back();
      }
      std::printf("freeasync %d\n", r);
    } else if (op == "sync") {
      r = cuStreamSynchronize(g_stream);
      std::printf("sync %d\n", r);
    } else if (op == "threshold") {
      cuuint64_t v = Num(a, 1);
      CUmemoryPool pool = g_pool;
      if (!pool) cuDeviceGetMemPool(&pool, g_ordinal);
      r = cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);
      std::printf("threshold %d\n", r);
    } else if (op == "trim") {
      CUmemoryPool pool = g_pool;
      if (!pool) cuDeviceGetMemPool(&pool, g_ordinal);
      r = cuMemPoolTrimTo(pool, Num(a, 1));
      std::printf("trim %d\n", r);
    } else if (op == "vmm" || op == "vmmhost") {
      CUmemAllocationProp prop{};
      prop.type = 1;
      prop.location.type = op == "vmm" ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
      prop.location.id = op == "vmm" ? g_ordinal : 0;
      prop.requestedHandleTypes =
          static_cast<int>(Num(a, 2));  // vmm:<bytes>:1: exportable as a POSIX fd
      CUmemGenericAllocationHandle h = 0;
      size_t size = Num(a, 1);
      r = cuMemCreate(&h, size, &prop, 0);
      if (r == CUDA_SUCCESS) {
        g_handles.push_back(h);
        CUdeviceptr va = 0;
        if (cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS &&
            cuMemMap(va, size, 0, h, 0) == CUDA_SUCCESS) {
          g_maps.push_back({va, size});
        }
      }
      std::printf("%s %d\n", op.c_str(), r);
    } else if (op == "vmmexport") {
      // The newest handle as a POSIX fd, kept open: "vmmexport <rc> <pid> <fd>".
      r = g_handles.empty()
              ? CUDA_ERROR_INVALID_VALUE
              : cuMemExportToShareableHandle(&g_export_fd, g_handles.back(),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      std::printf("vmmexport %d %d %d\n", r, static_cast<int>(getpid()), g_export_fd);
    } else if (op == "vmmimport") {
      // vmmimport:<pid|self>:<fd>:<bytes>: imports another process's fd (through /proc) or this
      // process's last export, then maps it: "vmmimport <rc> <map rc>".
      int fd =
          a.size() > 1 && a[1] == "self"
              ? g_export_fd
              : open(("/proc/" + (a.size() > 1 ? a[1] : "") + "/fd/" + (a.size() > 2 ? a[2] : ""))
                         .c_str(),
                     O_RDONLY | O_CLOEXEC);
      CUmemGenericAllocationHandle h = 0;
      r = cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (fd >= 0 && fd != g_export_fd) close(fd);
      CUresult mr = CUDA_ERROR_INVALID_VALUE;
      size_t size = Num(a, 3);
      if (r == CUDA_SUCCESS) {
        g_handles.push_back(h);
        CUdeviceptr va = 0;
        mr = cuMemAddressReserve(&va, size, 0, 0, 0);
        if (mr == CUDA_SUCCESS) mr = cuMemMap(va, size, 0, h, 0);
        if (mr == CUDA_SUCCESS) g_maps.push_back({va, size});
      }
      std::printf("vmmimport %d %d\n", r, mr);
    } else if (op == "release") {
      if (!g_handles.empty()) {
        r = cuMemRelease(g_handles.back());
        g_handles.pop_back();
      }
      std::printf("release %d\n", r);
    } else if (op == "unmap") {
      if (!g_maps.empty()) {
        r = cuMemUnmap(g_maps.back().first, g_maps.back().second);
        g_maps.pop_back();
      }
      std::printf("unmap %d\n", r);
    } else if (op == "array" || op == "array3d" || op == "mipmap") {
      if (op == "array") {
        CUDA_ARRAY_DESCRIPTOR d{Num(a, 1), Num(a, 2), CU_AD_FORMAT_FLOAT, 1};
        CUarray arr = nullptr;
        r = cuArrayCreate_v2(&arr, &d);
        if (r == CUDA_SUCCESS) g_arrays.push_back(arr);
      } else {
        CUDA_ARRAY3D_DESCRIPTOR d{Num(a, 1),          Num(a, 2), op == "array3d" ? Num(a, 3) : 0,
                                  CU_AD_FORMAT_FLOAT, 1,         0};
        if (op == "array3d") {
          CUarray arr = nullptr;
          r = cuArray3DCreate_v2(&arr, &d);
          if (r == CUDA_SUCCESS) g_arrays.push_back(arr);
        } else {
          CUmipmappedArray m = nullptr;
          r = cuMipmappedArrayCreate(&m, &d, static_cast<unsigned>(Num(a, 3)));
          if (r == CUDA_SUCCESS) g_mipmaps.push_back(m);
        }
      }
      std::printf("%s %d\n", op.c_str(), r);
    } else if (op == "arrayfree") {
      for (CUarray arr : g_arrays)
        if (cuArrayDestroy(arr) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
      for (CUmipmappedArray m : g_mipmaps)
        if (cuMipmappedArrayDestroy(m) != CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
      g_arrays.clear();
      g_mipmaps.clear();
      std::printf("arrayfree %d\n", r);
    } else if (op == "info") {
      size_t free_b = 0, total_b = 0;
      r = cuMemGetInfo_v2(&free_b, &total_b);
      std::printf("info %d %zu %zu\n", r, free_b, total_b);
    } else if (op == "total") {
      size_t bytes = 0;
      r = cuDeviceTotalMem_v2(&bytes, static_cast<CUdevice>(Num(a, 1)));
      std::printf("total %d %zu\n", r, bytes);
    } else if (op == "uuid") {
      CUuuid u;
      r = cuDeviceGetUuid_v2(&u, static_cast<CUdevice>(Num(a, 1)));
      std::printf("uuid %d %02x%02x\n", r, static_cast<unsigned char>(u.bytes[0]),
                  static_cast<unsigned char>(u.bytes[1]));
    } else if (op == "nvml") {
      nvmlDevice_t dev = nullptr;
      nvmlMemory_t m1{};
      nvmlMemory_v2_t m2{};
      m2.version = kNvmlMemoryV2Version;
      int rr = nvmlInit_v2();
      if (rr == 0) rr = nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(Num(a, 1)), &dev);
      if (rr == 0) rr = nvmlDeviceGetMemoryInfo(dev, &m1);
      if (rr == 0) rr = nvmlDeviceGetMemoryInfo_v2(dev, &m2);
      std::printf("nvml %d %llu %llu %llu %llu %llu\n", rr, m1.total, m1.used, m1.free, m2.total,
                  m2.used);
    } else if (op == "dlsym") {
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      auto fn = reinterpret_cast<AllocFn>(lib ? dlsym(lib, "cuMemAlloc_v2") : nullptr);
      CUdeviceptr p = 0;
      r = fn ? fn(&p, Num(a, 1)) : CUDA_ERROR_NOT_FOUND;
      if (r == CUDA_SUCCESS) g_ptrs.push_back(p);
      std::printf("dlsym %d\n", r);
    } else if (op == "gpa") {
      // cudart's path: dlsym the driver's cuGetProcAddress(_v2), then ask it for cuMemAlloc.
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      int version = static_cast<int>(Num(a, 1));
      cuuint64_t flags = Num(a, 2);
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status = -1;
      if (Num(a, 3)) {
        auto gpa =
            reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
        r = gpa("cuMemAlloc", &fn, version, flags, &status);
      } else {
        auto gpa = reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(lib, "cuGetProcAddress"));
        r = gpa("cuMemAlloc", &fn, version, flags);
      }
      CUdeviceptr p = 0;
      CUresult ar = fn ? reinterpret_cast<AllocFn>(fn)(&p, Num(a, 4)) : CUDA_ERROR_NOT_FOUND;
      if (ar == CUDA_SUCCESS) g_ptrs.push_back(p);
      std::printf("gpa %d %d %d\n", r, ar, status);
    } else if (op == "launch") {
      unsigned long long n = Num(a, 1);
      auto f = reinterpret_cast<CUfunction>(0x1);
      for (unsigned long long k = 0; k < n; ++k)
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
          r = CUDA_ERROR_UNKNOWN;
      std::printf("launch %d\n", r);
    } else if (op == "cudart") {
      // NVIDIA's CUDA runtime, started as a program starts it (dlopen, then the first calls
      // that initialise it), so that a logging driver (FAKE_CUDA_LOG_PROC) records every
      // entry point it asks cuGetProcAddress for. Prints "cudart <runtime version> <rc of
      // cudaGetDeviceCount> <rc of cudaFree(0)>"; on the fake driver the runtime gives up
      // after cuGetExportTable (its private tables), having asked for everything.
      void* rt = a.size() > 1 ? dlopen(a[1].c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
      using IntFn = int (*)(int*);
      auto version = reinterpret_cast<IntFn>(rt ? dlsym(rt, "cudaRuntimeGetVersion") : nullptr);
      auto count = reinterpret_cast<IntFn>(rt ? dlsym(rt, "cudaGetDeviceCount") : nullptr);
      auto free_fn = reinterpret_cast<int (*)(void*)>(rt ? dlsym(rt, "cudaFree") : nullptr);
      int v = -1, n = -1;
      int rc_count = -1, rc_free = -1;
      if (version && count && free_fn) {
        version(&v);
        rc_count = count(&n);
        rc_free = free_fn(nullptr);
      }
      std::printf("cudart %d %d %d\n", v, rc_count, rc_free);
    } else if (op == "proc") {
      // cuGetProcAddress_v2 through dlopen: "proc <rc> <status> <library> <symbol>" naming
      // where the answer lives (Where): "vgpu" (libvgpu.so), "wake" (its trampoline to the
      // driver's function <symbol>), "driver" or "null".
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      auto gpa =
          reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status = -1;
      r = gpa(a.size() > 1 ? a[1].c_str() : "", &fn, static_cast<int>(Num(a, 2)), Num(a, 3),
              &status);
      void* target = nullptr;
      const char* where = Where(fn, &target);
      const char* name = "-";
      Dl_info info{};
      if (target && dladdr(target, &info) && info.dli_sname && info.dli_saddr == target)
        name = info.dli_sname;
      std::printf("proc %d %d %s %s\n", r, status, where, name);
    } else if (op == "lookup") {
      // The copy functions (unhooked) as a program finds them: path "g" (cuGetProcAddress_v2 of
      // a dlopen'd libcuda.so.1, as the runtime does), "d" (dlsym) or "l" (linked against
      // libcuda.so.1: the dynamic linker's binding), and a 4 KiB allocation for
      // "copy": "lookup <rc> <where of HtoD> <where of DtoH>" (Where).
      const std::string path = a.size() > 1 ? a[1] : "g";
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      r = lib ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
      for (int i = 0; i < 2 && r == CUDA_SUCCESS; ++i) {
        const char* name = i == 0 ? "cuMemcpyHtoD" : "cuMemcpyDtoH";
        if (path == "l") {  // linked: the address the program's own references bind to
          g_copy_fns[i] = i == 0 ? reinterpret_cast<void*>(&cuMemcpyHtoD_v2)
                                 : reinterpret_cast<void*>(&cuMemcpyDtoH_v2);
        } else if (path == "g") {
          auto gpa =
              reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
          r = gpa(name, &g_copy_fns[i], 12000, 0, nullptr);
        } else {
          g_copy_fns[i] = dlsym(lib, i == 0 ? "cuMemcpyHtoD_v2" : "cuMemcpyDtoH_v2");
          if (!g_copy_fns[i]) r = CUDA_ERROR_NOT_FOUND;
        }
      }
      if (r == CUDA_SUCCESS) r = cuMemAlloc_v2(&g_copy_buf, 4096);
      void* t = nullptr;
      std::printf("lookup %d %s %s\n", r, Where(g_copy_fns[0], &t), Where(g_copy_fns[1], &t));
    } else if (op == "dlsymdata") {
      // The fake driver's data object cuFakeDriverData through dlsym of libcuda.so.1:
      // "dlsymdata <where> <value in hex>" (Where; "driver": handed out as it is).
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      void* p = lib ? dlsym(lib, "cuFakeDriverData") : nullptr;
      void* t = nullptr;
      const char* where = Where(p, &t);
      unsigned long long v = 0;
      if (p && std::strcmp(where, "driver") == 0) std::memcpy(&v, p, sizeof(v));
      std::printf("dlsymdata %s %llx\n", where, v);
    } else if (op == "samefn") {
      // One unhooked function (cuMemcpyHtoD) asked for <threads> x <iterations> times at once,
      // half through cuGetProcAddress_v2 and half through dlsym: "samefn <rc> <distinct
      // pointers> <where of the last>" (one slot per function: 1 pointer, "wake").
      const int threads = static_cast<int>(Num(a, 1));
      const int iterations = static_cast<int>(Num(a, 2));
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(
          lib ? dlsym(lib, "cuGetProcAddress_v2") : nullptr);
      std::vector<std::vector<void*>> got(static_cast<size_t>(threads));
      std::atomic<int> failures{0}, ready{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < threads) {
          }
          for (int k = 0; k < iterations; ++k) {
            void* fn = nullptr;
            if (t % 2 == 0) {
              if (!gpa || gpa("cuMemcpyHtoD", &fn, 12000, 0, nullptr) != CUDA_SUCCESS)
                failures.fetch_add(1);
            } else {
              fn = lib ? dlsym(lib, "cuMemcpyHtoD_v2") : nullptr;
            }
            if (!fn) failures.fetch_add(1);
            got[static_cast<size_t>(t)].push_back(fn);
          }
        });
      for (auto& th : pool) th.join();
      std::vector<void*> all;
      for (auto& v : got) all.insert(all.end(), v.begin(), v.end());
      std::sort(all.begin(), all.end());
      const long distinct = std::unique(all.begin(), all.end()) - all.begin();
      void* t = nullptr;
      std::printf("samefn %d %ld %s\n", failures.load() ? 1 : 0, distinct,
                  all.empty() ? "null" : Where(all.back(), &t));
    } else if (op == "ctorrace") {
      // Issue 36 review: a library's constructor calls the driver while this thread's first CUDA
      // call is resolving libcuda.so.1. Thread B dlopens <plugin> (vgpu_ctor_plugin: its
      // constructor, inside the dynamic loader's lock, sleeps 300 ms and then calls
      // cuDriverGetVersion); this thread calls cuInit 100 ms into that sleep. Before the fix
      // cuInit waited for the loader's lock and B's call for cuInit's resolution: a deadlock,
      // which the alarm turns into a killed process. "ctorrace <cuInit rc> <plugin's rc>".
      alarm(20);
      void* plugin = nullptr;
      std::thread b([&] { plugin = dlopen(a.size() > 1 ? a[1].c_str() : "", RTLD_NOW); });
      usleep(100 * 1000);
      const CUresult init_rc = cuInit(0);
      b.join();
      auto result =
          reinterpret_cast<int (*)()>(plugin ? dlsym(plugin, "vgpuCtorPluginRc") : nullptr);
      std::printf("ctorrace %d %d\n", init_rc, result ? result() : -1);
      alarm(0);
    } else if (op == "poke" || op == "peek") {
      // After "lookup": "poke" writes a pattern to the buffer through the looked-up HtoD copy
      // ("poke <rc>"); "peek" reads it back through DtoH ("peek <rc> <1 when it is intact>"),
      // so bytes written before a park can be checked after the wake.
      unsigned char pattern[4096], back[4096];
      for (int i = 0; i < 4096; ++i) pattern[i] = static_cast<unsigned char>(i * 13 + 5);
      auto htod = reinterpret_cast<decltype(&cuMemcpyHtoD_v2)>(g_copy_fns[0]);
      auto dtoh = reinterpret_cast<decltype(&cuMemcpyDtoH_v2)>(g_copy_fns[1]);
      if (op == "poke") {
        r = htod ? htod(g_copy_buf, pattern, sizeof(pattern)) : CUDA_ERROR_NOT_FOUND;
        std::printf("poke %d\n", r);
      } else {
        r = dtoh ? dtoh(back, g_copy_buf, sizeof(back)) : CUDA_ERROR_NOT_FOUND;
        std::printf("peek %d %d\n", r,
                    r == CUDA_SUCCESS && std::memcmp(pattern, back, sizeof(back)) == 0);
      }
    } else if (op == "copy") {
      // A round trip through the looked-up functions: "copy <rc> <1 when the bytes came back>".
      unsigned char out[4096], back[4096];
      for (int i = 0; i < 4096; ++i) out[i] = static_cast<unsigned char>(i * 7 + 3);
      auto htod = reinterpret_cast<decltype(&cuMemcpyHtoD_v2)>(g_copy_fns[0]);
      auto dtoh = reinterpret_cast<decltype(&cuMemcpyDtoH_v2)>(g_copy_fns[1]);
      r = htod && dtoh ? htod(g_copy_buf, out, sizeof(out)) : CUDA_ERROR_NOT_FOUND;
      if (r == CUDA_SUCCESS) r = dtoh(back, g_copy_buf, sizeof(back));
      std::printf("copy %d %d\n", r, r == CUDA_SUCCESS && std::memcmp(out, back, 4096) == 0);
    } else if (op == "primary_v1") {
      // The legacy v1 primary-context release/reset, resolved as cudart 7.0-11.0 did (v7000).
      void* lib = dlopen("libcuda.so.1", RTLD_NOW);
      auto gpa =
          reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
      void* fn = nullptr;
      const char* sym =
          a.size() > 1 && a[1] == "reset" ? "cuDevicePrimaryCtxReset" : "cuDevicePrimaryCtxRelease";
      r = gpa(sym, &fn, 7000, 0, nullptr);
      if (r == CUDA_SUCCESS && fn)
        r = reinterpret_cast<CUresult (*)(CUdevice)>(fn)(g_ordinal);
      else if (r == CUDA_SUCCESS)
        r = CUDA_ERROR_NOT_FOUND;
      g_ptrs.clear();
      std::printf("primary_v1 %d\n", r);
    } else if (op == "v1") {
      // v1:<d|g>:<name>[:args]: a legacy v1 entry point (32-bit ABI) found by LegacyEntry.
      // Prints "v1 <rc> <where> [values]". Pointers join g_ptrs (free / freeall free them with
      // cuMemFree_v2), arrays g_arrays; cuMemFree frees the newest pointer with the v1 free.
      const std::string path = a.size() > 1 ? a[1] : "d", name = a.size() > 2 ? a[2] : "";
      const char* where = "null";
      void* fn = LegacyEntry(path, name, &where);
      char values[96] = "";
      if (!fn) {
        r = CUDA_ERROR_NOT_FOUND;
      } else if (name == "cuMemAlloc") {
        CUdeviceptr_v1 p = 0;
        r = reinterpret_cast<decltype(&cuMemAlloc)>(fn)(&p, static_cast<unsigned>(Num(a, 3)));
        if (r == CUDA_SUCCESS) g_ptrs.push_back(p);
        std::snprintf(values, sizeof(values), "%u", p);
      } else if (name == "cuMemAllocPitch") {
        CUdeviceptr_v1 p = 0;
        unsigned pitch = 0;
        r = reinterpret_cast<decltype(&cuMemAllocPitch)>(fn)(
            &p, &pitch, static_cast<unsigned>(Num(a, 3)), static_cast<unsigned>(Num(a, 4)), 4);
        if (r == CUDA_SUCCESS) g_ptrs.push_back(p);
        std::snprintf(values, sizeof(values), "%u", pitch);
      } else if (name == "cuMemFree") {
        CUdeviceptr_v1 p = g_ptrs.empty() ? 0 : static_cast<CUdeviceptr_v1>(g_ptrs.back());
        if (!g_ptrs.empty()) g_ptrs.pop_back();
        r = reinterpret_cast<decltype(&cuMemFree)>(fn)(p);
      } else if (name == "cuArrayCreate") {
        CUDA_ARRAY_DESCRIPTOR_v1 d{static_cast<unsigned>(Num(a, 3)),
                                   static_cast<unsigned>(Num(a, 4)), CU_AD_FORMAT_FLOAT, 1};
        CUarray arr = nullptr;
        r = reinterpret_cast<decltype(&cuArrayCreate)>(fn)(&arr, &d);
        if (r == CUDA_SUCCESS) g_arrays.push_back(arr);
      } else if (name == "cuArray3DCreate") {
        CUDA_ARRAY3D_DESCRIPTOR_v1 d{static_cast<unsigned>(Num(a, 3)),
                                     static_cast<unsigned>(Num(a, 4)),
                                     static_cast<unsigned>(Num(a, 5)),
                                     CU_AD_FORMAT_FLOAT,
                                     1,
                                     0};
        CUarray arr = nullptr;
        r = reinterpret_cast<decltype(&cuArray3DCreate)>(fn)(&arr, &d);
        if (r == CUDA_SUCCESS) g_arrays.push_back(arr);
      } else if (name == "cuMemGetInfo") {
        unsigned f = 0, t = 0;
        r = reinterpret_cast<decltype(&cuMemGetInfo)>(fn)(&f, &t);
        std::snprintf(values, sizeof(values), "%u %u", f, t);
      } else if (name == "cuDeviceTotalMem") {
        unsigned b = 0;
        r = reinterpret_cast<decltype(&cuDeviceTotalMem)>(fn)(&b, static_cast<CUdevice>(Num(a, 3)));
        std::snprintf(values, sizeof(values), "%u", b);
      } else {
        r = CUDA_ERROR_INVALID_VALUE;
      }
      std::printf("v1 %d %s%s%s\n", r, where, values[0] ? " " : "", values);
    } else if (op == "nosyscall") {
      NoSyscall(Num(a, 1), Num(a, 2), a.size() > 3 ? a[3] : "d", Num(a, 4));
    } else if (op == "wallsleep") {  // a real sleep of <ms> (the virtual clock does not move)
      timespec ts{static_cast<time_t>(Num(a, 1) / 1000),
                  static_cast<long>(Num(a, 1) % 1000) * 1'000'000};
      nanosleep(&ts, nullptr);
      std::printf("wallsleep 0\n");
    } else if (op == "sleepto") {
      fakeClockSleepUntilNs(Num(a, 1) * 1'000'000ull);
      std::printf("sleepto 0\n");
    } else if (op == "cost") {
      fakeCudaSetKernelCostPs(Num(a, 1));
      std::printf("cost 0\n");
    } else if (op == "smrun") {
      SmRun(static_cast<unsigned>(Num(a, 1)), static_cast<unsigned>(Num(a, 2)),
            a.size() > 3 ? a[3] : "k", Num(a, 4), Num(a, 5) ? Num(a, 5) : 1);
    } else if (op == "stress") {
      Stress(static_cast<int>(Num(a, 1)), static_cast<int>(Num(a, 2)),
             static_cast<unsigned>(Num(a, 3)), a.size() > 4 ? a[4].c_str() : "");
    } else if (op == "module" || op == "library") {
      static const char kImage[] = "fake image";
      if (op == "module") {
        CUmodule m = nullptr;
        r = cuModuleLoadData(&m, kImage);
        if (r == CUDA_SUCCESS) g_modules.push_back(m);
      } else {
        CUlibrary l = nullptr;
        r = cuLibraryLoadData(&l, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0);
        if (r == CUDA_SUCCESS) g_libraries.push_back(l);
      }
      std::printf("%s %d\n", op.c_str(), r);
    } else if (op == "moduleunload") {
      if (!g_modules.empty()) {
        r = cuModuleUnload(g_modules.back());
        g_modules.pop_back();
      }
      std::printf("moduleunload %d\n", r);
    } else if (op == "libraryunload") {
      if (!g_libraries.empty()) {
        r = cuLibraryUnload(g_libraries.back());
        g_libraries.pop_back();
      }
      std::printf("libraryunload %d\n", r);
    } else if (op == "region") {
      PrintRegion(static_cast<int>(Num(a, 1)));
    } else if (op == "uses") {
      PrintUses();
    } else if (RunGraphOp(a, g_ordinal)) {
    } else if (RunShareOp(a, g_ordinal, g_ptrs)) {
    } else if (RunAttackOp(a, g_ordinal)) {
    } else if (op == "wait") {
      std::printf("ready\n");
      std::fflush(stdout);
      char c;
      while (read(0, &c, 1) > 0) {
      }
    } else {
      std::printf("unknown-op %s\n", op.c_str());
      return 2;
    }
  }
  return 0;
}
