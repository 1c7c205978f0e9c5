// vgpu_app's graph operations (tests/vgpu/graph_memory_test.cc): build graphs with memory
// nodes, instantiate, upload, launch, destroy, trim, read the graph pool. Each prints
// "<op> <CUresult> [values]". Graphs and executable graphs are kept in creation order; the
// "current" graph is the newest (gcreate or gcapture).
//
// Ops: gcreate | galloc:<bytes>[:n|p|p2] (cuGraphAddMemAllocNode, cuGraphAddNode, _v2) |
//   gfree[:<graph>] (frees that graph's newest allocation in the current graph) | gempty |
//   ginst[:<flags>] | ginstp:<flags>[:ptsz] (prints result_out) | ginstv1 | ginstv2 |
//   gupload[:<exec>] | glaunch[:<exec>] | glaunchpt[:<exec>] | gexecdestroy[:<exec>] |
//   gdestroy | gtrim | gattr (used, used high, reserved, reserved high) |
//   gcapture:<bytes>[:free] | gfreelive (cuMemFreeAsync of the newest allocation) | gbad
#include "vgpu_app_graph.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Graph {
  CUgraph handle = nullptr;
  std::vector<CUgraphNode> nodes;
  std::vector<CUdeviceptr> allocs;
};
std::vector<Graph> g_graphs;
std::vector<CUgraphExec> g_execs;
CUstream g_capture_stream = nullptr;

unsigned long long Arg(const std::vector<std::string>& a, size_t i, unsigned long long dflt) {
  return i < a.size() && !a[i].empty() ? std::strtoull(a[i].c_str(), nullptr, 10) : dflt;
}

Graph* Current() { return g_graphs.empty() ? nullptr : &g_graphs.back(); }

// Dependencies of a new node of `g`: its newest node (a chain).
size_t Deps(const Graph* g, const CUgraphNode** deps) {
  *deps = g && !g->nodes.empty() ? &g->nodes.back() : nullptr;
  return *deps ? 1 : 0;
}

CUgraphExec ExecAt(const std::vector<std::string>& a) {
  if (g_execs.empty()) return nullptr;
  return g_execs[Arg(a, 1, g_execs.size() - 1) % g_execs.size()];
}

CUDA_MEM_ALLOC_NODE_PARAMS AllocParams(size_t bytes, int ordinal) {
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = ordinal;
  p.bytesize = bytes;
  return p;
}

}  // namespace

CUgraphExec MakeGraphExec(size_t bytes, int ordinal) {
  CUgraph graph = nullptr;
  if (cuGraphCreate(&graph, 0) != CUDA_SUCCESS) return nullptr;
  CUgraphNode alloc = nullptr, free_node = nullptr;
  if (bytes > 0) {
    CUDA_MEM_ALLOC_NODE_PARAMS p = AllocParams(bytes, ordinal);
    if (cuGraphAddMemAllocNode(&alloc, graph, nullptr, 0, &p) != CUDA_SUCCESS ||
        cuGraphAddMemFreeNode(&free_node, graph, &alloc, 1, p.dptr) != CUDA_SUCCESS)
      return nullptr;
  } else if (cuGraphAddEmptyNode(&alloc, graph, nullptr, 0) != CUDA_SUCCESS) {
    return nullptr;
  }
  CUgraphExec exec = nullptr;
  if (cuGraphInstantiateWithFlags(&exec, graph, 0) != CUDA_SUCCESS) return nullptr;
  return exec;
}

bool RunGraphOp(const std::vector<std::string>& a, int ordinal) {
  const std::string& op = a[0];
  CUresult r = CUDA_SUCCESS;
  if (op == "gcreate") {
    Graph g;
    r = cuGraphCreate(&g.handle, 0);
    if (r == CUDA_SUCCESS) g_graphs.push_back(g);
    std::printf("gcreate %d\n", r);
  } else if (op == "galloc") {
    Graph* g = Current();
    const CUgraphNode* deps = nullptr;
    size_t n = Deps(g, &deps);
    CUgraphNode node = nullptr;
    const std::string how = a.size() > 2 ? a[2] : "n";
    CUdeviceptr dptr = 0;
    if (how == "n") {
      CUDA_MEM_ALLOC_NODE_PARAMS p = AllocParams(Arg(a, 1, 0), ordinal);
      r = cuGraphAddMemAllocNode(&node, g ? g->handle : nullptr, deps, n, &p);
      dptr = p.dptr;
    } else {
      CUgraphNodeParams p{};
      p.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
      p.alloc = AllocParams(Arg(a, 1, 0), ordinal);
      r = how == "p" ? cuGraphAddNode(&node, g ? g->handle : nullptr, deps, n, &p)
                     : cuGraphAddNode_v2(&node, g ? g->handle : nullptr, deps, nullptr, n, &p);
      dptr = p.alloc.dptr;
    }
    if (r == CUDA_SUCCESS) {
      g->nodes.push_back(node);
      g->allocs.push_back(dptr);
    }
    std::printf("galloc %d\n", r);
  } else if (op == "gfree") {
    Graph* g = Current();
    const Graph* owner =
        g_graphs.empty() ? nullptr : &g_graphs[Arg(a, 1, g_graphs.size() - 1) % g_graphs.size()];
    const CUgraphNode* deps = nullptr;
    size_t n = Deps(g, &deps);
    CUgraphNode node = nullptr;
    r = cuGraphAddMemFreeNode(&node, g ? g->handle : nullptr, deps, n,
                              owner && !owner->allocs.empty() ? owner->allocs.back() : 0);
    if (r == CUDA_SUCCESS) g->nodes.push_back(node);
    std::printf("gfree %d\n", r);
  } else if (op == "gempty") {
    Graph* g = Current();
    const CUgraphNode* deps = nullptr;
    size_t n = Deps(g, &deps);
    CUgraphNode node = nullptr;
    r = cuGraphAddEmptyNode(&node, g ? g->handle : nullptr, deps, n);
    if (r == CUDA_SUCCESS) g->nodes.push_back(node);
    std::printf("gempty %d\n", r);
  } else if (op == "ginst" || op == "ginstv1" || op == "ginstv2") {
    Graph* g = Current();
    CUgraphExec exec = nullptr;
    if (op == "ginst") {
      r = cuGraphInstantiateWithFlags(&exec, g ? g->handle : nullptr, Arg(a, 1, 0));
    } else {
      CUgraphNode err = reinterpret_cast<CUgraphNode>(0x1);
      char log[16] = "x";
      r = op == "ginstv1"
              ? cuGraphInstantiate(&exec, g ? g->handle : nullptr, &err, log, sizeof(log))
              : cuGraphInstantiate_v2(&exec, g ? g->handle : nullptr, &err, log, sizeof(log));
    }
    if (r == CUDA_SUCCESS) g_execs.push_back(exec);
    std::printf("%s %d\n", op.c_str(), r);
  } else if (op == "ginstp") {
    Graph* g = Current();
    CUDA_GRAPH_INSTANTIATE_PARAMS p{};
    p.flags = Arg(a, 1, 0);
    p.hUploadStream = nullptr;
    p.result_out = -1;
    CUgraphExec exec = nullptr;
    r = a.size() > 2 && a[2] == "ptsz"
            ? cuGraphInstantiateWithParams_ptsz(&exec, g ? g->handle : nullptr, &p)
            : cuGraphInstantiateWithParams(&exec, g ? g->handle : nullptr, &p);
    if (r == CUDA_SUCCESS) g_execs.push_back(exec);
    std::printf("ginstp %d %d\n", r, p.result_out);
  } else if (op == "gupload") {
    r = cuGraphUpload(ExecAt(a), nullptr);
    std::printf("gupload %d\n", r);
  } else if (op == "glaunch" || op == "glaunchpt") {
    r = op == "glaunch" ? cuGraphLaunch(ExecAt(a), nullptr)
                        : cuGraphLaunch_ptsz(ExecAt(a), nullptr);
    std::printf("%s %d\n", op.c_str(), r);
  } else if (op == "gexecdestroy") {
    CUgraphExec exec = ExecAt(a);
    r = cuGraphExecDestroy(exec);
    std::printf("gexecdestroy %d\n", r);
  } else if (op == "gdestroy") {
    Graph* g = Current();
    r = cuGraphDestroy(g ? g->handle : nullptr);
    std::printf("gdestroy %d\n", r);
  } else if (op == "gtrim") {
    r = cuDeviceGraphMemTrim(ordinal);
    std::printf("gtrim %d\n", r);
  } else if (op == "gattr") {
    cuuint64_t v[4] = {};
    for (int k = 0; k < 4 && r == CUDA_SUCCESS; ++k)
      r = cuDeviceGetGraphMemAttribute(ordinal, k, &v[k]);
    std::printf("gattr %d %llu %llu %llu %llu\n", r, static_cast<unsigned long long>(v[0]),
                static_cast<unsigned long long>(v[1]), static_cast<unsigned long long>(v[2]),
                static_cast<unsigned long long>(v[3]));
  } else if (op == "gcapture") {
    if (!g_capture_stream) r = cuStreamCreate(&g_capture_stream, 0);
    if (r == CUDA_SUCCESS) r = cuStreamBeginCapture_v2(g_capture_stream, 0);
    CUdeviceptr p = 0;
    CUresult ar = r == CUDA_SUCCESS ? cuMemAllocAsync(&p, Arg(a, 1, 0), g_capture_stream) : r;
    if (ar == CUDA_SUCCESS && a.size() > 2 && a[2] == "free")
      ar = cuMemFreeAsync(p, g_capture_stream);
    Graph g;
    if (r == CUDA_SUCCESS) r = cuStreamEndCapture(g_capture_stream, &g.handle);
    if (r == CUDA_SUCCESS) {
      g.allocs.push_back(p);
      g_graphs.push_back(g);
    }
    std::printf("gcapture %d %d\n", r, ar);
  } else if (op == "gfreelive") {
    const Graph* g = Current();
    r = cuMemFreeAsync(g && !g->allocs.empty() ? g->allocs.back() : 0, nullptr);
    std::printf("gfreelive %d\n", r);
  } else if (op == "gbad") {
    // Bad input, in order: instantiate without an output or a graph, with an unknown graph;
    // upload, launch and destroy of no and of an unknown executable graph; trim and attribute
    // of a device that does not exist; attribute into nothing, an unknown attribute; an
    // allocation node without parameters or of 0 bytes.
    auto bogus_graph = reinterpret_cast<CUgraph>(0x5000);
    auto bogus_exec = reinterpret_cast<CUgraphExec>(0x6000);
    CUgraphExec exec = nullptr;
    cuuint64_t v = 0;
    CUgraph graph = nullptr;
    cuGraphCreate(&graph, 0);
    CUgraphNode node = nullptr;
    CUDA_MEM_ALLOC_NODE_PARAMS zero = AllocParams(0, ordinal);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    const CUresult rs[] = {
        cuGraphInstantiateWithFlags(nullptr, graph, 0),
        cuGraphInstantiateWithFlags(&exec, nullptr, 0),
        cuGraphInstantiateWithFlags(&exec, bogus_graph, 0),
        cuGraphInstantiate(&exec, nullptr, nullptr, nullptr, 0),
        cuGraphInstantiateWithParams(&exec, graph, nullptr),
        cuGraphInstantiateWithParams(&exec, bogus_graph, &ip),
        cuGraphUpload(nullptr, nullptr),
        cuGraphUpload(bogus_exec, nullptr),
        cuGraphLaunch(nullptr, nullptr),
        cuGraphLaunch(bogus_exec, nullptr),
        cuGraphExecDestroy(nullptr),
        cuGraphExecDestroy(bogus_exec),
        cuDeviceGraphMemTrim(99),
        cuDeviceGetGraphMemAttribute(99, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v),
        cuDeviceGetGraphMemAttribute(ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, nullptr),
        cuDeviceGetGraphMemAttribute(ordinal, 77, &v),
        cuGraphAddMemAllocNode(&node, graph, nullptr, 0, nullptr),
        cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &zero),
        cuGraphAddMemFreeNode(&node, graph, nullptr, 0, 0x1234),
    };
    std::printf("gbad");
    for (CUresult x : rs) std::printf(" %d", x);
    std::printf("\n");
    cuGraphDestroy(graph);
  } else {
    return false;
  }
  return true;
}
