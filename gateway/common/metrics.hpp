#pragma once
// Process-wide counters and histograms, rendered in Prometheus text format by the admin listener.
// Callers look a series up once and keep the reference: the hot path is one relaxed atomic add.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hookgate::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Fixed buckets in seconds, from 50 µs to 30 s: wide enough for hooks and webhook round trips.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5, 30};
  void observe_ns(int64_t ns);
  uint64_t count() const;
  double sum_seconds() const;
  uint64_t bucket(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  // One slot per bound plus one past the last: the count is their sum, so an observation costs
  // two atomic adds (bucket and sum). Hooks are timed on every event.
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

class Registry {
 public:
  static Registry& global();

  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const Labels& labels = {});

  // Leaves out of the rendering every series that carries the label key=value (a webhook a reload
  // removed), until one of them is looked up again. The series live on: callers may still hold
  // references, and a webhook added back continues its counters.
  void hide_label(const std::string& key, const std::string& value);

  // Current value of a counter series, 0 if it was never created (tests and `hookgate` status).
  uint64_t counter_value(const std::string& name, const Labels& labels = {}) const;
  std::string render_prometheus() const;

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // key: rendered label set
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Type type);
  // The rendered label set `labels`, shown again if it was hidden.
  const std::string& shown(const std::string& labels);
  bool is_hidden(const std::string& labels) const;

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  // Rendered key="value" pairs, see hide_label().
  std::set<std::string, std::less<>> hidden_labels_;
};

// Shorthands for the global registry.
inline Counter& counter(const std::string& name, const std::string& help,
                        const Labels& labels = {}) {
  return Registry::global().counter(name, help, labels);
}
inline Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {}) {
  return Registry::global().gauge(name, help, labels);
}
inline Histogram& histogram(const std::string& name, const std::string& help,
                            const Labels& labels = {}) {
  return Registry::global().histogram(name, help, labels);
}

}  // namespace hookgate::metrics
