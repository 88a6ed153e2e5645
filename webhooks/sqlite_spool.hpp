#pragma once
// The durable DeliveryStore: an SQLite file in WAL mode (docs/spool.md).
//
// One writer thread owns the write connection and group-commits everything queued since its last
// transaction (adds, attempt outcomes, replays, pruning). add() blocks until the transaction
// holding its batch has committed: that is when the gateway may call the event accepted.
//
// Claiming is served from a bounded in-memory copy of each webhook's claimable deliveries, filled
// by add() while the writer commits the batch (a failed commit withdraws them again). A webhook
// whose backlog does not fit (and every webhook with pending rows at open) is in "disk mode":
// claims page from the file until the backlog is drained. Claims live in memory only, so after a
// crash in-flight deliveries are simply pending again, with the same ids. Changes made by another
// process (the `hookgate deliveries` CLI replaying dead letters) are noticed through PRAGMA
// data_version within ~200 ms.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"
#include "webhooks/delivery.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace hookgate::webhooks {

// The files of a spool: the database at spool.path, its WAL and its shared memory.
inline constexpr std::array<const char*, 3> kSpoolFileSuffixes = {"", "-wal", "-shm"};

// Knobs that are not worth a config key; tests shrink them.
struct SqliteSpoolTuning {
  size_t max_cached_deliveries = 5000;  // in-memory claimable copies, all webhooks together
  size_t max_cached_bytes = 64u << 20;  // body bytes of those copies (bodies may be 1 MiB)
  size_t refill_limit = 256;            // a drained disk-mode webhook with at most this many
                                        // (future) rows left is loaded back into memory, if
                                        // the lanes hold under 3/4 of both caps (see
                                        // enforce_cap_locked)
  size_t read_ahead_rows = 512;         // due rows a disk-mode claim reads beyond its own,
  size_t read_ahead_bytes = 4u << 20;   // up to this many body bytes, for the next claims
  size_t max_page_bytes = 16u << 20;    // read-ahead held by all disk-mode lanes together
  // A page nothing claimed from for this long (a paused or removed webhook, a stalled endpoint)
  // is dropped when another lane finds the shared budget short; its rows stay in the file.
  int64_t idle_page_ms = 2000;
  int64_t prune_interval_ms = 60000;  // how often delivered rows past retention are pruned, at
                                      // most (a tenth of a short retention, from 1 s, if less)
  int64_t poll_interval_ms = 200;     // writer idle tick: external-change check, pruning
  // How often the checkpointer thread counts pending deliveries per webhook from the file, for
  // pending_by_webhook_snapshot() (hookgate_webhook_pending, /status).
  int64_t pending_snapshot_interval_ms = 5000;
  int busy_timeout_ms = 5000;  // waiting for the other process's write lock
  // The writer waits this many more busy timeouts (warning each time) before it gives a batch
  // up: a refused batch is events the gateway cannot accept, so a CLI command's long
  // transaction must not cost them.
  int busy_retries = 11;
  size_t replay_chunk_rows = 5000;  // `deliveries replay --all-dead`: rows per transaction
  // Outcomes handed to complete() and not committed yet, all webhooks together: past it,
  // claim_due() hands out nothing until the writer catches up, so a stalled writer (another
  // process's lock, a full disk) cannot make the dispatcher queue outcomes without bound.
  // Requests still waiting for their answer do not count: those the webhooks' max_in_flight
  // bounds, and hung endpoints must not starve the healthy ones of claims.
  size_t max_unrecorded_outcomes = 8192;
  // An outcome the writer could not record is kept, its claim with it, and written again after
  // this wait, doubling up to the max: the delivery is not sent again meanwhile.
  int64_t outcome_retry_initial_ms = 100;
  int64_t outcome_retry_max_ms = 5000;
};

// Whether a batch of adds whose transaction failed with SQLite result `code` is written again
// (after 100 ms, doubling to 5 s; intake waits, /readyz 503) rather than refused: a refused event
// is lost, while one the bus still holds is not. A full disk or an I/O error waits; so, within an
// episode of those (`disk_trouble_before`), does what a failing disk says next (a "malformed" or
// read-only file). Anything else (a read-only or damaged file from the start, a lock held past
// busy_retries) refuses the batch.
bool spool_write_waits_for(int code, bool disk_trouble_before);

class SqliteSpool final : public DeliveryStore {
 public:
  // Opens (creating if needed, gateway mode) the spool at cfg.path. With read_only_tools the
  // spool serves only the operator views (list/get/replay, pending_count, next_due) straight from
  // the file, starts no writer thread and never creates or migrates the file: that is the
  // `hookgate deliveries` CLI running beside a live gateway.
  static Result<std::unique_ptr<SqliteSpool>> open(const config::SpoolConfig& cfg,
                                                   bool read_only_tools = false);
  static Result<std::unique_ptr<SqliteSpool>> open(const config::SpoolConfig& cfg,
                                                   const SqliteSpoolTuning& tuning,
                                                   bool read_only_tools = false);
  ~SqliteSpool() override;
  SqliteSpool(const SqliteSpool&) = delete;
  SqliteSpool& operator=(const SqliteSpool&) = delete;

  // Blocks until the batch is committed (or failed: disk full, corrupt file, duplicate id); the
  // batch is accepted whole or not at all.
  Status add(std::vector<Delivery> batch) override;
  // Deliveries of webhooks served from memory are claimable as soon as this returns; the future
  // answers when the commit lands (the event is accepted) or fails (they are withdrawn).
  std::future<Status> add_async(std::vector<Delivery> batch) override;
  // The marks go into bus_streams in the batch's transaction (docs/spool.md "Stream marks").
  std::future<Status> add_async_with_marks(std::vector<Delivery> batch, StreamMarks marks) override;
  void write_stream_marks(StreamMarks marks) override;
  // Due order: (next_attempt_ms, insertion order); a fresh delivery is due at its created_ms.
  std::vector<Delivery> claim_due(const std::string& webhook, int64_t now_ms,
                                  size_t limit) override;
  // Only a delivery claimed here can be completed, once. Queued to the writer, not waited for:
  // a crash before the commit means one more attempt (at-least-once). The claim ends when the
  // outcome commits, so the delivery is never handed out in between.
  void complete(const Delivery& delivery, const AttemptOutcome& outcome) override;
  // Memory only: the file never knew about the claim.
  void release(const Delivery& delivery) override;
  // For a webhook paging from disk this may be a lower bound (at worst one early, empty claim).
  std::optional<int64_t> next_due(const std::string& webhook) override;
  size_t pending_count() override;
  // Called from the writer thread or from an add() caller, never under a spool lock. The
  // callback may claim, complete and release; a blocking call (add, flush, replay, prune) from
  // it on the writer thread fails instead of deadlocking.
  void set_on_ready(std::function<void()> on_ready) override;
  std::optional<std::vector<std::string>> take_ready_webhooks() override;

  // Ordered by id (time-ordered, so oldest first); limit 0 = no limit; webhook "" = all. Bodies
  // are not read (body stays null): get() has them.
  std::vector<Delivery> list(std::optional<DeliveryState> state, const std::string& webhook,
                             size_t limit) override;
  std::optional<Delivery> get(const std::string& id) override;
  // As get(), without reading the body (up to 1 MiB): for state look-ups of many ids.
  std::optional<Delivery> get_head(const std::string& id);
  // Rows in `state` (of `webhook`; "" = all), read from the file; 0 on a read error
  // (take_read_error() says which).
  size_t count(DeliveryState state, const std::string& webhook);
  // Tools mode: the reads between these two see one state of the file (a read transaction), so a
  // listing and its totals agree while a gateway writes beside them. Not nested.
  void begin_read_snapshot();
  void end_read_snapshot();
  // Dead → pending, attempts 0, due now (last_error kept as history). Blocks until committed.
  // An error when the replay could not be written (the file locked beyond busy_timeout,
  // read-only, damaged), so `hookgate deliveries replay` does not report the ids as "no dead
  // delivery with that id".
  Result<size_t> replay(const std::vector<std::string>& ids) override;
  // As replay(); `delivered_too` (tools mode only: `deliveries replay --delivered`) sends delivered
  // ids again as well, same id, attempts from 1.
  Result<size_t> replay_ids(const std::vector<std::string>& ids, bool delivered_too = false);
  std::map<std::string, size_t> pending_by_webhook() override;
  // What the checkpointer thread last counted (every pending_snapshot_interval_ms, on its own
  // connection: the count walks the pending index, so neither the writer nor claims wait on it).
  std::map<std::string, size_t> pending_by_webhook_snapshot() override;
  [[nodiscard]] uint64_t external_changes() const override {
    return external_changes_.load(std::memory_order_acquire);
  }
  std::map<std::string, size_t> pending_by_webhook_after_external_change() override;
  // False while adds wait for the disk (a full disk, an I/O error: the writer tries their
  // transaction again); true again once it commits, or the wait ends at a stop.
  [[nodiscard]] bool writable() const override {
    return !write_failing_.load(std::memory_order_relaxed);
  }
  // spool.max_bytes reached (measured after each commit of adds, once a second, and while full
  // after each commit of a delivered outcome).
  [[nodiscard]] bool full() const override { return full_.load(std::memory_order_relaxed); }
  [[nodiscard]] bool file_missing() const override {
    return file_missing_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] bool database_missing() const override {
    return database_missing_.load(std::memory_order_relaxed);
  }
  // A reload's spool.max_bytes: the writer looks at it with its next measure (within a second).
  void set_max_bytes(int64_t bytes) override { max_bytes_.store(bytes, std::memory_order_relaxed); }
  [[nodiscard]] bool failing_to_write() const override {
    return last_write_failed_.load(std::memory_order_relaxed);
  }
  // From here on a foreign write lock is waited out for one busy timeout, not busy_retries more.
  // Also ends a wait for the disk (the batch is then refused, as at any stop).
  void begin_stop() override;
  // Kept in a table of their own (bus_streams), written with the run's transactions and whole at
  // a clean close; the next open reads and drops it. All are dropped when a delivery was added
  // after the rowid mark (a gateway that does not know the table ran on the file in between),
  // and each one no gateway saw for an hour (docs/spool.md "Stream marks").
  StreamMarks take_stream_marks() override;
  void keep_webhook_hold(const std::string& webhook, const WebhookHold& hold) override;
  std::map<std::string, WebhookHold> take_webhook_holds() override;
  void keep_stream_marks(StreamMarks marks) override;
  // `hookgate deliveries replay --all-dead` (webhook "" = every webhook). An error when the
  // replay could not be written (no write permission, the file locked beyond busy_timeout).
  Result<size_t> replay_all_dead(const std::string& webhook = "");

  // `hookgate deliveries purge ID... | --all-dead [--webhook NAME]` (tools mode only): deletes
  // those dead letters for good, and each payload whose last delivery that was; a pending or
  // delivered id is left alone. Chunked like replay_all_dead(). An error when it could not write.
  Result<size_t> purge_dead(const std::vector<std::string>& ids, bool all_dead,
                            const std::string& webhook = "");

  // Deletes delivered rows last updated before now_ms - retention_ms (and dead ones before
  // now_ms - dead_retention_ms, when that is set), and each payload whose last delivery that
  // was; returns how many deliveries. The writer also does this on its own every
  // prune_interval_ms() and right after open.
  size_t prune(int64_t now_ms);
  // Waits until everything queued so far (including complete()) is committed.
  Status flush();
  // Flushes, stops the writer, checkpoints the WAL into the file and closes it. Idempotent; the
  // destructor calls it. Afterwards add() fails and claims return nothing.
  void close() override;

  struct Stats {
    size_t cached = 0;  // deliveries held in memory for claiming
    size_t cached_bytes = 0;
    size_t page_bytes = 0;           // read ahead by disk-mode lanes (see SqliteSpoolTuning)
    size_t in_flight = 0;            // claimed, outcome not committed yet
    size_t unrecorded_outcomes = 0;  // outcomes the writer failed to record and will retry
    uint64_t disk_reads = 0;         // claims that read the file (not served from memory)
    uint64_t moved_to_disk = 0;      // lanes left to the file to keep within the caps
    uint64_t moved_to_memory = 0;    // disk-mode lanes loaded back into memory
    uint64_t commits = 0;            // writer transactions
    uint64_t batches_taken = 0;      // batches the writer took up (before it begins: a test's
                                     // way to know what the next batch cannot hold)
    uint64_t rows_written = 0;
    uint64_t outcomes_folded = 0;  // outcomes written with their delivery's insert
  };
  Stats stats();
  // The last error a read (list, get, pending_count, pending_by_webhook) met, cleared by taking
  // it: those answer "nothing" on a locked or damaged file, which `hookgate deliveries` must not
  // print as an empty spool.
  std::optional<std::string> take_read_error();
  const std::string& path() const { return path_; }
  // The latest time the file recorded when it was opened (the newest delivery's update and the
  // newest outcome), on the schedule clock that wrote it. The gateway holds its schedule clock
  // at or above it, so a wall clock set back while it was stopped does not delay what is pending.
  int64_t latest_recorded_ms() const { return latest_recorded_ms_; }

 private:
  struct Op;  // a unit of work for the writer thread
  // Claimable deliveries of one webhook that are not in flight.
  struct Lane {
    // Memory mode (disk == false): `cached` holds every such delivery, keyed like the claim index
    // (next_attempt_ms, rowid). Disk mode: the file is the truth and `cached` is empty.
    std::map<std::pair<int64_t, int64_t>, Delivery> cached;
    size_t cached_bytes = 0;
    bool disk = false;
    int64_t disk_next_due = 0;  // disk mode: a lower bound on the earliest next_attempt_ms
    // Disk mode: due rows read ahead by the last disk claim, in due order, (rowid, delivery).
    // Claims take from here first, so the file is read once per page, not once per claim.
    // Still pending in the file; dropped whenever the file becomes the truth again (resync).
    std::deque<std::pair<int64_t, Delivery>> page;
    size_t page_bytes = 0;     // cached_size() of the page's rows
    int64_t page_used_ns = 0;  // steady clock: the page was last filled or claimed from
    // Ids of this lane's deliveries in in_flight_: a disk-mode claim skips them without walking
    // every webhook's claims (thousands when endpoints hang).
    std::unordered_set<std::string> claimed;
    bool listed_ready = false;  // named in ready_
  };
  struct InFlight {
    std::string webhook;
    int64_t rowid = 0;
    bool completing = false;  // complete() queued its outcome; the claim ends when it commits
    size_t bytes = 0;         // cached_size(): what a retry brings back to its lane
  };
  struct Conn;  // one sqlite3 handle and its prepared statements

  SqliteSpool(std::string path, const config::SpoolConfig& cfg, const SqliteSpoolTuning& tuning,
              bool tools);
  Status init(bool tools);
  Status migrate_from_1(Conn& c);  // schema 1 to 2, in one transaction
  // At open, before the writer thread starts; `last_rowid` is the file's (kMaxRowid).
  Status load_stream_marks(int64_t last_rowid);
  Status load_webhook_holds();  // at open, before the writer thread starts
  // Writer thread: sets hookgate_spool_used_bytes (and with `files` hookgate_spool_file_bytes,
  // two stat() calls kept to once a second); the bytes in use (-1: unknown).
  int64_t set_size_gauges(bool files);
  // Sets file_missing_ and database_missing_ from a stat() of each spool file (writer only,
  // once a second), with the log line.
  void check_file_identity();
  // Sets full_ from the rows' size (writer only), with the log line and the gauge.
  void update_full(int64_t used);
  void say_full_state(bool at_stop = false);  // the line update_full() owes, once its minute is up
  void take_pending_snapshot();  // checkpointer thread: pending_snapshot_ from the file
  void save_stream_marks();      // at close, after the writer thread ended
  // Each webhook's pending deliveries in the file (kLanes, on `conn`): its name, earliest
  // next_attempt_ms and count. False on a read error (the statement's, or none prepared).
  static bool read_lanes(Conn& conn, const std::function<void(std::string, int64_t, size_t)>& each);

  // Writer side.
  void writer_loop();
  void run_batch(std::vector<std::unique_ptr<Op>>& ops);
  struct TransactionResult {
    std::string failure;   // empty: committed
    int failure_code = 0;  // SQLite's result code for `failure`
    size_t rows = 0;       // rows written
    size_t folded = 0;     // outcomes written with their delivery's insert
  };
  // Pairs each outcome in `ops` with its delivery's insert in the same ops, where there is one.
  static void fold_outcomes_into_inserts(std::vector<std::unique_ptr<Op>>& ops);
  TransactionResult write_transaction(Conn& c, std::vector<std::unique_ptr<Op>>& ops, int64_t now);
  void tick(int64_t now_ms);
  // `dead`, if given, gets how many of the deleted rows were dead letters.
  // `early`: every delivered row is due, retention_ms or not (spool.retention_max_bytes).
  // `failed`, if given, says whether the transaction failed (then 0 rows, logged).
  size_t prune_chunk(Conn& conn, int64_t now_ms, bool* more, size_t* dead = nullptr,
                     bool early = false, bool* failed = nullptr);
  // How often the writer prunes: tuning_.prune_interval_ms, or less for a short retention.
  int64_t prune_interval_ms() const;
  // Steps `s`, a DELETE ... RETURNING payload, inside the caller's transaction; counts the rows
  // into `deleted` and deletes each payload that has no delivery left.
  static bool delete_rows(Conn& conn, sqlite3_stmt* s, size_t& deleted);
  // Dead → pending for `ids` (or every dead delivery of `webhook`, all webhooks if empty, when
  // `all_dead`), inside the caller's transaction; adds the rows moved to `moved`.
  static bool replay_rows(Conn& conn, const std::vector<std::string>& ids, bool all_dead,
                          const std::string& webhook, int64_t now, size_t& moved,
                          bool delivered_too = false);
  // Where a chunked replay of dead letters has got to, in the dead index's (webhook, rowid) order.
  struct ReplayCursor {
    std::string webhook;
    int64_t rowid = 0;
  };
  // Up to `limit` (-1: all) dead deliveries of `webhook` past `cursor` back to pending, inside the
  // caller's transaction; moves `cursor` past them and adds their count to `moved`.
  static bool replay_dead_chunk(Conn& conn, const std::string& webhook, int64_t now, int64_t limit,
                                ReplayCursor& cursor, size_t& moved);
  Status enqueue(std::unique_ptr<Op> op);
  // add() (urgent: the caller waits) and add_async() (may linger for company, writer_loop).
  std::future<Status> submit_add(std::vector<Delivery> batch, bool urgent, StreamMarks marks = {});
  // Writer thread, inside a transaction: the marks kept from Marks ops, then those `ops` carry,
  // and the rowid mark. An error only when the transaction must go (SQLite gave it up, or the
  // disk is full); anything else is logged and the marks wait for the next transaction. What
  // it changes in the writer's state waits for the commit (marks_committed).
  struct MarksWritten {
    std::string failure;
    int failure_code = 0;
    bool wrote = false;      // the table exists and holds these marks once this commits
    int64_t rowid_mark = 0;  // written as the rowid mark
  };
  MarksWritten write_marks(Conn& c, const std::vector<std::unique_ptr<Op>>& ops);
  void marks_committed(const MarksWritten& written);
  // tick(): marks kept from Marks ops that no add took along, in a transaction of their own at
  // most every kMarksOnlyEveryMs; and marks no gateway saw for an hour, with the prune.
  void flush_kept_marks(int64_t now_ms);
  void forget_old_marks(int64_t now_ms);
  void notify_ready();

  // Checkpoints run on their own thread and connection, off the commit path (see docs/spool.md).
  static int on_wal_commit(void* self, sqlite3* db, const char* schema, int wal_pages);
  void checkpoint_loop();

  // Lane bookkeeping; callers hold mu_ (resync_locked also disk_mu_, and runs on the writer).
  // Makes a pending delivery claimable; false if it already was (cached or in flight).
  bool cache_locked(Lane& lane, Delivery delivery, int64_t rowid);
  void enforce_cap_locked();
  // What a drained disk-mode lane may bring back into memory now, in deliveries and in
  // cached_size() bytes (0: stay on disk unless nothing is left).
  struct RefillRoom {
    size_t count = 0;
    size_t bytes = 0;
  };
  RefillRoom refill_room_locked() const;
  void drop_page_locked(Lane& lane);  // forgets the lane's read-ahead (its rows stay in the file)
  // Drops the pages of lanes other than `except` that sat unused for tuning_.idle_page_ms.
  void drop_idle_pages_locked(const std::string& except);
  // `counted`: an eviction (the move counters), not a resync that could not read the file.
  void to_disk_mode_locked(Lane& lane, bool counted = true);
  // A disk-mode lane whose rows are all in memory (or gone) again; the caller caches them.
  void to_memory_mode_locked(Lane& lane);
  bool resync_locked();  // every lane back to what the file says; false if the file is unreadable
  void claim_cached_locked(Lane& lane, const std::string& webhook, int64_t now_ms, size_t limit,
                           std::vector<Delivery>& out);
  std::vector<Delivery> claim_from_disk(const std::string& webhook, int64_t now_ms, size_t limit);
  // A claim: the delivery goes to `out` and is in flight until its outcome commits or release();
  // nothing happens if its id is in flight already.
  void hand_out_locked(Lane& lane, const std::string& webhook, int64_t rowid, Delivery delivery,
                       std::vector<Delivery>& out);

  // Replay as a writer operation (gateway mode): one transaction with the other queued writes.
  Result<size_t> replay_via_writer(const std::vector<std::string>& ids, bool all_dead,
                                   const std::string& webhook);
  // The row `sql` (kById or kHeadById) selects for `id`, read on the read connection.
  std::optional<Delivery> get_by_id(const char* sql, const std::string& id);
  // BEGIN IMMEDIATE, waiting out another process's write lock up to tuning_.busy_retries times.
  bool begin_waiting(Conn& c);
  // Tools mode (no writer thread): the replay runs on the single connection under read_mu_.
  Result<size_t> replay_direct(const std::vector<std::string>& ids, bool all_dead,
                               const std::string& webhook, bool delivered_too = false);

  const std::string path_;
  // The gateway's exclusive flock on `path_.lock`: two gateways on one spool would each claim and
  // send the same deliveries. The CLI's tools mode takes none.
  int owner_lock_fd_ = -1;
  const config::SpoolConfig cfg_;
  const SqliteSpoolTuning tuning_;
  const bool tools_;

  std::unique_ptr<Conn> writer_;  // the writer thread's (and open/close's) connection
  std::unique_ptr<Conn> reader_;  // claims from disk, list/get, next_due; guarded by read_mu_
  std::mutex read_mu_;
  std::string read_error_;        // guarded by read_mu_
  void note_read_error_locked();  // under read_mu_: records (and logs) reader_'s error

  // disk_mu_ serializes disk-mode claims with the writer's post-commit publishing, so a claim's
  // view of the file and the in-memory lanes cannot disagree (lock order: disk_mu_, then mu_).
  std::mutex disk_mu_;
  std::mutex mu_;
  std::unordered_map<std::string, Lane> lanes_;  // absent = memory mode, nothing claimable
  std::unordered_map<std::string, InFlight> in_flight_;
  size_t completing_ = 0;  // claims in in_flight_ whose outcome waits for its commit
  // claim_due() refused for tuning_.max_unrecorded_outcomes: notify when below.
  bool claims_capped_ = false;
  // Writer thread only: outcomes whose write failed, retried at held_retry_ns_ (their claims
  // stay in in_flight_, so nothing sends those deliveries again meanwhile).
  std::vector<std::unique_ptr<Op>> held_outcomes_;
  int64_t held_retry_ns_ = 0;
  int64_t held_backoff_ms_ = 0;
  std::atomic<size_t> unrecorded_outcomes_{0};
  std::atomic<uint64_t> disk_reads_{0};
  ReadyWebhooks ready_;           // guarded by mu_: take_ready_webhooks()
  size_t claimed_bytes_ = 0;      // guarded by mu_: InFlight::bytes, summed
  uint64_t moved_to_disk_ = 0;    // guarded by mu_
  uint64_t moved_to_memory_ = 0;  // guarded by mu_
  size_t cached_ = 0;
  size_t cached_bytes_ = 0;
  size_t pending_ = 0;
  size_t page_bytes_ = 0;    // sum of the lanes' page_bytes, at most tuning_.max_page_bytes
  int64_t next_rowid_ = 1;   // add() picks rowids, so it can publish before the writer inserts
  uint64_t resync_gen_ = 0;  // bumped when resync_locked() recounts pending_
  std::map<std::string, size_t> resync_counts_;  // pending per webhook, as resync_locked() read

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::vector<std::unique_ptr<Op>> queue_;
  bool stopping_ = false;
  bool closed_ = false;
  bool wake_ = false;
  bool urgent_ = false;  // queue_ holds an op somebody waits for: no lingering
  std::thread writer_thread_;

  // Only checkpoint_loop() uses it: checkpoints, and the per-webhook count every few seconds.
  std::unique_ptr<Conn> checkpointer_;
  std::mutex ckpt_mu_;
  std::condition_variable ckpt_cv_;
  bool ckpt_wanted_ = false;
  bool ckpt_stop_ = false;
  std::mutex snapshot_mu_;
  std::map<std::string, size_t> pending_snapshot_;  // guarded by snapshot_mu_
  std::thread checkpoint_thread_;
  int wal_pages_at_request_ = 0;  // writer thread only (the WAL hook runs in its commits)

  std::mutex cb_mu_;
  std::function<void()> on_ready_;
  bool announce_backlog_ = false;  // set_on_ready with rows pending: writer fires once

  std::mutex marks_mu_;
  StreamMarks restored_marks_;                         // read at open, until taken
  std::map<std::string, WebhookHold> restored_holds_;  // read at open, until taken (marks_mu_)
  // Written at close: what open() read, unless the gateway hands over its own (so a start that
  // fails after open() loses none).
  StreamMarks marks_to_keep_;
  // Writer thread: bus_streams exists in this run, and every transaction that adds deliveries
  // updates its rowid mark (load_stream_marks compares it with the file's last rowid).
  bool marks_live_ = false;
  int64_t rowid_mark_ = 0;        // the last rowid committed: at open, then by the writer
  std::string last_marks_error_;  // logged once per cause
  // Marks ops' marks (messages that made no delivery), newest per stream, until a commit
  // writes them: a later add's transaction, or flush_kept_marks.
  std::map<std::string, StreamMark> kept_marks_;
  int64_t last_marks_write_ms_ = 0;

  // Writer-thread state.
  int64_t data_version_ = -1;
  int64_t latest_recorded_ms_ = 0;
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> external_changes_{0};  // bumped by the writer after it resyncs
  bool external_unannounced_ = false;  // writer thread: a change seen, no resync succeeded yet
  int64_t last_prune_ms_ = 0;
  int64_t last_size_ms_ = 0;  // when the size gauges were last set
  // Rows past spool.retention_max_bytes, or from 85 % of spool.max_bytes: prune delivered ones
  // early (over_retention_cap_: the first of those, for its warning).
  bool over_size_cap_ = false;
  bool over_retention_cap_ = false;
  bool said_cap_unreachable_ = false;  // warned that only pending and dead rows are left
  // spool.max_bytes, writer-only: the bound update_full() last applied, the rows' size it last
  // saw, and its log lines (say_full_state): when each was last said (steady ms), "full"
  // episodes since the last "full" line, and a line owed for a state that still holds.
  static constexpr int64_t kFullLogIntervalMs = 60'000;
  int64_t applied_max_bytes_ = 0;
  int64_t last_used_bytes_ = 0;
  struct FullStateLog {
    int64_t full_said_ms = -kFullLogIntervalMs;
    int64_t not_full_said_ms = -kFullLogIntervalMs;
    int64_t stuck_said_ms = -kFullLogIntervalMs;  // "no delivered rows left to prune"
    uint64_t full_unsaid = 0;
    bool full_owed = false;
    bool not_full_owed = false;
  } full_log_;
  // Commits with a delivered outcome so far, and at the last early prune that found nothing
  // delivered: while full, the size is looked at again only after such a commit (or once a
  // second).
  uint64_t delivered_commits_ = 0;
  uint64_t commits_at_empty_prune_ = 0;
  bool prune_more_ = false;
  bool resync_pending_ = false;
  std::string last_write_error_;
  bool disk_wait_logged_ = false;              // writer-only: "intake waits" said for this episode
  std::atomic<int64_t> max_bytes_;             // spool.max_bytes (0: no bound); reloadable
  std::atomic<bool> full_{false};              // max_bytes_ reached (writer-set)
  std::atomic<bool> file_missing_{false};      // a spool file is gone or replaced (writer-set)
  std::atomic<bool> database_missing_{false};  // of them, the database itself (writer-set)
  std::string companion_base_;  // the file SQLite opened (a symlink's target): -wal/-shm beside it
  // path_, its -wal and -shm (kSpoolFileSuffixes) as opened, or first seen (writer only).
  std::array<std::optional<std::pair<dev_t, ino_t>>, 3> opened_files_{};
  std::atomic<bool> write_failing_{false};      // adds wait for the disk (writer-set)
  std::atomic<bool> last_write_failed_{false};  // a disk failure since the last write (writer)
  uint64_t commits_ = 0;
  uint64_t batches_taken_ = 0;
  uint64_t rows_written_ = 0;
  uint64_t outcomes_folded_ = 0;
  std::mutex stats_mu_;
};

}  // namespace hookgate::webhooks
