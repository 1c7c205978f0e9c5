#pragma once
// vgpu_app's graph operations (vgpu_app_graph.cc).
#include <string>
#include <vector>

#include "vgpu/cuda_api.h"

/// Runs graph op `a` ("g…:args" split at ':') on CUDA ordinal `ordinal`, printing its line;
/// false when `a[0]` is not a graph op.
bool RunGraphOp(const std::vector<std::string>& a, int ordinal);

/// An executable graph of one allocation node of `bytes` on `ordinal` freed in the graph (an
/// empty node when `bytes` is 0), instantiated without upload; nullptr on any failure.
CUgraphExec MakeGraphExec(size_t bytes, int ordinal);
