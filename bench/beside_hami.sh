#!/usr/bin/env bash
# bench/beside_hami.sh HAMI_LIBVGPU [BUILD_DIR]
#
# fracgpu's libvgpu.so and HAMi-core's side by side, on the same fake driver and NVML, in one
# run: memory isolation, the added cost per call (bench_vgpu with FRACGPU_BENCH_PEER) and the
# SM limit's accuracy. HAMi-core is built from its own sources outside this repository and
# never committed (docs/vgpu.md "Beside HAMi-core" says how); BUILD_DIR defaults to
# build/release, which must hold bench_vgpu, tests/vgpu/vgpu_app, lib/libvgpu.so and the fakes.
#
# SM accuracy runs on the fake clock's realtime mode (FAKE_CLOCK_REALTIME=1,
# tests/fakes/cuda/fake_clock.h): kernels take wall time, synchronisation really sleeps, and
# NVML reports CLOCK_REALTIME timestamps, so both limiters run as shipped, with their own real
# clocks and sleeps. One process per limiter, a kernel of one full wave (grid = SM count) of
# the given length, a synchronisation after each launch, 6 s; the utilisation is the fake's
# own record of when kernels ran over [2 s, 6 s) — neither limiter reads that record (both
# read NVML) — so the check is independent of what they believe. Not deterministic: wall
# time on a shared machine; differences of a point or two are noise.
set -euo pipefail
hami=${1:?usage: bench/beside_hami.sh HAMI_LIBVGPU [BUILD_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build/release}
hami=$(realpath "$hami")
ours=$build/lib/libvgpu.so
app=$build/tests/vgpu/vgpu_app
for f in "$hami" "$ours" "$app" "$build/bench/bench_vgpu"; do
  [ -e "$f" ] || { echo "beside_hami: $f is missing (build the release preset first)" >&2; exit 2; }
done
export LD_LIBRARY_PATH=$build/fakes/lib FAKE_CUDA_DRIVER_VERSION=13000 LIBCUDA_LOG_LEVEL=0
gpu=GPU-11111111-1111-1111-1111-111111111111
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "fracgpu $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') vs $hami"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo

# 1. Memory: a 4 GiB limit on an 80 GiB card; 5 GiB through cuGetProcAddress_v2 (the CUDA
#    runtime's path) must be refused, 3 GiB accepted, then 2 GiB more refused.
mem() {
  local lib=$1 d
  d=$(mktemp -d -p "$work")
  FAKE_GPU_DEVICES=$gpu:81920 FAKE_GPU_STATE_DIR=$d LD_PRELOAD=$lib CUDA_DEVICE_MEMORY_LIMIT=4g \
    CUDA_DEVICE_MEMORY_LIMIT_0=4g CUDA_DEVICE_MEMORY_SHARED_CACHE=$d/region \
    "$app" init ctx:0 gpa:13000:0:1:5368709120 gpa:13000:0:1:3221225472 \
    gpa:13000:0:1:2147483648 2>/dev/null |
    awk '$1 == "gpa" { r = r ($3 == 0 ? "ok" : $3 == 2 ? "OOM" : "rc" $3) " " }
         END { print r }'
}
m_ours=$(mem "$ours")
m_hami=$(mem "$hami")
printf '%-52s %-16s %-16s\n' "memory, limit 4 GiB: 5 GiB, 3 GiB, 2 GiB more" "fracgpu" "HAMi-core"
printf '%-52s %-16s %-16s\n' "(expected: OOM ok OOM)" "$m_ours" "$m_hami"
echo

# 2. Added cost per call, one plain baseline for both.
FRACGPU_BENCH_PEER=$hami "$build/bench/bench_vgpu" 2>/dev/null | sed 's/peer/HAMi/g'
echo

# 3. SM limit accuracy.
sm() {  # lib limit block_us -> measured % over [2 s, 6 s)
  local lib=$1 limit=$2 block=$3 d
  d=$(mktemp -d -p "$work")
  FAKE_CLOCK_REALTIME=1 FAKE_GPU_DEVICES=$gpu:81920:108 FAKE_GPU_STATE_DIR=$d \
    LD_PRELOAD=$lib CUDA_DEVICE_SM_LIMIT=$limit CUDA_DEVICE_MEMORY_SHARED_CACHE=$d/region \
    timeout 60 "$app" init ctx:0 cost:1000000 "smrun:108:$block:k:6000:1" 2>/dev/null |
    awk '$1 == "smrun" { printf "%.1f", 100 * ($7 + $8 + $9 + $10) / 4e9 }'
}
printf '%-40s %10s %10s %10s %10s\n' "SM limit, kernel length (one wave)" "fracgpu %" "error" \
  "HAMi %" "error"
# The ceiling: no limit, no interposer (a synchronisation after each launch costs a wake-up).
for block in 5000 1000; do sm "" 0 "$block" >"$work/p.$block" & done
wait
for block in 5000 1000; do
  printf '%-40s %10s\n' "none, $(awk -v b="$block" 'BEGIN { printf "%g ms", b / 1000 }') kernels (ceiling)" \
    "$(cat "$work/p.$block")"
done
for limit in 30 70; do
  for block in 5000 1000; do
    sm "$ours" "$limit" "$block" >"$work/o.$limit.$block" &
    sm "$hami" "$limit" "$block" >"$work/h.$limit.$block" &
  done
  wait
  for block in 5000 1000; do
    o=$(cat "$work/o.$limit.$block")
    h=$(cat "$work/h.$limit.$block")
    printf '%-40s %10s %+10.1f %10s %+10.1f\n' \
      "$limit %, $(awk -v b="$block" 'BEGIN { printf "%g ms", b / 1000 }') kernels" \
      "${o:-hung}" "$(awk -v m="${o:-0}" -v l="$limit" 'BEGIN { print m - l }')" \
      "${h:-hung}" "$(awk -v m="${h:-0}" -v l="$limit" 'BEGIN { print m - l }')"
  done
done
