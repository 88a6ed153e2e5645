#include "webhooks/sqlite_spool.hpp"

// The durable spool as `hookgate deliveries` and the admin endpoint read and change it: counts,
// listings, one delivery, replay and purge.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <tuple>
#include <utility>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/text.hpp"
#include "webhooks/sqlite_spool_detail.hpp"

namespace hookgate::webhooks {

using namespace spool_detail;  // NOLINT: this file is the spool's own

bool SqliteSpool::replay_rows(Conn& c, const std::vector<std::string>& ids, bool all_dead,
                              const std::string& webhook, int64_t now, size_t& moved,
                              bool delivered_too) {
  if (all_dead) {
    ReplayCursor from_the_start;
    return replay_dead_chunk(c, webhook, now, -1, from_the_start, moved);
  }
  sqlite3_stmt* s = c.stmt(delivered_too ? kReplayOneOrDelivered : kReplayOne);
  if (s == nullptr) return false;
  for (const auto& id : ids) {
    StmtScope scope(s);
    bind_text(s, 1, id);
    sqlite3_bind_int64(s, 2, now);
    if (sqlite3_step(s) != SQLITE_DONE) return false;
    moved += static_cast<size_t>(sqlite3_changes(c.db));
  }
  return true;
}

bool SqliteSpool::replay_dead_chunk(Conn& c, const std::string& webhook, int64_t now, int64_t limit,
                                    ReplayCursor& cursor, size_t& moved) {
  sqlite3_stmt* s = c.stmt(kReplayDead);
  if (s == nullptr) return false;
  StmtScope scope(s);
  bind_text(s, 1, webhook);
  sqlite3_bind_int64(s, 2, now);
  sqlite3_bind_int64(s, 3, limit);
  bind_text(s, 4, cursor.webhook);
  sqlite3_bind_int64(s, 5, cursor.rowid);
  ReplayCursor last = cursor;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    ++moved;
    // RETURNING gives no order: keep the greatest (webhook, rowid).
    ReplayCursor row{column_text(s, 0), sqlite3_column_int64(s, 1)};
    if (std::tie(row.webhook, row.rowid) > std::tie(last.webhook, last.rowid)) last = row;
  }
  if (rc != SQLITE_DONE) return false;
  cursor = std::move(last);
  return true;
}

size_t SqliteSpool::pending_count() {
  if (tools_) {
    std::lock_guard rl(read_mu_);
    if (!reader_) return 0;
    auto count = reader_->scalar(kCountPending);
    if (!count) note_read_error_locked();
    return static_cast<size_t>(count.value_or(0));
  }
  std::lock_guard lock(mu_);
  return pending_;
}

size_t SqliteSpool::count(DeliveryState state, const std::string& webhook) {
  std::lock_guard rl(read_mu_);
  if (!reader_) return 0;
  sqlite3_stmt* s = reader_->stmt(kCountByState[state_code(state)]);
  if (s == nullptr) {
    note_read_error_locked();
    return 0;
  }
  StmtScope scope(s);
  bind_text(s, 1, webhook);
  if (sqlite3_step(s) != SQLITE_ROW) {
    note_read_error_locked();
    return 0;
  }
  return static_cast<size_t>(sqlite3_column_int64(s, 0));
}

void SqliteSpool::begin_read_snapshot() {
  std::lock_guard rl(read_mu_);
  // BEGIN alone takes no snapshot yet: the first read does, and the rest read what it saw.
  if (reader_ && !reader_->exec("BEGIN")) note_read_error_locked();
}

void SqliteSpool::end_read_snapshot() {
  std::lock_guard rl(read_mu_);
  if (reader_ && sqlite3_get_autocommit(reader_->db) == 0) (void)reader_->exec("COMMIT");
}

std::vector<Delivery> SqliteSpool::list(std::optional<DeliveryState> state,
                                        const std::string& webhook, size_t limit) {
  std::vector<Delivery> out;
  std::lock_guard rl(read_mu_);
  if (!reader_) return out;
  sqlite3_stmt* s = reader_->stmt(state ? kListByState[state_code(*state)] : kListAny);
  if (s == nullptr) {
    note_read_error_locked();
    return out;
  }
  StmtScope scope(s);
  bind_text(s, 1, webhook);
  sqlite3_bind_int64(s, 2, limit == 0 ? -1 : static_cast<int64_t>(limit));
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(read_row(s).second);
  if (rc != SQLITE_DONE) note_read_error_locked();
  return out;
}

void SqliteSpool::note_read_error_locked() {
  read_error_ = reader_->error();
  spdlog::warn("spool {}: read failed: {}", path_, read_error_);
}

std::optional<std::string> SqliteSpool::take_read_error() {
  std::lock_guard rl(read_mu_);
  if (read_error_.empty()) return std::nullopt;
  return std::exchange(read_error_, std::string());
}

std::map<std::string, size_t> SqliteSpool::pending_by_webhook() {
  std::map<std::string, size_t> out;
  std::lock_guard rl(read_mu_);
  if (!reader_) return out;
  if (!read_lanes(*reader_,
                  [&](std::string name, int64_t, size_t count) { out[std::move(name)] = count; }))
    note_read_error_locked();
  return out;
}

std::optional<Delivery> SqliteSpool::get(const std::string& id) {
  return get_by_id(kById, id);
}

std::optional<Delivery> SqliteSpool::get_head(const std::string& id) {
  return get_by_id(kHeadById, id);
}

std::optional<Delivery> SqliteSpool::get_by_id(const char* sql, const std::string& id) {
  std::lock_guard rl(read_mu_);
  if (!reader_) return std::nullopt;
  sqlite3_stmt* s = reader_->stmt(sql);
  if (s == nullptr) {
    note_read_error_locked();
    return std::nullopt;
  }
  StmtScope scope(s);
  bind_text(s, 1, id);
  const int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW) {
    if (rc != SQLITE_DONE) note_read_error_locked();
    return std::nullopt;
  }
  return read_row(s).second;
}

Result<size_t> SqliteSpool::replay(const std::vector<std::string>& ids) {
  return replay_ids(ids);
}

Result<size_t> SqliteSpool::replay_ids(const std::vector<std::string>& ids, bool delivered_too) {
  if (ids.empty()) return size_t{0};
  if (delivered_too && !tools_)
    return make_error("spool " + path_ + ": replaying delivered ids is for `hookgate deliveries`");
  return tools_ ? replay_direct(ids, false, "", delivered_too) : replay_via_writer(ids, false, "");
}

Result<size_t> SqliteSpool::replay_all_dead(const std::string& webhook) {
  return tools_ ? replay_direct({}, true, webhook) : replay_via_writer({}, true, webhook);
}

Result<size_t> SqliteSpool::replay_via_writer(const std::vector<std::string>& ids, bool all_dead,
                                              const std::string& webhook) {
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Replay;
  op->ids = ids;
  op->all_dead = all_dead;
  op->webhook = webhook;
  op->done = std::make_unique<std::promise<Op::Outcome>>();
  auto fut = op->done->get_future();
  if (auto st = enqueue(std::move(op)); !st) return st.error();
  auto out = fut.get();
  if (!out.status) return out.status.error();
  return out.count;
}

Result<size_t> SqliteSpool::replay_direct(const std::vector<std::string>& ids, bool all_dead,
                                          const std::string& webhook, bool delivered_too) {
  std::lock_guard rl(read_mu_);
  if (!reader_) return make_error("spool " + path_ + " is closed");
  Conn& c = *reader_;
  const int64_t now = schedule_now_ms();
  size_t moved = 0;
  auto failed = [&] {
    auto error = make_error("spool " + path_ + ": replay: " + c.error() +
                            (moved > 0 ? " (" + std::to_string(moved) + " replayed before)" : ""));
    if (!sqlite3_get_autocommit(c.db)) c.exec("ROLLBACK");
    return error;
  };
  // IMMEDIATE: take the write lock up front (waiting up to busy_timeout for the gateway's
  // writer) instead of failing on upgrade halfway through.
  if (!all_dead) {
    if (!c.exec("BEGIN IMMEDIATE") ||
        !replay_rows(c, ids, false, webhook, now, moved, delivered_too) || !c.exec("COMMIT")) {
      moved = 0;  // one transaction, rolled back: nothing was replayed before
      return failed();
    }
    return moved;
  }
  // Every dead letter, in chunks: a single UPDATE of a large backlog would hold the write lock
  // for seconds while the gateway's writer waits.
  const size_t chunk = std::max<size_t>(tuning_.replay_chunk_rows, 1);
  ReplayCursor cursor;
  for (;;) {
    size_t changed = 0;
    if (!c.exec("BEGIN IMMEDIATE")) return failed();
    const auto chunk_started = std::chrono::steady_clock::now();  // holding the lock from here
    if (!replay_dead_chunk(c, webhook, now, static_cast<int64_t>(chunk), cursor, changed) ||
        !c.exec("COMMIT"))
      return failed();
    moved += changed;
    if (changed < chunk) return moved;
    yield_write_lock(chunk_started);
  }
}

Result<size_t> SqliteSpool::purge_dead(const std::vector<std::string>& ids, bool all_dead,
                                       const std::string& webhook) {
  if (!tools_) return make_error("spool " + path_ + ": purge is for `hookgate deliveries` only");
  std::lock_guard rl(read_mu_);
  if (!reader_) return make_error("spool " + path_ + " is closed");
  Conn& c = *reader_;
  size_t deleted = 0;
  auto failed = [&] {
    auto error =
        make_error("spool " + path_ + ": purge: " + c.error() +
                   (deleted > 0 ? " (" + std::to_string(deleted) + " deleted before)" : ""));
    if (!sqlite3_get_autocommit(c.db)) c.exec("ROLLBACK");
    return error;
  };
  if (!all_dead) {
    // Counted apart until the commit: a rolled-back delete must not read "N deleted before".
    size_t in_transaction = 0;
    sqlite3_stmt* s = c.stmt(kPurgeOne);
    if (s == nullptr || !c.exec("BEGIN IMMEDIATE")) return failed();
    for (const auto& id : ids) {
      StmtScope scope(s);
      bind_text(s, 1, id);
      if (!delete_rows(c, s, in_transaction)) return failed();
    }
    if (!c.exec("COMMIT")) return failed();
    return in_transaction;
  }
  // In chunks, as replay: one DELETE of a large backlog would hold the write lock for seconds.
  auto ceiling = c.scalar(kMaxRowid);
  sqlite3_stmt* s = c.stmt(kPurgeDead);
  if (!ceiling || s == nullptr) return failed();
  const size_t chunk = std::max<size_t>(tuning_.replay_chunk_rows, 1);
  for (;;) {
    size_t changed = 0;
    if (!c.exec("BEGIN IMMEDIATE")) return failed();
    const auto chunk_started = std::chrono::steady_clock::now();  // holding the lock from here
    {
      StmtScope scope(s);
      bind_text(s, 1, webhook);
      sqlite3_bind_int64(s, 2, *ceiling);
      sqlite3_bind_int64(s, 3, static_cast<int64_t>(chunk));
      if (!delete_rows(c, s, changed)) return failed();
    }
    if (!c.exec("COMMIT")) return failed();
    deleted += changed;
    if (changed < chunk) return deleted;
    yield_write_lock(chunk_started);
  }
}

}  // namespace hookgate::webhooks
