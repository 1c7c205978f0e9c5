#!/usr/bin/env bash
# Real-GPU checks of libvgpu.so (issue 3), ≤ 10 minutes on a machine with an NVIDIA GPU, NVIDIA's
# CUDA 13 wheels (nvcc, cuda.h, libcudart: bash scripts/deps/cuda-wheels.sh; the 13.0 set, or
# CUDA_RELEASE=newest for the newest 13.x, or CUDA_HOME=<a toolkit>) and optionally PyTorch.
# Builds libvgpu.so and a driver-API test program, then checks, under a 1024 MiB limit on GPU 0:
#   1. the driver-API program allocates up to the limit and gets CUDA_ERROR_OUT_OF_MEMORY past it;
#   2. cuMemGetInfo reports total = the limit;
#   3. nvidia-smi (preloaded) shows the limit as the total;
#   4. two processes share one limit (the second is refused what the first holds);
#   5. PyTorch (if importable): torch.cuda.mem_get_info shows the slice, filling it raises OOM;
#   6. SM limit (issue 4, needs nvcc): a matmul loop under 25 / 50 / 75 % (throughput ratio to an
#      unlimited run and NVML utilisation), and two containers at 30 % and 70 % (ratio ~3:7).
#   7. Host PIDs (region v2): in a private PID namespace (`unshare --pid --fork --mount-proc`,
#      needs root) the region slot's host_pid equals the PID nvidia-smi lists for the process,
#      its context_bytes > 0 and used = context + module + data; with nvcc, the 50 % matmul run
#      inside such a namespace still runs at ~50 % (the limiter matches NVML's host PIDs).
#   8. Graph memory: a graph with one allocation node of 60 % of the free slice launches; a
#      second such graph is refused at launch and at upload (CUDA_ERROR_OUT_OF_MEMORY); once the
#      first executable graph is destroyed the second runs in its reserve; cuDeviceGraphMemTrim
#      gives the slice back. Also reports how much the driver reserved for the allocation.
#   9. CUDA 13 runtime (libcudart.so.13 of the wheels, linked by gcc, no nvcc): cudaMemGetInfo
#      shows the slice; cudaMalloc fills it in 64 MiB steps, then cudaErrorMemoryAllocation;
#      cudaDeviceReset (the primary context's release/reset) drops the charges, so the whole
#      slice can be allocated again in the same process; a cudaMallocAsync pool with the
#      release threshold at UINT64_MAX keeps its memory after a sync and is still charged.
#  10. Park and wake (issue 36 item 7, docs/reclaim.md "On a real GPU"): a driver-API program
#      (tests/gpu/park_tenant.cc, no libvgpu.so) fills 1 GiB and 4 GiB buffers (less where the
#      GPU's free memory is short) with a position-dependent pattern and waits; gpu_park_check
#      (tests/gpu/park_check.cc: node::Parker over the node agent's real driver and NVML
#      adapters) parks it (Lock, Checkpoint) and wakes it (Restore, Unlock); the program then
#      reads its bytes back. Rows: bytes intact, park and wake time per GiB, the host memory the
#      parked copy takes, NVML showing the memory free while parked; then a 256 MiB run under
#      libvgpu.so with the region's facts, as the agent parks. SKIP where the driver lacks the
#      checkpoint API (older than CUDA 12.8), the GPU is in MIG mode or a gate refuses (MPS,
#      persistence mode off).
# Prints a table of results; exits 0 when every run check passed. Skips (exit 0) without a GPU.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d /tmp/fracgpu-gpu-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
LIMIT_MIB=1024
declare -a ROWS=()
FAILED=0
row() { ROWS+=("$(printf '%-58s %-6s %s' "$1" "$2" "$3")"); [[ "$2" == FAIL ]] && FAILED=1; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU here: skipping the real-GPU checks"; exit 0
fi
CUDA_RELEASE="${CUDA_RELEASE:-13.0}"
CUDA_HOME="${CUDA_HOME:-$(python3 "$ROOT/scripts/cuda-tables/cuda_home.py" "$CUDA_RELEASE")}"
if [[ ! -f "$CUDA_HOME/include/cuda.h" ]]; then
  echo "no CUDA $CUDA_RELEASE wheels (bash scripts/deps/cuda-wheels.sh) nor CUDA_HOME: skipping"; exit 0
fi
# The wheels keep their libraries in lib/ (a toolkit: lib64/) and ship no stub libcuda.so: the
# driver-API programs then link against the driver's own libcuda.so.1.
CUDA_LIB="$CUDA_HOME/lib64"; [[ -d "$CUDA_LIB" ]] || CUDA_LIB="$CUDA_HOME/lib"
LIBCUDA=(-L"$CUDA_LIB/stubs" -lcuda); [[ -f "$CUDA_LIB/stubs/libcuda.so" ]] || LIBCUDA=(-l:libcuda.so.1)

cmake -S "$ROOT" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRACGPU_BENCH=OFF >/dev/null &&
  cmake --build "$WORK/build" --target vgpu -j"$(nproc)" >/dev/null || { echo "build of libvgpu.so failed"; exit 1; }
LIB="$WORK/build/lib/libvgpu.so"
# Check 10's tool links the node agent's libraries: built meanwhile, niced (nothing else uses
# the build tree after this point); waited for before the timed SM checks.
nice -n 19 cmake --build "$WORK/build" --target gpu_park_check -j"$(nproc)" >"$WORK/park-build.log" 2>&1 &
PARK_BUILD=$!

cat > "$WORK/alloc.c" <<'C'
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* alloc <MiB per step> <steps> [hold]: prints "ok <n>" allocations that succeeded, the first
   error code, and cuMemGetInfo's total in MiB; with "hold", sleeps 20 s holding the memory. */
int main(int argc, char** argv) {
  size_t step = strtoull(argv[1], 0, 10) << 20; int steps = atoi(argv[2]);
  CUdevice d; CUcontext c; size_t fr, tot; int ok = 0; CUresult first = CUDA_SUCCESS;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 3;
  for (int i = 0; i < steps; ++i) { CUdeviceptr p; CUresult r = cuMemAlloc(&p, step);
    if (r == CUDA_SUCCESS) ok++; else { first = r; break; } }
  cuMemGetInfo(&fr, &tot);
  printf("ok %d err %d total %zu free %zu\n", ok, (int)first, tot >> 20, fr >> 20); fflush(stdout);
  if (argc > 3) sleep(20);
  return 0;
}
C
gcc -O2 -I"$CUDA_HOME/include" "$WORK/alloc.c" -o "$WORK/alloc" "${LIBCUDA[@]}" || { echo "cannot build the test program"; exit 1; }

export CUDA_DEVICE_MEMORY_LIMIT_0="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/region.cache"
export NVIDIA_VISIBLE_DEVICES=0 CUDA_VISIBLE_DEVICES=0
out=$(LD_PRELOAD="$LIB" "$WORK/alloc" 64 100)
read -r _ ok _ err _ total _ free <<<"$out"
# A context takes some of the slice, so fewer than 16 × 64 MiB fit; never more.
[[ $ok -ge 10 && $ok -le 16 && $err -eq 2 ]] && row "driver API: fill 1024 MiB in 64 MiB steps, then OOM" PASS "$ok allocations, then error $err" ||
  row "driver API: fill 1024 MiB in 64 MiB steps, then OOM" FAIL "$out"
[[ $total -eq $LIMIT_MIB ]] && row "cuMemGetInfo total = limit" PASS "total $total MiB" || row "cuMemGetInfo total = limit" FAIL "$out"
smi=$(LD_PRELOAD="$LIB" nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -1 | tr -d ' ')
[[ "$smi" == "$LIMIT_MIB" ]] && row "nvidia-smi memory.total = limit" PASS "$smi MiB" || row "nvidia-smi memory.total = limit" FAIL "got '$smi'"

rm -f "$WORK/region.cache"
coproc HOLD { LD_PRELOAD="$LIB" "$WORK/alloc" 512 1 hold; }
read -r first_line <&"${HOLD[0]}"
second=$(LD_PRELOAD="$LIB" "$WORK/alloc" 768 1)
third=$(LD_PRELOAD="$LIB" "$WORK/alloc" 256 1)
kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null
[[ "$first_line" == "ok 1"* && "$second" == "ok 0 err 2"* && "$third" == "ok 1"* ]] &&
  row "two processes share one limit (512 held; 768 refused; 256 fits)" PASS "" ||
  row "two processes share one limit (512 held; 768 refused; 256 fits)" FAIL "$first_line | $second | $third"

# ---- Graph memory: charged as the graph pool reserves it, refused where it would grow ----
cat > "$WORK/graph.c" <<'C'
#include <cuda.h>
#include <stdio.h>
/* One graph per stream, each with one allocation node of 60 % of the free slice (freed in the
   graph). Prints "free <MiB> size <MiB> first <rc> reserved <MiB> second <rc> upload <rc>
   after_destroy <rc> trimmed <MiB> free_after <MiB>". */
static CUgraphExec make(size_t bytes) {
  CUgraph g; CUgraphNode a, f; CUgraphExec e = 0;
  CUDA_MEM_ALLOC_NODE_PARAMS p = {0};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.poolProps.location.id = 0;
  p.bytesize = bytes;
  if (cuGraphCreate(&g, 0) || cuGraphAddMemAllocNode(&a, g, 0, 0, &p) ||
      cuGraphAddMemFreeNode(&f, g, &a, 1, p.dptr) || cuGraphInstantiateWithFlags(&e, g, 0)) return 0;
  return e;
}
int main(void) {
  CUdevice d; CUcontext c; CUstream s1, s2; size_t fr, tot, fr2; cuuint64_t res = 0, trimmed = 0;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) ||
      cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)) return 3;
  cuMemGetInfo(&fr, &tot);
  size_t size = (fr / 10 * 6) >> 21 << 21;
  CUgraphExec e1 = make(size), e2 = make(size);
  if (!e1 || !e2) return 4;
  CUresult first = cuGraphLaunch(e1, s1); cuStreamSynchronize(s1);
  cuDeviceGetGraphMemAttribute(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &res);
  CUresult second = cuGraphLaunch(e2, s2), upload = cuGraphUpload(e2, s2);
  cuGraphExecDestroy(e1);
  CUresult after = cuGraphLaunch(e2, s2); cuStreamSynchronize(s2);
  cuGraphExecDestroy(e2);
  cuDeviceGraphMemTrim(d);
  cuDeviceGetGraphMemAttribute(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &trimmed);
  cuMemGetInfo(&fr2, &tot);
  printf("free %zu size %zu first %d reserved %llu second %d upload %d after_destroy %d trimmed %llu free_after %zu\n",
         fr >> 20, size >> 20, (int)first, (unsigned long long)(res >> 20), (int)second, (int)upload, (int)after,
         (unsigned long long)(trimmed >> 20), fr2 >> 20);
  return 0;
}
C
if gcc -O2 -I"$CUDA_HOME/include" "$WORK/graph.c" -o "$WORK/graph" "${LIBCUDA[@]}" 2>"$WORK/graph.log"; then
  rm -f "$WORK/region.cache"
  gout=$(LD_PRELOAD="$LIB" "$WORK/graph")
  read -r _ gfree _ gsize _ gfirst _ gres _ gsecond _ gupload _ gafter _ gtrim _ gfree2 <<<"$gout"
  if [[ "${gfirst:-}" == 0 && "${gsecond:-}" == 2 && "${gupload:-}" == 2 && "${gafter:-}" == 0 &&
        "${gres:-0}" -ge "${gsize:-1}" && "${gfree2:-0}" -ge $((gfree - 64)) ]]; then
    row "graph memory: second graph refused (launch, upload); trim frees" PASS "$gsize MiB graphs in a $gfree MiB slice"
  else
    row "graph memory: second graph refused (launch, upload); trim frees" FAIL "$gout"
  fi
  row "graph memory: driver's reservation for one allocation" INFO "${gres:-?} MiB reserved for ${gsize:-?} MiB; ${gtrim:-?} MiB after trim"
else
  row "graph memory checks" FAIL "cannot build the graph program: $(head -c 200 "$WORK/graph.log")"
fi

# ---- CUDA 13 runtime: what most programs use, through NVIDIA's own libcudart ----
cat > "$WORK/rt.c" <<'C'
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
/* Prints "rt <version> total <MiB> fill <n> err <code> reset <rc> refill <n> pool <rc> kept <MiB>
   charged_free <MiB>": cudaMemGetInfo's total, 64 MiB cudaMallocs until the first error, the
   same after cudaDeviceReset, then a 256 MiB cudaMallocAsync freed with the pool's release
   threshold at UINT64_MAX and the free memory cudaMemGetInfo shows after the sync. */
static int fill(void) { int n = 0; void* p; while (n < 1000 && cudaMalloc(&p, 64 << 20) == cudaSuccess) n++; return n; }
int main(void) {
  int v = 0; size_t fr = 0, tot = 0; cudaRuntimeGetVersion(&v);
  if (cudaFree(0) != cudaSuccess) { printf("rt %d init-failed\n", v); return 3; }
  cudaMemGetInfo(&fr, &tot);
  int n1 = fill(); cudaError_t e = cudaGetLastError();
  cudaError_t r = cudaDeviceReset();
  int n2 = fill(); cudaGetLastError();
  cudaDeviceReset();
  cudaMemPool_t pool; uint64_t keep = UINT64_MAX; void* p = 0; cudaStream_t s; size_t fr2 = 0, t2 = 0;
  cudaStreamCreate(&s); cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  cudaError_t pr = cudaMallocAsync(&p, 256 << 20, s);
  cudaFreeAsync(p, s); cudaStreamSynchronize(s); cudaMemGetInfo(&fr2, &t2);
  printf("rt %d total %zu fill %d err %d reset %d refill %d pool %d free_after %zu\n", v, tot >> 20, n1,
         (int)e, (int)r, n2, (int)pr, fr2 >> 20);
  return 0;
}
C
if gcc -O2 -I"$CUDA_HOME/include" "$WORK/rt.c" -o "$WORK/rt" -L"$CUDA_LIB" -l:libcudart.so.13 \
    -Wl,-rpath,"$CUDA_LIB" 2>"$WORK/rt.log"; then
  rm -f "$WORK/region.cache"
  rout=$(LD_PRELOAD="$LIB" "$WORK/rt")
  read -r _ rver _ rtot _ rfill _ rerr _ rreset _ rrefill _ rpool _ rfree <<<"$rout"
  [[ "$rtot" == "$LIMIT_MIB" ]] && row "CUDA $rver runtime: cudaMemGetInfo total = limit" PASS "total $rtot MiB" ||
    row "CUDA runtime: cudaMemGetInfo total = limit" FAIL "$rout"
  # cudaErrorMemoryAllocation = 2; a context takes some of the slice, as in check 1.
  [[ ${rfill:-0} -ge 10 && ${rfill:-0} -le 16 && "$rerr" == 2 ]] &&
    row "CUDA runtime: cudaMalloc fills the slice, then error 2" PASS "$rfill x 64 MiB" ||
    row "CUDA runtime: cudaMalloc fills the slice, then error 2" FAIL "$rout"
  [[ "$rreset" == 0 && ${rrefill:-0} -ge $(( ${rfill:-0} - 1 )) && ${rrefill:-0} -le 16 ]] &&
    row "CUDA runtime: cudaDeviceReset drops the charges" PASS "refill $rrefill x 64 MiB" ||
    row "CUDA runtime: cudaDeviceReset drops the charges" FAIL "$rout"
  # The pool keeps 256 MiB (threshold UINT64_MAX): free must stay at least that much below the
  # limit, i.e. the kept memory is charged.
  [[ "$rpool" == 0 && ${rfree:-9999} -le $(( LIMIT_MIB - 256 )) ]] &&
    row "CUDA runtime: pool at UINT64_MAX threshold keeps its charge" PASS "free $rfree MiB after sync" ||
    row "CUDA runtime: pool at UINT64_MAX threshold keeps its charge" FAIL "$rout"
else
  row "CUDA runtime checks" FAIL "cannot build against libcudart: $(head -c 200 "$WORK/rt.log")"
fi

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  rm -f "$WORK/region.cache"
  py=$(LD_PRELOAD="$LIB" python3 - <<'PY'
import torch
free, total = torch.cuda.mem_get_info(0)
blocks, oom = [], False
try:
    for _ in range(64):
        blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    oom = True
print(total >> 20, len(blocks), int(oom))
PY
)
  read -r ptotal pblocks poom <<<"$py"
  [[ "$ptotal" == "$LIMIT_MIB" && "$poom" == 1 && $pblocks -le 16 ]] &&
    row "PyTorch: mem_get_info total = limit; filling raises OOM" PASS "$pblocks × 64 MiB, then OOM" ||
    row "PyTorch: mem_get_info total = limit; filling raises OOM" FAIL "$py"
else
  row "PyTorch checks" SKIP "torch with CUDA not importable"
fi

# ---- Host PIDs (region layout v2): a process in its own PID namespace ----
cat > "$WORK/slots.cc" <<'CC'
// slots <region file>: one line per active slot: "<pid> <host_pid> <used> <ctx> <module> <data>" (device 0).
#include <fcntl.h>
#include <sys/mman.h>
#include <cstdio>
#include "vgpu/region.h"
int main(int, char** argv) {
  using namespace fracgpu::vgpu;
  int fd = open(argv[1], O_RDONLY);
  void* p = fd >= 0 ? mmap(nullptr, sizeof(Region), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (p == MAP_FAILED || RegionValidate(p, sizeof(Region)) != RegionError::kOk) return 1;
  for (const RegionSlot& s : static_cast<const Region*>(p)->slots)
    if (s.state.load() == kSlotActive)
      std::printf("%d %d %llu %llu %llu %llu\n", s.pid, s.host_pid, (unsigned long long)s.used[0].load(),
                  (unsigned long long)s.context_bytes[0].load(), (unsigned long long)s.module_bytes[0].load(),
                  (unsigned long long)s.data_bytes[0].load());
  return 0;
}
CC
if ! g++ -std=c++20 -O1 -I"$ROOT/src" "$WORK/slots.cc" "$ROOT/src/vgpu/region.cc" -o "$WORK/slots" -lpthread 2>"$WORK/slots.log"; then
  row "host PID in a PID namespace" FAIL "cannot build the region reader: $(head -c 200 "$WORK/slots.log")"
elif ! unshare --pid --fork --mount-proc true 2>/dev/null; then
  row "host PID in a PID namespace" SKIP "unshare --pid --fork --mount-proc not permitted here"
else
  rm -f "$WORK/region.cache"
  coproc NSHOLD { unshare --pid --fork --mount-proc env LD_PRELOAD="$LIB" "$WORK/alloc" 64 1 hold; }
  read -r _ <&"${NSHOLD[0]}"
  slot=$("$WORK/slots" "$WORK/region.cache" | head -1)
  apps=$(nvidia-smi -i 0 --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ' | tr '\n' ',')
  kill "$NSHOLD_PID" 2>/dev/null; wait "$NSHOLD_PID" 2>/dev/null
  read -r nspid hostpid used ctx mod data <<<"$slot"
  if [[ -n "${hostpid:-}" && "$hostpid" -gt 0 && "$hostpid" != "$nspid" && ",$apps" == *",$hostpid,"* &&
        "$ctx" -gt 0 && $((ctx + mod + data)) -eq "$used" ]]; then
    row "host PID in a PID namespace = nvidia-smi's PID" PASS "pid $nspid in the namespace, host $hostpid; context $((ctx >> 20)) MiB"
  else
    row "host PID in a PID namespace = nvidia-smi's PID" FAIL "slot '$slot', nvidia-smi pids '$apps'"
  fi
fi

wait "$PARK_BUILD"; park_build=$?  # check 10's tool, before the timed checks

# ---- SM limit (issue 4): a matrix-multiply loop under 25 / 50 / 75 %, and 30 % vs 70 % ----
# Throughput (matmuls per second) relative to an unlimited run should follow the limit; NVML
# utilisation (nvidia-smi, not preloaded: the real device) is sampled every 200 ms meanwhile.
if command -v "$CUDA_HOME/bin/nvcc" >/dev/null; then
  cat > "$WORK/matmul.cu" <<'CU'
#include <cstdio>
#include <cstdlib>
#include <chrono>
// matmul <seconds>: naive 1024x1024 float matmuls in a loop (synchronising each), prints the
// number completed per second.
__global__ void mm(const float* a, const float* b, float* c, int n) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n || col >= n) return;
  float s = 0; for (int k = 0; k < n; ++k) s += a[r * n + k] * b[k * n + col];
  c[r * n + col] = s;
}
int main(int argc, char** argv) {
  const int n = 1024; double secs = atof(argv[1]);
  float *a, *b, *c; cudaMalloc(&a, n * n * 4); cudaMalloc(&b, n * n * 4); cudaMalloc(&c, n * n * 4);
  dim3 blk(16, 16), grd(n / 16, n / 16); long iters = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    mm<<<grd, blk>>>(a, b, c, n); cudaDeviceSynchronize(); ++iters;
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el >= secs) { printf("%.2f\n", iters / el); return cudaGetLastError() == cudaSuccess ? 0 : 1; }
  }
}
CU
  if "$CUDA_HOME/bin/nvcc" -O2 "$WORK/matmul.cu" -o "$WORK/matmul" -L"$CUDA_LIB" 2>"$WORK/nvcc.log"; then
    # run_mm <region> <limit or ""> -> "<matmuls/s> <mean NVML utilisation %>"
    run_mm() {
      local region="$1" limit="$2" util_log="$WORK/util-$1.log" rate
      nvidia-smi -i 0 --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 >"$util_log" 2>/dev/null &
      local smi=$!
      rate=$(env CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/$region.cache" ${limit:+CUDA_DEVICE_SM_LIMIT_0=$limit} \
        LD_PRELOAD="$LIB" "$WORK/matmul" 8)
      kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
      echo "$rate $(awk 'NR > 10 { s += $1; n++ } END { printf "%.0f", n ? s / n : -1 }' "$util_log")"
    }
    read -r base base_util <<<"$(run_mm sm-base "")"
    row "SM: unlimited matmul loop" INFO "$base matmul/s, NVML util ${base_util} %"
    for lim in 25 50 75; do
      read -r rate util <<<"$(run_mm "sm-$lim" "$lim")"
      ratio=$(awk -v r="$rate" -v b="$base" 'BEGIN { printf "%.3f", b > 0 ? r / b : 0 }')
      ok=$(awk -v q="$ratio" -v l="$lim" -v u="$util" 'BEGIN { print (q > l/100 - 0.07 && q < l/100 + 0.07 && u > l - 10 && u < l + 10) ? 1 : 0 }')
      [[ $ok == 1 ]] && res=PASS || res=FAIL
      row "SM limit $lim %: throughput ratio ~$lim/100, NVML ~$lim %" $res "ratio $ratio, NVML util $util %"
    done
    # The same 50 % run inside a private PID namespace: NVML's PIDs are host PIDs there.
    if unshare --pid --fork --mount-proc true 2>/dev/null; then
      rate=$(unshare --pid --fork --mount-proc env CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/sm-ns.cache" \
        CUDA_DEVICE_SM_LIMIT_0=50 LD_PRELOAD="$LIB" "$WORK/matmul" 8)
      ratio=$(awk -v r="$rate" -v b="$base" 'BEGIN { printf "%.3f", b > 0 ? r / b : 0 }')
      awk -v q="$ratio" 'BEGIN { exit !(q > 0.43 && q < 0.57) }' && res=PASS || res=FAIL
      row "SM limit 50 % in a PID namespace: throughput ratio ~0.5" $res "ratio $ratio"
    else
      row "SM limit 50 % in a PID namespace" SKIP "unshare not permitted here"
    fi
    # Two containers (separate regions) at 30 % and 70 % on GPU 0 at once: ratio near 3 : 7.
    env CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/sm-a.cache" CUDA_DEVICE_SM_LIMIT_0=30 LD_PRELOAD="$LIB" \
      "$WORK/matmul" 8 >"$WORK/a.out" &
    pa=$!
    env CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/sm-b.cache" CUDA_DEVICE_SM_LIMIT_0=70 LD_PRELOAD="$LIB" \
      "$WORK/matmul" 8 >"$WORK/b.out" &
    pb=$!
    wait "$pa" "$pb"
    ra=$(cat "$WORK/a.out"); rb=$(cat "$WORK/b.out")
    q=$(awk -v a="$ra" -v b="$rb" 'BEGIN { printf "%.3f", b > 0 ? a / b : 0 }')
    awk -v q="$q" 'BEGIN { exit !(q > 0.33 && q < 0.55) }' && res=PASS || res=FAIL
    row "SM: two containers 30 % and 70 %: ratio near 3:7 (0.43)" $res "$ra vs $rb matmul/s, ratio $q"
  else
    row "SM checks" FAIL "nvcc could not build the matmul program: $(head -c 200 "$WORK/nvcc.log")"
  fi
else
  row "SM checks" SKIP "no nvcc at $CUDA_HOME/bin"
fi

# ---- 10. Park and wake a real CUDA program (issue 36 item 7) ----
PARK_TOOL="$WORK/build/tests/gpu/gpu_park_check"
[[ -x "$PARK_TOOL" ]] || PARK_TOOL="$(find "$WORK/build" -name gpu_park_check -type f -perm -u+x | head -1)"
mig=$(nvidia-smi -i 0 --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null | tr -d ' ')
driver=$(nvidia-smi -i 0 --query-gpu=driver_version --format=csv,noheader 2>/dev/null | tr -d ' ')
park_skip=""
if [[ "$mig" == Enabled ]]; then
  park_skip="GPU 0 is in MIG mode (the checkpoint API does not support MIG)"
elif [[ $park_build -ne 0 || -z "$PARK_TOOL" ]]; then
  row "10. park/wake checks" FAIL "gpu_park_check did not build: $(grep -m1 -i error "$WORK/park-build.log" | head -c 200)"
  park_skip="-"
elif ! g++ -std=c++17 -O2 -I"$CUDA_HOME/include" "$ROOT/tests/gpu/park_tenant.cc" -o "$WORK/park_tenant" \
    "${LIBCUDA[@]}" 2>"$WORK/tenant.log"; then
  row "10. park/wake checks" FAIL "cannot build park_tenant: $(head -c 200 "$WORK/tenant.log")"
  park_skip="-"
fi
# run_park <out prefix> <tool args...> -- <tenant command...>: starts the tenant, parks and
# wakes it with the tool once it is ready, lets it check its bytes. Sets park_rc (the tool's
# exit code), park_err (its stderr), park_verdict (the tenant's last line).
run_park() {
  local out="$1"; shift
  local -a targs=() cmd=()
  while [[ $# -gt 0 && "$1" != -- ]]; do targs+=("$1"); shift; done
  shift; cmd=("$@")
  park_rc=-1; park_err=""; park_verdict=""
  coproc PARKT { "${cmd[@]}" 2>"$out.tenant.err"; }
  local tpid=$PARKT_PID ready="" tin=${PARKT[1]} tout=${PARKT[0]}
  read -r -t 180 ready <&"$tout"
  if [[ "$ready" != ready* ]]; then
    park_verdict="tenant not ready: $ready"
  else
    read -r _ gpid _ <<<"$ready"
    "$PARK_TOOL" --pid "$gpid" --allow-driver "$driver" --lock-timeout-ms 10000 "${targs[@]}" \
      >"$out.out" 2>"$out.err"
    park_rc=$?
    park_err=$(head -c 300 "$out.err")
    # A failed park is undone (the process RUNNING again), so its bytes are checked too.
    echo go >&"$tin"
    read -r -t 300 park_verdict <&"$tout"
  fi
  kill "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
}
fig() { awk -v k="$2" '$1 == "figure" && $2 == k { print $3 }' "$1.out"; }
if [[ -z "$park_skip" ]]; then
  free_mib=$(nvidia-smi -i 0 --query-gpu=memory.free --format=csv,noheader,nounits | head -1 | tr -d ' ')
  # 1 GiB and 4 GiB, with 1 GiB left for the context and others; less on a small GPU.
  if [[ ${free_mib:-0} -ge 6144 ]]; then sizes=(1024 4096)
  elif [[ ${free_mib:-0} -ge 1536 ]]; then sizes=($(( (free_mib - 1024) / 5 )) $(( (free_mib - 1024) * 4 / 5 )))
  else park_skip="GPU 0 has ${free_mib:-?} MiB free, below 1536"; fi
fi
if [[ -z "$park_skip" ]]; then
  run_park "$WORK/park" --no-region -- env -u LD_PRELOAD CUDA_VISIBLE_DEVICES=0 "$WORK/park_tenant" "${sizes[@]}"
  buf_mib=$(( sizes[0] + sizes[1] ))
  if [[ $park_rc -eq 3 || $park_rc -eq 4 ]]; then
    # No checkpoint API in this driver, or a gate (MPS, persistence mode, ...): not a failure.
    park_skip="${park_err#gpu_park_check: }"
  elif [[ $park_rc -eq 0 && "$park_verdict" == "intact $buf_mib" ]]; then
    row "10. park/wake: bytes intact after restore" PASS "$buf_mib MiB (${sizes[0]} + ${sizes[1]}) on driver $driver"
  else
    row "10. park/wake: bytes intact after restore" FAIL "tool exit $park_rc: ${park_err:-ok}; tenant: $park_verdict"
  fi
  if [[ -z "$park_skip" && $park_rc -eq 0 ]]; then
    rel=$(fig "$WORK/park" released_bytes)
    gib=$(awk -v b="$rel" 'BEGIN { printf "%.3f", b / 1073741824 }')
    row "10. park time per GiB" INFO "$(awk -v t="$(fig "$WORK/park" park_ms)" -v g="$gib" \
      -v l="$(fig "$WORK/park" lock_ms)" -v c="$(fig "$WORK/park" checkpoint_ms)" \
      'BEGIN { printf "%.1f ms/GiB (lock %.1f ms, checkpoint %.1f ms, %s GiB released)", (g > 0 ? t / g : -1), l, c, g }')"
    row "10. wake time per GiB" INFO "$(awk -v t="$(fig "$WORK/park" wake_ms)" -v g="$gib" \
      -v r="$(fig "$WORK/park" restore_ms)" -v u="$(fig "$WORK/park" unlock_ms)" \
      'BEGIN { printf "%.1f ms/GiB (restore %.1f ms, unlock %.1f ms)", (g > 0 ? t / g : -1), r, u }')"
    row "10. host memory while parked (MiB per GiB)" INFO "$(awk -v b="$(fig "$WORK/park" vmrss_kib_before)" \
      -v p="$(fig "$WORK/park" vmrss_kib_parked)" -v a="$(fig "$WORK/park" vmrss_kib_after)" \
      -v mb="$(fig "$WORK/park" memavailable_kib_before)" -v mp="$(fig "$WORK/park" memavailable_kib_parked)" -v g="$gib" \
      'BEGIN { printf "%.0f MiB/GiB (VmRSS %+.0f MiB parked, %+.0f MiB after wake; node MemAvailable %+.0f MiB parked)", (g > 0 ? (p - b) / 1024 / g : -1), (p - b) / 1024, (a - b) / 1024, (mp - mb) / 1024 }')"
    listed=$(fig "$WORK/park" nvml_pid_listed_parked); pbytes=$(fig "$WORK/park" nvml_pid_bytes_parked)
    before=$(fig "$WORK/park" nvml_pid_bytes_before)
    freed=$(awk -v a="$(fig "$WORK/park" nvml_free_bytes_parked)" -v b="$(fig "$WORK/park" nvml_free_bytes_before)" 'BEGIN { printf "%.0f", (a - b) / 1048576 }')
    # ~0 for the pid while parked, and at least the buffers back in the GPU's free memory.
    if [[ "$listed" == 0 || ${pbytes:-1} -lt $((64 << 20)) ]] && [[ $freed -ge $buf_mib ]]; then
      row "10. NVML shows the memory free while parked" PASS "pid $((before >> 20)) MiB -> $((pbytes >> 20)) MiB (listed $listed); GPU free +$freed MiB"
    else
      row "10. NVML shows the memory free while parked" FAIL "pid $((before >> 20)) MiB -> $((pbytes >> 20)) MiB (listed $listed); GPU free +$freed MiB, buffers $buf_mib MiB"
    fi
  fi
fi
if [[ -z "$park_skip" ]]; then
  # The agent's path: the program under libvgpu.so (a limit of the whole GPU), the facts from its
  # region (the use record, the charged bytes that NVML must show released).
  total_mib=$(nvidia-smi -i 0 --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -d ' ')
  rm -f "$WORK/park-region.cache"
  run_park "$WORK/park-vgpu" --region "$WORK/park-region.cache" -- env LD_PRELOAD="$LIB" CUDA_VISIBLE_DEVICES=0 \
    CUDA_DEVICE_MEMORY_LIMIT_0="${total_mib}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$WORK/park-region.cache" \
    "$WORK/park_tenant" 256
  if [[ $park_rc -eq 0 && "$park_verdict" == "intact 256" ]]; then
    row "10. park/wake under libvgpu.so (region facts)" PASS "256 MiB; park $(fig "$WORK/park-vgpu" park_ms) ms, wake $(fig "$WORK/park-vgpu" wake_ms) ms"
  else
    row "10. park/wake under libvgpu.so (region facts)" FAIL "tool exit $park_rc: ${park_err:-ok}; tenant: $park_verdict"
  fi
elif [[ "$park_skip" != "-" ]]; then
  row "10. park/wake checks" SKIP "$park_skip"
fi

printf '\n%-52s %-6s %s\n' "check (limit ${LIMIT_MIB} MiB on GPU 0)" result detail
printf '%s\n' "${ROWS[@]}"
exit $FAILED
