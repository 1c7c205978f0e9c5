#pragma once
// The node agent's side of CUDA_TASK_PRIORITY (docs/sm-limiter.md "Priority", issue 32 item 2):
// no container writes state another container reads. Each pass, the publisher takes the
// priority of every fracgpu container from its limits file (written by the device plugin,
// outside the tenant's reach), reads the latest kernel launch of each priority-0 container from
// its own region (RegionDevice::last_launch_ns, CLOCK_MONOTONIC, stamped by libvgpu.so) and
// writes, per GPU, the newest of them into <node dir>/<GPU UUID> (api::NodeGpu, mode 0644), the
// directory the device plugin mounts read-only into every container. libvgpu.so in a priority-1
// container reads that file with pread and holds its launches back while the stamp is fresh.
// The same file carries the GPU's contention (GPU_CORE_UTILIZATION_POLICY=default, issue 34
// item 4): from every container's region, the time until which two or more containers count as
// active there (api::NodeGpu::contended_until_ns); a container alone on its GPU runs uncapped.
//
// The region is untrusted: only its header and device table are read (one bounded pread, no
// symlink, regular file only); a device counts only where the region's UUID equals the limits
// file's at the same index (a tenant cannot stamp a GPU it was not given), and a stamp in the
// future is ignored (a tenant cannot hold its neighbours back longer than by launching).
//
//   monitor::PriorityPublisher p(hook_path, node_dir);
//   p.Poll(MonotonicNowNs());   // every --priority-interval (default 10 ms)
//
// Thread-compatible: Poll() from one thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fracgpu::monitor {

/// Publishes the per-GPU priority-0 launch stamps of one node.
class PriorityPublisher {
 public:
  /// Limits files under <hook_path>/vgpu/limits, regions under <hook_path>/vgpu/containers,
  /// node files written under `node_dir` (created when missing).
  PriorityPublisher(std::string hook_path, std::string node_dir);

  /// One pass at CLOCK_MONOTONIC `now_ns`: re-lists the limits files when the last listing is
  /// older than kRescanNs, reads the priority-0 regions, writes every node file whose stamp
  /// changed, and after each re-listing every file of every GPU a limits file names (stamp 0
  /// when no priority-0 launch). Never fails: a file that cannot be read counts as no launch;
  /// a node file that cannot be written is logged once.
  void Poll(uint64_t now_ns);

  /// GPU UUID → the stamp last written (0 = no priority-0 launch seen).
  const std::map<std::string, uint64_t>& published() const { return published_; }
  /// GPU UUID → the contended_until_ns last written (api::NodeGpu): the second-newest last
  /// launch of distinct containers on the GPU (any priority) + api::kContentionActiveNs, 0 when
  /// fewer than two containers ever launched there. libvgpu.so under
  /// GPU_CORE_UTILIZATION_POLICY=default caps only before that time.
  const std::map<std::string, uint64_t>& contended_until() const { return contended_until_; }

  /// How often the limits files are listed again (ns).
  static constexpr uint64_t kRescanNs = 1'000'000'000;

 private:
  struct Container {
    std::string region_path;
    std::vector<std::string> uuids;  ///< NVIDIA_VISIBLE_DEVICES of the limits file, by index
    bool high = false;               ///< CUDA_TASK_PRIORITY=0
  };
  struct Published {
    uint64_t high_stamp = 0;
    uint64_t contended_until = 0;
  };
  void Rescan();
  bool Write(const std::string& uuid, const Published& value);

  std::string hook_path_;
  std::string node_dir_;
  std::vector<Container> containers_;
  uint64_t scanned_at_ = 0;
  bool scanned_ = false;
  std::map<std::string, uint64_t> published_;
  std::map<std::string, uint64_t> contended_until_;
  std::map<std::string, bool> write_failed_;  // uuid → logged
};

/// The stamp of the node file at `path` as libvgpu.so would take it (api::NodeGpuStamp after a
/// bounded read; no symlink, regular file only); empty when missing or not valid.
std::optional<uint64_t> ReadNodeGpuFile(const std::string& path);

}  // namespace fracgpu::monitor
