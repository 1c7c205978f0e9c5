#!/usr/bin/env bash
# NVIDIA's CUDA 13 headers, libraries and nvcc from their PyPI wheels, in place of a toolkit at
# /usr/local/cuda. Two sets, every wheel pinned exactly, each installed with pip --target into
# its own prefix outside the clone and outside any site-packages:
#   $FRACGPU_CUDA_WHEELS/13.0    CUDA 13.0.0, the release the committed tables come from
#                                (src/vgpu/cuda_variants.def, data/cuda/libcuda_exports.txt,
#                                data/cuda/cudart13_requests.txt; every 13.0.x update gives the
#                                same tables: same cudaTypedefs.h, same cudart requests)
#   $FRACGPU_CUDA_WHEELS/newest  CUDA 13.5.0, the newest 13.x, a second reference
# ($FRACGPU_CUDA_WHEELS defaults to ~/.cache/fracgpu/cuda.) The component versions are the ones
# NVIDIA's cuda-toolkit meta-package pins for that release (cuda-toolkit 13.0.0 and 13.5.0),
# plus NCCL (not in that package: the first and the newest nvidia-nccl-cu13) and, in the 13.0 set
# only, cuDNN (nvidia-cudnn-cu13), cuFFT, cuSPARSE and NVRTC (the 13.0.x updates' builds), whose
# driver requests data/cuda/library13_requests.txt lists. nvcc also needs
# nvidia-cuda-crt, nvidia-nvvm (cicc, libdevice) and nvidia-cuda-cccl (<nv/target>); all are
# installed with --no-deps, so only these pins are ever installed.
# Layout (scripts/cuda-tables/cuda_home.py prints a set's CUDA home): <set>/nvidia/cu13/
# {include,lib,bin,nvvm}, NCCL in <set>/nvidia/nccl/{include,lib}. There is no stub
# libcuda.so in any wheel.
# Idempotent: a set whose stamp names its pins is left alone, without the network; a set whose
# pins changed is installed anew beside the old one, then swapped in.
set -euo pipefail
root="${FRACGPU_CUDA_WHEELS:-$HOME/.cache/fracgpu/cuda}"

set_13_0=(
  nvidia-cuda-runtime==13.0.88
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-cccl==13.0.85
  nvidia-cublas==13.0.2.14
  nvidia-cuda-cupti==13.0.85
  nvidia-nccl-cu13==2.27.7
  nvidia-cudnn-cu13==9.28.1.4
  nvidia-cufft==12.0.0.61
  nvidia-cusparse==12.6.3.3
  nvidia-cuda-nvrtc==13.0.88
)
set_newest=(
  nvidia-cuda-runtime==13.5.37
  nvidia-cuda-nvcc==13.5.37
  nvidia-cuda-crt==13.5.37
  nvidia-nvvm==13.5.37
  nvidia-cuda-cccl==13.3.5.0.6
  nvidia-cublas==13.10.0.20
  nvidia-cuda-cupti==13.5.25
  nvidia-nccl-cu13==2.32.6
)

pip_cmd() {
  # Any python3 with pip: --target installs outside every environment (PEP 668 allows it).
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -m pip --version >/dev/null 2>&1; then
      "$py" -m pip "$@"
      return
    fi
  done
  echo "cuda-wheels: no python3 with pip (Debian package python3-pip, scripts/deps/cuda.txt)" >&2
  return 1
}

# install <set name> <pins...>
install_set() {
  local name="$1"
  shift
  local dir="$root/$name" want="$*"
  local stamp="$dir/.fracgpu-wheels"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/nvidia/cu13/include/cuda.h" ]; then
    echo "cuda-wheels: CUDA $name wheels up to date in $dir"
    return
  fi
  echo "cuda-wheels: installing CUDA $name wheels into $dir: $want"
  mkdir -p "$root"
  rm -rf "$root/.$name".*  # what an interrupted install left
  local tmp
  tmp=$(mktemp -d "$root/.$name.XXXXXX")
  if ! pip_cmd install --quiet --disable-pip-version-check --no-cache-dir --no-deps --root-user-action=ignore \
    --only-binary=:all: --target "$tmp" "$@"; then
    rm -rf "$tmp"
    echo "cuda-wheels: pip could not install the CUDA $name wheels" >&2
    return 1
  fi
  echo "$want" >"$tmp/.fracgpu-wheels"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

install_set 13.0 "${set_13_0[@]}"
install_set newest "${set_newest[@]}"
