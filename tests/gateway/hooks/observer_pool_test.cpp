#include "gateway/hooks/observer_pool.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "gateway/hooks/chain.hpp"
#include "tests/gateway/hooks/hook_test_util.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/log_capture.hpp"

namespace hookgate::hooks {
namespace {

using testing::answer;
using testing::counter;
using testing::DiagnosticLog;
using testing::fail;
using testing::fake;
using testing::make_event;

// Holds observers inside handle() until released.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_for_waiters(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

ObserverJob job_for(const HookPtr& hook, const std::string& type = "t") {
  return {hook, std::make_shared<const HookStats>(hook->spec().name),
          std::make_shared<const Event>(make_event("{\"type\":\"" + type + "\"}"))};
}

TEST(ObserverPool, FullQueueDropsAndCountsWithoutBlocking) {
  Gate gate;
  auto blocked = fake("pool_full_blocked", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  ObserverPool pool(1, 2, {});
  uint64_t dropped_before = counter("hookgate_observer_dropped_total");

  ASSERT_TRUE(pool.submit(job_for(blocked)));  // taken by the only thread, which then blocks
  ASSERT_TRUE(gate.wait_for_waiters(1));
  EXPECT_TRUE(pool.submit(job_for(blocked)));  // queued 1/2
  EXPECT_TRUE(pool.submit(job_for(blocked)));  // queued 2/2
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(pool.submit(job_for(blocked)));
  // A submit that waited for room would wait until the gate opens below, i.e. forever.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(pool.queued(), 2u);
  EXPECT_EQ(pool.dropped(), 5u);
  EXPECT_EQ(counter("hookgate_observer_dropped_total"), dropped_before + 5);

  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(blocked->calls(), 3);
  EXPECT_EQ(pool.completed(), 3u);
  EXPECT_FALSE(pool.submit(job_for(blocked)));  // stopped: dropped, never blocks
  EXPECT_EQ(pool.dropped(), 6u);
}

// Found in a hook author's test: a burst of drops got one line for its first drop, and the rest
// waited for a drop a second later, which may never come. The next run to finish says them.
TEST(ObserverPool, ABurstsLaterDropsAreSaidOnceTheIntervalHasPassed) {
  hookgate::testing::LogCapture log;
  Gate gate;
  auto blocked = fake("pool_burst_blocked", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  ObserverPool pool(1, 1, {});
  ASSERT_TRUE(pool.submit(job_for(blocked)));  // taken by the only thread, which then blocks
  ASSERT_TRUE(gate.wait_for_waiters(1));
  EXPECT_TRUE(pool.submit(job_for(blocked)));  // queued 1/1
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(pool.submit(job_for(blocked)));
  EXPECT_EQ(
      log.lines_containing("dropped 1 observer run(s), of hook pool_burst_blocked (1)").size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the 1 s interval
  gate.open();
  // The later line names the hook too (found in a hook author's pass: it named none).
  EXPECT_TRUE(hookgate::testing::wait_until(
      [&] {
        return !log.lines_containing(
                       "dropped 3 more observer run(s) since the last line, of hook "
                       "pool_burst_blocked (3)")
                    .empty();
      },
      std::chrono::seconds(10)));
  pool.stop(std::chrono::seconds(10));
}

// Found in a hook author's pass: lanes were per hook instance, and a reload builds new instances,
// so a hung observer's next generation took a second thread (N reloads stalled N threads) and
// one observer's runs overlapped, out of order. Lanes are per hook name now.
TEST(ObserverPool, AReloadedObserverQueuesBehindItsOldGeneration) {
  Gate gate;
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> running{0}, most_at_once{0};
  auto observer = [&](const std::string& generation, bool hang) {
    return fake("pool_reloaded", HookKind::Observe, [&, generation, hang](Event& ev) {
      const int now = running.fetch_add(1) + 1;
      int seen = most_at_once.load();
      while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
      }
      if (hang) gate.wait();
      {
        std::lock_guard lock(mu);
        order.push_back(generation + ":" + std::string(ev.type()));
      }
      running.fetch_sub(1);
      return answer(Action::Continue);
    });
  };
  auto old_generation = observer("old", true);
  auto new_generation = observer("new", true);
  std::atomic<int> other_runs{0};
  auto other = fake("pool_reloaded_other", HookKind::Observe, [&](Event&) {
    other_runs.fetch_add(1);
    return answer(Action::Continue);
  });
  ObserverPool pool(2, 100, {});
  ASSERT_TRUE(pool.submit(job_for(old_generation, "1")));
  ASSERT_TRUE(gate.wait_for_waiters(1));
  ASSERT_TRUE(pool.submit(job_for(old_generation, "2")));
  ASSERT_TRUE(pool.submit(job_for(new_generation, "3")));
  ASSERT_TRUE(pool.submit(job_for(new_generation, "4")));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.submit(job_for(other)));
  // The second thread stays free for the other observer: the new generation waits its turn.
  EXPECT_TRUE(hookgate::testing::wait_until([&] { return other_runs.load() == 5; },
                                            std::chrono::seconds(5)));
  EXPECT_EQ(new_generation->calls(), 0);
  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(order, (std::vector<std::string>{"old:1", "old:2", "new:3", "new:4"}));
  EXPECT_EQ(most_at_once.load(), 1);
}

// Found in review: the queue was bounded in runs only, so 10,000 waiting runs of large events
// behind one stalled observer could pin gigabytes.
TEST(ObserverPool, QueuedBytesAreBoundedToo) {
  Gate gate;
  auto blocked = fake("pool_bytes_blocked", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  auto big_event = [] {
    return std::make_shared<const Event>(
        make_event(R"({"type":"t","data":{"blob":")" + std::string(1 << 20, 'x') + R"("}})"));
  };
  auto first = big_event();
  ASSERT_GE(first->memory_bytes(), size_t{1} << 20);
  const size_t budget = 4 * first->memory_bytes() + 1000;
  ObserverPool pool(1, 10000, {}, budget);
  auto stats = std::make_shared<const HookStats>(blocked->spec().name);
  ASSERT_TRUE(pool.submit({blocked, stats, first}));  // taken by the only thread
  ASSERT_TRUE(gate.wait_for_waiters(1));
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += pool.submit({blocked, stats, big_event()}) ? 1 : 0;
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(pool.queued(), 4u);
  EXPECT_EQ(pool.dropped(), 6u);
  // Small runs still fit beside them.
  EXPECT_TRUE(pool.submit(job_for(blocked)));
  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(pool.completed(), 6u);

  // One event's runs for several observers count once; a run larger than the whole budget is
  // queued when nothing else waits.
  Gate hold;
  auto holder = fake("pool_bytes_holder", HookKind::Observe, [&](Event&) {
    hold.wait();
    return answer(Action::Continue);
  });
  auto other =
      fake("pool_bytes_other", HookKind::Observe, [](Event&) { return answer(Action::Continue); });
  ObserverPool tiny(1, 10, {}, 1000);
  ASSERT_TRUE(tiny.submit(job_for(holder)));
  ASSERT_TRUE(hold.wait_for_waiters(1));
  auto shared = big_event();
  EXPECT_TRUE(tiny.submit({blocked, stats, shared}));  // larger than the budget, queue empty
  EXPECT_FALSE(tiny.submit({blocked, stats, big_event()}));
  EXPECT_TRUE(tiny.submit({other, std::make_shared<const HookStats>(other->spec().name), shared}));
  hold.open();
  tiny.stop(std::chrono::seconds(10));
  EXPECT_EQ(tiny.completed(), 3u);
}

TEST(ObserverPool, StopDrainsQueuedWork) {
  std::atomic<int> done{0};
  auto slowish = fake("pool_drain", HookKind::Observe, [&](Event&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done.fetch_add(1);
    return answer(Action::Continue);
  });
  ObserverPool pool(2, 100, {});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.submit(job_for(slowish)));
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(done.load(), 10);
  EXPECT_EQ(pool.dropped(), 0u);
  pool.stop();  // idempotent
}

TEST(ObserverPool, StopWithoutGraceDropsWhatIsQueued) {
  Gate gate;
  auto blocked = fake("pool_stop_drop", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  ObserverPool pool(1, 10, {});
  ASSERT_TRUE(pool.submit(job_for(blocked)));
  ASSERT_TRUE(gate.wait_for_waiters(1));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.submit(job_for(blocked)));
  // Release the running observer once stop() has dropped the queue (it does so before joining
  // the workers); if it never does, after 5 s so that the test fails rather than hangs.
  std::thread opener([&] {
    hookgate::testing::wait_until([&] { return pool.dropped() == 4; }, std::chrono::seconds(5));
    gate.open();
  });
  pool.stop(std::chrono::milliseconds(0));
  opener.join();
  EXPECT_EQ(blocked->calls(), 1);  // the running one finished; the queued four were dropped
  EXPECT_EQ(pool.dropped(), 4u);
}

// Found in review: with runs taken strictly in queue order, a hung observer's queued runs took
// every worker (each waiting on the same hook) and starved all other observers.
TEST(ObserverPool, OneStuckObserverDoesNotHoldUpTheOthers) {
  Gate gate;
  auto stuck = fake("pool_stuck", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  std::atomic<int> other_runs{0};
  auto other = fake("pool_other", HookKind::Observe, [&](Event&) {
    other_runs.fetch_add(1);
    return answer(Action::Continue);
  });
  ObserverPool pool(2, 100, {});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.submit(job_for(stuck)));
  ASSERT_TRUE(gate.wait_for_waiters(1));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.submit(job_for(other)));
  EXPECT_TRUE(hookgate::testing::wait_until([&] { return other_runs.load() == 5; },
                                            std::chrono::seconds(5)));
  EXPECT_EQ(stuck->calls(), 1);  // one run per hook at a time: the other two still queued
  EXPECT_EQ(pool.queued(), 2u);
  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(stuck->calls(), 3);
  EXPECT_EQ(pool.completed(), 8u);
  EXPECT_EQ(pool.dropped(), 0u);
}

// Found in review: the queue was shared first come, first served, so a slow observer's backlog
// filled it and every run of the fast observers was dropped, with their threads idle.
TEST(ObserverPool, ASlowObserversBacklogMakesRoomForTheOthers) {
  Gate gate;
  auto slow = fake("pool_fair_slow", HookKind::Observe, [&](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  std::atomic<int> fast_runs{0};
  auto fast = fake("pool_fair_fast", HookKind::Observe, [&](Event&) {
    fast_runs.fetch_add(1);
    return answer(Action::Continue);
  });
  ObserverPool pool(2, 10, {});
  ASSERT_TRUE(pool.submit(job_for(slow)));
  ASSERT_TRUE(gate.wait_for_waiters(1));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.submit(job_for(slow)));
  EXPECT_FALSE(pool.submit(job_for(slow)));  // its own lane is the longest: its new run goes
  EXPECT_EQ(pool.dropped(), 1u);
  // The first fast run makes room by dropping slow's newest; from then on a slot is free
  // whenever the fast observer has caught up.
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(pool.submit(job_for(fast))) << i;
    EXPECT_TRUE(hookgate::testing::wait_until([&] { return fast_runs.load() == i + 1; },
                                              std::chrono::seconds(5)));
  }
  EXPECT_EQ(pool.dropped(), 2u);
  EXPECT_EQ(pool.queued(), 9u);  // slow's backlog, one shorter
  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(slow->calls(), 10);
  EXPECT_EQ(fast_runs.load(), 20);
}

TEST(ObserverPool, FailuresAreReportedLikeFailOpenAndNeverVeto) {
  DiagnosticLog diags;
  auto broken = fake(
      "pool_broken", HookKind::Observe, [](Event&) { return fail("crashed"); },
      FailurePolicy::Closed);
  uint64_t failures = counter("hookgate_hook_failures_total", {{"hook", "pool_broken"}});
  auto chain = [&] {
    HookEntry e;
    e.file.name = "pool_broken";
    e.hook = broken;
    std::vector<HookEntry> entries;
    entries.push_back(std::move(e));
    return HookChain::build(std::move(entries));
  }();
  ObserverPool pool(1, 10, diags.sink());
  Event ev = make_event(R"({"type":"user.created","id":"u-1"})");
  EXPECT_FALSE(chain->run(ev, diags.sink()).vetoed);
  chain->dispatch_observers(std::make_shared<const Event>(std::move(ev)), pool);
  pool.stop(std::chrono::seconds(10));
  ASSERT_EQ(diags.events().size(), 1u);
  EXPECT_EQ(diags.events()[0].type, diag::kHookFailed);
  EXPECT_EQ(diags.events()[0].hook, "pool_broken");
  EXPECT_EQ(diags.events()[0].event_id, "u-1");
  EXPECT_EQ(diags.events()[0].reason, "crashed");
  EXPECT_EQ(counter("hookgate_hook_failures_total", {{"hook", "pool_broken"}}), failures + 1);
}

// Found in an exploratory run: an observer that answered veto or replace was counted under
// result="veto"/"replace", which an alert on vetoed events would fire on, though both are ignored.
TEST(ObserverPool, AnIgnoredVetoOrReplaceCountsAsContinue) {
  DiagnosticLog diags;
  ObserverPool pool(1, 10, diags.sink());
  const auto runs = [](const std::string& hook, const char* result) {
    return counter("hookgate_hook_runs_total", {{"hook", hook}, {"result", result}});
  };
  for (const auto& [name, action] : std::vector<std::pair<std::string, Action>>{
           {"pool_ignored_veto", Action::Veto}, {"pool_ignored_replace", Action::Replace}}) {
    auto hook = fake(name, HookKind::Observe, [a = action](Event&) { return answer(a, "no"); });
    const uint64_t continued = runs(name, "continue");
    const uint64_t as_answered = runs(name, action == Action::Veto ? "veto" : "replace");
    const uint64_t ignored = counter("hookgate_hook_answers_ignored_total", {{"hook", name}});
    ASSERT_TRUE(pool.submit(job_for(hook)));
    ASSERT_TRUE(hookgate::testing::wait_until(
        [&] { return runs(name, "continue") == continued + 1; }, std::chrono::seconds(10)));
    EXPECT_EQ(runs(name, action == Action::Veto ? "veto" : "replace"), as_answered);
    EXPECT_EQ(counter("hookgate_hook_answers_ignored_total", {{"hook", name}}), ignored + 1);
  }
  pool.stop(std::chrono::seconds(10));
  EXPECT_TRUE(diags.events().empty());
}

TEST(ObserverPool, WorkOutlivesTheChainGenerationThatQueuedIt) {
  Gate gate;
  auto observer = fake("pool_generation", HookKind::Observe, [&](Event& ev) {
    gate.wait();
    EXPECT_EQ(ev.type(), "old.generation");
    return answer(Action::Continue);
  });
  std::weak_ptr<Hook> weak = observer;
  ObserverPool pool(1, 10, {});
  {
    std::vector<HookEntry> entries(1);
    entries[0].hook = std::move(observer);
    auto chain = HookChain::build(std::move(entries));
    chain->dispatch_observers(
        std::make_shared<const Event>(make_event(R"({"type":"old.generation"})")), pool);
  }  // the chain (a reload swapped it out) is gone; the queued item still holds the hook
  ASSERT_TRUE(gate.wait_for_waiters(1));
  EXPECT_FALSE(weak.expired());
  gate.open();
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(pool.completed(), 1u);
  EXPECT_TRUE(weak.expired());  // released once the run finished
}

TEST(ObserverPool, ObserverGetsItsOwnCopyOfTheEvent) {
  auto scribbler = fake("pool_scribbler", HookKind::Observe, [](Event& ev) {
    EXPECT_TRUE(ev.set_string("data.scribbled", "yes"));
    return answer(Action::Continue);
  });
  auto shared = std::make_shared<const Event>(make_event(R"({"type":"t","data":{}})"));
  ObserverPool pool(2, 10, {});
  ObserverJob job{scribbler, std::make_shared<const HookStats>("pool_scribbler"), shared};
  ASSERT_TRUE(pool.submit(job));
  ASSERT_TRUE(pool.submit(job));
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(scribbler->calls(), 2);
  EXPECT_EQ(shared->find("data.scribbled"), nullptr);
}

}  // namespace
}  // namespace hookgate::hooks
