#pragma once
// Captures log lines ("<level> <message>") for the lifetime of the object, in place of the
// default logger. Declare it before anything whose threads log (a Dispatcher, a hook), so those
// threads are gone before the logger is swapped back.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

namespace hookgate::testing {

class LogCapture {
 public:
  LogCapture()
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_pattern("%l %v");
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The last 1,000 lines.
  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  std::vector<std::string> lines_containing(const std::string& needle) const {
    std::vector<std::string> out;
    for (auto& line : lines())
      if (line.find(needle) != std::string::npos) out.push_back(line);
    return out;
  }
  bool contains(const std::string& needle) const { return !lines_containing(needle).empty(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace hookgate::testing
