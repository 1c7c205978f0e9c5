#pragma once
// vgpu_app's green-context and IPC operations (vgpu_app_share.cc).
#include <string>
#include <vector>

#include "vgpu/cuda_api.h"

/// Runs op `a` (split at ':') on CUDA ordinal `ordinal`, printing its line; `ptrs` are
/// vgpu_app's cuMemAlloc_v2 pointers (ipcget exports the newest). False when `a[0]` is not a
/// green-context or IPC op.
bool RunShareOp(const std::vector<std::string>& a, int ordinal, std::vector<CUdeviceptr>& ptrs);
