#include "gateway/hooks/observer_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "gateway/common/thread_name.hpp"

namespace hookgate::hooks {
namespace {

constexpr auto kDropWarnInterval = std::chrono::seconds(1);
const std::string kNoHook;  // the lane of a job without a hook (run() ignores it)

}  // namespace

ObserverPool::ObserverPool(int threads, int queue_capacity, DiagnosticSink diagnostics,
                           size_t queue_bytes)
    : capacity_(static_cast<size_t>(std::max(queue_capacity, 1))),
      capacity_bytes_(queue_bytes),
      diagnostics_(std::move(diagnostics)),
      dropped_total_(
          metrics::counter("hookgate_observer_dropped_total",
                           "Observer runs dropped because the observer queue was full")) {
  int n = std::max(threads, 1);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    threads_.emplace_back([this] {
      name_this_thread("hg-observer");  // top -H tells their CPU from the ingest thread's
      worker();
    });
}

ObserverPool::~ObserverPool() {
  stop(std::chrono::milliseconds(0));
}

bool ObserverPool::submit(ObserverJob job) {
  const char* why = "observer queue full";
  if (job.bytes == 0 && job.event) job.bytes = job.event->memory_bytes();
  std::vector<ObserverJob> evicted;  // released outside the lock
  bool accepted = false;
  {
    std::lock_guard lock(mu_);
    const std::string& key = job.hook ? job.hook->spec().name : kNoHook;
    auto fits = [&] {
      // An event already queued for another observer costs nothing more.
      const size_t more = queued_events_.count(job.event.get()) ? 0 : job.bytes;
      return queued_ == 0 ||
             (queued_ < capacity_ && (more == 0 || queued_bytes_ + more <= capacity_bytes_));
    };
    if (!accepting_) {
      why = "observer pool stopped";
    } else {
      // Full. The queue is shared, but a slow observer must not starve the others of it: while
      // another hook holds more queued runs than this one, its newest run makes room (it is
      // the one falling behind), and this run is queued.
      auto own = lanes_.find(key);
      const size_t own_size = own == lanes_.end() ? 0 : own->second.jobs.size();
      while (!fits()) {
        auto longest = lanes_.end();
        for (auto it = lanes_.begin(); it != lanes_.end(); ++it)
          if (longest == lanes_.end() || it->second.jobs.size() > longest->second.jobs.size())
            longest = it;
        if (longest == lanes_.end() || longest->second.jobs.size() <= own_size + 1) break;
        evicted.push_back(std::move(longest->second.jobs.back()));
        longest->second.jobs.pop_back();  // at least one stays: the lane keeps its place
        --queued_;
        uncount(evicted.back());
      }
    }
    if (accepting_ && fits()) {
      Lane& lane = lanes_[key];
      if (queued_events_[job.event.get()]++ == 0) queued_bytes_ += job.bytes;
      lane.jobs.push_back(std::move(job));
      ++queued_;
      if (!lane.running && lane.jobs.size() == 1) {
        ready_.push_back(key);
        work_cv_.notify_one();
      }
      accepted = true;
    }
  }
  // `job` is still whole when it was not queued.
  if (!accepted) note_drop(1, why, job.hook ? job.hook->spec().name : kNoHook);
  for (const ObserverJob& gone : evicted)
    note_drop(1, why, gone.hook ? gone.hook->spec().name : kNoHook);
  return accepted;
}

void ObserverPool::uncount(const ObserverJob& job) {
  auto it = queued_events_.find(job.event.get());
  if (it == queued_events_.end() || --it->second > 0) return;
  queued_events_.erase(it);
  queued_bytes_ -= job.bytes;
}

void ObserverPool::note_drop(size_t n, const char* why, const std::string& hook) {
  dropped_total_.inc(n);
  uint64_t to_report = 0;
  std::string by_hook;
  {
    std::lock_guard lock(mu_);
    dropped_ += n;
    drops_since_warn_ += n;
    drops_since_warn_by_hook_[hook] += n;
    auto now = std::chrono::steady_clock::now();
    if (now - last_drop_warn_ >= kDropWarnInterval) {
      to_report = drops_since_warn_;
      drops_since_warn_ = 0;
      last_drop_warn_ = now;
      by_hook = take_drops_by_hook();
    }
  }
  // Rate-limited: a flood of events against a slow observer must not become a flood of logs.
  if (to_report > 0)
    spdlog::warn("{} (capacity {} runs, {} KiB of events): dropped {} observer run(s){}", why,
                 capacity_, capacity_bytes_ / 1024, to_report, by_hook);
}

// ", of hooks slow (12), audit (3)": whose runs were dropped since the last line, most first.
std::string ObserverPool::take_drops_by_hook() {
  std::vector<std::pair<std::string, uint64_t>> counts;
  for (const auto& [hook, n] : drops_since_warn_by_hook_)
    if (!hook.empty()) counts.emplace_back(hook, n);  // a run without a hook names none
  drops_since_warn_by_hook_.clear();
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string text;
  constexpr size_t kNamed = 5;
  for (size_t i = 0; i < counts.size() && i < kNamed; ++i)
    text += (i == 0 ? (counts.size() == 1 ? ", of hook " : ", of hooks ") : ", ") +
            counts[i].first + " (" + std::to_string(counts[i].second) + ")";
  if (counts.size() > kNamed) text += " and " + std::to_string(counts.size() - kNamed) + " more";
  return text;
}

void ObserverPool::worker() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return exit_ || !ready_.empty(); });
    if (ready_.empty()) return;  // exit_ and nothing left
    const std::string key = std::move(ready_.front());
    ready_.pop_front();
    Lane& lane = lanes_[key];
    ObserverJob job = std::move(lane.jobs.front());
    lane.jobs.pop_front();
    lane.running = true;
    --queued_;
    uncount(job);
    ++active_;
    lock.unlock();
    try {
      run(job);
    } catch (const std::exception& e) {  // out of memory cloning the event, a throwing sink
      spdlog::error("observe hook {}: run failed: {}", job.hook ? job.hook->spec().name : "?",
                    e.what());
    }
    job = {};  // release the hook and event outside the lock
    lock.lock();
    --active_;
    ++completed_;
    // Drops a burst made after its first line are said once the interval has passed, by the next
    // run to finish, not at the next drop, which may never come (found in a hook author's test:
    // 15 dropped, one line saying 1). Once a second at most: under the lock is fine.
    if (const auto now = std::chrono::steady_clock::now();
        drops_since_warn_ > 0 && now - last_drop_warn_ >= kDropWarnInterval) {
      spdlog::warn(
          "observer queue full (capacity {} runs, {} KiB of events): dropped {} more "
          "observer run(s) since the last line{}",
          capacity_, capacity_bytes_ / 1024, std::exchange(drops_since_warn_, 0),
          take_drops_by_hook());
      last_drop_warn_ = now;
    }
    Lane& again = lanes_[key];  // the map may have rehashed meanwhile; the lane is still there
    again.running = false;
    if (!again.jobs.empty()) {
      ready_.push_back(key);
      work_cv_.notify_one();
    } else {
      lanes_.erase(key);
    }
    if (queued_ == 0 && active_ == 0) idle_cv_.notify_all();
  }
}

void ObserverPool::run(ObserverJob& job) {
  if (!job.hook || !job.stats || !job.event) return;
  // Hook::handle takes a mutable event; the shared one is read by other observers concurrently,
  // so each observer gets its own copy (made here, off the caller's thread).
  Event copy = job.event->clone();
  Invocation inv = invoke_hook(*job.hook, copy, *job.stats);
  if (!inv.result.ok()) {
    // Observers are always fail-open: they cannot veto, whatever their on_error says.
    report_failure(*job.hook, *job.stats, inv.result.error(), job.event->id(), job.event->type(),
                   diagnostics_, "ignored (observer)");
    return;
  }
  Action action = inv.result.value().action;
  // Counted as what it did: an observer's veto or replacement is ignored, so it continued (found
  // in an exploratory run: result="veto" series an alert on vetoes would have fired on).
  if (action == Action::Veto || action == Action::Replace)
    report_ignored_answer(*job.stats, job.hook->spec().name,
                          std::string("an observe hook answered ") +
                              (action == Action::Veto ? "veto" : "with an edited event") +
                              " (observers are read-only: a veto or transform hook does that)");
  job.stats->runs(action == Action::Skip ? RunResult::Skip : RunResult::Continue).inc();
}

void ObserverPool::stop(std::chrono::milliseconds drain) {
  std::lock_guard stop_lock(stop_mu_);
  std::unordered_map<std::string, Lane> leftover;
  size_t left = 0;
  uint64_t unreported = 0;  // dropped earlier, within a second of the last warning
  std::string unreported_by_hook;
  {
    std::unique_lock lock(mu_);
    if (exit_) return;
    accepting_ = false;
    idle_cv_.wait_for(lock, drain, [this] { return queued_ == 0 && active_ == 0; });
    // Lanes with a run in progress stay (empty): their worker still updates them.
    for (auto& [key, lane] : lanes_) {
      left += lane.jobs.size();
      leftover[key].jobs = std::move(lane.jobs);
      lane.jobs.clear();
    }
    ready_.clear();
    queued_ = 0;
    queued_bytes_ = 0;
    queued_events_.clear();
    exit_ = true;
    dropped_ += left;
    unreported = std::exchange(drops_since_warn_, 0);
    unreported_by_hook = take_drops_by_hook();
  }
  work_cv_.notify_all();
  leftover.clear();  // releases the hooks and events outside the lock
  dropped_total_.inc(left);
  if (unreported > 0)
    spdlog::warn("observer queue full (capacity {}): dropped {} observer run(s) not logged yet{}",
                 capacity_, unreported, unreported_by_hook);
  if (left > 0) spdlog::warn("observer pool stopping: dropped {} queued observer run(s)", left);
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

size_t ObserverPool::queued() const {
  std::lock_guard lock(mu_);
  return queued_;
}

uint64_t ObserverPool::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

uint64_t ObserverPool::completed() const {
  std::lock_guard lock(mu_);
  return completed_;
}

}  // namespace hookgate::hooks
