#pragma once
// The durable spool's internals shared by its three source files: its SQL, the helpers around
// SQLite's statements, one connection (Conn), one unit of the writer's work (Op) and its
// metrics. sqlite_spool.cpp holds the writer (open, transactions, pruning, the file's health),
// sqlite_spool_lanes.cpp the in-memory lanes that intake fills and the dispatcher claims from,
// sqlite_spool_tools.cpp what `hookgate deliveries` and the admin reads do. Not installed.
//
// The SQL constants are inline arrays, not pointers: Conn caches a statement by its SQL's
// address, and an inline array has one address in every file that uses it. (kListByState and
// kCountByState hold pointers to literals, which another file could see at other addresses:
// only sqlite_spool_tools.cpp uses them.)
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/common/metrics.hpp"
#include "webhooks/sqlite_spool.hpp"

namespace hookgate::webhooks {
namespace spool_detail {

inline constexpr int kSchemaVersion = 2;
inline constexpr int kPending = 0;
inline constexpr int kDelivered = 1;
inline constexpr int kDead = 2;
// Rows per prune transaction: keeps the writer responsive.
inline constexpr int64_t kPruneChunk = 5000;
// Delivered rows per early prune (spool.retention_max_bytes), each followed by a look at the
// size: about 350 KiB of 500-byte events, so a cap is not undershot by much history.
inline constexpr int64_t kEarlyPruneChunk = 500;
// Accounting for one cached delivery beyond its body (strings, map node): an estimate is enough.
inline constexpr size_t kCachedOverhead = 256;
// A disk-mode lane's disk_next_due when nothing of it is pending but its claims.
inline constexpr int64_t kNothingDue = std::numeric_limits<int64_t>::max();
// Where eviction stops and below which a backlog left to the file may come back: 3/4 of a cap.
inline constexpr size_t low_water(size_t cap) {
  return cap / 4 * 3;
}
// The spool whose writer runs on this thread, if any (see enqueue()).
inline thread_local const void* tls_writer_of = nullptr;

// Version 2 (docs/spool.md "Schema"). A payload is one event's body as one or more webhooks
// receive it: stored once, however many deliveries share it. Its deliveries are consecutive
// rows starting at its own rowid (add() picks both), so "is any of them left?" is a rowid range
// probe (kPrunePayload) and needs no index of its own. The delivery row, the one that changes
// on every attempt, stays narrow, and the claim index holds pending rows only: an outcome
// deletes an index entry instead of moving it within an index that grows with the history.
// Both tables name their rowid (an INTEGER PRIMARY KEY is an alias of it): SQLite keeps such
// rowids through VACUUM and .dump, and may renumber the implicit ones, which would tie
// deliveries to other events' payloads.
#define HG_PAYLOADS_TABLE                                                           \
  "CREATE TABLE payloads(id INTEGER PRIMARY KEY, span INTEGER NOT NULL, "           \
  "event_id TEXT NOT NULL, event_type TEXT NOT NULL, created_ms INTEGER NOT NULL, " \
  "body BLOB NOT NULL);"
#define HG_DELIVERIES_TABLE(name)                                                        \
  "CREATE TABLE " name                                                                   \
  "(seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, payload INTEGER NOT NULL, "        \
  "webhook TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_ms INTEGER NOT NULL, " \
  "updated_ms INTEGER NOT NULL, state INTEGER NOT NULL, last_error TEXT NOT NULL);"
// Dead letters get a (small) index of their own for `replay --all-dead`: without it the replay
// scans every retained row while holding the write lock.
#define HG_INDEXES_AND_VERSION                                                             \
  "CREATE INDEX deliveries_claim ON deliveries(webhook, next_attempt_ms) WHERE state = 0;" \
  "CREATE INDEX deliveries_prune ON deliveries(updated_ms) WHERE state = 1;"               \
  "CREATE INDEX deliveries_dead ON deliveries(webhook) WHERE state = 2;"                   \
  "PRAGMA user_version = 2;"

inline constexpr char kSchema[] =
    HG_PAYLOADS_TABLE HG_DELIVERIES_TABLE("deliveries") HG_INDEXES_AND_VERSION;

// Version 1 kept the body in every delivery row. Each of its rows becomes a payload of span 1
// with the same rowid, so delivery ids and rowids stay as they were.
inline constexpr char kMigrateFrom1[] =
    HG_PAYLOADS_TABLE
    "INSERT INTO payloads(id, span, event_id, event_type, created_ms, body) "
    "SELECT rowid, 1, event_id, event_type, created_ms, body FROM deliveries;" HG_DELIVERIES_TABLE(
        "deliveries_v2")
    "INSERT INTO deliveries_v2(seq, id, payload, webhook, attempts, next_attempt_ms, "
    "updated_ms, state, last_error) SELECT rowid, id, rowid, webhook, attempts, "
    "next_attempt_ms, updated_ms, state, last_error FROM deliveries;"
    "DROP TABLE deliveries;"
    "ALTER TABLE deliveries_v2 RENAME TO deliveries;" HG_INDEXES_AND_VERSION;

// A LEFT JOIN keeps deliveries the outer loop (walked through their own indexes), and keeps a
// delivery whose payload is gone visible (read_row: body null, dead-lettered on its attempt)
// instead of pending forever and never claimable.
#define HG_SELECT(body, index)                                                                   \
  "SELECT d.rowid, d.id, d.webhook, p.event_id, p.event_type, d.attempts, "                      \
  "d.next_attempt_ms, p.created_ms, d.state, d.last_error, " body " FROM deliveries AS d " index \
  "LEFT JOIN payloads AS p ON p.rowid = d.payload "
#define HG_COLUMNS HG_SELECT("p.body", "")

// Rowids are chosen by add() (see there), not by SQLite.
inline constexpr char kInsertPayload[] =
    "INSERT INTO payloads(id, span, event_id, event_type, created_ms, body) "
    "VALUES(?1,?2,?3,?4,?5,?6)";
inline constexpr char kInsert[] =
    "INSERT INTO deliveries(seq, id, payload, webhook, attempts, next_attempt_ms, updated_ms, "
    "state, last_error) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)";
// One statement for all three outcomes: ?3 is the new state; next_attempt_ms only moves on retry.
// The row is found by its rowid (?6, known from the claim) rather than through the TEXT id
// index; comparing the id as well keeps a reused rowid from ever matching another delivery.
inline constexpr char kComplete[] =
    "UPDATE deliveries SET state = ?3, attempts = attempts + 1, updated_ms = ?2, "
    "next_attempt_ms = CASE WHEN ?3 = 0 THEN ?4 ELSE next_attempt_ms END, last_error = ?5 "
    "WHERE rowid = ?6 AND id = ?1 AND state = 0 RETURNING attempts";
inline constexpr char kReplayOne[] =
    "UPDATE deliveries SET state = 0, attempts = 0, next_attempt_ms = ?2, updated_ms = ?2 "
    "WHERE id = ?1 AND state = 2";
// `deliveries replay --delivered ID`: a delivered one too (its receiver lost what it acknowledged).
inline constexpr char kReplayOneOrDelivered[] =
    "UPDATE deliveries SET state = 0, attempts = 0, next_attempt_ms = ?2, updated_ms = ?2 "
    "WHERE id = ?1 AND state IN (1, 2)";
// Dead letters back to pending, at most ?3 of them (-1: all), in (webhook, rowid) order past the
// cursor (?4, ?5), which the caller moves to the last row returned. A row the gateway
// dead-letters again while a chunked replay runs keeps its place behind the cursor, so a later
// chunk does not replay it twice (no clock involved: a stepped clock cannot skip rows).
inline constexpr char kReplayDead[] =
    "UPDATE deliveries SET state = 0, attempts = 0, next_attempt_ms = ?2, updated_ms = ?2 "
    "WHERE rowid IN (SELECT rowid FROM deliveries INDEXED BY deliveries_dead "
    "WHERE state = 2 AND (?1 = '' OR webhook = ?1) AND (webhook, rowid) > (?4, ?5) "
    "ORDER BY webhook, rowid LIMIT ?3) RETURNING webhook, rowid";
inline constexpr char kPrune[] =
    "DELETE FROM deliveries WHERE rowid IN (SELECT rowid FROM deliveries INDEXED BY "
    "deliveries_prune WHERE state = 1 AND updated_ms < ?1 ORDER BY updated_ms LIMIT ?2) "
    "RETURNING payload";
// Dead letters past spool.dead_retention_ms, through deliveries_dead_age, which the gateway
// creates at open only when that setting is on (no cost to a spool that keeps them).
inline constexpr char kDeadAgeIndex[] =
    "CREATE INDEX IF NOT EXISTS deliveries_dead_age ON deliveries(updated_ms) WHERE state = 2";
inline constexpr char kPruneDead[] =
    "DELETE FROM deliveries WHERE rowid IN (SELECT rowid FROM deliveries INDEXED BY "
    "deliveries_dead_age WHERE state = 2 AND updated_ms < ?1 LIMIT ?2) RETURNING payload";
// `hookgate deliveries purge`: dead letters only (a pending delivery is an accepted event).
inline constexpr char kPurgeOne[] =
    "DELETE FROM deliveries WHERE id = ?1 AND state = 2 RETURNING payload";
// Up to ?3 dead letters of ?1 ('' = every webhook) with rowids up to ?2: the ceiling, read when
// the purge starts, ends it even while the gateway keeps dead-lettering new deliveries.
inline constexpr char kPurgeDead[] =
    "DELETE FROM deliveries WHERE rowid IN (SELECT rowid FROM deliveries INDEXED BY "
    "deliveries_dead WHERE state = 2 AND (?1 = '' OR webhook = ?1) AND rowid <= ?2 LIMIT ?3) "
    "RETURNING payload";
// A payload goes with the last of its deliveries.
inline constexpr char kPrunePayload[] =
    "DELETE FROM payloads WHERE rowid = ?1 AND NOT EXISTS (SELECT 1 FROM deliveries WHERE "
    "rowid >= ?1 AND rowid < ?1 + payloads.span AND payload = ?1)";
// `state = 0` is a literal so the planner can use the partial deliveries_claim, walking it in
// (next_attempt_ms, rowid) order without sorting.
inline constexpr char kClaimDue[] = HG_COLUMNS
    "WHERE d.state = 0 AND d.webhook = ?1 AND d.next_attempt_ms <= ?2 "
    "ORDER BY d.next_attempt_ms, d.rowid LIMIT ?3";
inline constexpr char kPendingKeys[] =
    "SELECT rowid, id, next_attempt_ms, 0 FROM deliveries WHERE state = 0 AND webhook = ?1 "
    "ORDER BY next_attempt_ms, rowid LIMIT ?2";
// The same with what each would take in memory (cached_size() less its overhead), for a lane that
// may come back: a join per row, which the lanes that may not are spared. length() of a blob
// reads its size, not its bytes.
inline constexpr char kPendingKeysSized[] =
    "SELECT d.rowid, d.id, d.next_attempt_ms, CASE typeof(p.body) WHEN 'blob' THEN "
    "length(p.body) ELSE length(CAST(p.body AS BLOB)) END + length(CAST(d.last_error AS BLOB)) "
    "FROM deliveries AS d LEFT JOIN payloads AS p ON p.rowid = d.payload "
    "WHERE d.state = 0 AND d.webhook = ?1 ORDER BY d.next_attempt_ms, d.rowid LIMIT ?2";
inline constexpr char kByRowid[] = HG_COLUMNS "WHERE d.rowid = ?1 AND d.state = 0";
inline constexpr char kById[] = HG_COLUMNS "WHERE d.id = ?1";
inline constexpr char kHeadById[] = HG_SELECT("NULL", "") "WHERE d.id = ?1";  // no body
// The operator's listing: no bodies (up to 1 MiB each, and never printed), each state a literal.
// Dead letters walk their own partial index and sort what they find: without it the planner
// walks the id index to skip the sort, through every delivered row (seconds on a large spool).
// Pending and delivered rows may be most of the file, where the id walk is the quick one.
#define HG_LIST(where, index) \
  HG_SELECT("NULL", index) "WHERE " where "(?1 = '' OR d.webhook = ?1) ORDER BY d.id LIMIT ?2"
inline constexpr char kListAny[] = HG_LIST("", "");
inline constexpr const char* kListByState[] = {
    HG_LIST("d.state = 0 AND ", ""), HG_LIST("d.state = 1 AND ", ""),
    HG_LIST("d.state = 2 AND ", "INDEXED BY deliveries_dead ")};
// `hookgate deliveries list`'s total, per state ('' = every webhook); each state a literal, so
// pending and dead counts walk their partial indexes.
#define HG_COUNT(where) \
  "SELECT COUNT(*) FROM deliveries WHERE " where " AND (?1 = '' OR webhook = ?1)"
inline constexpr const char* kCountByState[] = {HG_COUNT("state = 0"), HG_COUNT("state = 1"),
                                                HG_COUNT("state = 2")};
inline constexpr char kLanes[] =
    "SELECT webhook, MIN(next_attempt_ms), COUNT(*) FROM deliveries WHERE state = 0 "
    "GROUP BY webhook";
inline constexpr char kCountPending[] = "SELECT COUNT(*) FROM deliveries WHERE state = 0";
inline constexpr char kNextDue[] =
    "SELECT MIN(next_attempt_ms) FROM deliveries WHERE state = 0 AND webhook = ?1";
inline constexpr char kDataVersion[] = "PRAGMA data_version";
// Bytes the file's live pages hold (free pages excluded: SQLite reuses them before it grows).
// spool.max_bytes: full at the bound, not full again below 90 % of it (intake would otherwise
// stop and go with every commit at the edge); delivered rows pruned early from 85 %.
inline constexpr int64_t max_bytes_resume_below(int64_t max_bytes) {
  return max_bytes / 10 * 9;
}
inline constexpr int64_t max_bytes_prune_from(int64_t max_bytes) {
  return max_bytes / 20 * 17;
}
inline constexpr char kUsedBytes[] =
    "SELECT (SELECT page_count FROM pragma_page_count) - (SELECT freelist_count FROM "
    "pragma_freelist_count), (SELECT page_size FROM pragma_page_size)";
// Both through an index: the newest row by rowid, and the newest outcome (deliveries_prune).
inline constexpr char kLatestRecorded[] =
    "SELECT MAX(COALESCE((SELECT updated_ms FROM deliveries ORDER BY rowid DESC LIMIT 1), 0), "
    "COALESCE((SELECT MAX(updated_ms) FROM deliveries WHERE state = 1), 0))";
// Publisher streams' sequence numbers (SqliteSpool::keep_stream_marks, add_async_with_marks).
// Not part of the versioned schema: an open reads and drops the table, the run writes it again
// with its transactions, and a clean close rewrites it whole. A hookgate that does not know it
// leaves it alone (then the marks are stale; see load_stream_marks). The row with the empty
// stream holds the rowid mark only. Those used outside the writer's transactions are prepared
// per use, not cached: the table comes and goes.
inline constexpr char kStreamMarksExist[] =
    "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'bus_streams'";
inline constexpr char kReadStreamMarks[] =
    "SELECT stream, last_seq, seen_ms, saved_rowid FROM bus_streams";
inline constexpr char kDropStreamMarks[] = "DROP TABLE IF EXISTS bus_streams";
inline constexpr char kCreateStreamMarks[] =
    "CREATE TABLE IF NOT EXISTS bus_streams(stream TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, "
    "seen_ms INTEGER NOT NULL, saved_rowid INTEGER NOT NULL) WITHOUT ROWID";
// A stream no gateway saw for this long is forgotten at the next start: its publisher is gone,
// or (a stop that long) another gateway may have taken its messages meanwhile.
inline constexpr int64_t kMaxStreamMarkAgeMs = 3'600'000;
// While running (tick): streams no gateway saw for kMaxStreamMarkAgeMs, as the open would drop.
inline constexpr char kForgetOldStreamMarks[] =
    "DELETE FROM bus_streams WHERE stream <> '' AND seen_ms < ?1";
inline constexpr char kInsertStreamMark[] =
    "INSERT OR REPLACE INTO bus_streams(stream, last_seq, seen_ms, saved_rowid) "
    "VALUES(?1, ?2, ?3, ?4)";
// Receivers' Retry-After holds (keep_webhook_hold), so a restart honours them. Not part of the
// versioned schema either: made when missing, left alone by a hookgate that does not know it.
inline constexpr char kCreateHolds[] =
    "CREATE TABLE IF NOT EXISTS webhook_holds(webhook TEXT PRIMARY KEY, receiver TEXT NOT NULL, "
    "until_ms INTEGER NOT NULL) WITHOUT ROWID";
inline constexpr char kPutHold[] =
    "INSERT OR REPLACE INTO webhook_holds(webhook, receiver, until_ms) VALUES(?1, ?2, ?3)";
inline constexpr char kDropHold[] = "DELETE FROM webhook_holds WHERE webhook = ?1";
inline constexpr char kForgetHolds[] = "DELETE FROM webhook_holds WHERE until_ms <= ?1";
inline constexpr char kReadHolds[] = "SELECT webhook, receiver, until_ms FROM webhook_holds";
// Past every rowid in use: a payload's rowid is its first delivery's, and that delivery may be
// gone while the payload (and a later delivery) remains.
inline constexpr char kMaxRowid[] =
    "SELECT MAX(COALESCE((SELECT MAX(rowid) FROM deliveries), 0), "
    "COALESCE((SELECT rowid + span - 1 FROM payloads ORDER BY rowid DESC LIMIT 1), 0))";

inline int state_code(DeliveryState s) {
  switch (s) {
    case DeliveryState::Pending:
      return kPending;
    case DeliveryState::Delivered:
      return kDelivered;
    case DeliveryState::Dead:
      return kDead;
  }
  return kPending;
}

// The state an attempt's outcome leaves its delivery in.
inline int outcome_state(const AttemptOutcome& outcome) {
  if (outcome.kind == AttemptOutcome::Kind::Delivered) return kDelivered;
  if (outcome.kind == AttemptOutcome::Kind::Dead) return kDead;
  return kPending;
}

// Bound with SQLITE_STATIC (bind_text): must outlive the statement's step.
inline const std::string kNoError;

inline DeliveryState state_from(int code) {
  if (code == kDelivered) return DeliveryState::Delivered;
  if (code == kDead) return DeliveryState::Dead;
  return DeliveryState::Pending;
}

inline constexpr int64_t kDiskRetryInitialMs = 100;
inline constexpr int64_t kDiskRetryMaxMs = 5000;

// Resets a cached statement when the scope ends, so no statement keeps a read snapshot open
// (which would stall WAL checkpoints) and bindings never leak into the next use.
class StmtScope {
 public:
  explicit StmtScope(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StmtScope() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  StmtScope(const StmtScope&) = delete;
  StmtScope& operator=(const StmtScope&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

inline void bind_text(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}

// One row of bus_streams through kInsertStreamMark.
inline bool put_stream_mark(sqlite3_stmt* s, const StreamMark& mark, int64_t saved_rowid) {
  StmtScope scope(s);
  bind_text(s, 1, mark.stream);
  sqlite3_bind_int64(s, 2, static_cast<int64_t>(mark.seq));  // the bits round-trip
  sqlite3_bind_int64(s, 3, mark.seen_ms);
  sqlite3_bind_int64(s, 4, saved_rowid);
  return sqlite3_step(s) == SQLITE_DONE;
}

inline std::string column_text(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return p == nullptr ? std::string()
                      : std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, i)));
}

// Reads a row selected with HG_COLUMNS.
inline std::pair<int64_t, Delivery> read_row(sqlite3_stmt* s) {
  Delivery d;
  const int64_t rowid = sqlite3_column_int64(s, 0);
  d.id = column_text(s, 1);
  d.webhook = column_text(s, 2);
  d.event_id = column_text(s, 3);
  d.event_type = column_text(s, 4);
  d.attempts = sqlite3_column_int(s, 5);
  d.next_attempt_ms = sqlite3_column_int64(s, 6);
  d.created_ms = sqlite3_column_int64(s, 7);
  d.state = state_from(sqlite3_column_int(s, 8));
  d.last_error = column_text(s, 9);
  // NULL: the payload row is gone (the file was edited or damaged). The body stays null, and
  // the dispatcher dead-letters the delivery instead of sending an empty body.
  if (sqlite3_column_type(s, 10) == SQLITE_NULL) return {rowid, std::move(d)};
  const void* blob = sqlite3_column_blob(s, 10);
  const int n = sqlite3_column_bytes(s, 10);
  d.body = std::make_shared<const std::string>(
      blob == nullptr ? std::string()
                      : std::string(static_cast<const char*>(blob), static_cast<size_t>(n)));
  return {rowid, std::move(d)};
}

// Deliveries of one event with the same body (the router shares it between webhooks with the
// same body mode) are stored with one payload row.
inline bool same_payload(const Delivery& a, const Delivery& b) {
  return a.body && a.body == b.body && a.event_id == b.event_id && a.event_type == b.event_type &&
         a.created_ms == b.created_ms;
}

// Between two chunks of a CLI run: the gateway's writer gets the lock for at least as long as the
// chunk held it (and 10 ms at least), so a long replay or purge takes about half the write time.
inline void yield_write_lock(std::chrono::steady_clock::time_point chunk_started) {
  const auto held = std::chrono::steady_clock::now() - chunk_started;
  std::this_thread::sleep_for(
      std::max<std::chrono::steady_clock::duration>(held, std::chrono::milliseconds(10)));
}

inline size_t cached_size(const Delivery& d) {
  return kCachedOverhead + (d.body ? d.body->size() : 0) + d.last_error.size();
}

}  // namespace spool_detail

// One connection and its prepared statements (prepared once, reused: the writer's hot loop never
// re-parses SQL). Not thread-safe: each Conn is used by one thread at a time.
struct SqliteSpool::Conn {
  sqlite3* db = nullptr;
  std::unordered_map<const char*, sqlite3_stmt*> stmts;  // keyed by the SQL constant's address

  ~Conn() {
    for (auto& [sql, stmt] : stmts) sqlite3_finalize(stmt);
    if (db != nullptr) sqlite3_close_v2(db);
  }
  // SQLite's message plus the OS reason for I/O failures ("disk I/O error (No space left on
  // device)"), so the operator sees what to fix.
  std::string error() const {
    if (db == nullptr) return "out of memory";
    std::string msg = sqlite3_errmsg(db);
    const int code = sqlite3_extended_errcode(db) & 0xff;
    const int sys = sqlite3_system_errno(db);
    if ((code == SQLITE_IOERR || code == SQLITE_FULL || code == SQLITE_CANTOPEN) && sys != 0)
      msg += std::string(" (") + std::strerror(sys) + ")";
    return msg;
  }
  sqlite3_stmt* stmt(const char* sql) {
    auto it = stmts.find(sql);
    if (it != stmts.end()) return it->second;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      sqlite3_finalize(s);
      return nullptr;
    }
    stmts.emplace(sql, s);
    return s;
  }
  bool exec(const char* sql) {
    return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  // Undoes and ends savepoint `name`; false when it could not (the transaction must then go:
  // committing it would keep what the savepoint was meant to undo).
  bool undo_savepoint(const std::string& name) {
    return exec(("ROLLBACK TO " + name).c_str()) && exec(("RELEASE " + name).c_str());
  }
  // First column of the first row as an integer (pragmas, counts); nullopt on error or NULL.
  std::optional<int64_t> scalar(const char* sql) {
    sqlite3_stmt* s = stmt(sql);
    if (s == nullptr) return std::nullopt;
    spool_detail::StmtScope scope(s);
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL)
      return std::nullopt;
    return sqlite3_column_int64(s, 0);
  }
};

struct SqliteSpool::Op {
  enum class Kind { Add, Complete, Replay, Prune, Flush, Marks, Hold };
  struct Outcome {
    Status status;
    size_t count = 0;
  };
  Kind kind = Kind::Flush;
  // Someone waits for this op's commit to go on (add(), flush, replay, a delivery of a lane in
  // disk mode). Outcomes, and add_async() batches whose deliveries are all claimable already,
  // are not urgent (writer_loop).
  bool urgent = true;
  std::vector<Delivery> batch;  // Add
  std::vector<int64_t> rowids;  // Add: chosen by add()
  // Add: which deliveries add() already made claimable, and under which resync generation.
  std::vector<bool> published;
  uint64_t published_gen = 0;
  // Add, per try: the Complete op whose outcome is written with each delivery's insert (null:
  // none); Complete, per try: the Add op it was folded into (fold_outcomes_into_inserts).
  std::vector<Op*> folded;
  Op* folded_into = nullptr;
  StreamMarks marks;             // Add, Marks: written in the same transaction (write_marks)
  Delivery delivery;             // Complete
  AttemptOutcome outcome{};      // Complete
  std::vector<std::string> ids;  // Replay
  bool all_dead = false;         // Replay
  std::string webhook;           // Replay (all_dead filter), Hold
  WebhookHold hold;              // Hold
  int64_t now_ms = 0;            // Prune
  // Writer results.
  Status status;
  size_t count = 0;                                // Replay: rows moved; Prune: rows deleted
  bool applied = false;                            // Complete: the row was pending and changed
  bool write_failed = false;                       // Complete: not recorded (SQLite error)
  int write_tries = 0;                             // Complete: failed writes so far
  int64_t rowid = 0;                               // Complete: from the claim
  int attempts = 0;                                // Complete
  std::unique_ptr<std::promise<Outcome>> done;     // only for callers that wait
  std::unique_ptr<std::promise<Status>> accepted;  // Add: answered when its commit lands
};

namespace spool_detail {

struct SpoolMetrics {
  metrics::Histogram& commit = metrics::histogram("hookgate_spool_commit_duration_seconds",
                                                  "Time to write and commit one spool transaction");
  metrics::Counter& commits =
      metrics::counter("hookgate_spool_commits_total", "Spool transactions committed");
  metrics::Counter& rows = metrics::counter(
      "hookgate_spool_rows_written_total",
      "Deliveries added and outcomes recorded by committed spool transactions (÷ commits = group "
      "size)");
  metrics::Counter& folded = metrics::counter(
      "hookgate_spool_outcomes_folded_total",
      "Outcomes written with their delivery's insert, in the same transaction (counted in "
      "hookgate_spool_rows_written_total too)");
  metrics::Counter& errors =
      metrics::counter("hookgate_spool_write_errors_total",
                       "Spool transactions, or add() batches within one, that failed to write "
                       "(a duplicate delivery id aside)");
  metrics::Histogram& checkpoint = metrics::histogram(
      "hookgate_spool_checkpoint_duration_seconds",
      "Time to copy WAL pages into the database file (checkpointer thread, off the commit path)");
  metrics::Gauge& unrecorded = metrics::gauge(
      "hookgate_spool_unrecorded_outcomes",
      "Delivery outcomes the spool failed to write and is retrying (their deliveries are held)");
  metrics::Gauge& waiting_for_disk = metrics::gauge(
      "hookgate_spool_waiting_for_disk",
      "1 while new events wait for the disk (a full disk, an I/O error): intake waits too");
  metrics::Gauge& full = metrics::gauge(
      "hookgate_spool_full",
      "1 while the spool's rows reach spool.max_bytes: intake waits until deliveries free space");
  metrics::Counter& inline_checkpoints = metrics::counter(
      "hookgate_spool_inline_checkpoints_total",
      "Checkpoints the writer ran itself because the WAL outgrew the checkpointer");
  metrics::Gauge& file_missing = metrics::gauge(
      "hookgate_spool_file_missing",
      "1 while spool.path, or its -wal or -shm, no longer names the file the gateway has open "
      "(deleted or replaced): intake waits; the log says what to do");
  metrics::Gauge& file_bytes = metrics::gauge(
      "hookgate_spool_file_bytes",
      "Disk space the spool takes: the database file and its WAL (neither shrinks by itself)");
  metrics::Gauge& used_bytes = metrics::gauge(
      "hookgate_spool_used_bytes",
      "Bytes of the spool's database pages in use (free pages excluded): what its rows take");
  metrics::Counter& file_claims = metrics::counter(
      "hookgate_spool_claims_from_file_total",
      "Claims of due deliveries that read the spool file: those of webhooks whose backlog "
      "outgrew the spool's memory");
  metrics::Counter& to_file = metrics::counter(
      "hookgate_spool_backlogs_moved_to_file_total",
      "Times a webhook's claimable deliveries were left to the file to keep the spool's memory "
      "bounded (the biggest backlog goes first)");
  metrics::Counter& to_memory = metrics::counter(
      "hookgate_spool_backlogs_moved_to_memory_total",
      "Times a webhook's backlog in the file became small enough to be held in memory again");
};
inline SpoolMetrics& spool_metrics() {
  static SpoolMetrics m;
  return m;
}

}  // namespace spool_detail
}  // namespace hookgate::webhooks
