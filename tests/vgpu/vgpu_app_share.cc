// vgpu_app's operations for green contexts and memory shared between processes
// (tests/vgpu/green_context_test.cc, ipc_test.cc). Each prints "<op> <CUresult> [values]".
//
// Ops: cuinit (cuInit only, no context) |
//   gcsplit:<min SMs>:<groups>[:<flags>] (cuDeviceGetDevResource, cuDevSmResourceSplitByCount,
//     cuDevResourceGenerateDesc of the groups; prints device SMs, groups made, SMs per group,
//     SMs remaining) | gccreate[:<flags>] (default CU_GREEN_CTX_DEFAULT_STREAM) | gccurrent
//   (cuCtxFromGreenCtx + cuCtxSetCurrent of the newest) | gcres (its SMs) | gcstream (a stream of
//   the newest, cuGreenCtxStreamCreate, then cuMemAllocAsync of <bytes> on it: gcstream:<bytes>) |
//   gcdestroy (the newest) | gcbad (bad arguments, one result each) |
//   ipcget (cuIpcGetMemHandle of the newest allocation; prints the handle in hex) |
//   ipcopen:<hex>[:<flags>][:v1] (cuIpcOpenMemHandle_v2, or the v4010 cuIpcOpenMemHandle) |
//   ipcclose (the newest opened) | ipcclosebad (an address never opened)
#include "vgpu_app_share.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::vector<CUgreenCtx> g_green;
CUdevResourceDesc g_desc = nullptr;
std::vector<CUdeviceptr> g_opened;

unsigned long long Arg(const std::vector<std::string>& a, size_t i, unsigned long long dflt) {
  return i < a.size() && !a[i].empty() ? std::strtoull(a[i].c_str(), nullptr, 10) : dflt;
}

std::string Hex(const CUipcMemHandle& h) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : h.reserved) {
    auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

CUipcMemHandle Unhex(const std::string& text) {
  CUipcMemHandle h{};
  for (size_t i = 0; i + 1 < text.size() && i / 2 < sizeof(h.reserved); i += 2)
    h.reserved[i / 2] = static_cast<char>(std::strtoul(text.substr(i, 2).c_str(), nullptr, 16));
  return h;
}

void GreenSplit(const std::vector<std::string>& a, int ordinal) {
  CUdevResource dev{}, groups[16]{}, rest{};
  unsigned n = static_cast<unsigned>(Arg(a, 2, 1));
  if (n > 16) n = 16;
  CUresult r = cuDeviceGetDevResource(ordinal, &dev, CU_DEV_RESOURCE_TYPE_SM);
  if (r == CUDA_SUCCESS)
    r = cuDevSmResourceSplitByCount(groups, &n, &dev, &rest, static_cast<unsigned>(Arg(a, 3, 0)),
                                    static_cast<unsigned>(Arg(a, 1, 0)));
  if (r == CUDA_SUCCESS && n > 0) r = cuDevResourceGenerateDesc(&g_desc, groups, n);
  std::printf("gcsplit %d %u %u %u %u\n", r, dev.sm.smCount, n, n > 0 ? groups[0].sm.smCount : 0,
              rest.sm.smCount);
}

}  // namespace

bool RunShareOp(const std::vector<std::string>& a, int ordinal, std::vector<CUdeviceptr>& ptrs) {
  const std::string& op = a[0];
  CUresult r = CUDA_SUCCESS;
  if (op == "cuinit") {
    std::printf("cuinit %d\n", cuInit(0));
  } else if (op == "gcsplit") {
    GreenSplit(a, ordinal);
  } else if (op == "gccreate") {
    CUgreenCtx g = nullptr;
    r = cuGreenCtxCreate(&g, g_desc, ordinal,
                         static_cast<unsigned>(Arg(a, 1, CU_GREEN_CTX_DEFAULT_STREAM)));
    if (r == CUDA_SUCCESS) g_green.push_back(g);
    std::printf("gccreate %d %d\n", r, g ? 1 : 0);
  } else if (op == "gccurrent") {
    CUcontext ctx = nullptr;
    r = g_green.empty() ? CUDA_ERROR_INVALID_CONTEXT : cuCtxFromGreenCtx(&ctx, g_green.back());
    if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
    std::printf("gccurrent %d\n", r);
  } else if (op == "gcres") {
    CUdevResource res{};
    r = g_green.empty() ? CUDA_ERROR_INVALID_CONTEXT
                        : cuGreenCtxGetDevResource(g_green.back(), &res, CU_DEV_RESOURCE_TYPE_SM);
    std::printf("gcres %d %u\n", r, res.sm.smCount);
  } else if (op == "gcstream") {
    CUstream st = nullptr;
    CUdeviceptr p = 0;
    r = g_green.empty() ? CUDA_ERROR_INVALID_CONTEXT
                        : cuGreenCtxStreamCreate(&st, g_green.back(), CU_STREAM_NON_BLOCKING, 0);
    if (r == CUDA_SUCCESS) r = cuMemAllocAsync(&p, Arg(a, 1, 1), st);
    if (r == CUDA_SUCCESS) r = cuMemFreeAsync(p, st);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize(st);
    std::printf("gcstream %d\n", r);
  } else if (op == "gcdestroy") {
    r = g_green.empty() ? CUDA_ERROR_INVALID_CONTEXT : cuGreenCtxDestroy(g_green.back());
    if (r == CUDA_SUCCESS) g_green.pop_back();
    std::printf("gcdestroy %d\n", r);
  } else if (op == "gcbad") {
    CUgreenCtx g = nullptr;
    CUcontext c = nullptr;
    std::printf("gcbad %d %d %d %d %d %d %d\n",
                cuGreenCtxCreate(nullptr, g_desc, ordinal, CU_GREEN_CTX_DEFAULT_STREAM),
                cuGreenCtxCreate(&g, nullptr, ordinal, CU_GREEN_CTX_DEFAULT_STREAM),
                cuGreenCtxCreate(&g, g_desc, ordinal, 0),
                cuGreenCtxCreate(&g, g_desc, 99, CU_GREEN_CTX_DEFAULT_STREAM),
                cuGreenCtxDestroy(nullptr),
                cuCtxFromGreenCtx(nullptr, g_green.empty() ? nullptr : g_green.back()),
                cuCtxFromGreenCtx(&c, nullptr));
  } else if (op == "ipcget") {
    CUipcMemHandle h{};
    r = ptrs.empty() ? CUDA_ERROR_INVALID_VALUE : cuIpcGetMemHandle(&h, ptrs.back());
    std::printf("ipcget %d %s\n", r, Hex(h).c_str());
  } else if (op == "ipcopen") {
    CUdeviceptr p = 0;
    CUipcMemHandle h = Unhex(a.size() > 1 ? a[1] : "");
    auto flags = static_cast<unsigned>(Arg(a, 2, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    r = a.size() > 3 && a[3] == "v1" ? cuIpcOpenMemHandle(&p, h, flags)
                                     : cuIpcOpenMemHandle_v2(&p, h, flags);
    if (r == CUDA_SUCCESS) g_opened.push_back(p);
    std::printf("ipcopen %d\n", r);
  } else if (op == "ipcclose") {
    r = g_opened.empty() ? CUDA_ERROR_INVALID_VALUE : cuIpcCloseMemHandle(g_opened.back());
    if (r == CUDA_SUCCESS) g_opened.pop_back();
    std::printf("ipcclose %d\n", r);
  } else if (op == "ipcclosebad") {
    std::printf("ipcclosebad %d\n", cuIpcCloseMemHandle(0x1000));
  } else {
    return false;
  }
  return true;
}
