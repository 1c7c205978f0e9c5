#include "park_journey.h"

#include <sstream>

#include "k8s/objects.h"

namespace fracgpu::e2e {
namespace {

using nlohmann::json;
constexpr uint64_t kMiB = 1024 * 1024;

// vgpu_app's "region 0 <host pid> <slot used> <context> <module> <data> <last launch ns>
// <now ns> <device used>": {slot used, now ns}; nullopt when the line is not that.
std::optional<std::pair<uint64_t, uint64_t>> RegionLine(const std::string& line) {
  std::istringstream in(line);
  std::string op;
  int rc = -1;
  uint64_t pid = 0, used = 0, skip = 0, now = 0;
  in >> op >> rc >> pid >> used >> skip >> skip >> skip >> skip >> now;
  if (!in || op != "region" || rc != 0) return std::nullopt;
  return std::pair<uint64_t, uint64_t>{used, now};
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " | ") + l;
  return "[" + out + "]";
}

// A pod pinned to `uuid` (nvidia.com/use-gpuuuid) with `annotation` set to "true".
json PinnedPod(const ParkJourneyOptions& o, const std::string& name, int64_t mib,
               std::vector<std::string> ops, const std::string& uuid,
               const std::string& annotation) {
  json pod = UserPod(name, {{"main", mib, std::move(ops)}});
  pod["metadata"]["namespace"] = o.ns;
  pod["metadata"]["annotations"] = {{"nvidia.com/use-gpuuuid", uuid}, {annotation, "true"}};
  return pod;
}

}  // namespace

ParkJourney RunParkJourney(Cluster& cluster, const ParkJourneyOptions& o) {
  ParkJourney j;
  NodeAgent& node = cluster.node(o.node);
  if (o.gpu < 0 || o.gpu >= static_cast<int>(node.gpus().size())) {
    j.failed = "setup: node " + o.node + " has no GPU " + std::to_string(o.gpu);
    return j;
  }
  j.uuid = node.gpus()[o.gpu].uuid;
  const int64_t gpu_mib = node.gpus()[o.gpu].mib;
  j.empty = node.Nvml(o.gpu);
  if (!j.empty) {
    j.failed = "setup: the fake NVML does not answer for GPU " + std::to_string(o.gpu);
    return j;
  }

  // The notebook: its memory, a 4 KiB buffer written through the unhooked copy, its account,
  // then idle until its stdin closes; then its account (the clock), the read (its first CUDA
  // call after idle), its account again, and a long sleep (it stays up).
  json notebook =
      PinnedPod(o, o.notebook, gpu_mib,
                {"init", "alloc:" + std::to_string(o.hold_mib * kMiB), "lookup:g", "poke",
                 "region:0", "wait", "region:0", "peek", "region:0", "wallsleep:3600000"},
                j.uuid, "fracgpu.io/park");
  HttpResult r = cluster.CreatePod(notebook);
  if (r.status != 201) {
    j.failed = "create notebook: HTTP " + std::to_string(r.status) + " " + r.body.dump();
    return j;
  }
  if (!cluster.WaitRunning(o.ns, o.notebook)) {
    auto pod = cluster.Pod(o.ns, o.notebook);
    j.failed = "notebook Running: " + (pod ? pod->dump() : std::string("gone"));
    return j;
  }
  j.notebook_lines = node.Container(o.ns, o.notebook, "main")->lines;
  if (j.notebook_lines.size() != 6) {
    j.failed = "notebook started: " + Lines(j.notebook_lines);
    return j;
  }
  j.poked = j.notebook_lines[3] == "poke 0";
  auto before = RegionLine(j.notebook_lines[4]);
  j.charged_before = before ? before->first : 0;
  j.held = node.Nvml(o.gpu);

  // The borrower: nothing is lent yet, so the full GPU refuses it.
  json borrower = PinnedPod(o, o.borrower, o.borrow_mib,
                            {"init", "alloc:" + std::to_string(o.borrow_mib * kMiB), "wait"},
                            j.uuid, "fracgpu.io/borrower");
  r = cluster.CreatePod(borrower);
  if (r.status != 201) {
    j.failed = "create borrower: HTTP " + std::to_string(r.status) + " " + r.body.dump();
    return j;
  }

  // The extender's FilteringFailed Event on the borrower: why the GPU refused it (an Event
  // stays; the driver's last attempt may already be the binding by the time it is read).
  if (!cluster.api().WaitFor([&] {
        for (const auto& e : cluster.api().List("events")) {
          if (e.value("reason", "") == "FilteringFailed" && e.contains("involvedObject") &&
              e["involvedObject"].value("name", "") == o.borrower &&
              e["involvedObject"].value("namespace", "") == o.ns) {
            j.borrower_reason = e.value("message", "");
            return true;
          }
        }
        return false;
      })) {
    j.failed = "the borrower refused (a FilteringFailed Event on it)";
    return j;
  }

  // Park: the fake NVML shows the notebook's memory free, and the node lends it.
  const uint64_t held_used = j.held ? j.held->used : 0;
  if (!PollUntil(
          [&] {
            j.parked = node.Nvml(o.gpu);
            return j.parked && j.parked->used + o.hold_mib * kMiB <= held_used;
          },
          kWait)) {
    j.failed = "park (NVML shows the notebook's memory free); monitor log:\n" + node.MonitorLog();
    return j;
  }
  if (!cluster.api().WaitFor([&] {
        auto n = cluster.api().Get("nodes", "", o.node);
        j.lent_record = n ? AnnotationOf(*n, "fracgpu.io/lent-memory") : "";
        return j.lent_record.find(j.uuid + ":") != std::string::npos;
      })) {
    j.failed = "lend (fracgpu.io/lent-memory names " + j.uuid + "): '" + j.lent_record + "'";
    return j;
  }
  const size_t at = j.lent_record.find(j.uuid + ":") + j.uuid.size() + 1;
  j.lent_mib = std::atoll(j.lent_record.c_str() + at);
  // The borrower is placed on the lent memory and allocates its slice.
  if (!cluster.WaitRunning(o.ns, o.borrower)) {
    auto pod = cluster.Pod(o.ns, o.borrower);
    j.failed = "borrower Running: " + (pod ? pod->dump() : std::string("gone"));
    return j;
  }
  auto parts = ParseAllocation(
      AnnotationOf(*cluster.Pod(o.ns, o.borrower), "hami.io/vgpu-devices-allocated"));
  if (parts.size() == 1 && parts[0].size() == 1) {
    j.borrower_gpu = parts[0][0].uuid;
    j.borrower_granted_mib = parts[0][0].mib;
  }
  auto b_lines = node.Container(o.ns, o.borrower, "main")->lines;
  j.borrower_allocated = b_lines.size() >= 2 && b_lines[1] == "alloc 0";
  j.lending = node.Nvml(o.gpu);

  // The wake: the notebook's read waits until the borrower is evicted and its bytes are back.
  if (!node.CloseStdin(o.ns, o.notebook, "main")) {
    j.failed = "close the notebook's stdin";
    return j;
  }
  if (!PollUntil([&] { return node.Container(o.ns, o.notebook, "main")->lines.size() >= 9; },
                 kWait)) {
    j.failed = "wake (the notebook's read returns): " +
               Lines(node.Container(o.ns, o.notebook, "main")->lines) + "; monitor log:\n" +
               node.MonitorLog();
    return j;
  }
  j.notebook_lines = node.Container(o.ns, o.notebook, "main")->lines;
  j.bytes_intact = j.notebook_lines[7] == "peek 0 1";
  auto idle = RegionLine(j.notebook_lines[6]);
  auto after = RegionLine(j.notebook_lines[8]);
  if (idle && after) {
    j.charged_idle = idle->first;
    j.charged_after = after->first;
    j.wake_ms = static_cast<double>(after->second - idle->second) / 1e6;
  }
  j.borrower_gone = !cluster.Pod(o.ns, o.borrower).has_value();
  for (const auto& e : cluster.api().List("events")) {
    if (e.value("reason", "") == "GPUMemoryReclaimed" && e.contains("involvedObject") &&
        e["involvedObject"].value("name", "") == o.borrower)
      j.reclaim_event = e;
  }
  j.awake = node.Nvml(o.gpu);
  return j;
}

}  // namespace fracgpu::e2e
