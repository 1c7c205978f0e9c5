#pragma once
// Asynchronous pod events (FilteringFailed, BindingSucceed, BindingFailed;
// docs/design/hami-behaviour.md §8.10): the filter and bind paths enqueue, one worker thread posts
// them, so an API-server round trip never adds to /filter latency. The queue is bounded (events
// past it are dropped and counted). Thread-safe.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "k8s/client.h"

namespace fracgpu::scheduler {

class EventRecorder {
 public:
  /// `client` may be null (events are then dropped); it must outlive the recorder.
  explicit EventRecorder(k8s::Client* client, std::string component = "fracgpu-scheduler",
                         size_t capacity = 1000);
  ~EventRecorder();
  /// Queues an event about `object` (type "Normal" or "Warning"). Only its kind and
  /// metadata.name/namespace/uid are kept, each read only when a string ("" otherwise): the
  /// object may be a request's (a /filter Pod whose metadata.uid is null). An error or
  /// exception while posting is logged, never thrown (the worker outlives every request).
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);
  /// Blocks until every queued event was posted, or `timeout`; returns whether the queue
  /// drained (tests).
  bool Flush(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  int64_t dropped() const;

 private:
  struct Item {
    nlohmann::json object;
    std::string type, reason, message;
  };
  void Run();

  k8s::Client* client_;
  std::string component_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<Item> queue_;
  bool busy_ = false, stop_ = false;
  int64_t dropped_ = 0;
  std::thread thread_;
};

}  // namespace fracgpu::scheduler
