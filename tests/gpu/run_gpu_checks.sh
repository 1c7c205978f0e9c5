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

printf '\n%-52s %-6s %s\n' "check (limit ${LIMIT_MIB} MiB on GPU 0)" result detail
printf '%s\n' "${ROWS[@]}"
exit $FAILED
