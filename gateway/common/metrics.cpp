#include "gateway/common/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace hookgate::metrics {
namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string render_labels(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    out += out.empty() ? "" : ",";
    out += k + "=\"" + escape_label(v) + "\"";
  }
  return out;
}

// Calls `each` with every rendered `key="value"` pair of the rendered label set `labels`, until it
// returns true; whether one did. Escaping keeps a value's own `,` and `"` from faking a boundary:
// its quotes carry a backslash.
template <typename Each>
bool any_label(std::string_view labels, Each each) {
  size_t start = 0;
  while (start < labels.size()) {
    const size_t open = labels.find("=\"", start);
    if (open == std::string_view::npos) return false;
    size_t close = open + 2;
    while (close < labels.size() && labels[close] != '"') close += labels[close] == '\\' ? 2 : 1;
    if (close >= labels.size()) return false;
    if (each(labels.substr(start, close + 1 - start))) return true;
    start = close + 2;  // past the quote and the comma
  }
  return false;
}

std::string with_le(const std::string& labels, const std::string& le) {
  return "{" + labels + (labels.empty() ? "" : ",") + "le=\"" + le + "\"}";
}

std::string braced(const std::string& labels) {
  return labels.empty() ? "" : "{" + labels + "}";
}

// Bucket bounds keep "%g" ("0.0005", not to_chars' "5e-04"): le labels are series names that
// dashboards and alerts select on, so their spelling must not change.
std::string fmt_bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Sums: the shortest text that reads back as the same double. "%g" kept 6 digits, so a latency
// _sum past 1e6 s moved in 10 s steps and rate(_sum)/rate(_count) drifted.
std::string fmt_sum(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

}  // namespace

namespace {
constexpr auto kBoundsNs = [] {
  std::array<int64_t, Histogram::kBounds.size()> ns{};
  for (size_t i = 0; i < ns.size(); ++i)
    ns[i] = static_cast<int64_t>(Histogram::kBounds[i] * 1e9 + 0.5);
  return ns;
}();
}  // namespace

void Histogram::observe_ns(int64_t ns) {
  ns = std::max<int64_t>(ns, 0);
  size_t i = 0;
  while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  uint64_t n = 0;
  for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
  return n;
}

double Histogram::sum_seconds() const {
  return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  return it->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::Counter).counters[shown(render_labels(labels))];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::Gauge).gauges[shown(render_labels(labels))];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, Type::Histogram).histograms[shown(render_labels(labels))];
  if (!slot) slot = std::make_unique<Histogram>();
  return *slot;
}

const std::string& Registry::shown(const std::string& labels) {
  if (!hidden_labels_.empty())
    (void)any_label(labels, [&](std::string_view label) {
      if (auto it = hidden_labels_.find(label); it != hidden_labels_.end())
        hidden_labels_.erase(it);
      return false;
    });
  return labels;
}

// A lookup per label, not a scan of the hidden ones (found in a scale pass: 12,000 webhooks
// renamed by reloads made a scrape take 20 s, series × hidden names).
bool Registry::is_hidden(const std::string& labels) const {
  return !hidden_labels_.empty() && any_label(labels, [&](std::string_view label) {
    return hidden_labels_.find(label) != hidden_labels_.end();
  });
}

void Registry::hide_label(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  hidden_labels_.insert(render_labels({{key, value}}));
}

uint64_t Registry::counter_value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto c = f->second.counters.find(render_labels(labels));
  return c == f->second.counters.end() ? 0 : c->second->value();
}

std::string Registry::render_prometheus() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    const char* type = f.type == Type::Counter ? "counter"
                       : f.type == Type::Gauge ? "gauge"
                                               : "histogram";
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto& [labels, c] : f.counters)
      if (!is_hidden(labels))
        out += name + braced(labels) + " " + std::to_string(c->value()) + "\n";
    for (const auto& [labels, g] : f.gauges)
      if (!is_hidden(labels))
        out += name + braced(labels) + " " + std::to_string(g->value()) + "\n";
    for (const auto& [labels, h] : f.histograms) {
      if (is_hidden(labels)) continue;
      uint64_t cumulative = 0;
      for (size_t i = 0; i < Histogram::kBounds.size(); ++i) {
        cumulative += h->bucket(i);
        out += name + "_bucket" + with_le(labels, fmt_bound(Histogram::kBounds[i])) + " " +
               std::to_string(cumulative) + "\n";
      }
      // +Inf and _count from the same reads as the finite buckets, so they never disagree.
      const std::string total = std::to_string(cumulative + h->bucket(Histogram::kBounds.size()));
      out += name + "_bucket" + with_le(labels, "+Inf") + " " + total + "\n";
      out += name + "_sum" + braced(labels) + " " + fmt_sum(h->sum_seconds()) + "\n";
      out += name + "_count" + braced(labels) + " " + total + "\n";
    }
  }
  return out;
}

}  // namespace hookgate::metrics
