#include "scheduler/events.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "k8s/objects.h"

namespace fracgpu::scheduler {
namespace {

// The involved object of an event, rebuilt from `object` with only the fields an Event reads,
// each a string (k8s::Name/Namespace/Uid read "" for a missing or non-string field): the
// object may come from outside (a /filter request's Pod), where metadata.uid can be null or a
// number, and must not reach the posting thread with a type it cannot read.
nlohmann::json Involved(const nlohmann::json& object) {
  nlohmann::json out = {{"metadata",
                         {{"name", k8s::Name(object)},
                          {"namespace", k8s::Namespace(object)},
                          {"uid", k8s::Uid(object)}}}};
  if (object.is_object()) {
    auto kind = object.find("kind");
    if (kind != object.end() && kind->is_string()) out["kind"] = *kind;
  }
  return out;
}

}  // namespace

EventRecorder::EventRecorder(k8s::Client* client, std::string component, size_t capacity)
    : client_(client),
      component_(std::move(component)),
      capacity_(capacity),
      thread_([this] { Run(); }) {}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventRecorder::Record(const nlohmann::json& object, const std::string& type,
                           const std::string& reason, const std::string& message) {
  if (client_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= capacity_) {
      ++dropped_;
      return;
    }
    queue_.push_back({Involved(object), type, reason, message});
  }
  cv_.notify_one();
}

bool EventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

int64_t EventRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void EventRecorder::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    // This thread runs after the response went out: nothing it meets may end the process.
    Status st;
    try {
      st = client_->CreateEvent(item.object, item.type, item.reason, item.message, component_);
    } catch (const std::exception& e) {
      st = Internal(std::string("exception: ") + e.what());
    } catch (...) {
      st = Internal("unknown exception");
    }
    if (!st.ok()) spdlog::warn("event {} not recorded: {}", item.reason, st.ToString());
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace fracgpu::scheduler
