#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bus/subscriber.hpp"

namespace hookgate::testing {

// ZeroMQ attaches new peers (and sends subscriptions) only when the socket's owner thread touches
// the socket, as the gateway's ingest loop does constantly: receive on a thread of its own.
class ReceivingThread {
 public:
  explicit ReceivingThread(bus::Subscriber& sub) : sub_(sub), thread_([this] { run(); }) {}
  ~ReceivingThread() {
    stop_ = true;
    thread_.join();
  }
  // The first message's frames as strings, or empty on timeout.
  std::vector<std::string> next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !received_.empty(); })) return {};
    auto front = received_.front();
    received_.erase(received_.begin());
    return front;
  }

 private:
  void run() {
    std::vector<zmq::message_t> frames;
    while (!stop_) {
      if (!sub_.receive(frames, std::chrono::milliseconds(20))) continue;
      std::vector<std::string> parts;
      for (auto& f : frames) parts.push_back(f.to_string());
      std::lock_guard lock(mu_);
      received_.push_back(parts);
      cv_.notify_all();
    }
  }
  bus::Subscriber& sub_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<std::string>> received_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hookgate::testing
