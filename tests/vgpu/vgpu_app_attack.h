#pragma once
// vgpu_app's operations for the attacks of issue 32 (vgpu_app_attack.cc): NULL out-pointers,
// legacy launches, many-mapping unmaps and the handle/limit entry points.
#include <string>
#include <vector>

/// Runs op `a` (split at ':') on CUDA ordinal `ordinal`, printing its one line. False when
/// `a[0]` is not one of these ops.
bool RunAttackOp(const std::vector<std::string>& a, int ordinal);
