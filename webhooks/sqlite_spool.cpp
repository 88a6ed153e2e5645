#include "webhooks/sqlite_spool.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"
#include "webhooks/sqlite_spool_detail.hpp"

namespace hookgate::webhooks {

using namespace spool_detail;  // NOLINT: this file is the spool's own

bool spool_write_waits_for(int code, bool disk_trouble_before) {
  code &= 0xff;
  if (code == SQLITE_FULL || code == SQLITE_IOERR) return true;
  // What a failing disk says next: its reads come back as a damaged file ("database disk image
  // is malformed"), and errors=remount-ro makes it read-only. Found in a chaos test: an ext4
  // shutdown turned the wait into refusals within 100 ms, with /readyz 200, though the file
  // was sound once the disk was back.
  return disk_trouble_before && (code == SQLITE_CORRUPT || code == SQLITE_NOTADB ||
                                 code == SQLITE_READONLY || code == SQLITE_CANTOPEN);
}

Result<std::unique_ptr<SqliteSpool>> SqliteSpool::open(const config::SpoolConfig& cfg,
                                                       bool read_only_tools) {
  return open(cfg, SqliteSpoolTuning{}, read_only_tools);
}

namespace {
// SQLite keeps memory statistics by default, behind a process-wide mutex taken on every one of
// its allocations: about a tenth of the spool writer's CPU at full load. Nothing here reads
// them. sqlite3_config only works before SQLite initializes; if something else initialized it
// first, the call fails harmlessly and the statistics stay on.
void configure_sqlite_once() {
  static std::once_flag once;
  std::call_once(once, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}
}  // namespace

Result<std::unique_ptr<SqliteSpool>> SqliteSpool::open(const config::SpoolConfig& cfg,
                                                       const SqliteSpoolTuning& tuning,
                                                       bool read_only_tools) {
  configure_sqlite_once();
  std::unique_ptr<SqliteSpool> spool(new SqliteSpool(cfg.path, cfg, tuning, read_only_tools));
  if (auto st = spool->init(read_only_tools); !st) {
    spool->close();
    return st.error();
  }
  return spool;
}

SqliteSpool::SqliteSpool(std::string path, const config::SpoolConfig& cfg,
                         const SqliteSpoolTuning& tuning, bool tools)
    : path_(std::move(path)),
      cfg_(cfg),
      tuning_(tuning),
      tools_(tools),
      max_bytes_(cfg.max_bytes) {}

SqliteSpool::~SqliteSpool() {
  close();
}

namespace {
// The gateway's exclusive lock on a spool (owner_lock_fd_): `FILE.lock` beside the file SQLite
// really opens (symlinks resolved, as SQLite resolves them, so two paths to one file share one
// lock), holding the holder's pid. Made by root (a debugging run), it is given to the spool's
// owner, as SQLite does with its -wal file: a lock the service's user cannot open would keep the
// service from starting.
Result<int> take_owner_lock(const std::string& db_path) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::weakly_canonical(db_path, ec);
  if (ec) real = db_path;
  const std::string lock_path = real.string() + ".lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  const bool writable = fd >= 0;
  // flock needs no write access: someone else's lock file still locks, without the pid.
  if (fd < 0 && errno == EACCES) {
    fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    // No lock file, in a folder this user may not write: that, not the retry's ENOENT, is why
    // (found in a hostile-environment pass: "No such file or directory" as `nobody`).
    if (fd < 0 && errno == ENOENT)
      return make_error("cannot create " + lock_path + ": its folder " +
                        real.parent_path().string() + " is not writable by this user");
  }
  if (fd < 0 && errno == ENOENT && !std::filesystem::is_directory(real.parent_path(), ec))
    return make_error("its folder " + real.parent_path().string() + " does not exist");
  if (fd < 0) return make_error("cannot open " + lock_path + ": " + std::strerror(errno));
  if (writable && ::geteuid() == 0) {
    struct stat owner {};
    if (::stat(real.c_str(), &owner) == 0 || ::stat(real.parent_path().c_str(), &owner) == 0)
      (void)::fchown(fd, owner.st_uid, owner.st_gid);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    (void)::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return make_error("cannot lock " + lock_path + ": " + std::strerror(err));
    const std::string pid(trim(holder));
    return make_error("another gateway uses this spool (process " + (pid.empty() ? "?" : pid) +
                      " holds " + lock_path +
                      "): two would send each delivery twice; stop it or give this one its own "
                      "spool.path");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (writable && (::ftruncate(fd, 0) != 0 ||
                   ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())))
    spdlog::debug("spool: cannot write the pid into {}", lock_path);  // the lock still holds
  return fd;
}

// sqlite3_busy_timeout() sleeps up to 100 ms between tries, so a writer waiting for another
// process that commits chunk after chunk (`deliveries replay --all-dead`) rarely finds the lock
// free (found in review: 2 s waits during a 2.5 s replay). Trying every millisecond finds each
// gap. The budget is the same busy_timeout, in time waited, not in tries: a try costs more than
// its millisecond on a loaded machine. One wait runs on one thread, from tries == 0.
int busy_retry_every_ms(void* budget_ms, int tries) {
  thread_local std::chrono::steady_clock::time_point started;
  const auto now = std::chrono::steady_clock::now();
  if (tries == 0) started = now;
  if (now - started >= std::chrono::milliseconds(reinterpret_cast<intptr_t>(budget_ms))) return 0;
  ::usleep(1000);
  return 1;
}

// Opens one connection with the settings every connection needs.
Status open_db(const std::string& path, bool create, int busy_ms, sqlite3** out) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;  // our own mutexes guard each handle
  if (create) {
    flags |= SQLITE_OPEN_CREATE;
    // Owner-only: the spool holds every event body (found in a security pass: 0644 under the
    // usual umask, an auth failure's fields readable by every local user). SQLite gives its -wal
    // and -shm the database's mode; an existing file keeps the mode its owner chose. No O_EXCL:
    // it refuses a dangling symlink, whose target SQLite would then create under the umask.
    if (const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600); fd >= 0)
      ::close(fd);
  }
  const int rc = sqlite3_open_v2(path.c_str(), out, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = *out != nullptr ? sqlite3_errmsg(*out) : sqlite3_errstr(rc);
    if (!create && rc == SQLITE_CANTOPEN) why = "no such spool file (is spool.path right?)";
    return make_error("cannot open: " + why);
  }
  sqlite3_extended_result_codes(*out, 1);
  sqlite3_busy_handler(*out, busy_retry_every_ms,
                       reinterpret_cast<void*>(static_cast<intptr_t>(std::max(busy_ms, 0))));
  return {};
}
}  // namespace

// open() errors do not repeat the path: its callers (gateway, CLI) prefix "spool PATH: ".
Status SqliteSpool::init(bool tools) {
  const std::string sync = ascii_upper(cfg_.synchronous.empty() ? "NORMAL" : cfg_.synchronous);
  if (sync != "NORMAL" && sync != "FULL" && sync != "EXTRA")
    return make_error("spool.synchronous must be NORMAL or FULL, not '" + cfg_.synchronous + "'");
  const std::string sync_pragma = "PRAGMA synchronous=" + sync;
  auto fail = [&](Conn& c, const std::string& what) { return make_error(what + ": " + c.error()); };

  if (!tools) {
    auto lock = take_owner_lock(path_);
    if (!lock) return lock.error();
    owner_lock_fd_ = *lock;
  }

  // Conn owns the handle even when opening fails (sqlite3_open_v2 may still allocate one).
  auto main = std::make_unique<Conn>();
  if (auto st = open_db(path_, !tools, tuning_.busy_timeout_ms, &main->db); !st) return st;

  // SQLite falls back to read-only when the file cannot be opened for writing: the gateway would
  // then start and refuse every event.
  if (!tools && sqlite3_db_readonly(main->db, "main") == 1)
    return make_error(
        "the file is read-only for this user; the gateway must be able to write it (and create "
        "files beside it)");
  // What the file is, before anything changes it: only an empty file or a hookgate spool is
  // switched to WAL below (journal_mode persists in the file), so another application's database
  // named by mistake is refused untouched. One statement, one snapshot: a schema another process
  // creates meanwhile comes with its user_version.
  std::optional<int64_t> version;
  int64_t table_count = 0;
  {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(main->db,
                           "SELECT (SELECT user_version FROM pragma_user_version), "
                           "(SELECT COUNT(*) FROM sqlite_schema)",
                           -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      version = sqlite3_column_int64(s, 0);
      table_count = sqlite3_column_int64(s, 1);
    }
    sqlite3_finalize(s);  // keeps the error for fail()
  }
  if (!version) return fail(*main, "not a readable SQLite database");
  auto too_new = [](int64_t v) {
    return make_error("schema version " + std::to_string(v) +
                      ", newer than this hookgate understands (" + std::to_string(kSchemaVersion) +
                      ")");
  };
  if (*version == 0 && table_count != 0)
    return make_error("an SQLite file, but not a hookgate spool");
  if (*version > kSchemaVersion) return too_new(*version);

  if (!tools) {
    // WAL: readers (claims, the CLI) never block the writer, and a commit is one sequential append.
    sqlite3_stmt* jm = nullptr;
    std::string mode;
    if (sqlite3_prepare_v2(main->db, "PRAGMA journal_mode=WAL", -1, &jm, nullptr) == SQLITE_OK &&
        sqlite3_step(jm) == SQLITE_ROW)
      mode = column_text(jm, 0);
    sqlite3_finalize(jm);
    if (mode != "wal") {
      if (mode.empty()) return fail(*main, "cannot enable WAL");
      return make_error("WAL mode unavailable (journal_mode stays '" + mode +
                        "'; is it on a network filesystem?)");
    }
    // Bound the -wal file after checkpoints instead of leaving it at its high-water mark.
    main->exec("PRAGMA journal_size_limit=67108864");
    // 4 MiB of page cache (default 2 MiB): the hot ends of the id and claim indexes stay
    // cached. 16 MiB filled up and cost ~12 MiB of steady RSS; the OS page cache still holds
    // the rest of the file. See docs/performance.md.
    main->exec("PRAGMA cache_size=-4096");
  }
  if (!main->exec(sync_pragma.c_str())) return fail(*main, "cannot set synchronous");

  if (*version == 0) {
    if (tools) return make_error("no hookgate schema in this file yet");
    // Create under the write lock, re-checking: another process may be creating it too.
    if (!main->exec("BEGIN IMMEDIATE")) return fail(*main, "cannot lock for schema creation");
    auto again = main->scalar("PRAGMA user_version");
    auto tables = main->scalar("SELECT COUNT(*) FROM sqlite_schema");
    if (again && *again == 0) {
      if (!tables || *tables != 0) {
        main->exec("ROLLBACK");
        return make_error("an SQLite file, but not a hookgate spool");
      }
      if (!main->exec(kSchema)) {
        auto err = fail(*main, "cannot create schema");
        main->exec("ROLLBACK");
        return err;
      }
    }
    if (!main->exec("COMMIT")) {
      auto err = fail(*main, "cannot commit schema");
      main->exec("ROLLBACK");
      return err;
    }
    version = again && *again != 0 ? *again : kSchemaVersion;
  }
  if (*version == 1) {
    // The CLI never migrates: an older gateway may still be running on this file.
    if (tools)
      return make_error(
          "schema version 1, written by an older hookgate: start this version's gateway on it "
          "once to upgrade the file");
    if (auto st = migrate_from_1(*main); !st) return st;
    version = kSchemaVersion;
  }
  if (*version > kSchemaVersion) return too_new(*version);  // created meanwhile by a newer one

  if (tools) {
    reader_ = std::move(main);
    return {};
  }

  auto reader = std::make_unique<Conn>();
  if (auto st = open_db(path_, false, tuning_.busy_timeout_ms, &reader->db); !st) return st;
  reader_ = std::move(reader);
  reader_->exec("PRAGMA query_only=1");
  writer_ = std::move(main);
  // Building it walks the dead letters once (a large backlog of them: a moment at start).
  if (cfg_.dead_retention_ms > 0 && !writer_->exec(kDeadAgeIndex))
    return fail(*writer_, "cannot create the index for spool.dead_retention_ms");

  // SQLite's automatic checkpoint runs inside the commit that crosses 1,000 WAL pages, so every
  // ~1,000th commit paid for copying pages and (synchronous=NORMAL) both fsyncs: 2.5–10 ms
  // stalls on the ingest thread, the durable p99. A checkpointer thread with its own connection
  // does it instead; PASSIVE never blocks the writer or readers. The hook replaces the automatic
  // checkpoint (sqlite3_wal_hook and sqlite3_wal_autocheckpoint share one slot).
  auto ckpt = std::make_unique<Conn>();
  if (auto st = open_db(path_, false, tuning_.busy_timeout_ms, &ckpt->db); !st) return st;
  if (!ckpt->exec(sync_pragma.c_str())) return fail(*ckpt, "cannot set synchronous");
  checkpointer_ = std::move(ckpt);
  sqlite3_wal_hook(writer_->db, &SqliteSpool::on_wal_commit, this);
  checkpoint_thread_ = std::thread([this] {
    name_this_thread("hg-checkpoint");
    checkpoint_loop();
  });

  auto dv = writer_->scalar(kDataVersion);
  if (!dv) return fail(*writer_, "cannot read data_version");
  data_version_ = *dv;
  auto max_rowid = writer_->scalar(kMaxRowid);
  if (!max_rowid) return fail(*writer_, "cannot read the last rowid");
  auto latest = writer_->scalar(kLatestRecorded);
  if (!latest) return fail(*writer_, "cannot read the latest update time");
  latest_recorded_ms_ = *latest;
  if (auto st = load_stream_marks(*max_rowid); !st)
    spdlog::warn(
        "spool {}: publisher sequence numbers from the last stop not read ({}): gaps "
        "across that restart are not counted",
        path_, st.error().message);
  if (auto st = load_webhook_holds(); !st)
    spdlog::warn(
        "spool {}: receivers' Retry-After pauses from the last run not read ({}): they are not "
        "honoured after this start",
        path_, st.error().message);
  {
    std::scoped_lock lock(disk_mu_, mu_);
    next_rowid_ = *max_rowid + 1;
    if (!resync_locked()) return fail(*writer_, "cannot read pending deliveries");
    std::lock_guard snapshot(snapshot_mu_);
    pending_snapshot_ = resync_counts_;  // until the checkpointer's first count
  }
  // The files opened, to tell later whether the paths still name them (check_file_identity).
  if (const char* opened = sqlite3_db_filename(writer_->db, "main"); opened && *opened)
    companion_base_ = opened;
  else
    companion_base_ = path_;
  for (size_t i = 0; i < opened_files_.size(); ++i) {
    const std::string file = i == 0 ? path_ : companion_base_ + kSpoolFileSuffixes[i];
    if (struct stat st{}; ::stat(file.c_str(), &st) == 0)
      opened_files_[i] = std::pair{st.st_dev, st.st_ino};
  }
  spool_metrics().file_missing.set(0);
  spdlog::debug("spool {}: opened ({} pending, synchronous={})", path_, pending_, sync);
  writer_thread_ = std::thread([this] {
    name_this_thread("hg-spool-writer");
    writer_loop();
  });
  return {};
}

Status SqliteSpool::load_stream_marks(int64_t last_rowid) {
  rowid_mark_ = last_rowid;
  auto exists = writer_->scalar(kStreamMarksExist);
  if (!exists) return make_error(writer_->error());
  if (*exists == 0) return {};
  StreamMarks marks;
  std::string read_error;
  int64_t saved_rowid = 0;  // the file's last rowid at the close that wrote them (every row's)
  {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(writer_->db, kReadStreamMarks, -1, &s, nullptr) == SQLITE_OK) {
      int rc;
      while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        std::string stream = column_text(s, 0);
        saved_rowid = std::max<int64_t>(saved_rowid, sqlite3_column_int64(s, 3));
        if (stream.empty()) continue;  // the rowid mark alone
        marks.push_back({std::move(stream), static_cast<uint64_t>(sqlite3_column_int64(s, 1)),
                         sqlite3_column_int64(s, 2)});
      }
      if (rc != SQLITE_DONE) read_error = writer_->error();
    } else {
      read_error = writer_->error();
    }
    sqlite3_finalize(s);
  }
  // Read once: a crash later must not find these again, by then out of date. (A start that
  // fails after this writes them back at close: keep_stream_marks below.)
  if (!writer_->exec(kDropStreamMarks)) return make_error(writer_->error());
  if (!read_error.empty()) return make_error(read_error);
  // A delivery added since means another hookgate took events on this file meanwhile, maybe
  // their streams' messages. (Not a time: `hookgate deliveries replay` and purge rewrite or drop
  // rows while the gateway is stopped, and add none.)
  if (!marks.empty() && last_rowid > saved_rowid) {
    spdlog::info(
        "spool {}: publisher sequence numbers from the last stop are not used: deliveries were "
        "added to the file since (another hookgate ran on it)",
        path_);
    return {};
  }
  const int64_t oldest = now_unix_ms() - kMaxStreamMarkAgeMs;
  std::erase_if(marks, [&](const StreamMark& m) { return m.seen_ms < oldest; });
  std::lock_guard lock(marks_mu_);
  restored_marks_ = marks;
  marks_to_keep_ = std::move(marks);
  return {};
}

void SqliteSpool::save_stream_marks() {
  StreamMarks marks;
  {
    std::lock_guard lock(marks_mu_);
    marks = std::move(marks_to_keep_);
  }
  if (!writer_) return;
  // Past every delivery this run added: the next open compares (see load_stream_marks).
  const int64_t saved_rowid = writer_->scalar(kMaxRowid).value_or(0);
  // Always goes, and is replaced whole (the run's transactions wrote it as they went; the open
  // dropped whatever an earlier run left).
  bool ok = writer_->exec("BEGIN IMMEDIATE") && writer_->exec(kDropStreamMarks);
  if (ok && !marks.empty()) {
    ok = writer_->exec(kCreateStreamMarks);
    sqlite3_stmt* s = nullptr;
    if (ok) ok = sqlite3_prepare_v2(writer_->db, kInsertStreamMark, -1, &s, nullptr) == SQLITE_OK;
    for (size_t i = 0; ok && i < marks.size(); ++i) ok = put_stream_mark(s, marks[i], saved_rowid);
    sqlite3_finalize(s);
  }
  if (ok) ok = writer_->exec("COMMIT");
  if (!ok) {
    spdlog::warn("spool {}: cannot keep publisher sequence numbers for the next start ({}): {}",
                 path_, writer_->error(),
                 marks_live_ ? "it goes on from those its last transactions wrote"
                             : "gaps across this restart will not be counted");
    writer_->exec("ROLLBACK");
    return;
  }
  if (!marks.empty())
    spdlog::debug("spool {}: kept the sequence numbers of {} publisher streams", path_,
                  marks.size());
}

Status SqliteSpool::load_webhook_holds() {
  if (!writer_->exec(kCreateHolds)) return make_error(writer_->error());
  sqlite3_stmt* forget = nullptr;
  bool ok = sqlite3_prepare_v2(writer_->db, kForgetHolds, -1, &forget, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_bind_int64(forget, 1, schedule_now_ms());
    ok = sqlite3_step(forget) == SQLITE_DONE;
  }
  sqlite3_finalize(forget);
  if (!ok) return make_error(writer_->error());
  std::map<std::string, WebhookHold> holds;
  sqlite3_stmt* read = nullptr;
  int rc = sqlite3_prepare_v2(writer_->db, kReadHolds, -1, &read, nullptr);
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(read)) == SQLITE_ROW)
      holds[column_text(read, 0)] = {column_text(read, 1), sqlite3_column_int64(read, 2)};
  }
  sqlite3_finalize(read);
  if (rc != SQLITE_DONE) return make_error(writer_->error());
  std::lock_guard lock(marks_mu_);
  restored_holds_ = std::move(holds);
  return {};
}

std::map<std::string, WebhookHold> SqliteSpool::take_webhook_holds() {
  std::lock_guard lock(marks_mu_);
  return std::exchange(restored_holds_, {});
}

StreamMarks SqliteSpool::take_stream_marks() {
  std::lock_guard lock(marks_mu_);
  return std::exchange(restored_marks_, {});
}

void SqliteSpool::keep_stream_marks(StreamMarks marks) {
  std::lock_guard lock(marks_mu_);
  marks_to_keep_ = std::move(marks);
}

Status SqliteSpool::migrate_from_1(Conn& c) {
  if (!c.exec("BEGIN IMMEDIATE"))
    return make_error("cannot lock for the schema upgrade: " + c.error());
  auto again = c.scalar("PRAGMA user_version");
  if (again && *again == 1) {  // not upgraded by someone else meanwhile
    const auto rows = c.scalar("SELECT COUNT(*) FROM deliveries").value_or(0);
    if (!c.exec(kMigrateFrom1) || !c.exec("COMMIT")) {
      auto err = make_error("cannot upgrade schema 1 to 2: " + c.error());
      c.exec("ROLLBACK");
      return err;
    }
    spdlog::info("spool {}: upgraded schema 1 to 2 ({} deliveries kept)", path_, rows);
    return {};
  }
  if (!c.exec("COMMIT")) {
    auto err = make_error("cannot upgrade schema 1 to 2: " + c.error());
    c.exec("ROLLBACK");
    return err;
  }
  if (!again || *again != kSchemaVersion)
    return make_error("schema changed during the upgrade: " +
                      (again ? std::to_string(*again) : c.error()));
  return {};
}

void SqliteSpool::close() {
  {
    std::lock_guard lock(q_mu_);
    if (closed_) return;
    closed_ = true;
    stopping_ = true;
  }
  q_cv_.notify_all();
  if (writer_thread_.joinable()) writer_thread_.join();
  {
    std::lock_guard lock(ckpt_mu_);
    ckpt_stop_ = true;
  }
  ckpt_cv_.notify_all();
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  checkpointer_.reset();
  {
    std::lock_guard lock(read_mu_);
    reader_.reset();
  }
  if (writer_) {
    save_stream_marks();
    // Fold the WAL back into the main file so a copied or backed-up .db is self-contained. Fails
    // harmlessly (busy) if another process holds a read snapshot.
    writer_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
    writer_.reset();
  }
  if (owner_lock_fd_ >= 0) ::close(std::exchange(owner_lock_fd_, -1));  // the file stays: no race
  std::lock_guard lock(mu_);
  lanes_.clear();
  in_flight_.clear();
  claimed_bytes_ = 0;
  completing_ = 0;
  cached_ = cached_bytes_ = 0;
}

// ---------------------------------------------------------------------------------------------
// Writer thread

Status SqliteSpool::enqueue(std::unique_ptr<Op> op) {
  // A waiting call from the writer thread (an on_ready callback calling add()) would wait for
  // itself forever.
  if ((op->done || op->accepted) && tls_writer_of == this)
    return make_error("spool: blocking call from the spool's own writer thread (on_ready)");
  bool wake = false;
  {
    std::lock_guard lock(q_mu_);
    if (tools_) return make_error("spool " + path_ + " is open for operator tools only");
    if (stopping_) return make_error("spool " + path_ + " is closed");
    // The writer takes the whole queue at once: only the first op since its last take needs
    // to wake it (saves a futex call per completion at full load), and the first urgent one,
    // which ends a linger over outcomes (writer_loop).
    const bool urgent = op->urgent;
    wake = queue_.empty() || (urgent && !urgent_);
    urgent_ = urgent_ || urgent;
    queue_.push_back(std::move(op));
  }
  if (wake) q_cv_.notify_one();
  return {};
}

namespace {
// How long work nobody waits for lingers for more to share its commit (writer_loop), unless
// this much has queued already.
constexpr std::chrono::milliseconds kLinger{2};
constexpr size_t kLingerOps = 256;
// SQLite's own auto-checkpoint threshold; with 4 KiB pages about 4 MiB of WAL.
constexpr int kCheckpointWalPages = 1000;
// If the checkpointer falls this far behind (a reader pinning old frames, a starved thread), the
// writer checkpoints inline as SQLite would, so the WAL stays bounded (~64 MiB).
constexpr int kInlineCheckpointWalPages = 16 * kCheckpointWalPages;
}  // namespace

int SqliteSpool::on_wal_commit(void* self, sqlite3* db, const char* schema, int wal_pages) {
  auto* spool = static_cast<SqliteSpool*>(self);
  // wal_pages counts every frame since the WAL last restarted, checkpointed or not. Ask for a
  // checkpoint once per kCheckpointWalPages new frames, not on every commit past the threshold:
  // each checkpoint fsyncs both files, and while one runs the WAL cannot restart anyway.
  if (wal_pages < spool->wal_pages_at_request_) spool->wal_pages_at_request_ = 0;  // restarted
  if (wal_pages >= kInlineCheckpointWalPages) {
    spool_metrics().inline_checkpoints.inc();
    sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (wal_pages - spool->wal_pages_at_request_ >= kCheckpointWalPages) {
    spool->wal_pages_at_request_ = wal_pages;
    {
      std::lock_guard lock(spool->ckpt_mu_);
      spool->ckpt_wanted_ = true;
    }
    spool->ckpt_cv_.notify_one();
  }
  return SQLITE_OK;  // the commit itself succeeded; a checkpoint failure is retried next time
}

void SqliteSpool::checkpoint_loop() {
  const auto snapshot_interval =
      std::chrono::milliseconds(std::max<int64_t>(tuning_.pending_snapshot_interval_ms, 1));
  // The first count one interval in: open() left the one its resync read.
  auto next_snapshot = std::chrono::steady_clock::now() + snapshot_interval;
  for (;;) {
    bool checkpoint = false;
    {
      std::unique_lock lock(ckpt_mu_);
      ckpt_cv_.wait_until(lock, next_snapshot, [&] { return ckpt_stop_ || ckpt_wanted_; });
      if (ckpt_stop_) return;  // close() runs the final TRUNCATE checkpoint on the writer
      checkpoint = std::exchange(ckpt_wanted_, false);
    }
    if (const auto start = std::chrono::steady_clock::now(); start >= next_snapshot) {
      take_pending_snapshot();
      // The count walks the pending index, longest when a receiver is down: it takes at most
      // about a twentieth of this thread's time, and a requested checkpoint waits at most that.
      const auto end = std::chrono::steady_clock::now();
      next_snapshot = end + std::max<std::chrono::steady_clock::duration>(snapshot_interval,
                                                                          20 * (end - start));
    }
    if (!checkpoint) continue;
    const int64_t t0 = now_steady_ns();
    const int rc = sqlite3_wal_checkpoint_v2(checkpointer_->db, nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             nullptr, nullptr);
    spool_metrics().checkpoint.observe_ns(now_steady_ns() - t0);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      spdlog::warn("spool {}: checkpoint failed: {}", path_, checkpointer_->error());
  }
}

void SqliteSpool::writer_loop() {
  tls_writer_of = this;
  // A spool reopened at its bound is full before intake takes a first batch.
  if (max_bytes_.load(std::memory_order_relaxed) > 0) update_full(set_size_gauges(true));
  for (;;) {
    std::vector<std::unique_ptr<Op>> ops;
    bool stop = false;
    {
      std::unique_lock lock(q_mu_);
      if (!prune_more_) {
        auto wait = std::chrono::milliseconds(tuning_.poll_interval_ms);
        if (!held_outcomes_.empty())
          wait = std::min<std::chrono::milliseconds>(
              wait, std::chrono::milliseconds(std::max<int64_t>(
                        0, (held_retry_ns_ - now_steady_ns() + 999999) / 1000000)));
        q_cv_.wait_for(lock, wait, [&] { return stopping_ || wake_ || !queue_.empty(); });
      }
      ops.swap(queue_);
      // Outcomes that failed to write go again once their wait is over, and a last time at stop.
      if (!held_outcomes_.empty() && (stopping_ || now_steady_ns() >= held_retry_ns_)) {
        for (auto& op : held_outcomes_) ops.push_back(std::move(op));
        held_outcomes_.clear();
      }
      // Outcomes and add_async() batches are not urgent: no delivery waits for their commit
      // (a crash before it means one more attempt, or an event not yet accepted), so they wait
      // a little for more work to share the transaction. At moderate rates that cuts the
      // commits, and the WAL pages and writer CPU per event, several times over: those drive
      // the checkpoints and the CPU the other threads compete for (docs/spool.md "Group commit").
      if (!ops.empty() && ops.size() < kLingerOps && !urgent_ && !wake_ && !stopping_) {
        q_cv_.wait_for(lock, kLinger, [&] { return stopping_ || wake_ || urgent_; });
        for (auto& op : queue_) ops.push_back(std::move(op));
        queue_.clear();
      }
      urgent_ = false;
      wake_ = false;
      stop = stopping_;
    }
    if (!ops.empty()) run_batch(ops);
    // enqueue() refuses once stopping_ is set, so after this swap nothing new can arrive.
    if (stop) {
      if (!held_outcomes_.empty())
        spdlog::error(
            "spool {}: {} delivery outcomes could not be recorded before the stop; "
            "those deliveries are pending in the file and will be sent again",
            path_, held_outcomes_.size());
      say_full_state(/*at_stop=*/true);  // the log's last word on it is right
      break;
    }
    tick(schedule_now_ms());
  }
}

// An outcome that reaches the writer in the same transaction as its delivery's insert (dispatch
// before the commit, docs/spool.md) is written with the insert: one row in its final state,
// instead of a pending row in the claim index and an UPDATE that moves it out again. Adds come
// in rowid order (add() numbers and queues them under one lock), each with consecutive rowids,
// and an outcome after its add; whatever does not fit that is simply not folded.
void SqliteSpool::fold_outcomes_into_inserts(std::vector<std::unique_ptr<Op>>& ops) {
  std::vector<Op*> adds;
  for (auto& op_ptr : ops) {
    Op& op = *op_ptr;
    if (op.kind == Op::Kind::Add) {
      op.folded.assign(op.batch.size(), nullptr);
      if (!op.rowids.empty()) adds.push_back(&op);
      continue;
    }
    // An outcome must not pass a replay queued between it and its insert: the replay would find
    // the row final (dead) where it should find it pending, and send it again.
    if (op.kind == Op::Kind::Replay) adds.clear();
    if (op.kind != Op::Kind::Complete) continue;
    op.folded_into = nullptr;
    auto after =
        std::upper_bound(adds.begin(), adds.end(), op.rowid,
                         [](int64_t rowid, const Op* add) { return rowid < add->rowids.front(); });
    if (after == adds.begin()) continue;
    Op& add = **std::prev(after);
    const int64_t i = op.rowid - add.rowids.front();
    if (i >= static_cast<int64_t>(add.rowids.size())) continue;
    const auto at = static_cast<size_t>(i);
    if (add.rowids[at] != op.rowid || add.folded[at] != nullptr ||
        add.batch[at].state != DeliveryState::Pending || add.batch[at].id != op.delivery.id)
      continue;
    add.folded[at] = &op;
    op.folded_into = &add;
  }
}

// One try at writing `ops` in one transaction (rolled back when it fails). Each op's per-try
// state was reset by the caller; the outcomes it records are read by run_batch's publish step.
SqliteSpool::TransactionResult SqliteSpool::write_transaction(Conn& c,
                                                              std::vector<std::unique_ptr<Op>>& ops,
                                                              int64_t now) {
  std::string failure;   // non-empty: the whole transaction was lost
  int failure_code = 0;  // SQLite's primary result code for `failure`
  size_t rows = 0;
  if (!begin_waiting(c)) failure = c.error();
  fold_outcomes_into_inserts(ops);
  size_t folded = 0;
  for (auto& op_ptr : ops) {
    if (!failure.empty()) break;
    Op& op = *op_ptr;
    switch (op.kind) {
      case Op::Kind::Add: {
        // A savepoint per add() call: a bad batch (duplicate id) fails alone, atomically.
        if (!c.exec("SAVEPOINT add_batch")) {
          failure = c.error();
          break;
        }
        sqlite3_stmt* s = c.stmt(kInsert);
        sqlite3_stmt* ps = c.stmt(kInsertPayload);
        std::string err = s == nullptr || ps == nullptr ? c.error() : "";
        bool duplicate = false;  // the caller's fault, not the spool's
        int64_t payload = 0;
        for (size_t i = 0; err.empty() && i < op.batch.size(); ++i) {
          const Delivery& d = op.batch[i];
          // Consecutive deliveries of one event with the same body (the router shares it)
          // share one payload row; add() gave them consecutive rowids.
          if (i == 0 || !same_payload(op.batch[i - 1], d)) {
            size_t span = 1;
            while (i + span < op.batch.size() && same_payload(d, op.batch[i + span])) ++span;
            payload = op.rowids[i];
            StmtScope pscope(ps);
            sqlite3_bind_int64(ps, 1, payload);
            sqlite3_bind_int64(ps, 2, static_cast<int64_t>(span));
            bind_text(ps, 3, d.event_id);
            bind_text(ps, 4, d.event_type);
            sqlite3_bind_int64(ps, 5, d.created_ms);
            if (d.body && !d.body->empty()) {
              sqlite3_bind_blob64(ps, 6, d.body->data(), d.body->size(), SQLITE_STATIC);
            } else {
              sqlite3_bind_zeroblob(ps, 6, 0);
            }
            if (sqlite3_step(ps) != SQLITE_DONE) {
              err = c.error();  // a taken rowid: a second gateway writing this file
              break;
            }
          }
          StmtScope scope(s);
          sqlite3_bind_int64(s, 1, op.rowids[i]);
          bind_text(s, 2, d.id);
          sqlite3_bind_int64(s, 3, payload);
          bind_text(s, 4, d.webhook);
          sqlite3_bind_int64(s, 7, now);
          if (const Op* outcome = op.folded[i]; outcome != nullptr) {
            // The row as kComplete would leave it.
            const int state = outcome_state(outcome->outcome);
            sqlite3_bind_int(s, 5, d.attempts + 1);
            sqlite3_bind_int64(
                s, 6, state == kPending ? outcome->outcome.next_attempt_ms : d.next_attempt_ms);
            sqlite3_bind_int(s, 8, state);
            bind_text(s, 9, state == kDelivered ? kNoError : outcome->outcome.error);
          } else {
            sqlite3_bind_int(s, 5, d.attempts);
            sqlite3_bind_int64(s, 6, d.next_attempt_ms);
            sqlite3_bind_int(s, 8, state_code(d.state));
            bind_text(s, 9, d.last_error);
          }
          const int rc = sqlite3_step(s);
          if (rc == SQLITE_DONE) continue;
          // Only a clash on the id is the caller's fault; anything else, a taken rowid included
          // (a second gateway writing this file, see docs/spool.md), is reported as SQLite
          // says.
          const std::string why = c.error();
          if (sqlite3_extended_errcode(c.db) == SQLITE_CONSTRAINT_UNIQUE &&
              why.find("deliveries.id") != std::string::npos) {
            err = "duplicate delivery id " + d.id;
            duplicate = true;
          } else {
            err = why;
          }
        }
        if (sqlite3_get_autocommit(c.db)) {  // SQLite rolled the whole transaction back
          failure = err.empty() ? c.error() : err;
        } else if (!err.empty() && !duplicate &&
                   spool_write_waits_for(sqlite3_errcode(c.db),
                                         last_write_failed_.load(std::memory_order_relaxed))) {
          // A full disk or an I/O error failing only this statement: the whole transaction
          // goes, and is tried again below, instead of refusing these events.
          failure_code = sqlite3_errcode(c.db);
          failure = err;
        } else if (!err.empty()) {
          // If the partial batch cannot be undone, the whole transaction goes: committing it
          // would keep part of a batch reported refused.
          if (!c.undo_savepoint("add_batch")) failure = err + "; " + c.error();
          op.status = make_error("spool " + path_ + ": " + err);
          // Anything but a duplicate id (a file that became read-only, a full disk failing
          // only this statement) refuses events as a lost transaction does: count and say it.
          if (!duplicate && failure.empty()) {
            spool_metrics().errors.inc();
            static LogLimiter log_limit{5, "spool: unwritten-batch lines"};
            if (log_limit.allow())
              spdlog::error("spool {}: a batch of {} deliveries could not be written: {}", path_,
                            op.batch.size(), err);
          }
        } else if (!c.exec("RELEASE add_batch")) {
          failure = c.error();
        } else {
          rows += op.batch.size();
        }
        break;
      }
      case Op::Kind::Complete: {
        // (run_batch reset op.applied and op.attempts for this try.)
        // The receiver's word stands whatever becomes of the row; written again on a retried
        // transaction, which changes nothing.
        if (op.folded_into != nullptr) {
          // Written with its insert, which stands if its add did (a refused add undid its rows).
          const Op& add = *op.folded_into;
          op.applied = add.status.ok();
          if (op.applied) {
            op.attempts = add.batch[op.rowid - add.rowids.front()].attempts + 1;
            ++folded;
            ++rows;
          }
          break;
        }
        sqlite3_stmt* s = c.stmt(kComplete);
        if (s == nullptr) {
          failure = c.error();
          break;
        }
        StmtScope scope(s);
        bind_text(s, 1, op.delivery.id);
        sqlite3_bind_int64(s, 2, now);
        const int state = outcome_state(op.outcome);
        sqlite3_bind_int(s, 3, state);
        sqlite3_bind_int64(s, 4, op.outcome.next_attempt_ms);
        bind_text(s, 5, state == kDelivered ? kNoError : op.outcome.error);
        sqlite3_bind_int64(s, 6, op.rowid);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
          op.applied = true;
          op.attempts = sqlite3_column_int(s, 0);
          rc = sqlite3_step(s);
        }
        if (rc != SQLITE_DONE) {
          // Not fatal for the others unless SQLite gave up the transaction. Logged once per
          // outcome: it is retried until it is written.
          if (op.write_tries == 0)
            spdlog::warn("spool {}: recording outcome of {} failed, retrying: {}", path_,
                         op.delivery.id, c.error());
          op.applied = false;
          op.write_failed = true;
          if (sqlite3_get_autocommit(c.db)) failure = c.error();
        } else if (op.applied) {
          ++rows;
        }
        break;
      }
      case Op::Kind::Replay: {
        // All of it or none: a replay that failed half-way must not commit the half it did
        // while reporting failure.
        if (!c.exec("SAVEPOINT replay")) {
          failure = c.error();
          break;
        }
        if (!replay_rows(c, op.ids, op.all_dead, op.webhook, now, op.count)) {
          const std::string why = c.error();
          op.status = make_error("spool " + path_ + ": replay failed: " + why);
          op.count = 0;
          if (sqlite3_get_autocommit(c.db)) {
            failure = why;
          } else if (!c.undo_savepoint("replay")) {
            failure = why + "; " + c.error();
          }
        } else if (!c.exec("RELEASE replay")) {
          failure = c.error();
        }
        rows += op.count;
        break;
      }
      case Op::Kind::Hold: {
        sqlite3_stmt* h = c.stmt(op.hold.until_ms > 0 ? kPutHold : kDropHold);
        bool kept = h != nullptr;
        if (kept) {
          StmtScope scope(h);
          bind_text(h, 1, op.webhook);
          if (op.hold.until_ms > 0) {
            bind_text(h, 2, op.hold.receiver);
            sqlite3_bind_int64(h, 3, op.hold.until_ms);
          }
          kept = sqlite3_step(h) == SQLITE_DONE;
        }
        if (!kept && sqlite3_get_autocommit(c.db)) {  // SQLite gave the transaction up
          failure = c.error();
          break;
        }
        // Otherwise not worth the batch: a restart then forgets the hold, as it used to.
        static LogLimiter log_limit{5, "spool: unkept Retry-After lines"};
        if (!kept && log_limit.allow())
          spdlog::warn("spool {}: webhook {}'s Retry-After pause is not kept for a restart: {}",
                       path_, op.webhook, c.error());
        break;
      }
      case Op::Kind::Prune:
      case Op::Kind::Flush:
      case Op::Kind::Marks:
        break;
    }
  }
  MarksWritten marks;
  if (failure.empty()) {
    marks = write_marks(c, ops);
    failure = marks.failure;
    if (!failure.empty()) failure_code = marks.failure_code;
  }
  if (failure.empty() && !c.exec("COMMIT")) failure = c.error();
  if (!failure.empty() && failure_code == 0) failure_code = sqlite3_errcode(c.db);
  if (!failure.empty() && !sqlite3_get_autocommit(c.db)) c.exec("ROLLBACK");
  if (failure.empty()) marks_committed(marks);
  return {std::move(failure), failure_code, rows, folded};
}

SqliteSpool::MarksWritten SqliteSpool::write_marks(Conn& c,
                                                   const std::vector<std::unique_ptr<Op>>& ops) {
  // The newest mark of each stream: kept ones are older than any an op carries (their Marks ops
  // were queued before these), and ops are in queue order.
  std::unordered_map<std::string_view, const StreamMark*> newest;
  for (const auto& [stream, mark] : kept_marks_) newest[stream] = &mark;
  int64_t last_rowid = 0;
  for (const auto& op : ops) {
    if (op->kind != Op::Kind::Add) continue;
    for (const auto& m : op->marks) newest[m.stream] = &m;
    if (op->status.ok() && !op->rowids.empty())
      last_rowid = std::max(last_rowid, op->rowids.back());
  }
  MarksWritten written;
  written.rowid_mark = std::max(rowid_mark_, last_rowid);
  if (newest.empty() && (!marks_live_ || last_rowid == 0)) return written;
  auto failed = [&](const char* what) -> MarksWritten {
    const int code = sqlite3_errcode(c.db);
    // Events are not refused for a diagnostic's sake: only what fails the whole transaction
    // (or waits for the disk, as adds do) is the transaction's failure.
    if (sqlite3_get_autocommit(c.db) ||
        spool_write_waits_for(code, last_write_failed_.load(std::memory_order_relaxed)))
      return {c.error(), code};
    const std::string why = std::string(what) + ": " + c.error();
    if (why != last_marks_error_)
      spdlog::warn(
          "spool {}: cannot write publisher sequence numbers ({}); gaps across a crash may be "
          "missed until it works again",
          path_, why);
    last_marks_error_ = why;
    return {};
  };
  // Every time until a commit has made it: a rolled-back CREATE leaves no table.
  if (!marks_live_ && !c.exec(kCreateStreamMarks)) return failed("create");
  sqlite3_stmt* s = c.stmt(kInsertStreamMark);
  if (s == nullptr) return failed("prepare");
  for (const auto& [stream, mark] : newest)
    if (!put_stream_mark(s, *mark, 0)) return failed("write");
  // Always: a run whose events all made no delivery still says where the file stood.
  if (!put_stream_mark(s, StreamMark{"", 0, now_unix_ms()}, written.rowid_mark))
    return failed("write");
  written.wrote = true;
  return written;
}

void SqliteSpool::marks_committed(const MarksWritten& written) {
  rowid_mark_ = std::max(rowid_mark_, written.rowid_mark);
  if (!written.wrote) return;
  marks_live_ = true;
  kept_marks_.clear();
  last_marks_error_.clear();
  last_marks_write_ms_ = now_unix_ms();
}

namespace {
// Marks of messages that made no delivery wait at most this long for an add to take them along.
constexpr int64_t kMarksOnlyEveryMs = 200;
}  // namespace

void SqliteSpool::flush_kept_marks(int64_t now_ms) {
  if (kept_marks_.empty() || now_ms - last_marks_write_ms_ < kMarksOnlyEveryMs) return;
  Conn& c = *writer_;
  static const std::vector<std::unique_ptr<Op>> kNoOps;
  if (!begin_waiting(c)) return;  // kept for the next try
  MarksWritten written = write_marks(c, kNoOps);
  if (written.failure.empty() && c.exec("COMMIT")) {
    marks_committed(written);
    return;
  }
  if (!sqlite3_get_autocommit(c.db)) c.exec("ROLLBACK");
  last_marks_write_ms_ = now_ms;  // tried: again after the interval, or with the next add
}

void SqliteSpool::forget_old_marks(int64_t now_ms) {
  if (!marks_live_) return;
  sqlite3_stmt* s = writer_->stmt(kForgetOldStreamMarks);
  if (s == nullptr) return;
  StmtScope scope(s);
  sqlite3_bind_int64(s, 1, now_ms - kMaxStreamMarkAgeMs);
  (void)sqlite3_step(s);  // a failure leaves them for the next prune (and the open's age check)
}

void SqliteSpool::run_batch(std::vector<std::unique_ptr<Op>>& ops) {
  Conn& c = *writer_;
  bool any_txn = false;
  bool any_add = false;
  bool any_delivered = false;  // an outcome that makes a row the prune may take
  for (auto& op : ops) {
    any_txn |=
        op->kind != Op::Kind::Flush && op->kind != Op::Kind::Prune && op->kind != Op::Kind::Marks;
    any_add |= op->kind == Op::Kind::Add;
    any_delivered |=
        op->kind == Op::Kind::Complete && op->outcome.kind == AttemptOutcome::Kind::Delivered;
    // Kept until a commit writes them: alone, they would cost a transaction per batch of
    // vetoed or unrouted messages (write_marks, flush_kept_marks).
    if (op->kind == Op::Kind::Marks)
      for (auto& m : op->marks) kept_marks_[m.stream] = std::move(m);
  }

  std::string failure;  // non-empty: the whole transaction was lost
  // Held outcomes not in this batch (their retry is not due): the schedule is theirs, and this
  // batch's failures join it rather than push it back.
  const bool others_held = !held_outcomes_.empty();
  size_t rows = 0;
  int64_t retry_wait_ms = 0;  // > 0 once a batch of adds waits for the disk
  for (;;) {
    const int64_t t0 = now_steady_ns();
    failure.clear();
    rows = 0;
    for (auto& op : ops) {  // what a lost try left behind
      if (op->kind == Op::Kind::Add || op->kind == Op::Kind::Replay) op->status = {};
      if (op->kind == Op::Kind::Replay) op->count = 0;
      if (op->kind == Op::Kind::Complete) {
        op->write_failed = false;
        op->applied = false;
        op->attempts = 0;
      }
    }
    if (any_txn) {
      if (retry_wait_ms == 0) {  // a batch, however often it is tried
        std::lock_guard lock(stats_mu_);
        ++batches_taken_;
      }
      TransactionResult written = write_transaction(c, ops, schedule_now_ms());
      failure = std::move(written.failure);
      rows = written.rows;
      auto& m = spool_metrics();
      if (failure.empty()) {
        m.commit.observe_ns(now_steady_ns() - t0);
        if (any_delivered) ++delivered_commits_;
        // Measured after each commit of adds, not once a second: intake stops within a batch
        // or two of the bound rather than a second's worth of events past it.
        if (any_add && rows > 0 && max_bytes_.load(std::memory_order_relaxed) > 0) {
          const int64_t used = set_size_gauges(false);
          update_full(used);
          // Near the bound the next tick prunes history early (it measures once a second).
          if (applied_max_bytes_ > 0 && used >= max_bytes_prune_from(applied_max_bytes_))
            over_size_cap_ = true;
        }
        m.commits.inc();
        m.rows.inc(rows);
        m.folded.inc(written.folded);
        std::lock_guard lock(stats_mu_);
        ++commits_;
        rows_written_ += rows;
        outcomes_folded_ += written.folded;
      } else {
        m.errors.inc();
      }
      // Recovery is announced only by a commit that wrote rows: one that changed nothing (an
      // outcome for a withdrawn delivery) writes no page, so on a full disk it commits, and each
      // such commit would log recovery and the next event the failure again.
      bool stopping = stop_requested_.load(std::memory_order_relaxed);
      if (!failure.empty() && !stopping) {
        std::lock_guard lock(q_mu_);
        stopping = stopping_;
      }
      const bool wait = !failure.empty() && any_add &&
                        spool_write_waits_for(written.failure_code,
                                              last_write_failed_.load(std::memory_order_relaxed)) &&
                        !stopping;
      // Once per cause (refused adds are logged by their caller); waiting once per episode.
      if (!failure.empty() && failure != last_write_error_) {
        spdlog::error("spool {}: write transaction failed: {}", path_, failure);
        last_write_error_ = failure;
      }
      // Only a failure adds wait out (a full disk, an I/O error), not a lock held at a stop.
      if (!failure.empty() &&
          spool_write_waits_for(written.failure_code,
                                last_write_failed_.load(std::memory_order_relaxed)))
        last_write_failed_.store(true, std::memory_order_relaxed);
      if (wait && !disk_wait_logged_) {
        spdlog::error(
            "spool {}: cannot write, so intake waits (the bus queues, then publishers wait); "
            "the write is tried again until it succeeds or the gateway stops",
            path_);
        disk_wait_logged_ = true;
      }
      if (failure.empty() && rows > 0 && !last_write_error_.empty()) {
        spdlog::info("spool {}: writes succeed again", path_);
        last_write_error_.clear();
        last_write_failed_.store(false, std::memory_order_relaxed);
        disk_wait_logged_ = false;
      }
      // As the log: only a commit that wrote rows shows that writes succeed again.
      // Not writable while adds wait for the disk: intake waits then. A failure that refuses
      // (or only holds outcomes) leaves intake going, so it does not make the gateway unready.
      write_failing_.store(wait, std::memory_order_relaxed);
      spool_metrics().waiting_for_disk.set(wait ? 1 : 0);
      if (wait) {
        // The size gauges follow the files while they wait (found in review: they froze at
        // their last value, so an alert on them saw a near-empty spool on a full disk).
        set_size_gauges(/*files=*/true);
        // The adders wait for their answer meanwhile, which stops the ingest thread once enough
        // deliveries are open: the spool's backpressure on the bus (docs/spool.md).
        retry_wait_ms =
            std::clamp<int64_t>(retry_wait_ms * 2, kDiskRetryInitialMs, kDiskRetryMaxMs);
        std::unique_lock lock(q_mu_);
        q_cv_.wait_for(lock, std::chrono::milliseconds(retry_wait_ms), [&] {
          return stopping_ || stop_requested_.load(std::memory_order_relaxed);
        });
        continue;
      }
    }
    break;
  }

  // Publish what committed: claimable copies, released claims, the pending count.
  bool ready = false;
  {
    std::scoped_lock lock(disk_mu_, mu_);
    bool resync = false;
    for (auto& op_ptr : ops) {
      Op& op = *op_ptr;
      if (op.kind == Op::Kind::Complete && (op.write_failed || !failure.empty())) {
        // Not recorded: the file still says pending. The claim stays, so the delivery is not
        // sent again (a 2xx answered twice, a retry without its backoff) while the writer
        // keeps trying; after a crash it is pending and sent again (at-least-once).
        ++op.write_tries;
        op.write_failed = false;
        held_outcomes_.push_back(std::move(op_ptr));
        continue;
      }
      if (op.kind == Op::Kind::Complete) {
        Lane* claim_lane = nullptr;
        if (auto it = in_flight_.find(op.delivery.id); it != in_flight_.end()) {
          if (auto lane = lanes_.find(it->second.webhook); lane != lanes_.end()) {
            lane->second.claimed.erase(op.delivery.id);
            claim_lane = &lane->second;
          }
          if (it->second.completing) --completing_;
          claimed_bytes_ -= it->second.bytes;
          in_flight_.erase(it);
        }
        // A disk-mode lane whose last claim ended, and does not come back as a retry, with
        // nothing else pending holds nothing: back to memory, at no cost. Otherwise a healthy
        // webhook evicted in a burst stayed in disk mode while other backlogs kept the memory
        // above 3/4 of the cap: its claims, counted against that room, never let it return
        // (found in review). (A failed transaction resyncs every lane below.)
        const bool comes_back =
            failure.empty() && op.applied && op.outcome.kind == AttemptOutcome::Kind::Retry;
        if (!comes_back && claim_lane != nullptr && claim_lane->disk &&
            claim_lane->claimed.empty() && claim_lane->page.empty() &&
            claim_lane->disk_next_due == kNothingDue) {
          to_memory_mode_locked(*claim_lane);
        }
        if (!failure.empty() || !op.applied) continue;
        if (op.outcome.kind != AttemptOutcome::Kind::Retry) {
          if (pending_ > 0) --pending_;
          continue;
        }
        Delivery d = std::move(op.delivery);
        d.attempts = op.attempts;
        d.next_attempt_ms = op.outcome.next_attempt_ms;
        d.last_error = op.outcome.error;
        d.state = DeliveryState::Pending;
        Lane& lane = lanes_[d.webhook];  // before the move below: argument order is unspecified
        cache_locked(lane, std::move(d), op.rowid);
        ready = true;
      } else if (op.kind == Op::Kind::Add && failure.empty() && op.status.ok()) {
        // add() made some of these claimable already and counted them. Since then a resync
        // may have recounted the file without them, and a lane may have dropped its copies
        // (disk mode); caching again is harmless when neither happened (cache_locked skips
        // what is cached or in flight), and a claim cannot have ended yet: its outcome is
        // queued behind this add.
        const bool recounted = op.published_gen != resync_gen_;
        for (size_t i = 0; i < op.batch.size(); ++i) {
          if (op.batch[i].state != DeliveryState::Pending) continue;
          if (!op.published[i] || recounted) ++pending_;
          Lane& lane = lanes_[op.batch[i].webhook];
          ready |= cache_locked(lane, std::move(op.batch[i]), op.rowids[i]);
        }
      } else if (op.kind == Op::Kind::Add) {
        // Lost: whatever add() made claimable must go again (its claims, if any, complete
        // against no row). The resync below rebuilds the lanes from the file.
        for (bool p : op.published) resync |= p;
      } else if (op.kind == Op::Kind::Replay && failure.empty() && op.count > 0) {
        resync = true;  // the replayed rows' lanes must look at the file again
        ready = true;
        ready_.name_all();
      }
    }
    if (!failure.empty()) resync = true;  // adds lost with it
    if (resync && !resync_locked()) resync_pending_ = true;
    enforce_cap_locked();
    if (claims_capped_ && completing_ < tuning_.max_unrecorded_outcomes) {
      claims_capped_ = false;
      ready = true;
      ready_.name_all();  // every lane's claims were refused
    }
  }
  std::erase(ops, nullptr);  // the outcomes held for another try
  if (!held_outcomes_.empty() && !others_held) {
    const bool first = held_backoff_ms_ == 0;
    held_backoff_ms_ = first ? tuning_.outcome_retry_initial_ms
                             : std::min(held_backoff_ms_ * 2, tuning_.outcome_retry_max_ms);
    held_retry_ns_ = now_steady_ns() + held_backoff_ms_ * 1000000;
    if (first)
      spdlog::error(
          "spool {}: {} delivery outcomes could not be recorded; their deliveries are "
          "held (not sent again) and the writes retried",
          path_, held_outcomes_.size());
  } else if (held_outcomes_.empty() && held_backoff_ms_ != 0 && last_write_error_.empty()) {
    // (While transactions still fail, held outcomes that matched no row change nothing: the
    // episode is not over, and the backoff carries on for the next ones.)
    spdlog::info("spool {}: held delivery outcomes recorded", path_);
    held_backoff_ms_ = 0;
  }
  unrecorded_outcomes_.store(held_outcomes_.size(), std::memory_order_relaxed);
  spool_metrics().unrecorded.set(static_cast<int64_t>(held_outcomes_.size()));

  // Wake the dispatcher before answering the callers, so that after add() or flush() returns
  // the callback has run (no lost wake-up for a caller that checks right away).
  if (ready) notify_ready();
  for (auto& op_ptr : ops) {
    Op& op = *op_ptr;
    if (op.kind == Op::Kind::Prune) {
      bool more = true;
      while (more) op.count += prune_chunk(c, op.now_ms, &more);
    }
    if (op.accepted) {
      op.accepted->set_value(failure.empty()
                                 ? op.status
                                 : make_error("spool " + path_ + ": write failed: " + failure));
      continue;
    }
    if (!op.done) continue;
    Op::Outcome out;
    if (!failure.empty() && op.kind != Op::Kind::Prune) {
      out.status = make_error("spool " + path_ + ": write failed: " + failure);
    } else {
      out.status = op.status;
      out.count = op.count;
    }
    op.done->set_value(std::move(out));
  }
}

bool SqliteSpool::delete_rows(Conn& c, sqlite3_stmt* s, size_t& deleted) {
  std::vector<int64_t> payloads;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    ++deleted;
    payloads.push_back(sqlite3_column_int64(s, 0));
  }
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) return false;
  sqlite3_stmt* ps = c.stmt(kPrunePayload);
  if (ps == nullptr) return false;
  std::sort(payloads.begin(), payloads.end());
  payloads.erase(std::unique(payloads.begin(), payloads.end()), payloads.end());
  for (int64_t payload : payloads) {
    StmtScope scope(ps);
    sqlite3_bind_int64(ps, 1, payload);
    if (sqlite3_step(ps) != SQLITE_DONE) return false;
  }
  return true;
}

// A tenth of the shortest retention, between 1 s and the tuning's interval: with a fixed minute a
// 10 s retention_ms kept about 70 s of history.
int64_t SqliteSpool::prune_interval_ms() const {
  int64_t shortest = std::max<int64_t>(cfg_.retention_ms, 0);
  if (cfg_.dead_retention_ms > 0) shortest = std::min(shortest, cfg_.dead_retention_ms);
  return std::min(tuning_.prune_interval_ms, std::max<int64_t>(1000, shortest / 10));
}

size_t SqliteSpool::prune_chunk(Conn& c, int64_t now_ms, bool* more, size_t* dead, bool early,
                                bool* failed) {
  *more = false;
  if (dead != nullptr) *dead = 0;
  if (failed != nullptr) *failed = true;  // until the commit
  sqlite3_stmt* s = c.stmt(kPrune);
  // Dead letters only where open() created their age index: the gateway, not the CLI's tools mode.
  const bool prune_dead = cfg_.dead_retention_ms > 0 && !tools_;
  sqlite3_stmt* ds = prune_dead ? c.stmt(kPruneDead) : nullptr;
  // One transaction: the payloads go with their last deliveries or not at all. IMMEDIATE waits
  // (busy_timeout) for the other process's writer instead of failing halfway.
  if (s == nullptr || (prune_dead && ds == nullptr) || !c.exec("BEGIN IMMEDIATE")) {
    spdlog::warn("spool {}: pruning failed: {}", path_, c.error());
    return 0;
  }
  size_t delivered = 0, dead_rows = 0;
  bool ok;
  {
    StmtScope scope(s);
    sqlite3_bind_int64(s, 1,
                       early ? std::numeric_limits<int64_t>::max()
                             : now_ms - std::max<int64_t>(cfg_.retention_ms, 0));
    sqlite3_bind_int64(s, 2, early ? kEarlyPruneChunk : kPruneChunk);
    ok = delete_rows(c, s, delivered);
  }
  if (ok && ds != nullptr) {
    StmtScope scope(ds);
    sqlite3_bind_int64(ds, 1, now_ms - cfg_.dead_retention_ms);
    sqlite3_bind_int64(ds, 2, kPruneChunk);
    ok = delete_rows(c, ds, dead_rows);
  }
  if (!ok || !c.exec("COMMIT")) {
    spdlog::warn("spool {}: pruning failed: {}", path_, c.error());
    c.exec("ROLLBACK");
    return 0;
  }
  if (failed != nullptr) *failed = false;
  *more = delivered == static_cast<size_t>(early ? kEarlyPruneChunk : kPruneChunk) ||
          dead_rows == static_cast<size_t>(kPruneChunk);
  if (dead != nullptr) *dead = dead_rows;
  return delivered + dead_rows;
}

void SqliteSpool::tick(int64_t now_ms) {
  // Another process (the CLI replaying dead letters) committed: the file is the truth again.
  auto dv = writer_->scalar(kDataVersion);
  const bool external = dv && *dv != data_version_;
  if (dv) data_version_ = *dv;
  external_unannounced_ |= external;
  if (external || resync_pending_) {
    {
      std::scoped_lock lock(disk_mu_, mu_);
      resync_pending_ = !resync_locked();
    }
    // Announced only with counts read after it: a failed resync is retried next tick.
    if (external_unannounced_ && !resync_pending_) {
      external_unannounced_ = false;
      external_changes_.fetch_add(1, std::memory_order_release);
    }
    notify_ready();
  }
  flush_kept_marks(now_unix_ms());
  bool announce = false;
  {
    std::lock_guard lock(cb_mu_);
    std::swap(announce, announce_backlog_);
  }
  if (announce && pending_count() > 0) notify_ready();

  // Once a second, and after each early prune while over a cap; while full, also after each
  // commit of a delivered outcome since a prune found nothing delivered, so intake goes on as
  // soon as there is room, without a write transaction per tick (or per retry) for an outage's
  // length.
  const bool second_passed = now_ms - last_size_ms_ >= 1000 || now_ms < last_size_ms_;
  bool full = full_.load(std::memory_order_relaxed);
  if (over_size_cap_ || second_passed || (full && delivered_commits_ != commits_at_empty_prune_)) {
    if (second_passed) last_size_ms_ = now_ms;
    const int64_t used = set_size_gauges(/*files=*/second_passed);
    update_full(used);
    full = full_.load(std::memory_order_relaxed);
    over_retention_cap_ = cfg_.retention_max_bytes > 0 && used > cfg_.retention_max_bytes;
    if (!over_retention_cap_) said_cap_unreachable_ = false;
    // Near spool.max_bytes the history gives way to new events, as over retention_max_bytes:
    // from 85 % of it, so history alone (retention_ms of it may take more than the bound) does
    // not make the spool full and stop intake while it is pruned.
    const bool near_full =
        applied_max_bytes_ > 0 && used >= max_bytes_prune_from(applied_max_bytes_);
    over_size_cap_ = over_retention_cap_ || full || near_full;
  }
  say_full_state();
  if (prune_more_ || over_size_cap_ || now_ms - last_prune_ms_ >= prune_interval_ms()) {
    size_t dead = 0;
    const bool early = over_size_cap_;
    bool failed = false;
    const size_t n = prune_chunk(*writer_, now_ms, &prune_more_, &dead, early, &failed);
    if (!prune_more_) forget_old_marks(now_unix_ms());
    last_prune_ms_ = now_ms;
    if (early && failed) {
      over_size_cap_ = false;  // logged; the size is looked at again in a second
    } else if (early && n == dead) {
      // Nothing delivered left to give way: what remains is accepted events (pending) and dead
      // letters, which no cap drops. Looked at again in a second, or (full) after the next
      // commit of a delivered outcome.
      over_size_cap_ = false;
      commits_at_empty_prune_ = delivered_commits_;
      const int64_t steady_ms = now_steady_ns() / 1'000'000;
      if (full) {
        if (steady_ms - full_log_.stuck_said_ms >= kFullLogIntervalMs) {
          full_log_.stuck_said_ms = steady_ms;
          spdlog::warn(
              "spool {}: at spool.max_bytes ({} bytes) with no delivered rows left to prune: "
              "pending deliveries and dead letters take the rest, so intake waits until receivers "
              "take deliveries (or dead letters are replayed or purged)",
              path_, applied_max_bytes_);
        }
      } else if (over_retention_cap_ && !std::exchange(said_cap_unreachable_, true)) {
        spdlog::warn(
            "spool {}: over spool.retention_max_bytes ({} bytes) with no delivered rows left to "
            "prune: pending deliveries and dead letters take the rest (replay or purge dead "
            "letters; the file keeps growing while receivers are down)",
            path_, cfg_.retention_max_bytes);
      }
    } else if (early && n > dead) {
      spdlog::debug("spool {}: pruned {} delivered rows early (a size bound)", path_, n - dead);
    }
    if (!early && n > dead) spdlog::debug("spool {}: pruned {} delivered rows", path_, n - dead);
    // Dropping dead letters is dropping events for good: an operator should see it.
    if (dead > 0)
      spdlog::info("spool {}: removed {} dead letters older than spool.dead_retention_ms ({} ms)",
                   path_, dead, cfg_.dead_retention_ms);
  }
}

void SqliteSpool::update_full(int64_t used) {
  const int64_t max_bytes = max_bytes_.load(std::memory_order_relaxed);
  const bool was = full_.load(std::memory_order_relaxed);
  if (max_bytes > 0 && used < 0) return;  // not measured: as it was, the bound not applied yet
  if (used >= 0) last_used_bytes_ = used;
  // A bound a reload changed is met afresh: full only at the new one, so raising it by any
  // amount lets intake go on (90 % of the new bound could still be below what is used).
  const bool bound_changed = std::exchange(applied_max_bytes_, max_bytes) != max_bytes;
  bool full = false;
  if (max_bytes > 0) {
    full = was && !bound_changed ? used >= max_bytes_resume_below(max_bytes) : used >= max_bytes;
  }
  if (full == was) return;
  full_.store(full, std::memory_order_relaxed);
  spool_metrics().full.set(full ? 1 : 0);
  if (max_bytes <= 0) {  // a reload lifted the bound
    full_log_.not_full_owed = full_log_.full_owed = false;
    spdlog::info("spool {}: spool.max_bytes is off now: intake goes on", path_);
    return;
  }
  if (full) ++full_log_.full_unsaid;
  full_log_.full_owed = full;
  full_log_.not_full_owed = !full;
  say_full_state();
}

// While a bus backlog drains into a spool at its bound, it turns full and not full again every
// second or so: each line at most once a minute, the count of episodes left out in the next, and
// a line left out said once the minute is up if its state still holds, so the log's last word on
// it is right.
void SqliteSpool::say_full_state(bool at_stop) {
  if (!full_log_.full_owed && !full_log_.not_full_owed) return;
  const int64_t now_ms = now_steady_ns() / 1'000'000;
  const int64_t max_bytes = applied_max_bytes_;  // the bound judged, not one a reload just set
  if (full_log_.full_owed && (at_stop || now_ms - full_log_.full_said_ms >= kFullLogIntervalMs)) {
    spdlog::warn(
        "spool {}: its rows take {} bytes, spool.max_bytes is {}: intake waits (the bus queues) "
        "until deliveries free space below {}; delivered rows are pruned early meanwhile{}",
        path_, last_used_bytes_, max_bytes, max_bytes_resume_below(max_bytes),
        full_log_.full_unsaid > 1
            ? fmt::format(" (full {} times since the last such line)", full_log_.full_unsaid)
            : std::string());
    full_log_.full_said_ms = now_ms;
    full_log_.full_unsaid = 0;
    full_log_.full_owed = false;
  }
  if (full_log_.not_full_owed &&
      (at_stop || now_ms - full_log_.not_full_said_ms >= kFullLogIntervalMs)) {
    spdlog::info(
        "spool {}: its rows take {} bytes, below {} (90 % of spool.max_bytes): intake goes on",
        path_, last_used_bytes_, max_bytes_resume_below(max_bytes));
    full_log_.not_full_said_ms = now_ms;
    full_log_.not_full_owed = false;
  }
}

int64_t SqliteSpool::set_size_gauges(bool files) {
  auto& m = spool_metrics();
  if (files) {
    int64_t on_disk = 0;
    for (const std::string& file : {path_, path_ + "-wal"}) {
      struct stat st;
      if (::stat(file.c_str(), &st) == 0) on_disk += static_cast<int64_t>(st.st_size);
    }
    m.file_bytes.set(on_disk);
    check_file_identity();
  }
  sqlite3_stmt* s = writer_->stmt(kUsedBytes);
  if (s == nullptr) return -1;
  StmtScope scope(s);
  if (sqlite3_step(s) != SQLITE_ROW) return -1;
  const int64_t used = sqlite3_column_int64(s, 0) * sqlite3_column_int64(s, 1);
  m.used_bytes.set(used);
  return used;
}

void SqliteSpool::check_file_identity() {
  // The database, and its WAL and shared memory (found in an adversarial run: a WAL deleted
  // under a running gateway took the commits since the last checkpoint with it at a crash).
  // Either of those made after the open (SQLite makes them as it needs them) is taken as found.
  // They sit beside the file SQLite opened, a symlink's target (companion_base_).
  bool database_same = true;
  bool companions_same = true;
  for (size_t i = 0; i < opened_files_.size(); ++i) {
    struct stat st {};
    const std::string file = i == 0 ? path_ : companion_base_ + kSpoolFileSuffixes[i];
    const bool there = ::stat(file.c_str(), &st) == 0;
    bool same = there || i > 0;
    if (!opened_files_[i]) {
      if (there && i > 0) opened_files_[i] = std::pair{st.st_dev, st.st_ino};
    } else {
      same = there && std::pair{st.st_dev, st.st_ino} == *opened_files_[i];
    }
    (i == 0 ? database_same : companions_same) &= same;
  }
  const bool same = database_same && companions_same;
  database_missing_.store(!database_same, std::memory_order_relaxed);
  if (same == !file_missing_.load(std::memory_order_relaxed)) return;
  file_missing_.store(!same, std::memory_order_relaxed);
  spool_metrics().file_missing.set(same ? 0 : 1);
  if (same) {
    spdlog::warn("spool {}: the path names the open files again: intake goes on", path_);
    return;
  }
  if (!database_same) {
    // Found in an exploratory run: deleted while the gateway ran, the file went on taking
    // events, every one lost at the next stop, and nothing said so.
    spdlog::error(
        "spool {}: the path no longer names the file this gateway has open (deleted or "
        "replaced): intake waits, so new events stay with the publishers; the pending deliveries "
        "in the open file are still sent while the gateway runs, but a stop loses what is left "
        "of them: let that backlog drain (hookgate_spool_depth 0), then restart",
        path_);
    return;
  }
  // The database is there: a clean stop writes the open WAL back into it (its checkpoint goes
  // through the open files); a crash first, or another process making new ones, would not.
  spdlog::error(
      "spool {}: its -wal or -shm file was deleted or replaced while the gateway has them open: "
      "intake waits; restart the gateway now (its stop writes the WAL back into the database) "
      "and do not run `hookgate deliveries` on the file meanwhile",
      path_);
}

void SqliteSpool::notify_ready() {
  std::function<void()> cb;
  {
    std::lock_guard lock(cb_mu_);
    cb = on_ready_;
  }
  if (cb) cb();
}

// ---------------------------------------------------------------------------------------------
// Lanes

std::optional<std::vector<std::string>> SqliteSpool::take_ready_webhooks() {
  std::lock_guard lock(mu_);
  return ready_.take([&](const std::string& webhook) -> bool* {
    auto it = lanes_.find(webhook);
    return it == lanes_.end() ? nullptr : &it->second.listed_ready;
  });
}

void SqliteSpool::begin_stop() {
  stop_requested_.store(true, std::memory_order_relaxed);
  {
    std::lock_guard lock(q_mu_);  // a writer between its check and its wait sees the flag
  }
  q_cv_.notify_all();
}

bool SqliteSpool::begin_waiting(Conn& c) {
  for (int retry = 0;; ++retry) {
    if (c.exec("BEGIN IMMEDIATE")) return true;
    if ((sqlite3_extended_errcode(c.db) & 0xff) != SQLITE_BUSY || retry >= tuning_.busy_retries)
      return false;
    {
      // Shutting down: one busy timeout is all the wait a stop gets (a service manager's stop
      // timeout is not much longer than the grace period).
      std::lock_guard lock(q_mu_);
      if (stopping_ || stop_requested_.load(std::memory_order_relaxed)) return false;
    }
    spdlog::warn(
        "spool {}: another process (a `hookgate deliveries` command?) has held the write lock "
        "for {} ms; intake waits for it",
        path_, int64_t{tuning_.busy_timeout_ms} * (retry + 1));
  }
}

size_t SqliteSpool::prune(int64_t now_ms) {
  if (tools_) {
    std::lock_guard rl(read_mu_);
    if (!reader_) return 0;
    size_t n = 0;
    bool more = true;
    while (more) n += prune_chunk(*reader_, now_ms, &more);
    return n;
  }
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Prune;
  op->now_ms = now_ms;
  op->done = std::make_unique<std::promise<Op::Outcome>>();
  auto fut = op->done->get_future();
  if (!enqueue(std::move(op))) return 0;
  return fut.get().count;
}

Status SqliteSpool::flush() {
  if (tools_) return {};
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Flush;
  op->done = std::make_unique<std::promise<Op::Outcome>>();
  auto fut = op->done->get_future();
  if (auto st = enqueue(std::move(op)); !st) return st;
  return fut.get().status;
}

SqliteSpool::Stats SqliteSpool::stats() {
  Stats s;
  {
    std::lock_guard lock(mu_);
    s.cached = cached_;
    s.cached_bytes = cached_bytes_;
    s.page_bytes = page_bytes_;
    s.in_flight = in_flight_.size();
    s.unrecorded_outcomes = unrecorded_outcomes_.load(std::memory_order_relaxed);
    s.disk_reads = disk_reads_.load(std::memory_order_relaxed);
    s.moved_to_disk = moved_to_disk_;
    s.moved_to_memory = moved_to_memory_;
  }
  std::lock_guard lock(stats_mu_);
  s.commits = commits_;
  s.batches_taken = batches_taken_;
  s.rows_written = rows_written_;
  s.outcomes_folded = outcomes_folded_;
  return s;
}

}  // namespace hookgate::webhooks
