#pragma once
// Shared helpers for the hook tests: real temporary directories and files, events, and a Hook test
// double whose behaviour each test scripts.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gateway/common/metrics.hpp"
#include "gateway/diagnostics.hpp"
#include "gateway/event.hpp"
#include "gateway/hooks/hook.hpp"
#include "tests/support/gateway_process.hpp"

namespace hookgate::hooks::testing {

// The tests' one temporary folder (tests/support), removed with everything in it at scope exit.
using TempDir = hookgate::testing::TempDir;

inline std::string write_file(const std::string& dir, const std::string& name,
                              const std::string& text, bool executable = false) {
  auto p = std::filesystem::path(dir) / name;
  std::ofstream(p, std::ios::binary) << text;
  namespace fs = std::filesystem;
  auto perms = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read;
  if (executable) perms |= fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  fs::permissions(p, perms);
  return p.string();
}

inline Event make_event(const std::string& json) {
  auto ev = Event::parse_envelope(json, 1700000000000);
  EXPECT_TRUE(ev.ok()) << ev.error().message << " in " << json;
  return ev.ok() ? std::move(ev.value()) : Event();
}

// Collects diagnostic events (thread-safe, like the pipeline's sink).
class DiagnosticLog {
 public:
  DiagnosticSink sink() {
    return [this](DiagnosticEvent d) {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(d));
    };
  }
  std::vector<DiagnosticEvent> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const auto& d : events()) out.push_back(d.type);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<DiagnosticEvent> events_;
};

// A Hook whose answer each test scripts; counts its calls.
class FakeHook final : public Hook {
 public:
  using Behaviour = std::function<HookResult(Event&)>;
  FakeHook(HookSpec spec, Behaviour behaviour) : Hook(std::move(spec)), behaviour_(behaviour) {}
  HookResult handle(Event& event) override {
    calls_.fetch_add(1);
    return behaviour_(event);
  }
  int calls() const { return calls_.load(); }

 private:
  Behaviour behaviour_;
  std::atomic<int> calls_{0};
};

inline HookSpec spec_of(const std::string& name, HookKind kind,
                        FailurePolicy on_error = FailurePolicy::Open,
                        std::vector<std::string> events = {"*"}) {
  HookSpec s;
  s.name = name;
  s.kind = kind;
  s.on_error = on_error;
  s.events = std::move(events);
  s.file = "/fake/" + name;
  return s;
}

inline std::shared_ptr<FakeHook> fake(const std::string& name, HookKind kind,
                                      FakeHook::Behaviour behaviour,
                                      FailurePolicy on_error = FailurePolicy::Open,
                                      std::vector<std::string> events = {"*"}) {
  return std::make_shared<FakeHook>(spec_of(name, kind, on_error, std::move(events)),
                                    std::move(behaviour));
}

inline HookResult answer(Action a, std::string reason = {}) {
  return HookVerdict{a, std::nullopt, std::move(reason)};
}
inline HookResult fail(std::string reason) {
  return HookFailure{HookFailure::Kind::Error, std::move(reason)};
}
inline HookResult time_out() {
  return HookFailure{HookFailure::Kind::Timeout, "no answer within 50 ms"};
}

inline uint64_t counter(const std::string& name, const metrics::Labels& labels = {}) {
  return metrics::Registry::global().counter_value(name, labels);
}

}  // namespace hookgate::hooks::testing
