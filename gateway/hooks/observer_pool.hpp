#pragma once
// Runs observe hooks off the event path (PRODUCT.md "Hooks": observe = after the chain, in
// parallel, never delays delivery). A fixed set of threads drains a BOUNDED queue; when the queue
// is full the new item is dropped and counted: submit() never blocks the caller for longer than a
// mutex hand-off. The pool outlives chain generations: each item holds its own HookPtr.
//
// Parallel across hooks, one run at a time per hook (a hook handles one call at a time anyway: a
// program hook's co-process takes turns). A worker only takes a hook's next item once its last
// run ended, so one slow or hung observer occupies one thread, never all of them waiting for its
// turn, and the other observers keep running. A hook is its name, across reloads: each reload
// builds new instances, and lanes per instance let a hung observer's generations take a thread
// each, and one observer's runs overlap and go out of order (found in a hook author's pass).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/diagnostics.hpp"
#include "gateway/event.hpp"
#include "gateway/hooks/hook.hpp"
#include "gateway/hooks/hook_runner.hpp"

namespace hookgate::hooks {

struct ObserverJob {
  HookPtr hook;
  std::shared_ptr<const HookStats> stats;  // the hook's metric series, looked up at chain build
  std::shared_ptr<const Event> event;      // shared by every observer of one event; read-only
  size_t bytes = 0;  // the event's memory_bytes(); submit() measures it when 0
};

// Bytes of events the queue may pin besides its run count: 10,000 waiting runs of 512 KiB events
// would otherwise hold gigabytes behind one stalled observer. An event shared by several
// observers' runs counts once.
inline constexpr size_t kObserverQueueBytes = 64u << 20;

class ObserverPool {
 public:
  // `diagnostics` receives hookgate.hook.failed/timeout for observer failures; may be empty.
  ObserverPool(int threads, int queue_capacity, DiagnosticSink diagnostics,
               size_t queue_bytes = kObserverQueueBytes);
  ObserverPool(const config::HooksConfig& config, DiagnosticSink diagnostics)
      : ObserverPool(config.observer_threads, config.observer_queue, std::move(diagnostics)) {}
  ~ObserverPool();  // stop(0ms): drops what is still queued
  ObserverPool(const ObserverPool&) = delete;
  ObserverPool& operator=(const ObserverPool&) = delete;

  // Queues one observer run. Returns false (and counts hookgate_observer_dropped_total, with a
  // rate-limited warn log) when the queue is full (runs or bytes) or the pool is stopping. A
  // run larger than the byte budget is still queued when the queue is empty. Never blocks. When
  // the queue is full and another hook holds more queued runs than this one, that hook's newest
  // run is dropped (and counted) instead: a slow observer falls behind alone.
  bool submit(ObserverJob job);

  // Stops accepting work, lets the threads drain the queue for up to `drain`, drops whatever is
  // left (counted as dropped), then joins. Idempotent. A running observer is bounded by its own
  // hook timeout, so this returns once those finish.
  void stop(std::chrono::milliseconds drain = std::chrono::seconds(5));

  size_t queued() const;
  uint64_t dropped() const;    // by this pool (the metric is process-wide)
  uint64_t completed() const;  // observer runs finished, whatever their result
  size_t capacity() const { return capacity_; }

 private:
  void worker();
  void run(ObserverJob& job);
  void uncount(const ObserverJob& job);  // a run leaves the queue (mu_ held)
  void note_drop(size_t n, const char* why, const std::string& hook);
  std::string take_drops_by_hook();  // mu_ held: names the hooks of drops_since_warn_

  const size_t capacity_;
  const size_t capacity_bytes_;
  const DiagnosticSink diagnostics_;
  metrics::Counter& dropped_total_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // workers: an item arrived, or exit
  std::condition_variable idle_cv_;  // stop(): the queue drained
  // Queued items per hook; a hook is in ready_ while it has items and no run in progress.
  struct Lane {
    std::deque<ObserverJob> jobs;
    bool running = false;
  };
  std::unordered_map<std::string, Lane> lanes_;  // by hook name
  std::deque<std::string> ready_;  // oldest first: hooks take turns in the order they queued
  size_t queued_ = 0;              // items in lanes_, all hooks together (≤ capacity_)
  size_t queued_bytes_ = 0;        // their events' bytes, each event once
  std::unordered_map<const Event*, size_t> queued_events_;  // queued runs per event
  size_t active_ = 0;
  bool accepting_ = true;
  bool exit_ = false;
  uint64_t dropped_ = 0;
  uint64_t completed_ = 0;
  // Rate limit for the "queue full" warning: at most one line per interval, with the count.
  std::chrono::steady_clock::time_point last_drop_warn_{};
  uint64_t drops_since_warn_ = 0;
  std::unordered_map<std::string, uint64_t> drops_since_warn_by_hook_;  // its parts, by hook

  std::mutex stop_mu_;  // serializes stop() callers
  std::vector<std::thread> threads_;
};

}  // namespace hookgate::hooks
