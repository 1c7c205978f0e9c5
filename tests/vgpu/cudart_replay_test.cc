// What NVIDIA's CUDA 13 runtime asks the driver for, replayed through libvgpu.so (the shipped
// library) over the fake driver. The requests are data/cuda/cudart13_requests.txt, captured
// from the real libcudart.so.13 by scripts/cuda-tables/capture_cudart.py (which CTest reruns
// against the CUDA 13.0 wheels when installed: VgpuCudartRequests.MatchCuda13_0Runtime). Each
// request is asked twice through dlopen("libcuda.so.1") + cuGetProcAddress_v2, as the runtime asks:
// once from the bare driver (the truth: which variant it answers), once with libvgpu.so
// preloaded. Then:
//   * an answer from libvgpu.so is the hook of the very variant the driver answered (no
//     wrong-ABI answer), with the driver's status;
//   * every other answer is the driver's, behind libvgpu.so's wake trampoline to that very
//     function (null answers unchanged);
//   * a variant hooks.def hooks always comes back hooked;
//   * every requested entry point of the memory, context, module, graph and launch families
//     is hooked, or listed with its reason in data/cuda/passthrough.txt — and the list holds
//     nothing hooked or never requested.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "harness.h"
#include "vgpu/hooks.def"

namespace fracgpu::vgpu::testing {
namespace {

struct Request {
  std::string symbol;  // "" for the empty symbol ("-" in the file)
  std::string version, flags;
};

std::vector<Request> ReadRequests() {
  std::vector<Request> out;
  std::ifstream in(FRACGPU_SOURCE_DIR "/data/cuda/cudart13_requests.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    Request r;
    f >> r.symbol >> r.version >> r.flags;
    if (r.symbol == "-") r.symbol.clear();
    out.push_back(r);
  }
  return out;
}

/// base name -> reason, from data/cuda/passthrough.txt.
std::map<std::string, std::string> ReadPassThrough() {
  std::map<std::string, std::string> out;
  std::ifstream in(FRACGPU_SOURCE_DIR "/data/cuda/passthrough.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string base, reason;
    f >> base >> reason;
    out[base] = reason;
  }
  return out;
}

/// One "proc <rc> <status> <where> <name>" line of vgpu_app.
struct Answer {
  std::string rc, status, where, name;
  bool operator==(const Answer&) const = default;
};
Answer ParseAnswer(const std::string& line) {
  auto f = Fields(line);
  if (f.size() != 5 || f[0] != "proc") return {"?", "?", "?", line};
  return {f[1], f[2], f[3], f[4]};
}

/// What libvgpu.so must answer for a request it does not hook: the driver's answer behind its
/// wake trampoline ("wake", the same function: src/vgpu/wake.h), a null answer unchanged.
Answer Wrapped(Answer d) {
  if (d.where == "driver") d.where = "wake";
  return d;
}

std::vector<Answer> Ask(const std::vector<Request>& reqs, bool preload) {
  Sandbox box;
  auto env = box.Env();
  if (preload) {
    env["LD_PRELOAD"] = FRACGPU_LIBVGPU;  // the shipped library
  } else {
    env.erase("LD_PRELOAD");
  }
  env["FAKE_CUDA_DRIVER_VERSION"] = "13000";
  env["CUDA_DEVICE_MEMORY_LIMIT_0"] = "512m";
  std::vector<std::string> ops = {"init"};
  for (const Request& r : reqs) ops.push_back("proc:" + r.symbol + ":" + r.version + ":" + r.flags);
  auto lines = RunApp(box, env, ops);
  std::vector<Answer> out;
  for (size_t i = 1; i < lines.size(); ++i) out.push_back(ParseAnswer(lines[i]));
  return out;
}

// The families whose every requested entry point must be hooked or listed: base names that
// start with one of these. (A prefix list, not std::regex: GCC 12's <regex> trips
// -Wmaybe-uninitialized under -Werror in the ASan build.)
constexpr const char* kFamilyPrefixes[] = {"cuMem",
                                           "cuArray",
                                           "cuMipmappedArray",
                                           "cuCtx",
                                           "cuDevicePrimaryCtx",
                                           "cuGreenCtx",
                                           "cuModule",
                                           "cuLibrary",
                                           "cuKernel",
                                           "cuGraph",
                                           "cuDeviceGraphMem",
                                           "cuLaunch",
                                           "cuIpc",
                                           "cuDeviceGetMemPool",
                                           "cuDeviceSetMemPool",
                                           "cuDeviceGetDefaultMemPool",
                                           "cuDeviceTotalMem",
                                           "cuStreamBeginCapture",
                                           "cuStreamEndCapture",
                                           "cuMulticast",
                                           "cuImportExternalMemory",
                                           "cuExternalMemory",
                                           "cuDestroyExternalMemory",
                                           "cuCheckpoint"};

bool InFamilies(const std::string& base) {
  for (const char* p : kFamilyPrefixes)
    if (base.rfind(p, 0) == 0) return true;
  return false;
}

/// base name -> the libraries naming it, from data/cuda/library13_requests.txt.
std::map<std::string, std::vector<std::string>> ReadLibraryRequests() {
  std::map<std::string, std::vector<std::string>> out;
  std::ifstream in(FRACGPU_SOURCE_DIR "/data/cuda/library13_requests.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string base, libs;
    f >> base >> libs;
    std::vector<std::string>& v = out[base];
    for (size_t pos = 0; pos <= libs.size();) {
      size_t comma = libs.find(',', pos);
      if (comma == std::string::npos) comma = libs.size();
      if (comma > pos) v.push_back(libs.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return out;
}

TEST(VgpuCudartReplay, EveryRequestOfTheRuntimeGetsTheRightVariantOrThePassThrough) {
  auto reqs = ReadRequests();
  ASSERT_EQ(reqs.size(), 440u);  // libcudart.so.13 of CUDA 13.0, as captured
  std::set<std::string> hooked_elf, hooked_base;
#define FRACGPU_COLLECT(elf, base, ver, pt) \
  hooked_elf.insert(#elf);                  \
  hooked_base.insert(#base);
  FRACGPU_CUDA_HOOKS(FRACGPU_COLLECT)
#undef FRACGPU_COLLECT

  auto driver = Ask(reqs, false);
  auto ours = Ask(reqs, true);
  ASSERT_EQ(driver.size(), reqs.size());
  ASSERT_EQ(ours.size(), reqs.size());

  int hooked = 0, wrong_abi = 0, unhooked_variant = 0, changed = 0, null_answers = 0;
  std::set<std::string> requested_bases;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Request& r = reqs[i];
    const Answer& d = driver[i];
    const Answer& o = ours[i];
    const std::string what = r.symbol + " at " + r.version + " flags " + r.flags;
    if (!r.symbol.empty()) requested_bases.insert(r.symbol);
    ASSERT_NE(d.rc, "?") << what << ": " << d.name;
    if (d.where == "null") ++null_answers;
    if (o.where == "vgpu") {
      ++hooked;
      if (o.name != d.name) {
        ++wrong_abi;
        ADD_FAILURE() << what << ": libvgpu answers its " << o.name << " hook, the driver "
                      << d.name;
      }
      EXPECT_EQ(o.rc, d.rc) << what;
      EXPECT_EQ(o.status, d.status) << what;
    } else {
      if (!(o == Wrapped(d))) {
        ++changed;
        ADD_FAILURE() << what << ": driver " << d.where << " " << d.name << ", with libvgpu "
                      << o.where << " " << o.name;
      }
      if (hooked_elf.count(d.name)) {
        ++unhooked_variant;
        ADD_FAILURE() << what << ": the driver answers " << d.name
                      << ", which hooks.def hooks, but it came back unhooked";
      }
    }
  }

  auto pass = ReadPassThrough();
  int family = 0, family_hooked = 0, unlisted = 0;
  std::map<std::string, int> reasons;
  for (const std::string& base : requested_bases) {
    if (!InFamilies(base)) continue;
    ++family;
    if (hooked_base.count(base)) {
      ++family_hooked;
      continue;
    }
    auto it = pass.find(base);
    if (it == pass.end()) {
      ++unlisted;
      ADD_FAILURE() << base << " is asked for by the runtime, neither hooked nor listed in "
                    << "data/cuda/passthrough.txt";
    } else {
      ++reasons[it->second];
    }
  }
  auto libraries = ReadLibraryRequests();
  for (const auto& [base, reason] : pass) {
    EXPECT_TRUE(requested_bases.count(base) || libraries.count(base))
        << base << " is listed but never requested";
    EXPECT_FALSE(hooked_base.count(base)) << base << " is listed as passed through but hooked";
    EXPECT_TRUE(InFamilies(base)) << base << " is outside the families";
  }
  EXPECT_EQ(wrong_abi, 0);
  EXPECT_EQ(unhooked_variant, 0);
  EXPECT_EQ(changed, 0);
  EXPECT_EQ(unlisted, 0);
  EXPECT_GT(hooked, 0);

  std::cout << "cudart 13 replay: " << reqs.size() << " requests of " << requested_bases.size()
            << " entry points; " << hooked << " answered with a hook (wrong ABI: " << wrong_abi
            << "), " << reqs.size() - hooked << " passed through behind the wake trampoline ("
            << null_answers
            << " null from the driver too); unhooked hooked variants: " << unhooked_variant
            << "\nfamilies (memory, context, module, graph, launch): " << family
            << " entry points requested, " << family_hooked << " hooked, "
            << family - family_hooked - unlisted << " passed through by reason:";
  for (const auto& [reason, n] : reasons) std::cout << " " << reason << " " << n;
  std::cout << "; unlisted: " << unlisted << "\n";
}

// The entry points NVIDIA's CUDA 13 libraries can ask the driver for (cuBLAS, cuBLASLt, NCCL,
// CUPTI: data/cuda/library13_requests.txt, extracted from their wheels by
// scripts/cuda-tables/library_requests.py; CTest's VgpuLibraryRequests.MatchCuda13_0Wheels
// re-extracts it when the wheels are installed), each asked at CUDA 13000 with the default and
// the per-thread flags, bare and through libvgpu.so: no wrong-ABI answer, no hooked variant
// answered unhooked, nothing else changed; and every one of the families above is hooked or
// listed with its reason. Prints the summary per library.
TEST(VgpuLibraryReplay, EveryEntryPointTheLibrariesNameIsHookedOrPassedThroughWithAReason) {
  auto libraries = ReadLibraryRequests();
  ASSERT_EQ(libraries.size(), 447u);  // as extracted from the CUDA 13.0 wheels
  std::vector<Request> reqs;
  for (const auto& [base, libs] : libraries) {
    reqs.push_back({base, "13000", "0"});
    reqs.push_back({base, "13000", "2"});  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
  }
  std::set<std::string> hooked_elf, hooked_base;
#define FRACGPU_COLLECT(elf, base, ver, pt) \
  hooked_elf.insert(#elf);                  \
  hooked_base.insert(#base);
  FRACGPU_CUDA_HOOKS(FRACGPU_COLLECT)
#undef FRACGPU_COLLECT
  auto driver = Ask(reqs, false);
  auto ours = Ask(reqs, true);
  ASSERT_EQ(driver.size(), reqs.size());
  ASSERT_EQ(ours.size(), reqs.size());
  int hooked = 0, wrong_abi = 0, unhooked_variant = 0, changed = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string what = reqs[i].symbol + " flags " + reqs[i].flags;
    const Answer& d = driver[i];
    const Answer& o = ours[i];
    ASSERT_NE(d.rc, "?") << what << ": " << d.name;
    if (o.where == "vgpu") {
      ++hooked;
      if (o.name != d.name) {
        ++wrong_abi;
        ADD_FAILURE() << what << ": libvgpu answers " << o.name << ", the driver " << d.name;
      }
      EXPECT_EQ(o.rc, d.rc) << what;
    } else {
      if (!(o == Wrapped(d))) {
        ++changed;
        ADD_FAILURE() << what << ": driver " << d.where << " " << d.name << ", with libvgpu "
                      << o.where << " " << o.name;
      }
      if (hooked_elf.count(d.name)) {
        ++unhooked_variant;
        ADD_FAILURE() << what << ": " << d.name << " is hooked but came back unhooked";
      }
    }
  }
  auto pass = ReadPassThrough();
  struct Tally {
    int family = 0, hooked = 0, passed = 0, unlisted = 0;
  };
  std::map<std::string, Tally> per_library;
  for (const auto& [base, libs] : libraries) {
    if (!InFamilies(base)) continue;
    const bool is_hooked = hooked_base.count(base) > 0, is_listed = pass.count(base) > 0;
    if (!is_hooked && !is_listed)
      ADD_FAILURE() << base << " (named by " << libs.front()
                    << ") is neither hooked nor listed in data/cuda/passthrough.txt";
    for (const std::string& lib : libs) {
      Tally& t = per_library[lib];
      ++t.family;
      if (is_hooked)
        ++t.hooked;
      else if (is_listed)
        ++t.passed;
      else
        ++t.unlisted;
    }
  }
  EXPECT_EQ(wrong_abi, 0);
  EXPECT_EQ(unhooked_variant, 0);
  EXPECT_EQ(changed, 0);
  EXPECT_GT(hooked, 0);
  std::cout << "CUDA 13 libraries replay: " << reqs.size() << " requests of " << libraries.size()
            << " entry points; " << hooked << " answered with a hook (wrong ABI: " << wrong_abi
            << "); unhooked hooked variants: " << unhooked_variant << "\n";
  for (const auto& [lib, t] : per_library) {
    std::cout << "  " << lib << ": " << t.family
              << " memory/context/module/graph/launch/external/multicast/checkpoint entry points, "
              << t.hooked << " hooked, " << t.passed << " passed through with a reason, "
              << t.unlisted << " unhooked and unlisted\n";
    EXPECT_EQ(t.unlisted, 0) << lib;
  }
}

}  // namespace
}  // namespace fracgpu::vgpu::testing
