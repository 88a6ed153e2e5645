#include "webhooks/sqlite_spool.hpp"

#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "gateway/common/clock.hpp"
#include "gateway/common/metrics.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/log_capture.hpp"

namespace hookgate::webhooks {
namespace {

namespace fs = std::filesystem;

class SqliteSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "hookgate-spool-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    cfg_.path = (dir_ / "spool.db").string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<SqliteSpool> open(bool tools = false, SqliteSpoolTuning tuning = {}) {
    auto spool = SqliteSpool::open(cfg_, tuning, tools);
    EXPECT_TRUE(spool) << (spool ? "" : spool.error().message);
    return spool ? std::move(spool).value() : nullptr;
  }

  static Delivery make(const std::string& id, const std::string& webhook,
                       const std::string& body = "") {
    Delivery d;
    d.id = id;
    d.webhook = webhook;
    d.event_id = "ev-" + id;
    d.event_type = "auth.failure";
    d.body = std::make_shared<const std::string>(body.empty() ? "{\"id\":\"" + id + "\"}" : body);
    return d;
  }

  // Another delivery of `d`'s event with the same body, for `webhook`: one payload row for both.
  static Delivery sibling_of(const Delivery& d, const std::string& id, const std::string& webhook) {
    Delivery sibling = d;
    sibling.id = id;
    sibling.webhook = webhook;
    return sibling;
  }

  static std::vector<std::string> ids_of(const std::vector<Delivery>& ds) {
    std::vector<std::string> out;
    for (const auto& d : ds) out.push_back(d.id);
    return out;
  }

  static std::string seq_id(int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "msg_%07d", i);
    return buf;
  }

  // Opens a spool bounded by spool.max_bytes whose writer ticks every 20 ms (the size tests).
  std::unique_ptr<SqliteSpool> open_bounded(int64_t max_bytes) {
    cfg_.max_bytes = max_bytes;
    SqliteSpoolTuning tuning;
    tuning.poll_interval_ms = 20;
    return open(false, tuning);
  }

  // Adds `n` deliveries to "siem" with 1 KB bodies, ids seq_id(*added) on; waits for the commit.
  static Status add_padded(SqliteSpool& spool, int* added, int n) {
    std::vector<Delivery> batch;
    for (int i = 0; i < n; ++i, ++*added)
      batch.push_back(make(seq_id(*added), "siem", std::string(1000, 'b')));
    return spool.add(std::move(batch));
  }

  // `webhooks` failing webhooks with `each` pending deliveries apiece (due 10, 20, ... ms from
  // now), claimed every 5 ms for kFailingSteps steps; every attempt fails and is due again
  // `retry_ms` later; with `answers_late`, each attempt's outcome comes 4 steps (20 ms) after its
  // claim, in flight meanwhile. The stats a quarter of the way through are the settled ones.
  static constexpr int kFailingSteps = 400;
  struct FailingRun {
    SqliteSpool::Stats settled{};
    size_t attempts = 0;
  };
  static FailingRun run_failing_webhooks(SqliteSpool& spool, const SqliteSpoolTuning& tuning,
                                         int webhooks, int each, const std::string& body,
                                         int64_t retry_ms, bool answers_late = false) {
    FailingRun run;
    std::deque<std::pair<int, Delivery>> in_flight;  // (the step its answer comes, the claim)
    int64_t now_ms = now_unix_ms();
    std::vector<Delivery> batch;
    for (int w = 0; w < webhooks; ++w) {
      for (int i = 0; i < each; ++i) {
        batch.push_back(make(seq_id(w * each + i), "failing" + std::to_string(w), body));
        batch.back().next_attempt_ms = now_ms + 10 * (i + 1);  // their retries, spread out
      }
    }
    EXPECT_TRUE(spool.add(std::move(batch)));
    for (int step = 0; step < kFailingSteps; ++step) {
      now_ms += 5;
      for (; !in_flight.empty() && in_flight.front().first <= step; in_flight.pop_front())
        spool.complete(in_flight.front().second,
                       {AttemptOutcome::Kind::Retry, now_ms + retry_ms, "HTTP 500"});
      for (int w = 0; w < webhooks; ++w) {
        for (auto& d : spool.claim_due("failing" + std::to_string(w), now_ms, 100)) {
          ++run.attempts;
          if (answers_late) {
            in_flight.emplace_back(step + 4, std::move(d));
          } else {
            spool.complete(d, {AttemptOutcome::Kind::Retry, now_ms + retry_ms, "HTTP 500"});
          }
        }
      }
      EXPECT_TRUE(spool.flush());
      const auto stats = spool.stats();
      EXPECT_LE(stats.cached, tuning.max_cached_deliveries);
      EXPECT_LE(stats.cached_bytes, tuning.max_cached_bytes);
      if (step == kFailingSteps / 4) run.settled = stats;
    }
    return run;
  }
  // The cap did bind, and no lane moved after the run settled.
  static void expect_settled(SqliteSpool& spool, const FailingRun& run) {
    const auto s = spool.stats();
    EXPECT_GE(s.moved_to_disk, 1u);
    EXPECT_LE(s.moved_to_disk + s.moved_to_memory,
              run.settled.moved_to_disk + run.settled.moved_to_memory)
        << "after settling: to the file " << s.moved_to_disk - run.settled.moved_to_disk
        << ", back to memory " << s.moved_to_memory - run.settled.moved_to_memory;
  }

  // What the file's rows take, as hookgate_spool_used_bytes measures it.
  int64_t used_bytes() const;

  fs::path dir_;
  config::SpoolConfig cfg_;
};

TEST_F(SqliteSpoolTest, AddClaimCompleteRoundTrip) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("a1", "siem", "body-1"), make("b1", "audit"), make("a2", "siem")}));
  EXPECT_EQ(spool->pending_count(), 3u);
  const int64_t now = now_unix_ms();

  auto claimed = spool->claim_due("siem", now, 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(*claimed[0].body, "body-1");
  EXPECT_EQ(claimed[0].event_id, "ev-a1");
  EXPECT_EQ(claimed[0].event_type, "auth.failure");
  EXPECT_EQ(claimed[0].attempts, 0);
  EXPECT_GT(claimed[0].created_ms, 0);

  spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 2u);
  auto got = spool->get("a1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->state, DeliveryState::Delivered);
  EXPECT_EQ(got->attempts, 1);
  EXPECT_EQ(*got->body, "body-1");
  EXPECT_FALSE(spool->get("nope"));

  EXPECT_EQ(ids_of(spool->claim_due("audit", now, 10)), (std::vector<std::string>{"b1"}));
  EXPECT_TRUE(spool->claim_due("unknown", now, 10).empty());
  EXPECT_EQ(spool->list(DeliveryState::Pending, "", 0).size(), 2u);
  EXPECT_EQ(spool->list(std::nullopt, "siem", 0).size(), 2u);
  EXPECT_EQ(spool->list(std::nullopt, "", 1).size(), 1u);
}

// Found in a security pass: the spool (every event body) was 0644 under the usual umask. A new
// file and its -wal are the owner's alone, whatever the umask; an existing file keeps its mode.
// Found in a spool-at-scale pass: `deliveries list` read its rows and its totals apart, so beside
// a busy gateway it printed "0 shown; 1 pending in all". Between begin_read_snapshot() and
// end_read_snapshot() every read sees the file as the first one did.
TEST_F(SqliteSpoolTest, AReadSnapshotSeesOneStateOfTheFile) {
  auto gateway = open();
  ASSERT_TRUE(gateway);
  ASSERT_TRUE(gateway->add({make("s1", "siem")}));
  auto cli = open(/*tools=*/true);
  ASSERT_TRUE(cli);
  cli->begin_read_snapshot();
  EXPECT_EQ(cli->list(DeliveryState::Pending, "", 0).size(), 1u);
  ASSERT_TRUE(gateway->add({make("s2", "siem"), make("s3", "siem")}));
  ASSERT_TRUE(gateway->flush());
  EXPECT_EQ(cli->count(DeliveryState::Pending, ""), 1u) << "the snapshot's count";
  cli->end_read_snapshot();
  EXPECT_EQ(cli->count(DeliveryState::Pending, ""), 3u) << "after it";
  EXPECT_FALSE(cli->take_read_error());
}

TEST_F(SqliteSpoolTest, ANewSpoolFileIsReadableByItsOwnerOnly) {
  const mode_t before = ::umask(022);
  auto spool = open();
  ::umask(before);
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("a1", "siem", "a password")}));
  ASSERT_TRUE(spool->flush());
  for (const char* suffix : {"", "-wal"}) {
    struct stat st {};
    ASSERT_EQ(::stat((cfg_.path + suffix).c_str(), &st), 0) << suffix;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << cfg_.path << suffix;
  }
  spool.reset();
  ASSERT_EQ(::chmod(cfg_.path.c_str(), 0640), 0);  // its owner's choice, say for a group's tools
  ASSERT_TRUE(open());
  struct stat st {};
  ASSERT_EQ(::stat(cfg_.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // spool.path a symlink to a file not made yet (a data volume's fixed name): the target is new.
  const fs::path target = dir_ / "volume" / "spool.db";
  fs::create_directories(target.parent_path());
  const fs::path link = dir_ / "linked.db";
  fs::create_symlink(target, link);
  config::SpoolConfig via_link = cfg_;
  via_link.path = link.string();
  const mode_t umask_before = ::umask(022);
  auto linked = SqliteSpool::open(via_link, SqliteSpoolTuning{}, false);
  ::umask(umask_before);
  ASSERT_TRUE(linked);
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Found in review: nothing stopped two gateways from running on one spool, each claiming and
// sending the same pending deliveries. The gateway holds spool.path's .lock; the CLI takes none.
TEST_F(SqliteSpoolTest, OneGatewayAtATimeOwnsTheSpool) {
  auto first = open();
  ASSERT_TRUE(first);
  auto second = SqliteSpool::open(cfg_, SqliteSpoolTuning{}, false);
  ASSERT_FALSE(second);
  EXPECT_NE(
      second.error().message.find("another gateway uses this spool (process " +
                                  std::to_string(::getpid()) + " holds " + cfg_.path + ".lock)"),
      std::string::npos)
      << second.error().message;
  EXPECT_TRUE(open(/*tools=*/true));  // `hookgate deliveries` works beside a running gateway
  // Another path to the same file (a symlink) is the same spool: SQLite follows it.
  const fs::path link = dir_ / "link.db";
  fs::create_symlink(cfg_.path, link);
  config::SpoolConfig via_link = cfg_;
  via_link.path = link.string();
  EXPECT_FALSE(SqliteSpool::open(via_link, SqliteSpoolTuning{}, false));
  first.reset();
  EXPECT_TRUE(open());  // and the next gateway starts once the first is gone
}

TEST_F(SqliteSpoolTest, ClaimedDeliveriesAreNotHandedOutTwice) {
  auto spool = open();
  ASSERT_TRUE(spool);
  std::vector<Delivery> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(make(seq_id(i), "siem"));
  ASSERT_TRUE(spool->add(batch));
  const int64_t now = now_unix_ms();
  auto first = spool->claim_due("siem", now, 3);
  auto second = spool->claim_due("siem", now, 3);
  EXPECT_EQ(ids_of(first), (std::vector<std::string>{seq_id(0), seq_id(1), seq_id(2)}));
  EXPECT_EQ(ids_of(second), (std::vector<std::string>{seq_id(3), seq_id(4)}));
  EXPECT_TRUE(spool->claim_due("siem", now, 3).empty());
  EXPECT_FALSE(spool->next_due("siem"));
  EXPECT_EQ(spool->pending_count(), 5u);  // in flight still counts as pending

  spool->release(first[1]);
  EXPECT_EQ(ids_of(spool->claim_due("siem", now, 3)), (std::vector<std::string>{seq_id(1)}));
}

TEST_F(SqliteSpoolTest, RetryBecomesDueLater) {
  std::atomic<int> ready{0};  // outlives the spool: the writer may call back until close()
  auto spool = open();
  ASSERT_TRUE(spool);
  spool->set_on_ready([&] { ready++; });
  ASSERT_TRUE(spool->add({make("r1", "siem")}));
  const int64_t now = now_unix_ms();
  auto claimed = spool->claim_due("siem", now, 1);
  ASSERT_EQ(claimed.size(), 1u);
  const int before = ready.load();
  spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, now + 60000, "HTTP 503"});
  ASSERT_TRUE(spool->flush());
  EXPECT_GT(ready.load(), before);  // the dispatcher re-reads next_due after the retry commits
  EXPECT_TRUE(spool->claim_due("siem", now, 1).empty());
  EXPECT_EQ(spool->next_due("siem"), now + 60000);
  auto again = spool->claim_due("siem", now + 60000, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, "r1");
  EXPECT_EQ(again[0].attempts, 1);
  EXPECT_EQ(again[0].last_error, "HTTP 503");
  EXPECT_EQ(spool->get("r1")->next_attempt_ms, now + 60000);
}

TEST_F(SqliteSpoolTest, DeadLettersAreListedAndReplayed) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("d1", "siem"), make("d2", "siem")}));
  const int64_t now = now_unix_ms();
  for (auto& d : spool->claim_due("siem", now, 10))
    spool->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 404"});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
  auto dead = spool->list(DeliveryState::Dead, "", 0);
  ASSERT_EQ(ids_of(dead), (std::vector<std::string>{"d1", "d2"}));
  EXPECT_EQ(dead[0].last_error, "HTTP 404");
  EXPECT_EQ(dead[0].attempts, 1);

  EXPECT_EQ(spool->replay({"d1", "missing"}).value(), 1u);
  EXPECT_EQ(spool->replay({"d1"}).value(), 0u);  // no longer dead
  EXPECT_EQ(spool->pending_count(), 1u);
  auto back = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(back), (std::vector<std::string>{"d1"}));
  EXPECT_EQ(back[0].attempts, 0);
  EXPECT_EQ(spool->replay_all_dead().value(), 1u);
  EXPECT_EQ(ids_of(spool->claim_due("siem", now_unix_ms(), 10)), (std::vector<std::string>{"d2"}));
}

TEST_F(SqliteSpoolTest, IdsAndBodiesSurviveReopenAndClaimsResume) {
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    ASSERT_TRUE(spool->add({make("k1", "siem", "one"), make("k2", "siem", std::string(5000, 'x')),
                            make("k3", "siem", "three")}));
    auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
    ASSERT_EQ(claimed.size(), 3u);
    spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
    spool->complete(claimed[2], {AttemptOutcome::Kind::Retry, 1, "timeout"});
    // k2 stays claimed: the process "dies" with it in flight.
  }
  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(spool->pending_count(), 2u);
  auto resumed = spool->claim_due("siem", now_unix_ms(), 10);
  // Due order: k3's retry time (1) is earlier than k2's creation time.
  ASSERT_EQ(ids_of(resumed), (std::vector<std::string>{"k3", "k2"}));
  EXPECT_EQ(*resumed[1].body, std::string(5000, 'x'));
  EXPECT_EQ(resumed[0].attempts, 1);
  EXPECT_EQ(*resumed[0].body, "three");
  EXPECT_EQ(spool->get("k1")->state, DeliveryState::Delivered);
}

TEST_F(SqliteSpoolTest, CliInstanceListsAndReplaysWhileGatewayRuns) {
  std::mutex mu;
  std::condition_variable cv;
  int wakeups = 0;
  auto gateway = open();
  ASSERT_TRUE(gateway);
  gateway->set_on_ready([&] {
    std::lock_guard lock(mu);
    ++wakeups;
    cv.notify_all();
  });
  ASSERT_TRUE(gateway->add({make("x1", "siem"), make("x2", "siem")}));
  for (auto& d : gateway->claim_due("siem", now_unix_ms(), 10)) {
    if (d.id == "x1") gateway->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 410"});
  }
  ASSERT_TRUE(gateway->flush());

  auto cli = open(/*tools=*/true);
  ASSERT_TRUE(cli);
  EXPECT_EQ(ids_of(cli->list(DeliveryState::Dead, "", 0)), (std::vector<std::string>{"x1"}));
  EXPECT_EQ(cli->pending_count(), 1u);  // x2, in flight in the gateway
  EXPECT_FALSE(cli->add({make("x9", "siem")}));
  EXPECT_TRUE(cli->claim_due("siem", now_unix_ms(), 10).empty());
  int seen;
  {
    std::lock_guard lock(mu);
    seen = wakeups;
  }
  EXPECT_EQ(cli->replay({"x1"}).value(), 1u);

  {  // The gateway notices the other process's commit and wakes its dispatcher.
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return wakeups > seen; }));
  }
  auto replayed = gateway->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(replayed), (std::vector<std::string>{"x1"}));
  EXPECT_EQ(replayed[0].attempts, 0);
  EXPECT_EQ(gateway->pending_count(), 2u);
  EXPECT_EQ(cli->get("x1")->state, DeliveryState::Pending);
}

TEST_F(SqliteSpoolTest, CliRefusesMissingOrForeignFiles) {
  auto missing = SqliteSpool::open(cfg_, /*read_only_tools=*/true);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no such spool file"), std::string::npos);
  EXPECT_FALSE(fs::exists(cfg_.path));  // the CLI never creates a spool

  std::ofstream(cfg_.path) << "this is not a database, just some text that is long enough......";
  auto garbage = SqliteSpool::open(cfg_);
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("not a database"), std::string::npos)
      << garbage.error().message;

  config::SpoolConfig bad = cfg_;
  bad.path = (dir_ / "other.db").string();
  bad.synchronous = "SOMETIMES";
  EXPECT_FALSE(SqliteSpool::open(bad));
  bad.path = (dir_ / "no-such-dir" / "spool.db").string();
  bad.synchronous = "FULL";
  EXPECT_FALSE(SqliteSpool::open(bad));
}

TEST_F(SqliteSpoolTest, RejectsBadBatchesWhole) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("u1", "siem")}));
  auto dup = spool->add({make("u2", "siem"), make("u1", "siem")});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("duplicate delivery id u1"), std::string::npos);
  EXPECT_FALSE(spool->get("u2"));  // all or nothing
  EXPECT_FALSE(spool->add({make("", "siem")}));
  EXPECT_EQ(spool->pending_count(), 1u);
  EXPECT_EQ(ids_of(spool->claim_due("siem", now_unix_ms(), 10)), (std::vector<std::string>{"u1"}));
  spool->close();
  EXPECT_FALSE(spool->add({make("u3", "siem")}));
  EXPECT_TRUE(spool->claim_due("siem", now_unix_ms(), 10).empty());
}

// (10 s retentions: the writer's own prunes, a tenth of that apart, must not take "old" first.)
TEST_F(SqliteSpoolTest, PruneRemovesOnlyOldDeliveredRows) {
  cfg_.retention_ms = 10000;
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("old", "siem"), make("dead", "siem")}));
  for (auto& d : spool->claim_due("siem", now_unix_ms(), 10)) {
    spool->complete(d, d.id == "old" ? AttemptOutcome{AttemptOutcome::Kind::Delivered}
                                     : AttemptOutcome{AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
  }
  ASSERT_TRUE(spool->flush());
  // "new" is delivered at or after `new_from`, past "old"'s time: a prune at new_from + 10000
  // finds "old" older than the retention and "new" not (no sleep for the time to pass).
  const int64_t old_done = now_unix_ms();
  ASSERT_TRUE(
      testing::wait_until([&] { return now_unix_ms() > old_done; }, std::chrono::seconds(1)));
  const int64_t new_from = now_unix_ms();
  ASSERT_TRUE(spool->add({make("new", "siem"), make("waiting", "siem")}));
  for (auto& d : spool->claim_due("siem", now_unix_ms(), 1))
    spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());

  EXPECT_EQ(spool->prune(new_from + 10000), 1u);
  EXPECT_FALSE(spool->get("old"));
  EXPECT_EQ(spool->get("new")->state, DeliveryState::Delivered);
  EXPECT_EQ(spool->get("dead")->state, DeliveryState::Dead);
  EXPECT_EQ(spool->get("waiting")->state, DeliveryState::Pending);
}

// Found in an operator's pass: the writer pruned once a minute whatever the retention, so a 10 s
// retention_ms kept about 70 s of history. It prunes every tenth of the retention now, from 1 s.
TEST_F(SqliteSpoolTest, TheWriterPrunesAShortRetentionSoonAfterItIsUp) {
  cfg_.retention_ms = 1000;
  SqliteSpoolTuning tuning;
  tuning.poll_interval_ms = 20;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("done", "siem")}));
  const int64_t before_delivered = now_unix_ms();  // its row's time is this or later
  for (auto& d : spool->claim_due("siem", now_unix_ms(), 10))
    spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  ASSERT_TRUE(spool->get("done"));
  ASSERT_TRUE(testing::wait_until([&] { return !spool->get("done"); }, std::chrono::seconds(10)));
  EXPECT_GE(now_unix_ms() - before_delivered, 1000) << "not before its retention is up";
}

// Reads one integer from the spool file through a connection of its own.
int64_t count_in(const std::string& path, const std::string& sql);

int64_t SqliteSpoolTest::used_bytes() const {
  return count_in(cfg_.path,
                  "SELECT ((SELECT page_count FROM pragma_page_count) - (SELECT freelist_count "
                  "FROM pragma_freelist_count)) * (SELECT page_size FROM pragma_page_size)");
}

int64_t count_in(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return n;
}

// spool.retention_max_bytes: while the rows take more than that, delivered rows go before their
// retention is up, oldest first; pending deliveries and dead letters never do, and when only they
// are left the spool says so (once) instead of pruning on.
TEST_F(SqliteSpoolTest, ASizeCapPrunesDeliveredRowsEarlyAndNothingElse) {
  cfg_.retention_max_bytes = 1 << 20;
  SqliteSpoolTuning tuning;
  tuning.poll_interval_ms = 20;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  constexpr int kEvents = 3000;  // about 3.3 MB of rows
  int added = 0;
  ASSERT_TRUE(add_padded(*spool, &added, kEvents));
  int done = 0;
  while (done < kEvents) {
    auto claimed = spool->claim_due("siem", now_unix_ms() + 1000, 500);
    ASSERT_FALSE(claimed.empty());
    for (const auto& d : claimed) {
      const int i = std::stoi(d.id.substr(4));
      if (i < kEvents - 10)
        spool->complete(d, {AttemptOutcome::Kind::Delivered});
      else if (i < kEvents - 5)
        spool->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
      else
        spool->release(d);
      ++done;
    }
    ASSERT_TRUE(spool->flush());
  }
  ASSERT_TRUE(testing::wait_until([&] { return used_bytes() <= cfg_.retention_max_bytes; },
                                  std::chrono::seconds(20)))
      << used_bytes();
  const int64_t delivered = count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries WHERE state = 1");
  EXPECT_GT(delivered, 0);  // under the cap once enough went: the newest stay
  EXPECT_LT(delivered, kEvents - 10);
  EXPECT_FALSE(spool->get(seq_id(0)));  // oldest first
  EXPECT_TRUE(spool->get(seq_id(kEvents - 11)));
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries WHERE state = 2"), 5);
  EXPECT_EQ(spool->pending_count(), 5u);
}

TEST_F(SqliteSpoolTest, ASizeCapThatOnlyPendingAndDeadRowsExceedIsSaidOnce) {
  cfg_.retention_max_bytes = 4096;  // less than the schema's own pages
  SqliteSpoolTuning tuning;
  tuning.poll_interval_ms = 20;
  testing::LogCapture log;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("done", "siem"), make("dead", "siem"), make("waiting", "siem")}));
  for (auto& d : spool->claim_due("siem", now_unix_ms(), 2))
    spool->complete(d, d.id == "done" ? AttemptOutcome{AttemptOutcome::Kind::Delivered}
                                      : AttemptOutcome{AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
  ASSERT_TRUE(spool->flush());
  ASSERT_TRUE(testing::wait_until([&] { return !spool->get("done"); }, std::chrono::seconds(10)));
  ASSERT_TRUE(
      testing::wait_until([&] { return log.contains("with no delivered rows left to prune"); },
                          std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a second look
  EXPECT_EQ(log.lines_containing("with no delivered rows left to prune").size(), 1u);
  EXPECT_EQ(spool->get("dead")->state, DeliveryState::Dead);
  EXPECT_EQ(spool->get("waiting")->state, DeliveryState::Pending);
}

// spool.max_bytes: full once the rows reach the bound (measured after each commit of adds), with
// the gauge and one log line; pending deliveries are never dropped for it, so while only they are
// left the spool stays full. Delivered rows then go early, and it is not full again until below
// 90 % of the bound; a reload lifting the bound ends it too.
TEST_F(SqliteSpoolTest, AtMaxBytesTheSpoolIsFullUntilDeliveriesFreeSpace) {
  testing::LogCapture log;
  auto spool = open_bounded(1 << 20);
  ASSERT_TRUE(spool);
  auto full_gauge = [] {
    return testing::metric_value(metrics::Registry::global().render_prometheus(),
                                 "hookgate_spool_full");
  };
  int added = 0;
  auto fill = [&] {
    while (!spool->full() && added < 10000)  // 50 × 1 KB a batch; add() waits for its commit
      ASSERT_TRUE(add_padded(*spool, &added, 50));
  };
  ASSERT_NO_FATAL_FAILURE(fill());
  ASSERT_TRUE(spool->full()) << used_bytes();
  EXPECT_GE(used_bytes(), cfg_.max_bytes);
  EXPECT_LT(used_bytes(), cfg_.max_bytes + 128 * 1024);  // stopped within a batch of the bound
  EXPECT_EQ(full_gauge(), 1u);
  EXPECT_EQ(log.lines_containing("spool.max_bytes is 1048576: intake waits").size(), 1u);

  // Nothing delivered to prune: full it stays, and says why once.
  ASSERT_TRUE(testing::wait_until(
      [&] { return log.contains("at spool.max_bytes (1048576 bytes) with no delivered rows"); },
      std::chrono::seconds(10)));
  EXPECT_TRUE(spool->full());
  EXPECT_EQ(spool->pending_count(), static_cast<size_t>(added));

  // All delivered: their rows go before retention_ms (24 h) is up, and intake may go on.
  for (;;) {
    auto claimed = spool->claim_due("siem", now_unix_ms() + 1000, 500);
    if (claimed.empty()) break;
    for (const auto& d : claimed) spool->complete(d, {AttemptOutcome::Kind::Delivered});
    ASSERT_TRUE(spool->flush());
  }
  ASSERT_TRUE(testing::wait_until([&] { return !spool->full(); }, std::chrono::seconds(20)))
      << used_bytes();
  EXPECT_LT(used_bytes(), cfg_.max_bytes / 10 * 9);
  EXPECT_TRUE(testing::wait_until(  // logged just after the flag and the gauge turn
      [&] { return log.contains("(90 % of spool.max_bytes): intake goes on"); },
      std::chrono::seconds(5)));
  EXPECT_EQ(full_gauge(), 0u);
  EXPECT_EQ(spool->pending_count(), 0u);
  EXPECT_LT(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries WHERE state = 1"), added);

  // Full again (after the early prune took the delivered rows still there, which could make it
  // not full at once), then a reload lifts the bound.
  const int delivered = added;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        fill();
        return spool->full() &&
               count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries WHERE state = 1") == 0;
      },
      std::chrono::seconds(20)));
  ASSERT_TRUE(spool->full());
  spool->set_max_bytes(0);
  ASSERT_TRUE(testing::wait_until([&] { return !spool->full(); }, std::chrono::seconds(10)));
  EXPECT_TRUE(testing::wait_until([&] { return log.contains("spool.max_bytes is off now"); },
                                  std::chrono::seconds(5)));
  EXPECT_EQ(spool->pending_count(), static_cast<size_t>(added - delivered));
}

// From 85 % of spool.max_bytes the history gives way: a steady flow whose delivered rows alone
// would take several times the bound (retention_ms is 24 h) never makes the spool full.
TEST_F(SqliteSpoolTest, HistoryAloneNeverMakesTheSpoolFull) {
  testing::LogCapture log;
  auto spool = open_bounded(1 << 20);
  ASSERT_TRUE(spool);
  constexpr int kEvents = 4000;  // about 4.6 MB of rows if none went
  for (int added = 0; added < kEvents;) {
    ASSERT_TRUE(add_padded(*spool, &added, 50));
    ASSERT_FALSE(spool->full()) << added;
    for (const auto& d : spool->claim_due("siem", now_unix_ms() + 1000, 50))
      spool->complete(d, {AttemptOutcome::Kind::Delivered});
    ASSERT_TRUE(spool->flush());
  }
  EXPECT_FALSE(log.contains("intake waits"));
  EXPECT_LT(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries WHERE state = 1"), kEvents / 2);
  EXPECT_EQ(spool->pending_count(), 0u);
}

// hookgate_webhook_pending and /status read per-webhook counts every second: the spool answers
// from a count its checkpointer thread takes from the file, off the writer and the claims.
TEST_F(SqliteSpoolTest, PendingPerWebhookSnapshotFollowsTheFile) {
  SqliteSpoolTuning tuning;
  tuning.pending_snapshot_interval_ms = 20;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  using Counts = std::map<std::string, size_t>;
  auto snapshot_is = [&](const Counts& want) {
    return testing::wait_until([&] { return spool->pending_by_webhook_snapshot() == want; },
                               std::chrono::seconds(10));
  };
  ASSERT_TRUE(spool->add(
      {make("a1", "siem"), make("a2", "siem"), make("a3", "siem"), make("b1", "audit")}));
  EXPECT_TRUE(snapshot_is({{"siem", 3}, {"audit", 1}}));
  // In flight still counts; delivered, dead and retried-later as their state says.
  auto claimed = spool->claim_due("siem", now_unix_ms(), 3);
  ASSERT_EQ(claimed.size(), 3u);
  ASSERT_TRUE(spool->add({make("b2", "audit")}));
  EXPECT_TRUE(snapshot_is({{"siem", 3}, {"audit", 2}}));
  spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
  spool->complete(claimed[1], {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
  spool->complete(claimed[2], {AttemptOutcome::Kind::Retry, now_unix_ms() + 60000, "HTTP 503"});
  ASSERT_TRUE(spool->flush());
  EXPECT_TRUE(snapshot_is({{"siem", 1}, {"audit", 2}}));
  for (auto& d : spool->claim_due("audit", now_unix_ms(), 2))
    spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_TRUE(snapshot_is({{"siem", 1}})) << spool->pending_by_webhook_snapshot().size();
}

// spool.dead_retention_ms: off (0) keeps every dead letter; on, the prune takes old ones only,
// and a payload stays while one of its deliveries does.
TEST_F(SqliteSpoolTest, DeadRetentionPrunesOnlyOldDeadLetters) {
  cfg_.retention_ms = 3600 * 1000;
  for (int64_t dead_retention_ms : {int64_t{0}, int64_t{10000}}) {
    SCOPED_TRACE(dead_retention_ms);
    cfg_.dead_retention_ms = dead_retention_ms;
    cfg_.path = (dir_ / ("dead-" + std::to_string(dead_retention_ms) + ".db")).string();
    auto spool = open();
    ASSERT_TRUE(spool);
    // "old" and "sibling" share a payload (one batch, one body): "sibling" stays pending.
    auto old = make("old", "siem", "shared body");
    ASSERT_TRUE(spool->add({old, sibling_of(old, "sibling", "siem-2")}));
    for (auto& d : spool->claim_due("siem", now_unix_ms(), 10))
      spool->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
    ASSERT_TRUE(spool->flush());
    // "young" dies at or after `young_from`, past "old"'s time; a prune at young_from + 10000
    // then finds "old" 10 s old and "young" not yet (no sleep for the time to pass).
    const int64_t old_done = now_unix_ms();
    ASSERT_TRUE(
        testing::wait_until([&] { return now_unix_ms() > old_done; }, std::chrono::seconds(1)));
    const int64_t young_from = now_unix_ms();
    ASSERT_TRUE(spool->add({make("young", "siem")}));
    for (auto& d : spool->claim_due("siem", now_unix_ms(), 10))
      spool->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
    ASSERT_TRUE(spool->flush());

    EXPECT_EQ(spool->prune(young_from + 10000), dead_retention_ms > 0 ? 1u : 0u);
    EXPECT_EQ(spool->get("old").has_value(), dead_retention_ms == 0);
    EXPECT_EQ(spool->get("young")->state, DeliveryState::Dead);
    auto kept = spool->get("sibling");
    ASSERT_TRUE(kept);
    ASSERT_TRUE(kept->body);
    EXPECT_EQ(*kept->body, "shared body");
  }
}

// `hookgate deliveries purge`: dead letters only, by id or all of a webhook's, while the gateway
// runs; a payload goes with its last delivery.
TEST_F(SqliteSpoolTest, CliPurgeDeletesDeadLettersOnly) {
  auto gateway = open();
  ASSERT_TRUE(gateway);
  ASSERT_TRUE(gateway->add(
      {make("p1", "siem"), make("p2", "siem"), make("p3", "audit"), make("p4", "siem")}));
  for (auto* webhook : {"siem", "audit"})
    for (auto& d : gateway->claim_due(webhook, now_unix_ms(), 10))
      if (d.id != "p4") gateway->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
  ASSERT_TRUE(gateway->flush());
  EXPECT_FALSE(gateway->purge_dead({"p1"}, false));  // the gateway itself prunes; only the CLI

  auto cli = open(/*tools=*/true);
  ASSERT_TRUE(cli);
  // p4 is pending (in flight in the gateway): an accepted event is never purged.
  EXPECT_EQ(cli->purge_dead({"p1", "p4", "nope"}, false).value(), 1u);
  EXPECT_FALSE(cli->get("p1"));
  EXPECT_EQ(cli->get("p4")->state, DeliveryState::Pending);
  EXPECT_EQ(cli->purge_dead({}, true, "audit").value(), 1u);
  EXPECT_EQ(ids_of(cli->list(DeliveryState::Dead, "", 0)), (std::vector<std::string>{"p2"}));
  EXPECT_EQ(cli->purge_dead({}, true).value(), 1u);
  EXPECT_TRUE(cli->list(DeliveryState::Dead, "", 0).empty());
  // Every purged delivery had a payload of its own: all gone, p4's kept.
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 1);
}

// Found in review: purge was tested with one transaction and payloads of their own only.
TEST_F(SqliteSpoolTest, CliPurgeOfManyChunksKeepsAPayloadWhileADeliveryUsesIt) {
  auto gateway = open();
  ASSERT_TRUE(gateway);
  // s1 and s2: one event to two webhooks, sharing its payload.
  auto shared = make("s1", "siem", "shared body");
  std::vector<Delivery> batch = {shared, sibling_of(shared, "s2", "audit")};
  for (int i = 0; i < 5; ++i) batch.push_back(make("d" + std::to_string(i), "siem"));
  ASSERT_TRUE(gateway->add(batch));
  for (auto* webhook : {"siem", "audit"})
    for (auto& d : gateway->claim_due(webhook, now_unix_ms(), 10))
      gateway->complete(d, {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
  ASSERT_TRUE(gateway->flush());

  SqliteSpoolTuning small_chunks;
  small_chunks.replay_chunk_rows = 2;
  auto cli = open(/*tools=*/true, small_chunks);
  ASSERT_TRUE(cli);
  EXPECT_EQ(cli->purge_dead({"s1"}, false).value(), 1u);
  ASSERT_TRUE(cli->get("s2"));
  ASSERT_TRUE(cli->get("s2")->body);
  EXPECT_EQ(*cli->get("s2")->body, "shared body");
  // Six dead letters left, two per transaction: the loop goes on past a full chunk.
  EXPECT_EQ(cli->purge_dead({}, true).value(), 6u);
  EXPECT_TRUE(cli->list(std::nullopt, "", 0).empty());
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 0);
}

TEST_F(SqliteSpoolTest, OneEventsBodyIsStoredOnceAndGoesWithItsLastDelivery) {
  cfg_.retention_ms = 0;
  auto spool = open();
  ASSERT_TRUE(spool);
  // One event fanned out to three webhooks with one body, a fourth with its own (body: data),
  // then an unrelated event.
  auto shared = std::make_shared<const std::string>("{\"shared\":true}");
  std::vector<Delivery> batch;
  for (const char* w : {"a", "b", "c"}) {
    Delivery d = make(std::string("e1-") + w, w);
    d.event_id = "e1";
    d.body = shared;
    batch.push_back(d);
  }
  Delivery data = make("e1-d", "d", "{\"data\":1}");
  data.event_id = "e1";
  batch.push_back(data);
  batch.push_back(make("e2-a", "a"));
  ASSERT_TRUE(spool->add(batch));
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 3);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries"), 5);

  // Delivering two of the three sharing deliveries leaves their payload in place.
  const int64_t now = now_unix_ms();
  for (const char* w : {"a", "b"})
    for (auto& d : spool->claim_due(w, now, 10))
      spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  // (The writer prunes on its own as well: count what is left rather than what prune() says.)
  spool->prune(now_unix_ms() + 1);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries"), 2);  // e1-c, e1-d
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 2);

  // The survivor still reads its body from the file, after a restart too.
  spool.reset();
  spool = open();
  ASSERT_TRUE(spool);
  auto c = spool->get("e1-c");
  ASSERT_TRUE(c);
  EXPECT_EQ(*c->body, "{\"shared\":true}");
  EXPECT_EQ(c->event_id, "e1");
  auto claimed = spool->claim_due("c", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"e1-c"}));
  EXPECT_EQ(*claimed[0].body, "{\"shared\":true}");
  spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
  for (auto& d : spool->claim_due("d", now_unix_ms(), 10))
    spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  spool->prune(now_unix_ms() + 1);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 0);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries"), 0);

  // The spool goes on working with both tables empty.
  ASSERT_TRUE(spool->add({make("later", "a")}));
  EXPECT_EQ(ids_of(spool->claim_due("a", now_unix_ms(), 10)), (std::vector<std::string>{"later"}));
}

TEST_F(SqliteSpoolTest, RowidsStayFreshWhenOnlyAPayloadRemainsAtTheEnd) {
  cfg_.retention_ms = 0;
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    auto shared = std::make_shared<const std::string>("{\"shared\":true}");
    Delivery first = make("x-1", "one");
    Delivery last = make("x-2", "two");
    first.event_id = last.event_id = "x";
    first.body = last.body = shared;
    ASSERT_TRUE(spool->add({first, last}));
    // The last delivery is delivered and pruned while the first still waits, so the payload
    // (rowid 1, span 2) outlives the delivery with the highest rowid.
    for (auto& d : spool->claim_due("two", now_unix_ms(), 10))
      spool->complete(d, {AttemptOutcome::Kind::Delivered});
    ASSERT_TRUE(spool->flush());
    spool->prune(now_unix_ms() + 1);
    EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries"), 1);
    EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 1);
  }
  // Reopened: MAX(deliveries.rowid) is now the first delivery's, but the payload still spans
  // the next rowid; a new delivery must not take it (it would be mistaken for the payload's).
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("y", "two")}));
  EXPECT_EQ(count_in(cfg_.path, "SELECT MIN(rowid) FROM deliveries WHERE id = 'y'"), 3);
  for (auto& d : spool->claim_due("one", now_unix_ms(), 10))
    spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  spool->prune(now_unix_ms() + 1);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM deliveries"), 1);
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 1);  // y's own
  auto y = spool->claim_due("two", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(y), (std::vector<std::string>{"y"}));
  EXPECT_EQ(*y[0].body, "{\"id\":\"y\"}");
}

// Runs SQL on the spool file through a connection of its own (waiting for the spool's writer if
// it is open).
void exec_on(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// Installs a fault (a trigger) from another connection, then puts the spool's writer behind that
// commit (it rereads the file after another process wrote), so what follows meets the fault.
void inject_fault(SqliteSpool& spool, const std::string& path, const char* trigger) {
  exec_on(path, trigger);
  ASSERT_TRUE(spool.flush());
  ASSERT_TRUE(spool.flush());
}

// VACUUM (and .dump) may renumber implicit rowids; deliveries must keep their own bodies.
TEST_F(SqliteSpoolTest, BodiesStayWithTheirDeliveriesThroughVacuum) {
  cfg_.retention_ms = 0;
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    ASSERT_TRUE(spool->add({make("gone", "w", "body-gone")}));
    ASSERT_TRUE(spool->add({make("second", "w", "body-second"), make("third", "w", "body-third")}));
    auto first = spool->claim_due("w", now_unix_ms(), 1);
    ASSERT_EQ(ids_of(first), (std::vector<std::string>{"gone"}));
    spool->complete(first[0], {AttemptOutcome::Kind::Delivered});
    ASSERT_TRUE(spool->flush());
    spool->prune(now_unix_ms() + 1);  // a gap where the first payload was
    EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 2);
  }
  exec_on(cfg_.path, "VACUUM");
  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(*spool->get("second")->body, "body-second");
  EXPECT_EQ(*spool->get("third")->body, "body-third");
  auto claimed = spool->claim_due("w", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"second", "third"}));
  EXPECT_EQ(*claimed[0].body, "body-second");
  EXPECT_EQ(*claimed[1].body, "body-third");
}

// A payload row removed behind the spool's back: the delivery is still handed out (so the
// dispatcher can dead-letter it), with no body rather than an empty one.
TEST_F(SqliteSpoolTest, ADeliveryWhosePayloadIsGoneComesOutWithoutABody) {
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    ASSERT_TRUE(spool->add({make("orphan", "w"), make("fine", "w")}));
  }
  exec_on(cfg_.path,
          "DELETE FROM payloads WHERE id = (SELECT payload FROM deliveries "
          "WHERE id = 'orphan')");
  auto spool = open();
  ASSERT_TRUE(spool);
  auto claimed = spool->claim_due("w", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"orphan", "fine"}));
  EXPECT_EQ(claimed[0].body, nullptr);
  ASSERT_NE(claimed[1].body, nullptr);
  EXPECT_EQ(*claimed[1].body, "{\"id\":\"fine\"}");
}

// A version-1 file, as hookgate before schema 2 wrote it.
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE deliveries(
  id TEXT PRIMARY KEY NOT NULL, webhook TEXT NOT NULL, event_id TEXT NOT NULL,
  event_type TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, state INTEGER NOT NULL,
  last_error TEXT NOT NULL, body BLOB NOT NULL);
CREATE INDEX deliveries_claim ON deliveries(state, webhook, next_attempt_ms);
CREATE INDEX deliveries_prune ON deliveries(updated_ms) WHERE state = 1;
INSERT INTO deliveries VALUES('v1-pending', 'siem', 'ev-1', 'auth.failure', 2, 1000, 900, 950, 0,
                              'HTTP 503', '{"n":1}');
INSERT INTO deliveries VALUES('v1-dead', 'siem', 'ev-2', 'auth.failure', 5, 1000, 900, 950, 2,
                              'HTTP 400', '{"n":2}');
INSERT INTO deliveries VALUES('v1-done', 'audit', 'ev-3', 'user.created', 1, 1000, 900, 950, 1,
                              '', '{"n":3}');
PRAGMA user_version = 1;
)sql";

TEST_F(SqliteSpoolTest, UpgradesAVersionOneFileAndKeepsEveryDelivery) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(cfg_.path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, kVersion1Schema, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  // The CLI does not upgrade (an older gateway may still be using the file) and says what to do.
  auto cli = SqliteSpool::open(cfg_, /*read_only_tools=*/true);
  ASSERT_FALSE(cli);
  EXPECT_NE(cli.error().message.find("schema version 1"), std::string::npos) << cli.error().message;

  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(count_in(cfg_.path, "PRAGMA user_version"), 2);
  EXPECT_EQ(spool->pending_count(), 1u);
  auto pending = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(pending), (std::vector<std::string>{"v1-pending"}));
  EXPECT_EQ(*pending[0].body, "{\"n\":1}");
  EXPECT_EQ(pending[0].attempts, 2);
  EXPECT_EQ(pending[0].created_ms, 900);
  EXPECT_EQ(pending[0].event_id, "ev-1");
  auto dead = spool->list(DeliveryState::Dead, "", 0);
  ASSERT_EQ(ids_of(dead), (std::vector<std::string>{"v1-dead"}));
  EXPECT_EQ(dead[0].last_error, "HTTP 400");
  EXPECT_FALSE(dead[0].body);  // list() reads no bodies; get() does
  EXPECT_EQ(*spool->get("v1-dead")->body, "{\"n\":2}");
  EXPECT_EQ(spool->get("v1-done")->state, DeliveryState::Delivered);

  // New deliveries take rowids past the old ones, and old rows prune with their payloads.
  ASSERT_TRUE(spool->add({make("v2-new", "siem")}));
  spool->complete(pending[0], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->get("v1-pending")->state, DeliveryState::Delivered);
  spool->prune(now_unix_ms() + cfg_.retention_ms + 1);  // (v1-done may be gone already)
  EXPECT_FALSE(spool->get("v1-done"));
  EXPECT_FALSE(spool->get("v1-pending"));
  EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM payloads"), 2);  // v1-dead's, v2-new's
  EXPECT_EQ(spool->replay({"v1-dead"}).value(), 1u);
  ASSERT_TRUE(spool->flush());
  // Due order: v2-new was due when it was added, v1-dead when it was replayed.
  EXPECT_EQ(ids_of(spool->claim_due("siem", now_unix_ms(), 10)),
            (std::vector<std::string>{"v2-new", "v1-dead"}));

  // Opening again does not upgrade twice.
  spool.reset();
  spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(spool->pending_count(), 2u);
}

TEST_F(SqliteSpoolTest, BoundedCachePagesFiftyThousandInOrder) {
  auto spool = open();
  ASSERT_TRUE(spool);
  constexpr int kTotal = 50000;
  for (int i = 0; i < kTotal; i += 1000) {
    std::vector<Delivery> batch;
    for (int j = i; j < i + 1000; ++j) batch.push_back(make(seq_id(j), "backlog"));
    ASSERT_TRUE(spool->add(std::move(batch)));
    ASSERT_LE(spool->stats().cached, 5000u);
  }
  // A healthy webhook added after the backlog keeps its hot path in memory.
  ASSERT_TRUE(spool->add({make("h1", "healthy")}));
  EXPECT_GE(spool->stats().cached, 1u);
  EXPECT_EQ(spool->pending_count(), kTotal + 1u);
  EXPECT_EQ(ids_of(spool->claim_due("healthy", now_unix_ms(), 10)),
            (std::vector<std::string>{"h1"}));

  int next = 0;
  std::set<std::string> seen;
  std::vector<Delivery> held;  // keep one page in flight to exercise the exclusion of claims
  while (true) {
    auto page = spool->claim_due("backlog", now_unix_ms(), 700);
    if (page.empty()) {
      // Outcomes waiting for their commit are capped (8,192): on a loaded machine the writer
      // may not have recorded the completions yet. Once it has, an empty page means the end.
      ASSERT_TRUE(spool->flush());
      page = spool->claim_due("backlog", now_unix_ms(), 700);
      if (page.empty()) break;
    }
    for (auto& d : page) {
      ASSERT_EQ(d.id, seq_id(next)) << "out of order or duplicated";
      ASSERT_TRUE(seen.insert(d.id).second);
      ++next;
    }
    for (auto& d : held) spool->complete(d, {AttemptOutcome::Kind::Delivered});
    held = std::move(page);
    ASSERT_LE(spool->stats().cached, 5000u);
  }
  EXPECT_EQ(next, kTotal);
  for (auto& d : held) spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 1u);  // h1, in flight
  EXPECT_FALSE(spool->next_due("backlog"));
}

// Found at scale: with more failing webhooks' retries than the memory cap holds, a lane evicted
// to the file came back as soon as its due rows were claimed, which pushed the next one out: 1,400
// moves a second with 700 failing webhooks, each reading its rows back. Eviction now goes down to
// 3/4 of the cap and a backlog comes back only if all of it fits below that, so the lanes settle.
TEST_F(SqliteSpoolTest, FailingWebhooksRetriesDoNotMoveBetweenMemoryAndTheFile) {
  SqliteSpoolTuning tuning;
  tuning.max_cached_deliveries = 40;  // against 10 webhooks' 8 pending retries each
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  const FailingRun run = run_failing_webhooks(*spool, tuning, 10, 8, "", 80);
  // Every retry came due every 80 ms (16 steps) and was claimed.
  EXPECT_GE(run.attempts, static_cast<size_t>(10 * 8 * (kFailingSteps / 16 - 1)));
  expect_settled(*spool, run);
  EXPECT_EQ(spool->pending_count(), 80u);
}

// The same in bytes (found in review): a failing webhook's few retries with large bodies came
// back whenever their count fitted, though their bodies went over the bytes cap, and were
// evicted again at once.
TEST_F(SqliteSpoolTest, RetriesWithLargeBodiesDoNotMoveBetweenMemoryAndTheFile) {
  SqliteSpoolTuning tuning;
  tuning.max_cached_bytes = 64 * 1024;  // 4 webhooks' 6 bodies of 8 KiB: three times the cap
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  const FailingRun run = run_failing_webhooks(*spool, tuning, 4, 6, std::string(8192, 'b'), 60);
  expect_settled(*spool, run);
  EXPECT_EQ(spool->pending_count(), 24u);
}

// And with answers that take a while (found in review): the bytes of a lane's requests in flight
// count too, since each comes back to it as a retry.
TEST_F(SqliteSpoolTest, RetriesInFlightWithLargeBodiesDoNotMoveBetweenMemoryAndTheFile) {
  SqliteSpoolTuning tuning;
  tuning.max_cached_bytes = 64 * 1024;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  const FailingRun run =
      run_failing_webhooks(*spool, tuning, 8, 3, std::string(8192, 'b'), 30, /*answers_late=*/true);
  expect_settled(*spool, run);
  EXPECT_EQ(spool->pending_count(), 24u);
}

// Found in review: a healthy webhook evicted in a burst stayed in disk mode while failing
// webhooks kept the memory above 3/4 of the cap (its own claims counted against the room), and
// each of its new deliveries then waited for the commit and a file read. Once its last claim is
// delivered with nothing else pending, it is back in memory: a new delivery is claimable before
// its commit again, and named to the dispatcher.
TEST_F(SqliteSpoolTest, AnEvictedWebhookReturnsToMemoryOnceItsLastClaimIsDelivered) {
  SqliteSpoolTuning tuning;
  tuning.max_cached_deliveries = 40;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  const int64_t later = now_unix_ms() + 3'600'000;
  std::vector<Delivery> batch;
  for (int i = 0; i < 36; ++i) {  // failing webhooks' retries, due later: 3/4 of the cap and more
    batch.push_back(make(seq_id(i), "failing" + std::to_string(i % 6)));
    batch.back().next_attempt_ms = later;
  }
  for (int i = 0; i < 10; ++i) batch.push_back(make(seq_id(100 + i), "healthy"));  // a burst
  ASSERT_TRUE(spool->add(std::move(batch)));
  ASSERT_TRUE(spool->flush());
  (void)spool->take_ready_webhooks();
  const uint64_t moved_before = spool->stats().moved_to_memory;
  auto burst = spool->claim_due("healthy", now_unix_ms(), 100);
  ASSERT_EQ(burst.size(), 10u);  // from the file: the burst made it the biggest lane
  EXPECT_GE(spool->stats().disk_reads, 1u);
  for (const auto& d : burst) spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->stats().moved_to_memory, moved_before + 1);

  const uint64_t reads = spool->stats().disk_reads;
  ASSERT_TRUE(spool->add({make("fresh", "healthy")}));
  const auto ready = spool->take_ready_webhooks();
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(*ready, std::vector<std::string>{"healthy"});
  EXPECT_EQ(ids_of(spool->claim_due("healthy", now_unix_ms(), 10)),
            std::vector<std::string>{"fresh"});
  EXPECT_EQ(spool->stats().disk_reads, reads);  // from memory
}

// The spool names the webhooks that got claimable deliveries, so the dispatcher asks only those;
// an event that concerns them all (a replay, another process's change, a new listener) names none
// and says "all" (nullopt).
TEST_F(SqliteSpoolTest, NamesTheWebhooksThatGotClaimableDeliveries) {
  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_FALSE(spool->take_ready_webhooks().has_value());  // at first: whatever is pending
  ASSERT_TRUE(spool->add({make("a1", "a"), make("a2", "a"), make("b1", "b")}));
  auto ready = spool->take_ready_webhooks();
  ASSERT_TRUE(ready.has_value());
  std::sort(ready->begin(), ready->end());
  EXPECT_EQ(*ready, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(spool->take_ready_webhooks(), std::vector<std::string>{});  // taken

  auto claimed = spool->claim_due("a", now_unix_ms(), 1);
  ASSERT_EQ(claimed.size(), 1u);
  spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, now_unix_ms() + 60000, "HTTP 500"});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->take_ready_webhooks(), std::vector<std::string>{"a"});  // its retry

  claimed = spool->claim_due("b", now_unix_ms(), 1);
  ASSERT_EQ(claimed.size(), 1u);
  spool->complete(claimed[0], {AttemptOutcome::Kind::Dead, 0, "HTTP 500"});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->take_ready_webhooks(), std::vector<std::string>{});  // nothing claimable
  EXPECT_EQ(spool->replay({"b1"}).value(), 1u);
  ASSERT_TRUE(spool->flush());
  EXPECT_FALSE(spool->take_ready_webhooks().has_value());  // a replay: every webhook
}

// Checkpoints run on the checkpointer thread, not inside commits, and the WAL stays bounded:
// writing ~100 MB of rows leaves a -wal file near the 16,000-page (~64 MiB) inline limit at
// most, not one that grew with everything written.
// Read-ahead pages of many backlogged webhooks share one byte budget: memory stays bounded
// however many webhooks have a backlog, and every delivery still comes out once, in order.
TEST_F(SqliteSpoolTest, ReadAheadOfManyBackloggedWebhooksSharesOneBudget) {
  constexpr int kWebhooks = 8;
  constexpr int kEach = 120;
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    std::vector<Delivery> batch;
    for (int i = 0; i < kEach; ++i)
      for (int w = 0; w < kWebhooks; ++w)
        batch.push_back(
            make(seq_id(i * kWebhooks + w), "w" + std::to_string(w), std::string(1024, 'x')));
    ASSERT_TRUE(spool->add(std::move(batch)));
  }
  SqliteSpoolTuning tuning;  // reopened: every lane starts in disk mode
  tuning.max_page_bytes = 24 * 1024;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  std::vector<std::vector<std::string>> got(kWebhooks);
  size_t max_page_bytes = 0;
  for (bool more = true; more;) {
    more = false;
    for (int w = 0; w < kWebhooks; ++w) {
      auto claimed = spool->claim_due("w" + std::to_string(w), now_unix_ms() + 1, 3);
      max_page_bytes = std::max(max_page_bytes, spool->stats().page_bytes);
      for (const auto& d : claimed) {
        got[static_cast<size_t>(w)].push_back(d.id);
        spool->complete(d, {AttemptOutcome::Kind::Delivered});
      }
      more = more || !claimed.empty();
    }
  }
  EXPECT_LE(max_page_bytes, tuning.max_page_bytes);
  EXPECT_GT(max_page_bytes, 0u);  // read-ahead did happen
  for (int w = 0; w < kWebhooks; ++w) {
    std::vector<std::string> want;
    for (int i = 0; i < kEach; ++i) want.push_back(seq_id(i * kWebhooks + w));
    EXPECT_EQ(got[static_cast<size_t>(w)], want) << "webhook w" << w;
  }
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
}

// Found in review: the page of a webhook that stopped claiming (paused by a 410, removed by a
// reload) kept its share of the read-ahead budget until a resync, and every other backlogged
// webhook went back to a file read per claim.
TEST_F(SqliteSpoolTest, AnIdlePageGivesItsBudgetToAnotherLane) {
  constexpr int kEach = 120;
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    std::vector<Delivery> batch;
    for (int i = 0; i < kEach; ++i)
      for (const char* w : {"a", "b"})
        batch.push_back(make(std::string(w) + seq_id(i), w, std::string(1024, 'x')));
    ASSERT_TRUE(spool->add(std::move(batch)));
  }
  SqliteSpoolTuning tuning;  // reopened: both lanes start in disk mode
  tuning.max_page_bytes = 24 * 1024;
  tuning.idle_page_ms = 50;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  std::vector<std::string> got_a, got_b;
  auto claim = [&](const char* w, std::vector<std::string>& got) {
    auto claimed = spool->claim_due(w, now_unix_ms() + 1, 1);
    for (const auto& d : claimed) {
      got.push_back(d.id);
      spool->complete(d, {AttemptOutcome::Kind::Delivered});
    }
    return claimed.size();
  };
  ASSERT_EQ(claim("a", got_a), 1u);                             // a's page takes the whole budget
  ASSERT_EQ(claim("b", got_b), 1u);                             // b finds none left
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // a stops claiming
  ASSERT_EQ(claim("b", got_b), 1u);  // a's idle page is dropped; b reads a page
  const uint64_t reads = spool->stats().disk_reads;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(claim("b", got_b), 1u);
  EXPECT_EQ(spool->stats().disk_reads, reads);  // served from b's page
  EXPECT_LE(spool->stats().page_bytes, tuning.max_page_bytes);
  // Nothing of a's dropped page is lost or reordered.
  while (claim("a", got_a) > 0 || claim("b", got_b) > 0) {
  }
  std::vector<std::string> want_a, want_b;
  for (int i = 0; i < kEach; ++i) {
    want_a.push_back("a" + seq_id(i));
    want_b.push_back("b" + seq_id(i));
  }
  EXPECT_EQ(got_a, want_a);
  EXPECT_EQ(got_b, want_b);
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
}

TEST_F(SqliteSpoolTest, CheckpointerRunsOffTheCommitPathAndTheWalStaysBounded) {
  auto& checkpoints = metrics::histogram("hookgate_spool_checkpoint_duration_seconds", "");
  auto& inline_checkpoints = metrics::counter("hookgate_spool_inline_checkpoints_total", "");
  const uint64_t checkpoints_before = checkpoints.count();
  const uint64_t inline_before = inline_checkpoints.value();
  const fs::path wal = cfg_.path + "-wal";
  constexpr int kBatches = 120;
  constexpr int kPerBatch = 1000;
  const std::string body(800, 'x');  // 120,000 rows, ~96 MB of bodies alone
  uintmax_t max_wal = 0;
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    for (int b = 0; b < kBatches; ++b) {
      std::vector<Delivery> batch;
      for (int j = 0; j < kPerBatch; ++j)
        batch.push_back(make(seq_id(b * kPerBatch + j), "wh", body));
      ASSERT_TRUE(spool->add(std::move(batch)));
      std::error_code ec;
      max_wal = std::max(max_wal, fs::file_size(wal, ec));
    }
    EXPECT_GT(checkpoints.count(), checkpoints_before);
  }
  std::printf("[spool] max -wal file %.1f MiB, inline checkpoints %llu\n",
              static_cast<double>(max_wal) / (1 << 20),
              static_cast<unsigned long long>(inline_checkpoints.value() - inline_before));
  EXPECT_GT(max_wal, 0u);
  EXPECT_LT(max_wal, 80u << 20) << "the WAL grew with the data: nothing restarted it";
  auto reopened = open();
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->pending_count(), static_cast<size_t>(kBatches * kPerBatch));
}

// Runs `child` in a forked process that then exits with its result at once, like a crash right
// after: `child` leaves its spool open (keep_open), so no close() and no checkpoint run. Its exit
// code, or -1.
int run_and_crash(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) _exit(child());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}
// Never closed: the process exits without it, as a killed one does.
void keep_open(std::unique_ptr<SqliteSpool> spool) {
  (void)spool.release();
}

TEST_F(SqliteSpoolTest, SurvivesAbruptExitOfTheWritingProcess) {
  constexpr int kN = 300;
  ASSERT_EQ(run_and_crash([&] {
              auto spool = SqliteSpool::open(cfg_);
              if (!spool) return 2;
              for (int i = 0; i < kN; i += 10) {
                std::vector<Delivery> batch;
                for (int j = i; j < i + 10; ++j) batch.push_back(make(seq_id(j), "siem"));
                if (!spool.value()->add(std::move(batch))) return 3;
              }
              keep_open(std::move(spool).value());
              return 0;  // right after accepting
            }),
            0);

  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(spool->pending_count(), static_cast<size_t>(kN));
  auto all = spool->claim_due("siem", now_unix_ms(), 1000);
  ASSERT_EQ(all.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(all[i].id, seq_id(i));
}

// Publisher streams' sequence numbers go from a clean close to the next open, every bit of a
// 64-bit number intact. The open takes them out of the file (a crash after it must not find them
// again); its close writes back what it read unless it is handed others (a start that failed
// after opening the spool loses none). A mark no gateway saw for an hour is dropped, and all are
// when another writer added a delivery after the close that kept them.
TEST_F(SqliteSpoolTest, StreamMarksGoFromACleanCloseToTheNextOpen) {
  const int64_t now = now_unix_ms();
  const StreamMarks marks{{"s1", 3, now}, {"s2", ~uint64_t{0}, now - 60'000}};
  auto taken_at_open = [&](std::optional<StreamMarks> keep) {
    auto spool = open();
    EXPECT_TRUE(spool);
    if (!spool) return StreamMarks{};
    auto taken = spool->take_stream_marks();
    EXPECT_TRUE(spool->take_stream_marks().empty());
    EXPECT_EQ(count_in(cfg_.path, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'bus_streams'"),
              0);
    if (keep) spool->keep_stream_marks(*keep);
    std::sort(taken.begin(), taken.end());
    return taken;
  };
  EXPECT_TRUE(taken_at_open(marks).empty());
  EXPECT_EQ(taken_at_open(std::nullopt), marks);  // closed without others: written back
  EXPECT_EQ(taken_at_open(StreamMarks{}), marks);
  EXPECT_TRUE(taken_at_open(StreamMarks{{"old", 5, now - 3'700'000}, {"s1", 4, now}}).empty());
  EXPECT_EQ(taken_at_open(marks), (StreamMarks{{"s1", 4, now}}));  // "old": unseen for an hour

  // What the same run records after its marks were handed over (outcomes during the shutdown
  // grace) does not make them look stale, nor does a replay by the CLI while it is stopped.
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    EXPECT_EQ(spool->take_stream_marks().size(), 2u);
    spool->keep_stream_marks({{"s1", 9, now - 1000}});
    ASSERT_TRUE(spool->add({make("late", "siem"), make("gone", "siem")}));
    for (auto& d : spool->claim_due("siem", now_unix_ms() + 1000, 2))
      spool->complete(d, d.id == "late"
                             ? AttemptOutcome{AttemptOutcome::Kind::Delivered}
                             : AttemptOutcome{AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
    ASSERT_TRUE(spool->flush());
  }
  {
    auto cli = open(/*tools=*/true);
    ASSERT_TRUE(cli);
    auto replayed = cli->replay_all_dead();
    ASSERT_TRUE(replayed);
    EXPECT_EQ(replayed.value(), 1u);
  }
  EXPECT_EQ(taken_at_open(marks), (StreamMarks{{"s1", 9, now - 1000}}));

  // A hookgate that does not know the table records a delivery after the close that kept them.
  exec_on(cfg_.path,
          "INSERT INTO payloads(id, span, event_id, event_type, created_ms, body) "
          "VALUES(1000, 1, 'e', 't', 0, x'00');"
          "INSERT INTO deliveries(seq, id, payload, webhook, attempts, next_attempt_ms, "
          "updated_ms, state, last_error) "
          "VALUES(1000, 'msg_x', 1000, 'w', 0, 0, 9000000000000, 0, '')");
  EXPECT_TRUE(taken_at_open(std::nullopt).empty());
  EXPECT_TRUE(taken_at_open(std::nullopt).empty());
  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(spool->pending_count(), 2u);  // "gone" (replayed) and "msg_x"
}

// While the gateway runs, each stream's mark is written with the deliveries its messages made
// (or alone, for messages that made none): a crash leaves the marks of what was taken in, which
// the next open hands over as a clean close's. A batch refused for a duplicate id still has its
// marks written: its messages arrived (and are counted as refused, not again as lost).
TEST_F(SqliteSpoolTest, StreamMarksWrittenWithTheirAddsSurviveACrash) {
  const int64_t now = now_unix_ms();
  ASSERT_EQ(run_and_crash([&] {
              auto opened = SqliteSpool::open(cfg_);
              if (!opened) return 2;
              auto& spool = *opened.value();
              if (!spool.add_async_with_marks({make("a", "siem")}, {{"s1", 5, now}}).get())
                return 3;
              spool.write_stream_marks({{"s2", 9, now - 1000}});
              if (!spool.add_async_with_marks({make("b", "siem")}, {{"s1", 7, now}}).get())
                return 4;
              // A duplicate id: refused, its transaction not.
              if (spool.add_async_with_marks({make("a", "siem")}, {{"s3", 1, now}}).get()) return 5;
              const bool flushed = spool.flush().ok();
              // Marks that no add takes along are written on their own within a moment.
              spool.write_stream_marks({{"s4", 2, now}});
              const bool alone = testing::wait_until(
                  [&] {
                    return count_in(cfg_.path,
                                    "SELECT COUNT(*) FROM bus_streams WHERE stream = 's4'") == 1;
                  },
                  std::chrono::seconds(5));
              keep_open(std::move(opened).value());
              return !flushed ? 6 : alone ? 0 : 7;  // like a kill -9 right after
            }),
            0);
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    auto taken = spool->take_stream_marks();
    std::sort(taken.begin(), taken.end());
    EXPECT_EQ(taken,
              (StreamMarks{{"s1", 7, now}, {"s2", 9, now - 1000}, {"s3", 1, now}, {"s4", 2, now}}));
    EXPECT_EQ(spool->pending_count(), 2u);
  }
}

// Runs `child` in a forked process whose files may grow to 512 KiB (a full disk: writes fail
// with EFBIG); its exit code, or -1. `child` may lift the limit with lift_file_size_limit().
int run_with_a_full_disk(const std::function<int()>& child) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    rlimit limit{};
    getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 512 * 1024;  // the hard limit stays: the child can lift it again
    setrlimit(RLIMIT_FSIZE, &limit);
    _exit(child());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

void lift_file_size_limit() {
  rlimit limit{};
  getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_FSIZE, &limit);
}

// Found in review: on a full disk every batch was refused at once, so the gateway went on
// reading the bus and lost everything published until the disk was freed. add() now waits while
// the writer tries again (the ingest thread, waiting for it, stops reading the bus), and returns
// once space is back; the spool says it cannot write meanwhile (/readyz answers 503).
TEST_F(SqliteSpoolTest, AFullDiskHoldsAddsUntilThereIsSpaceAgain) {
  constexpr int kAdds = 600;  // 1.2 MB of bodies: well past the 512 KiB
  const int code = run_with_a_full_disk([&] {
    auto spool = SqliteSpool::open(cfg_);
    if (!spool) return 2;
    std::atomic<int> accepted{0};
    std::atomic<bool> refused{false};
    std::thread adder([&] {
      for (int i = 0; i < kAdds; ++i) {
        if (!spool.value()->add({make(seq_id(i), "siem", std::string(2000, 'x'))})) {
          refused = true;
          return;
        }
        accepted = i + 1;
      }
    });
    const bool full =
        testing::wait_until([&] { return !spool.value()->writable(); }, std::chrono::seconds(30));
    // While it cannot write, the add in progress neither returns nor fails.
    const int held_at = accepted.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const bool held = accepted.load() == held_at && !refused;
    // The size gauge follows the files while they wait (found in review: it froze at its last
    // tick before the wait, below what the files grew to after it).
    const uint64_t file_bytes = testing::metric_value(
        metrics::Registry::global().render_prometheus(), "hookgate_spool_file_bytes");
    uint64_t on_disk = 0;
    for (const std::string& file : {cfg_.path, cfg_.path + "-wal"}) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(file, ec);
      if (!ec) on_disk += size;
    }
    lift_file_size_limit();  // space again
    adder.join();
    if (!full) return 3;
    if (!held) return 4;
    if (refused || accepted != kAdds) return 5;
    if (!spool.value()->writable()) return 6;
    if (file_bytes + 16 * 1024 < on_disk) return 7;
    return 0;
  });
  ASSERT_EQ(code, 0);
  auto spool = open();
  ASSERT_TRUE(spool);
  EXPECT_EQ(spool->list(DeliveryState::Pending, "siem", 0).size(), static_cast<size_t>(kAdds));
}

// A stop ends the wait: the batch still waiting is refused (its events were never accepted),
// with the reason and the file named, and what was accepted before is in the file.
TEST_F(SqliteSpoolTest, AStopWhileTheDiskIsFullRefusesTheWaitingAdds) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int code = run_with_a_full_disk([&] {
    auto spool = SqliteSpool::open(cfg_);
    if (!spool) return 2;
    std::atomic<int> accepted{0};
    std::string error;
    std::thread adder([&] {
      for (int i = 0; i < 10000; ++i) {
        auto st = spool.value()->add({make(seq_id(i), "siem", std::string(2000, 'x'))});
        if (!st) {
          error = st.error().message;
          return;
        }
        accepted = i + 1;
      }
    });
    if (!testing::wait_until([&] { return !spool.value()->writable(); }, std::chrono::seconds(30)))
      return 3;
    spool.value()->begin_stop();
    adder.join();
    const int n = accepted.load();
    if (write(fds[1], &n, sizeof n) != sizeof n) return 5;
    if (error.find(cfg_.path) == std::string::npos) return 4;
    return 0;
  });
  close(fds[1]);
  int accepted = -1;
  ASSERT_EQ(read(fds[0], &accepted, sizeof accepted), static_cast<ssize_t>(sizeof accepted));
  close(fds[0]);
  ASSERT_EQ(code, 0);
  ASSERT_GT(accepted, 0);

  auto spool = open();
  ASSERT_TRUE(spool);
  std::set<std::string> pending;
  for (const auto& d : spool->list(DeliveryState::Pending, "siem", 0)) pending.insert(d.id);
  for (int i = 0; i < accepted; ++i) EXPECT_EQ(pending.count(seq_id(i)), 1u) << seq_id(i);
  EXPECT_EQ(pending.count(seq_id(accepted)), 0u);  // the refused one is not there
}

// Holds the spool file's write lock from a second connection (as the CLI's replay does), so the
// writer's next transaction waits for it, or gives up after its busy timeout.
class ForeignWriteLock {
 public:
  explicit ForeignWriteLock(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);  // the spool's writer may hold the lock for a moment
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  void release() {
    if (db_ == nullptr) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }
  ~ForeignWriteLock() { release(); }
  ForeignWriteLock(const ForeignWriteLock&) = delete;
  ForeignWriteLock& operator=(const ForeignWriteLock&) = delete;

 private:
  sqlite3* db_ = nullptr;
};

// The first attempt does not wait for the commit: the delivery is claimable while add() is still
// blocked on it, and add() reports the event accepted only once the commit lands.
TEST_F(SqliteSpoolTest, DeliveriesAreClaimableWhileTheirCommitIsInFlight) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("warm", "siem")}));  // the lane exists, in memory mode
  auto warm = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(warm.size(), 1u);
  spool->complete(warm[0], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());

  ForeignWriteLock lock(cfg_.path);
  std::atomic<bool> returned{false};
  auto adding = std::async(std::launch::async, [&] {
    auto st = spool->add({make("early", "siem")});
    returned = true;
    return st.ok();
  });
  std::vector<Delivery> claimed;
  hookgate::testing::wait_until(
      [&] { return !(claimed = spool->claim_due("siem", now_unix_ms(), 10)).empty(); },
      std::chrono::seconds(3));
  ASSERT_EQ(ids_of(claimed), std::vector<std::string>{"early"});
  EXPECT_FALSE(returned.load());  // still waiting for the write lock, so not accepted yet
  // The outcome arrives before the commit; it is recorded after it, in order.
  spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
  lock.release();
  ASSERT_TRUE(adding.get());
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
  auto row = spool->get("early");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, DeliveryState::Delivered);
  EXPECT_EQ(row->attempts, 1);
}

// If the commit fails after the deliveries were made claimable, they are withdrawn: not
// claimable, not counted, not in the file; an outcome for a claim of one changes nothing.
TEST_F(SqliteSpoolTest, AFailedCommitWithdrawsWhatAddPublished) {
  SqliteSpoolTuning tuning;
  tuning.busy_timeout_ms = 2000;  // how long the writer waits for the lock before giving up
  tuning.busy_retries = 0;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("kept", "siem"), make("audit-warm", "audit")}));
  auto warm = spool->claim_due("audit", now_unix_ms(), 10);
  ASSERT_EQ(warm.size(), 1u);
  spool->complete(warm[0], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());

  ForeignWriteLock lock(cfg_.path);
  // "lost" is claimed while its commit waits; "lost-unclaimed" (another webhook) is not.
  // add_async() makes them claimable before it returns.
  auto adding = spool->add_async({make("lost", "siem"), make("lost-unclaimed", "audit")});
  auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"kept", "lost"}));  // "lost" uncommitted
  EXPECT_EQ(spool->pending_count(), 3u);
  EXPECT_FALSE(adding.get());  // the writer gave up on the lock: not accepted
  lock.release();

  EXPECT_TRUE(spool->claim_due("audit", now_unix_ms() + 1, 10).empty());
  for (const auto& d : claimed) spool->complete(d, {AttemptOutcome::Kind::Retry, 0, "HTTP 500"});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 1u);
  EXPECT_EQ(ids_of(spool->claim_due("siem", now_unix_ms() + 1, 10)),
            std::vector<std::string>{"kept"});
  EXPECT_FALSE(spool->get("lost"));
  EXPECT_FALSE(spool->get("lost-unclaimed"));
  // The spool keeps working.
  ASSERT_TRUE(spool->add({make("after", "siem")}));
  EXPECT_EQ(ids_of(spool->claim_due("siem", now_unix_ms() + 1, 10)),
            std::vector<std::string>{"after"});
}

// Found in review: a `hookgate deliveries replay` holding the write lock past busy_timeout made
// the writer refuse whole batches, and the gateway then dropped those events. The writer waits
// out a lock held by another process (up to busy_retries more timeouts) instead.
TEST_F(SqliteSpoolTest, TheWriterWaitsOutAnotherProcesssLongTransaction) {
  SqliteSpoolTuning tuning;
  tuning.busy_timeout_ms = 250;  // with the default 11 retries: 3 s before the writer gives up
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  auto lock = std::make_unique<ForeignWriteLock>(cfg_.path);
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // nearly three busy timeouts
    lock->release();
  });
  auto adding = spool->add_async({make("waited", "siem")});
  EXPECT_TRUE(adding.get());
  holder.join();
  EXPECT_TRUE(spool->get("waited"));
}

// Found in review: a stop did not shorten that wait until close(), which runs after the ingest
// thread has settled its adds, so a SIGTERM during a foreign lock took up to a minute.
TEST_F(SqliteSpoolTest, AStopWaitsOutAForeignLockForOneBusyTimeoutOnly) {
  SqliteSpoolTuning tuning;
  tuning.busy_timeout_ms = 200;  // 12 timeouts (2.4 s) while running
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  ForeignWriteLock lock(cfg_.path);
  auto adding = spool->add_async({make("during-stop", "siem")});
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  spool->begin_stop();
  ASSERT_EQ(adding.wait_for(std::chrono::milliseconds(1200)), std::future_status::ready);
  EXPECT_FALSE(adding.get());  // refused, and said so: not accepted
  lock.release();
}

// A replay of every dead letter from the CLI moves them in chunks, each its own transaction, so
// the gateway's writer never waits for all of them at once; every one of them is moved.
TEST_F(SqliteSpoolTest, ReplayAllDeadFromTheCliMovesEveryChunk) {
  auto spool = open();
  ASSERT_TRUE(spool);
  std::vector<Delivery> dead;
  for (int i = 0; i < 2500; ++i) {
    Delivery d = make("dead-" + std::to_string(i), i % 2 == 0 ? "siem" : "audit");
    d.state = DeliveryState::Dead;
    dead.push_back(std::move(d));
  }
  ASSERT_TRUE(spool->add(std::move(dead)));
  ASSERT_TRUE(spool->flush());
  SqliteSpoolTuning tuning;
  tuning.replay_chunk_rows = 100;
  auto cli = open(/*tools=*/true, tuning);
  ASSERT_TRUE(cli);
  auto moved = cli->replay_all_dead("siem");
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_EQ(moved.value(), 1250u);
  EXPECT_EQ(cli->list(DeliveryState::Dead, "", 0).size(), 1250u);
  EXPECT_EQ(cli->list(DeliveryState::Pending, "siem", 0).size(), 1250u);
  // A row dead-lettered again while a chunked replay runs is not replayed twice by a later chunk
  // of the same run. A trigger plays the gateway: every audit row replayed dies again at once.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(cfg_.path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TRIGGER rekill AFTER UPDATE OF state ON deliveries "
                         "WHEN NEW.state = 0 AND NEW.webhook = 'audit' BEGIN "
                         "UPDATE deliveries SET state = 2 WHERE rowid = NEW.rowid; END",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  auto rest = cli->replay_all_dead();
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_EQ(rest.value(), 1250u);  // each once (the chunks would otherwise go round forever)
  EXPECT_EQ(cli->list(DeliveryState::Dead, "", 0).size(), 1250u);
  sqlite3_exec(db, "DROP TRIGGER rekill", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

// The gateway's path: add_async() returns at once, the deliveries are claimed and their outcomes
// queued before the batch commits (held up here by a foreign write lock); all of it lands, in
// order, once the lock goes.
TEST_F(SqliteSpoolTest, AddAsyncDeliveriesCanBeCompletedBeforeTheirCommit) {
  auto spool = open();
  ASSERT_TRUE(spool);
  {
    ForeignWriteLock lock(cfg_.path);
    auto accepted = spool->add_async({make("a1", "siem"), make("a2", "siem")});
    auto claimed = spool->claim_due("siem", now_unix_ms() + 1, 10);
    ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"a1", "a2"}));
    spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
    spool->complete(claimed[1], {AttemptOutcome::Kind::Dead, 0, "HTTP 400"});
    EXPECT_EQ(accepted.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    lock.release();
    ASSERT_TRUE(accepted.get());
  }
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
  auto a1 = spool->get("a1");
  auto a2 = spool->get("a2");
  ASSERT_TRUE(a1 && a2);
  EXPECT_EQ(a1->state, DeliveryState::Delivered);
  EXPECT_EQ(a2->state, DeliveryState::Dead);
  EXPECT_EQ(a2->last_error, "HTTP 400");

  // An id that is already spooled: the batch is refused, and the copy add_async() published
  // never goes out beside the real one.
  ASSERT_TRUE(spool->add({make("b1", "siem")}));
  {
    ForeignWriteLock lock(cfg_.path);
    auto dup = spool->add_async({make("b2", "siem"), make("b1", "siem")});
    auto claimed = spool->claim_due("siem", now_unix_ms() + 1, 10);
    EXPECT_EQ(ids_of(claimed), (std::vector<std::string>{"b1", "b2"}));
    lock.release();
    EXPECT_FALSE(dup.get());
    for (const auto& d : claimed) spool->complete(d, {AttemptOutcome::Kind::Delivered});
  }
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
  EXPECT_FALSE(spool->get("b2"));
  auto b1 = spool->get("b1");
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->state, DeliveryState::Delivered);
  EXPECT_TRUE(spool->claim_due("siem", now_unix_ms() + 1, 10).empty());
}

// Found in review: an outcome SQLite could not record used to end the claim, and the file
// (still pending) made the delivery claimable at once: a 2xx answered was sent again and again,
// and a failing delivery retried without backoff, for as long as the write kept failing. Now the
// claim stays and the write is retried until it lands.
TEST_F(SqliteSpoolTest, AnOutcomeSqliteCouldNotRecordIsRetriedWhileItsDeliveryIsHeld) {
  SqliteSpoolTuning tuning;
  tuning.outcome_retry_initial_ms = 20;
  tuning.outcome_retry_max_ms = 50;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  // A statement-level error (as SQLITE_FULL or an I/O error can be) that leaves the rest of the
  // transaction standing: RAISE(ABORT) in a trigger fails only the UPDATE of x1.
  // The writer notices that commit (another process wrote: it rereads the file) after a batch;
  // two flushes put it behind us, so the deliveries below are held in memory.
  inject_fault(*spool, cfg_.path,
               "CREATE TRIGGER fail_x1 BEFORE UPDATE ON deliveries WHEN OLD.id = 'x1' "
               "BEGIN SELECT RAISE(ABORT, 'injected'); END;");
  ASSERT_TRUE(spool->add({make("x1", "siem"), make("x2", "siem")}));
  auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"x1", "x2"}));
  spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
  spool->complete(claimed[1], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->get("x2")->state, DeliveryState::Delivered);
  EXPECT_EQ(spool->get("x1")->state, DeliveryState::Pending);
  EXPECT_EQ(spool->stats().unrecorded_outcomes, 1u);
  // Steady traffic meanwhile: its commits must not push the retry back (found in review: every
  // batch re-armed the wait, so under load the outcome was never tried again).
  std::atomic<bool> adding{true};
  std::thread traffic([&] {
    for (int i = 0; adding; ++i) {
      EXPECT_TRUE(spool->add({make("o" + std::to_string(i), "other")}));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Several retries later x1 is still not handed out again: it was delivered.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(spool->claim_due("siem", now_unix_ms(), 10).empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_EQ(spool->stats().in_flight, 1u);
  // Once the write can succeed, the outcome lands and the claim ends.
  exec_on(cfg_.path, "DROP TRIGGER fail_x1;");
  const bool recorded = testing::wait_until(
      [&] { return spool->get("x1")->state == DeliveryState::Delivered; }, std::chrono::seconds(3));
  adding = false;
  traffic.join();
  ASSERT_TRUE(recorded);
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->stats().in_flight, 0u);
  EXPECT_EQ(spool->stats().unrecorded_outcomes, 0u);
  EXPECT_TRUE(spool->claim_due("siem", now_unix_ms(), 10).empty());
}

// Found in review: list, get and the pending count answered "nothing" on a damaged file, and
// `hookgate deliveries list` printed an empty spool with exit 0.
TEST_F(SqliteSpoolTest, AReadThatFailsIsReportedNotEmpty) {
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    std::vector<Delivery> batch;
    for (int i = 0; i < 300; ++i) batch.push_back(make(seq_id(i), "siem", std::string(1000, 'x')));
    ASSERT_TRUE(spool->add(std::move(batch)));
  }  // closed: checkpointed, the WAL folded into the file
  auto tools = open(/*tools=*/true);
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->list(std::nullopt, "", 10).size(), 10u);
  EXPECT_FALSE(tools->take_read_error());
  tools.reset();
  // Everything past the first page (the schema stays readable) overwritten.
  {
    std::fstream f(cfg_.path, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(cfg_.path);
    ASSERT_GT(size, 16384u);
    f.seekp(4096);
    const std::string junk(size - 4096, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  tools = open(/*tools=*/true);
  ASSERT_TRUE(tools);
  EXPECT_TRUE(tools->list(std::nullopt, "", 10).empty());
  auto error = tools->take_read_error();
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("malformed"), std::string::npos) << *error;
  EXPECT_FALSE(tools->take_read_error());  // taken
  EXPECT_FALSE(tools->get(seq_id(1)));
  EXPECT_TRUE(tools->take_read_error());
}

// Found in review: with the writer stalled, the dispatcher kept claiming and every outcome waited
// in memory. Outcomes waiting for their commit are capped.
TEST_F(SqliteSpoolTest, OutcomesWaitingForTheirCommitAreCapped) {
  SqliteSpoolTuning tuning;
  tuning.max_unrecorded_outcomes = 4;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  std::vector<Delivery> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(make("c" + std::to_string(i), "siem"));
  ASSERT_TRUE(spool->add(batch));
  std::atomic<int> ready{0};
  spool->set_on_ready([&] { ++ready; });
  auto first = spool->claim_due("siem", now_unix_ms(), 4);
  ASSERT_EQ(first.size(), 4u);
  {
    ForeignWriteLock lock(cfg_.path);  // the writer cannot commit the outcomes below
    for (auto& d : first) spool->complete(d, {AttemptOutcome::Kind::Delivered});
    EXPECT_TRUE(spool->claim_due("siem", now_unix_ms(), 10).empty());
    const int before = ready.load();
    lock.release();
    ASSERT_TRUE(spool->flush());
    EXPECT_GT(ready.load(), before);  // below the cap again: the dispatcher is woken
  }
  EXPECT_EQ(spool->claim_due("siem", now_unix_ms(), 10).size(), 6u);
  spool->set_on_ready(nullptr);
}

// Found in review: the cap counted requests still waiting for their answer, so endpoints that
// hang (40 webhooks at max_in_flight 250 hold 10,000 claims) stopped every other webhook, the
// pager on hookgate.delivery.dead included. Those claims are bounded by max_in_flight instead.
TEST_F(SqliteSpoolTest, RequestsWaitingForTheirAnswerDoNotStarveOtherWebhooks) {
  SqliteSpoolTuning tuning;
  tuning.max_unrecorded_outcomes = 4;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  std::vector<Delivery> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(make("hung" + std::to_string(i), "hung"));
  for (int i = 0; i < 3; ++i) batch.push_back(make("good" + std::to_string(i), "good"));
  ASSERT_TRUE(spool->add(batch));
  EXPECT_EQ(spool->claim_due("hung", now_unix_ms(), 10).size(), 10u);  // never answered
  auto good = spool->claim_due("good", now_unix_ms(), 10);
  ASSERT_EQ(good.size(), 3u);
  for (auto& d : good) spool->complete(d, {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->get("good2")->state, DeliveryState::Delivered);
}

// Found in review: a replay that failed half-way committed the rows it had moved while it
// reported that nothing was replayed.
TEST_F(SqliteSpoolTest, AReplayThatFailsHalfWayMovesNothing) {
  auto spool = open();
  ASSERT_TRUE(spool);
  Delivery a = make("a", "siem"), b = make("b", "siem");
  a.state = b.state = DeliveryState::Dead;
  ASSERT_TRUE(spool->add({a, b}));
  ASSERT_TRUE(spool->flush());
  exec_on(cfg_.path,
          "CREATE TRIGGER fail_b BEFORE UPDATE ON deliveries WHEN OLD.id = 'b' "
          "BEGIN SELECT RAISE(ABORT, 'injected'); END;");
  ASSERT_TRUE(spool->flush());
  auto replayed = spool->replay({"a", "b"});
  ASSERT_FALSE(replayed);
  EXPECT_NE(replayed.error().message.find("injected"), std::string::npos)
      << replayed.error().message;
  EXPECT_EQ(spool->get("a")->state, DeliveryState::Dead);
  EXPECT_EQ(spool->get("b")->state, DeliveryState::Dead);
  EXPECT_EQ(spool->pending_count(), 0u);
}

TEST_F(SqliteSpoolTest, OnlyClaimsCanBeCompletedAndOnlyOnce) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("c1", "siem")}));
  spool->complete(make("c1", "siem"), {AttemptOutcome::Kind::Delivered});  // never claimed
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->get("c1")->state, DeliveryState::Pending);

  auto claimed = spool->claim_due("siem", now_unix_ms(), 1);
  ASSERT_EQ(claimed.size(), 1u);
  spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, 5, "first"});
  spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, 5, "second"});
  spool->release(claimed[0]);
  ASSERT_TRUE(spool->flush());
  auto again = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 1);
  EXPECT_EQ(again[0].last_error, "first");
}

// Found in an exploratory run: a restart forgot a receiver's Retry-After, and the throttled
// receiver got the rest of its backlog at once. The spool keeps each webhook's hold as the
// dispatcher last set it, and the next open hands over those that have not run out.
TEST_F(SqliteSpoolTest, AWebhookHoldIsKeptForTheNextStart) {
  const int64_t now = schedule_now_ms();
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    spool->keep_webhook_hold("siem", {"receiver-a", now + 1000});
    spool->keep_webhook_hold("siem", {"receiver-a", now + 60000});  // lengthened: replaced
    spool->keep_webhook_hold("ended", {"receiver-b", now + 60000});
    spool->keep_webhook_hold("ended", {});  // a reload that changed the webhook ended it
    spool->keep_webhook_hold("over", {"receiver-c", now - 1});  // run out by the next start
    ASSERT_TRUE(spool->flush());
    EXPECT_TRUE(spool->take_webhook_holds().empty());  // none from before this run
  }
  auto spool = open();
  ASSERT_TRUE(spool);
  auto holds = spool->take_webhook_holds();
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds["siem"].receiver, "receiver-a");
  EXPECT_EQ(holds["siem"].until_ms, now + 60000);
  EXPECT_TRUE(spool->take_webhook_holds().empty());  // handed over once
  // Written with the other work of a transaction: an add beside it stands, and so does the hold.
  spool->keep_webhook_hold("siem", {"receiver-d", now + 5000});
  ASSERT_TRUE(spool->add({make("h1", "siem")}));
  spool.reset();
  auto reopened = open();
  ASSERT_TRUE(reopened);
  holds = reopened->take_webhook_holds();
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds["siem"].receiver, "receiver-d");
  EXPECT_EQ(holds["siem"].until_ms, now + 5000);
  EXPECT_TRUE(reopened->get("h1").has_value());
  // A tools-mode open (`hookgate deliveries`) neither takes nor writes them.
  reopened.reset();
  auto tools = open(/*tools=*/true);
  ASSERT_TRUE(tools);
  tools->keep_webhook_hold("siem", {});
  tools.reset();
  EXPECT_EQ(open()->take_webhook_holds().size(), 1u);
}

// Found in exploratory runs: the database, or only its WAL, deleted under a running gateway
// went on taking deliveries that a stop or a crash then lost. Any of the three files gone or
// replaced makes the spool say so (file_missing(), which holds the gateway's intake).
TEST_F(SqliteSpoolTest, AFileDeletedUnderTheSpoolIsNoticed) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    SCOPED_TRACE(suffix);
    cfg_.path = (dir_ / (std::string("noticed") + suffix + ".db")).string();
    auto spool = open();
    ASSERT_TRUE(spool);
    ASSERT_TRUE(spool->add({make(std::string("n1") + suffix, "siem")}));
    ASSERT_TRUE(std::filesystem::exists(cfg_.path + "-wal"));
    // No false alarm first: `hookgate deliveries` opening and closing the file beside it (SQLite
    // removes -wal and -shm only at the last close, which this is not), and time passing.
    {
      auto tools = open(/*tools=*/true);
      ASSERT_TRUE(tools);
      EXPECT_EQ(tools->list(std::nullopt, "", 10).size(), 1u);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // an absence: a check ran
    EXPECT_FALSE(spool->file_missing());
    std::filesystem::remove(cfg_.path + suffix);
    EXPECT_TRUE(
        testing::wait_until([&] { return spool->file_missing(); }, std::chrono::seconds(5)));
    EXPECT_FALSE(spool->full());  // that is spool.max_bytes; the gateway looks at both
    EXPECT_EQ(spool->database_missing(), std::string(suffix).empty());
  }
}

TEST_F(SqliteSpoolTest, BlockingCallFromOnReadyFailsInsteadOfDeadlocking) {
  std::promise<bool> result;
  std::atomic<bool> tried{false};
  auto spool = open();
  ASSERT_TRUE(spool);
  // add() itself announces on its caller's thread, where blocking is fine; the writer thread
  // announces a backlog that exists when the callback is set.
  ASSERT_TRUE(spool->add({make("o1", "siem")}));
  spool->set_on_ready([&] {
    if (tried.exchange(true)) return;
    result.set_value(spool->add({make("from-callback", "siem")}).ok());
  });
  auto fut = result.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(fut.get());
}

// Adders, claimers and random outcomes at once, with a tiny cache so lanes keep switching between
// memory and disk mode: every delivery ends up delivered exactly once, never claimed twice.
TEST_F(SqliteSpoolTest, ConcurrentAddClaimCompleteLosesNothing) {
  SqliteSpoolTuning tuning;
  tuning.max_cached_deliveries = 40;
  tuning.refill_limit = 8;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  constexpr int kAdders = 3;
  constexpr int kPerAdder = 600;
  const std::vector<std::string> hooks = {"a", "b", "c"};
  std::atomic<int> delivered{0};
  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> done;
  std::atomic<bool> failed{false};

  std::vector<std::thread> threads;
  for (int t = 0; t < kAdders; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerAdder; i += 3) {
        std::vector<Delivery> batch;
        for (int j = i; j < i + 3; ++j) {
          const std::string id = "t" + std::to_string(t) + "-" + std::to_string(j);
          batch.push_back(make(id, hooks[static_cast<size_t>(j) % hooks.size()]));
        }
        if (!spool->add(std::move(batch))) failed = true;
      }
    });
  }
  const int total = kAdders * kPerAdder;
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(c));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (delivered.load() < total && std::chrono::steady_clock::now() < deadline) {
        const auto& hook = hooks[rng() % hooks.size()];
        auto page = spool->claim_due(hook, now_unix_ms(), 1 + rng() % 20);
        if (page.empty()) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        for (auto& d : page) {
          {
            std::lock_guard lock(mu);
            if (!in_flight.insert(d.id).second || done.count(d.id)) failed = true;
          }
          const unsigned roll = rng() % 10;
          if (roll == 0) {
            std::lock_guard lock(mu);
            in_flight.erase(d.id);
            spool->release(d);
          } else if (roll < 3) {
            std::lock_guard lock(mu);
            in_flight.erase(d.id);
            spool->complete(d, {AttemptOutcome::Kind::Retry,
                                now_unix_ms() + static_cast<int64_t>(rng() % 20), "503"});
          } else {
            std::lock_guard lock(mu);
            in_flight.erase(d.id);
            done[d.id]++;
            delivered++;
            spool->complete(d, {AttemptOutcome::Kind::Delivered});
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(delivered.load(), total);
  EXPECT_EQ(done.size(), static_cast<size_t>(total));
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->pending_count(), 0u);
  EXPECT_EQ(spool->list(DeliveryState::Delivered, "", 0).size(), static_cast<size_t>(total));
}

// Many concurrent add() callers share commits (bench/ measures how fast).
TEST_F(SqliteSpoolTest, GroupCommitSharesTransactionsBetweenAdders) {
  for (const char* sync : {"NORMAL", "FULL"}) {
    cfg_.synchronous = sync;
    cfg_.path = (dir_ / (std::string(sync) + ".db")).string();
    auto spool = open();
    ASSERT_TRUE(spool);
    constexpr int kThreads = 8;
    constexpr int kAddsPerThread = 250;
    constexpr int kFanOut = 16;
    const std::string body(400, 'b');
    const auto before = spool->stats();
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kAddsPerThread; ++i) {
          auto shared = std::make_shared<const std::string>(body);
          std::vector<Delivery> batch;
          for (int w = 0; w < kFanOut; ++w) {
            Delivery d =
                make("e" + std::to_string(t) + "-" + std::to_string(i) + "-" + std::to_string(w),
                     "w" + std::to_string(w));
            d.body = shared;
            batch.push_back(std::move(d));
          }
          if (!spool->add(std::move(batch))) errors++;
        }
      });
    }
    for (auto& th : threads) th.join();
    const auto after = spool->stats();
    const uint64_t commits = after.commits - before.commits;
    const uint64_t rows = after.rows_written - before.rows_written;
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(rows, static_cast<uint64_t>(kThreads * kAddsPerThread * kFanOut));
    EXPECT_LT(commits, static_cast<uint64_t>(kThreads * kAddsPerThread));
  }
}

// Found in review: an Add and the outcome of its delivery often share a transaction (dispatch
// before the commit). When that transaction was lost, the held outcome kept "applied" from the
// UPDATE that had matched the lost row, so its retry (no row now) acted on it anyway: a Retry put
// the delivery back in the lane, to be sent again although its event was refused, and a
// Delivered took one off the pending count for a row never counted.
TEST_F(SqliteSpoolTest, AnOutcomeHeldWithItsLostTransactionDoesNotActOnTheLostRow) {
  SqliteSpoolTuning tuning;
  tuning.outcome_retry_initial_ms = 20;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  // Inserting "poison" loses its whole transaction, as a full disk or an I/O error does.
  inject_fault(*spool, cfg_.path,
               "CREATE TRIGGER poison BEFORE INSERT ON deliveries WHEN NEW.id = 'poison' "
               "BEGIN SELECT RAISE(ROLLBACK, 'injected'); END;");
  ASSERT_TRUE(spool->add({make("kept", "audit")}));
  {
    ForeignWriteLock lock(cfg_.path);
    // The writer takes this batch and waits for the lock; what follows queues up behind it and
    // goes into one transaction, which "poison" loses.
    const uint64_t taken = spool->stats().batches_taken;
    auto blocker = spool->add_async({make("blocker", "audit")});
    ASSERT_TRUE(testing::wait_until([&] { return spool->stats().batches_taken > taken; },
                                    std::chrono::seconds(5)));
    auto lost = spool->add_async({make("lost-retry", "siem"), make("lost-delivered", "siem")});
    auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
    ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"lost-retry", "lost-delivered"}));
    spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, 0, "HTTP 500"});
    spool->complete(claimed[1], {AttemptOutcome::Kind::Delivered});
    auto poison = spool->add_async({make("poison", "audit")});
    lock.release();
    EXPECT_TRUE(blocker.get());
    EXPECT_FALSE(lost.get());
    EXPECT_FALSE(poison.get());
  }
  // The outcomes were held with their transaction; written again, they match no row.
  ASSERT_TRUE(
      testing::wait_until([&] { return spool->stats().in_flight == 0; }, std::chrono::seconds(3)));
  ASSERT_TRUE(spool->flush());
  EXPECT_TRUE(spool->claim_due("siem", now_unix_ms() + 1, 10).empty());
  EXPECT_EQ(spool->pending_count(), 2u);  // kept and blocker
  EXPECT_FALSE(spool->get("lost-retry"));
  EXPECT_FALSE(spool->get("lost-delivered"));
  EXPECT_EQ(ids_of(spool->claim_due("audit", now_unix_ms() + 1, 10)),
            (std::vector<std::string>{"kept", "blocker"}));
}

// An outcome that reaches the writer with its delivery's insert (dispatch before the commit) is
// written with it: the row goes in final, as an insert followed by the outcome's UPDATE would
// have left it, and stays so across a reopen.
TEST_F(SqliteSpoolTest, AnOutcomeInTheTransactionOfItsInsertIsWrittenWithIt) {
  auto spool = open();
  ASSERT_TRUE(spool);
  const int64_t retry_at = now_unix_ms() + 60000;
  int64_t gone_due = 0;
  {
    ForeignWriteLock lock(cfg_.path);
    // The writer takes this batch and waits for the lock: the add and its outcomes queue up
    // behind it and share the next transaction.
    const uint64_t taken = spool->stats().batches_taken;
    auto blocker = spool->add_async({make("blocker", "audit")});
    ASSERT_TRUE(testing::wait_until([&] { return spool->stats().batches_taken > taken; },
                                    std::chrono::seconds(5)));
    Delivery ok = make("ok", "siem");
    ok.last_error = "an error a delivered row must not keep";
    auto added = spool->add_async({ok, make("again", "siem"), make("gone", "siem")});
    auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
    ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"ok", "again", "gone"}));
    gone_due = claimed[2].next_attempt_ms;
    spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
    spool->complete(claimed[1], {AttemptOutcome::Kind::Retry, retry_at, "HTTP 503"});
    spool->complete(claimed[2], {AttemptOutcome::Kind::Dead, 0, "HTTP 404"});
    lock.release();
    EXPECT_TRUE(blocker.get());
    EXPECT_TRUE(added.get());
  }
  ASSERT_TRUE(
      testing::wait_until([&] { return spool->stats().in_flight == 0; }, std::chrono::seconds(3)));
  EXPECT_EQ(spool->stats().outcomes_folded, 3u);
  auto check = [&](SqliteSpool& s) {
    auto ok = s.get("ok");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->state, DeliveryState::Delivered);
    EXPECT_EQ(ok->attempts, 1);
    EXPECT_EQ(ok->last_error, "");
    auto again = s.get("again");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->state, DeliveryState::Pending);
    EXPECT_EQ(again->attempts, 1);
    EXPECT_EQ(again->next_attempt_ms, retry_at);
    EXPECT_EQ(again->last_error, "HTTP 503");
    auto gone = s.get("gone");
    ASSERT_TRUE(gone);
    EXPECT_EQ(gone->state, DeliveryState::Dead);
    EXPECT_EQ(gone->attempts, 1);
    EXPECT_EQ(gone->last_error, "HTTP 404");
    EXPECT_EQ(gone->next_attempt_ms, gone_due);  // a final outcome leaves it as it was
    EXPECT_EQ(s.pending_count(), 2u);            // blocker and again
    EXPECT_EQ(s.count(DeliveryState::Dead, "siem"), 1u);
  };
  check(*spool);
  // The retry waits for its time, then is claimed with its attempt counted.
  EXPECT_TRUE(spool->claim_due("siem", retry_at - 1, 10).empty());
  auto retried = spool->claim_due("siem", retry_at, 10);
  ASSERT_EQ(ids_of(retried), (std::vector<std::string>{"again"}));
  EXPECT_EQ(retried[0].attempts, 1);
  spool->release(retried[0]);
  spool.reset();
  auto reopened = open();
  ASSERT_TRUE(reopened);
  check(*reopened);
}

// An outcome that shares the transaction of an add the spool refuses (a duplicate id) is not
// recorded, as its UPDATE would have found no row; the first delivery of that id is untouched.
TEST_F(SqliteSpoolTest, AnOutcomeOfARefusedAddIsNotWrittenWithIt) {
  auto spool = open();
  ASSERT_TRUE(spool);
  ASSERT_TRUE(spool->add({make("dup", "siem")}));
  auto first = spool->claim_due("siem", now_unix_ms(), 10);
  ASSERT_EQ(ids_of(first), (std::vector<std::string>{"dup"}));
  spool->complete(first[0], {AttemptOutcome::Kind::Delivered});
  ASSERT_TRUE(
      testing::wait_until([&] { return spool->stats().in_flight == 0; }, std::chrono::seconds(3)));
  {
    ForeignWriteLock lock(cfg_.path);
    const uint64_t taken = spool->stats().batches_taken;
    auto blocker = spool->add_async({make("blocker", "audit")});
    ASSERT_TRUE(testing::wait_until([&] { return spool->stats().batches_taken > taken; },
                                    std::chrono::seconds(5)));
    auto again = spool->add_async({make("dup", "siem")});
    auto claimed = spool->claim_due("siem", now_unix_ms(), 10);
    ASSERT_EQ(ids_of(claimed), (std::vector<std::string>{"dup"}));
    spool->complete(claimed[0], {AttemptOutcome::Kind::Retry, now_unix_ms(), "HTTP 500"});
    lock.release();
    EXPECT_TRUE(blocker.get());
    EXPECT_FALSE(again.get());
  }
  ASSERT_TRUE(
      testing::wait_until([&] { return spool->stats().in_flight == 0; }, std::chrono::seconds(3)));
  ASSERT_TRUE(spool->flush());
  EXPECT_EQ(spool->stats().outcomes_folded, 0u);
  auto dup = spool->get("dup");
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->state, DeliveryState::Delivered);
  EXPECT_EQ(dup->attempts, 1);
  EXPECT_EQ(dup->last_error, "");
  EXPECT_TRUE(spool->claim_due("siem", now_unix_ms() + 1000, 10).empty());
}

// Opens `cfg` in a child process that runs as nobody when this one is root; the error it was
// refused with ("" if it opened), or nullopt when the child could not switch user.
std::optional<std::string> open_as_nobody(const config::SpoolConfig& cfg) {
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(77);
    auto spool = SqliteSpool::open(cfg);
    const std::string message = spool ? "" : spool.error().message;
    if (write(fds[1], message.data(), message.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 77)
    return std::nullopt;
  return message;
}

// Found in review: a spool file this user cannot write (left owned by root, say) is opened
// read-only by SQLite without a word, and the gateway started only to refuse every event.
TEST_F(SqliteSpoolTest, AFileThisUserCannotWriteIsRefusedAtOpen) {
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    ASSERT_TRUE(spool->add({make("a", "siem")}));
  }
  // The directory stays writable (SQLite could create the -wal and -shm files there): only the
  // file is not. Root writes any file, so the open runs as nobody, in a child.
  const bool root = geteuid() == 0;
  fs::permissions(dir_, fs::perms::all);
  fs::permissions(cfg_.path,
                  root ? fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::others_read
                       : fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // The owner lock beside it (made by the open above) stays usable: the spool file is the point.
  fs::permissions(cfg_.path + ".lock", fs::perms::owner_read | fs::perms::owner_write |
                                           fs::perms::group_read | fs::perms::group_write |
                                           fs::perms::others_read | fs::perms::others_write);
  auto refused = open_as_nobody(cfg_);
  if (!refused) GTEST_SKIP() << "cannot switch to user nobody (65534)";
  EXPECT_NE(refused->find("read-only for this user"), std::string::npos) << *refused;
}

// Found in a hostile-environment pass: as `nobody`, a spool in a folder only root may write was
// refused with "cannot open ...lock: No such file or directory", the read-only retry's errno.
TEST_F(SqliteSpoolTest, AFolderThisUserCannotWriteIsSaid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to make a folder nobody may not write";
  fs::permissions(dir_, fs::perms::all);
  fs::create_directory(dir_ / "roots");
  fs::permissions(dir_ / "roots", fs::perms::owner_all | fs::perms::group_read |
                                      fs::perms::group_exec | fs::perms::others_read |
                                      fs::perms::others_exec);
  cfg_.path = (dir_ / "roots" / "spool.db").string();
  auto refused = open_as_nobody(cfg_);
  if (!refused) GTEST_SKIP() << "cannot switch to user nobody (65534)";
  EXPECT_NE(refused->find("is not writable by this user"), std::string::npos) << *refused;
}

// Found in review: a batch SQLite refused on its own (its savepoint undone, the transaction
// committed without it) was not counted in hookgate_spool_write_errors_total nor logged by the
// spool; only a duplicate id is the caller's fault.
TEST_F(SqliteSpoolTest, ABatchRefusedForAnythingButADuplicateIdIsAWriteError) {
  testing::LogCapture logs;  // before the spool: its writer logs
  auto& errors = metrics::counter("hookgate_spool_write_errors_total", "");
  auto spool = open();
  ASSERT_TRUE(spool);
  // Fails the statement only (RAISE(ABORT)), as a file turned read-only or a full disk can.
  inject_fault(*spool, cfg_.path,
               "CREATE TRIGGER refuse BEFORE INSERT ON deliveries WHEN NEW.id = 'refused' "
               "BEGIN SELECT RAISE(ABORT, 'injected'); END;");
  ASSERT_TRUE(spool->add({make("u1", "siem")}));
  const uint64_t before = errors.value();
  EXPECT_FALSE(spool->add({make("u1", "siem")}));
  EXPECT_EQ(errors.value(), before);  // a duplicate id: the caller's fault
  auto refused = spool->add({make("ok", "siem"), make("refused", "siem")});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("injected"), std::string::npos) << refused.error().message;
  EXPECT_EQ(errors.value(), before + 1);
  EXPECT_TRUE(logs.contains("a batch of 2 deliveries could not be written: injected"));
  EXPECT_FALSE(spool->get("ok"));
  EXPECT_TRUE(spool->add({make("after", "siem")}));
}

// Found in a chaos test: after an I/O error (an ext4 shutdown) SQLite's next try said "database
// disk image is malformed", which refused every event from then on with /readyz 200, though the
// file was sound once the disk came back. Within such an episode it is waited out too.
TEST(SpoolWriteWaitsFor, AFailingDisksLaterErrorsAreWaitedOutToo) {
  for (int code : {SQLITE_FULL, SQLITE_IOERR, SQLITE_IOERR_WRITE, SQLITE_IOERR_FSYNC}) {
    EXPECT_TRUE(spool_write_waits_for(code, false)) << code;
    EXPECT_TRUE(spool_write_waits_for(code, true)) << code;
  }
  for (int code : {SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_READONLY, SQLITE_CANTOPEN}) {
    EXPECT_FALSE(spool_write_waits_for(code, false)) << code;  // damaged from the start
    EXPECT_TRUE(spool_write_waits_for(code, true)) << code;
  }
  for (int code : {SQLITE_BUSY, SQLITE_CONSTRAINT, SQLITE_ERROR}) {
    EXPECT_FALSE(spool_write_waits_for(code, false)) << code;
    EXPECT_FALSE(spool_write_waits_for(code, true)) << code;
  }
}

// Found in review: on a full disk an outcome for a withdrawn delivery is an UPDATE that changes
// nothing, so its transaction commits, and the log said "writes succeed again" (and "held
// delivery outcomes recorded") once per event, in turn with "write transaction failed".
TEST_F(SqliteSpoolTest, RecoveryIsLoggedOnlyWhenAWriteSucceeds) {
  testing::LogCapture logs;  // before the spool: its writer logs
  SqliteSpoolTuning tuning;
  tuning.outcome_retry_initial_ms = 20;
  auto spool = open(false, tuning);
  ASSERT_TRUE(spool);
  // Every insert of a "lost…" delivery loses its transaction, as a full disk does.
  inject_fault(*spool, cfg_.path,
               "CREATE TRIGGER full BEFORE INSERT ON deliveries WHEN NEW.id LIKE 'lost%' "
               "BEGIN SELECT RAISE(ROLLBACK, 'injected'); END;");
  for (int i = 0; i < 3; ++i) {
    const std::string id = "lost" + std::to_string(i);
    std::vector<Delivery> claimed;
    {
      ForeignWriteLock lock(cfg_.path);  // holds the commit until the delivery is claimed
      auto adding = spool->add_async({make(id, "siem")});
      claimed = spool->claim_due("siem", now_unix_ms(), 10);
      ASSERT_EQ(ids_of(claimed), std::vector<std::string>{id});
      lock.release();
      EXPECT_FALSE(adding.get());
    }
    // The outcome of the withdrawn delivery matches no row; the next event (usually in the same
    // transaction) fails again, and the outcome is held and retried alone.
    spool->complete(claimed[0], {AttemptOutcome::Kind::Delivered});
    EXPECT_FALSE(spool->add_async({make(id + "b", "siem")}).get());
    ASSERT_TRUE(testing::wait_until([&] { return spool->stats().in_flight == 0; },
                                    std::chrono::seconds(3)));
    ASSERT_TRUE(spool->flush());
  }
  EXPECT_EQ(logs.lines_containing("write transaction failed").size(), 1u);
  EXPECT_TRUE(logs.lines_containing("writes succeed again").empty());
  EXPECT_TRUE(logs.lines_containing("held delivery outcomes recorded").empty());
  ASSERT_TRUE(spool->add({make("written", "siem")}));
  EXPECT_EQ(logs.lines_containing("writes succeed again").size(), 1u);
}

// Found in review: pointing spool.path at another application's database switched it to WAL
// (journal_mode persists in the file) before refusing it.
TEST_F(SqliteSpoolTest, AForeignDatabaseIsRefusedWithoutSwitchingItToWal) {
  auto journal_mode = [](const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    std::string mode;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      mode = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return mode;
  };
  exec_on(cfg_.path, "CREATE TABLE users(x); INSERT INTO users VALUES(1);");
  auto foreign = SqliteSpool::open(cfg_);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("not a hookgate spool"), std::string::npos)
      << foreign.error().message;
  EXPECT_EQ(journal_mode(cfg_.path), "delete");

  config::SpoolConfig newer = cfg_;
  newer.path = (dir_ / "newer.db").string();
  exec_on(newer.path, "PRAGMA user_version = 9;");
  auto too_new = SqliteSpool::open(newer);
  ASSERT_FALSE(too_new);
  EXPECT_NE(too_new.error().message.find("schema version 9"), std::string::npos)
      << too_new.error().message;
  EXPECT_EQ(journal_mode(newer.path), "delete");
}

// Found in review: `hookgate deliveries replay ID` reported a file locked past the busy timeout
// (or read-only) as "no dead delivery with that id", and waited the timeout out again per id.
TEST_F(SqliteSpoolTest, AReplayThatCannotWriteIsAnErrorNotZero) {
  {
    auto spool = open();
    ASSERT_TRUE(spool);
    Delivery d = make("d1", "siem");
    d.state = DeliveryState::Dead;
    ASSERT_TRUE(spool->add({d}));
  }
  SqliteSpoolTuning tuning;
  tuning.busy_timeout_ms = 200;
  auto cli = open(/*tools=*/true, tuning);
  ASSERT_TRUE(cli);
  {
    ForeignWriteLock lock(cfg_.path);
    auto moved = cli->replay_ids({"d1"});
    ASSERT_FALSE(moved) << "replayed " << *moved;
    EXPECT_NE(moved.error().message.find("locked"), std::string::npos) << moved.error().message;
  }
  EXPECT_EQ(cli->get("d1")->state, DeliveryState::Dead);
  EXPECT_EQ(cli->replay_ids({"nope"}).value(), 0u);
  EXPECT_EQ(cli->replay_ids({"d1"}).value(), 1u);
}

}  // namespace
}  // namespace hookgate::webhooks
