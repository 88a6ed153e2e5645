#include "webhooks/sqlite_spool.hpp"

// The durable spool's lanes: deliveries intake adds, held in memory per webhook (or left to the
// file past the spool's memory bound) until the dispatcher claims them and records outcomes.
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

bool SqliteSpool::cache_locked(Lane& lane, Delivery delivery, int64_t rowid) {
  // Already handed out (add() published it, or a disk-mode claim saw the commit first).
  if (in_flight_.count(delivery.id) > 0) return false;
  if (lane.disk) {
    lane.disk_next_due = std::min(lane.disk_next_due, delivery.next_attempt_ms);
    ready_.name(lane.listed_ready, delivery.webhook);
    return true;
  }
  const size_t bytes = cached_size(delivery);
  const auto key = std::make_pair(delivery.next_attempt_ms, rowid);
  // Already cached: published by add(), or loaded by a refill.
  auto [cached, fresh] = lane.cached.try_emplace(key, std::move(delivery));
  if (!fresh) return false;
  ready_.name(lane.listed_ready, cached->second.webhook);
  lane.cached_bytes += bytes;
  ++cached_;
  cached_bytes_ += bytes;
  return true;
}

void SqliteSpool::to_disk_mode_locked(Lane& lane, bool counted) {
  if (!lane.cached.empty()) {
    lane.disk_next_due = lane.disk ? std::min(lane.disk_next_due, lane.cached.begin()->first.first)
                                   : lane.cached.begin()->first.first;
  } else if (!lane.disk) {
    lane.disk_next_due = std::numeric_limits<int64_t>::min();  // unknown: look on the next claim
  }
  if (!lane.disk && counted) {
    ++moved_to_disk_;
    spool_metrics().to_file.inc();
  }
  cached_ -= lane.cached.size();
  cached_bytes_ -= lane.cached_bytes;
  lane.cached.clear();
  lane.cached_bytes = 0;
  lane.disk = true;
}

void SqliteSpool::to_memory_mode_locked(Lane& lane) {
  lane.disk = false;
  ++moved_to_memory_;
  spool_metrics().to_memory.inc();
}

void SqliteSpool::drop_page_locked(Lane& lane) {
  page_bytes_ -= lane.page_bytes;
  lane.page_bytes = 0;
  lane.page.clear();
}

void SqliteSpool::drop_idle_pages_locked(const std::string& except) {
  const int64_t cutoff = now_steady_ns() - tuning_.idle_page_ms * 1000000;
  for (auto& [name, lane] : lanes_) {
    if (name == except || lane.page.empty() || lane.page_used_ns > cutoff) continue;
    // The page's rows are due (it is in due order): the next claim must read them again.
    lane.disk_next_due = std::min(lane.disk_next_due, lane.page.front().second.next_attempt_ms);
    drop_page_locked(lane);
  }
}

void SqliteSpool::enforce_cap_locked() {
  // Evict the biggest lane: the webhook with the backlog (typically a slow or dead endpoint)
  // pages from disk, and the healthy ones keep their hot path in memory. Down to 3/4 of the caps,
  // with refills only below that: evicting just under the cap, a failing webhook's retries came
  // back from the file as soon as they were claimed and pushed the next one out (a scale run
  // with 700 failing webhooks moved 1,400 lanes a second, the dispatcher's thread busy reading
  // them back and the healthy webhooks' p99 at 170 ms).
  if (cached_ <= tuning_.max_cached_deliveries && cached_bytes_ <= tuning_.max_cached_bytes) return;
  // Sorted once: going down to 3/4 may take hundreds of small lanes, and this runs under mu_.
  std::vector<Lane*> biggest_first;
  for (auto& [name, lane] : lanes_)
    if (!lane.cached.empty()) biggest_first.push_back(&lane);
  std::sort(biggest_first.begin(), biggest_first.end(),
            [](const Lane* a, const Lane* b) { return a->cached_bytes > b->cached_bytes; });
  for (Lane* lane : biggest_first) {
    if (cached_ <= low_water(tuning_.max_cached_deliveries) &&
        cached_bytes_ <= low_water(tuning_.max_cached_bytes))
      break;
    to_disk_mode_locked(*lane);
  }
}

SqliteSpool::RefillRoom SqliteSpool::refill_room_locked() const {
  // Claims count as held: a retry brings each back to its lane (found in review: lanes that came
  // back while other lanes' requests were out went over the cap when those returned).
  const size_t held = cached_ + in_flight_.size();
  const size_t held_bytes = cached_bytes_ + claimed_bytes_;
  const size_t low_count = low_water(tuning_.max_cached_deliveries);
  const size_t low_bytes = low_water(tuning_.max_cached_bytes);
  if (held >= low_count || held_bytes >= low_bytes) return {};
  return {std::min(tuning_.refill_limit, low_count - held), low_bytes - held_bytes};
}

bool SqliteSpool::resync_locked() {
  // Runs on the writer connection (writer thread or open()), under disk_mu_ and mu_.
  ready_.name_all();  // every lane is read again (or left to the file)
  for (auto& [name, lane] : lanes_) {
    cached_ -= lane.cached.size();
    cached_bytes_ -= lane.cached_bytes;
    lane.cached.clear();
    lane.cached_bytes = 0;
    drop_page_locked(lane);
    lane.disk = false;
  }
  size_t pending = 0;
  std::map<std::string, size_t> counts;  // replaces resync_counts_ only when the read succeeds
  const bool read = read_lanes(*writer_, [&](std::string name, int64_t next_due, size_t count) {
    Lane& lane = lanes_[name];
    lane.disk = true;
    lane.disk_next_due = next_due;
    pending += count;
    counts[std::move(name)] = count;
  });
  if (!read) {
    // Rate-limited like the other spool lines: a failing disk retries this often (found in a
    // chaos test: 11,588 warning lines in 10 s from this one and the claim's below).
    if (log_limiter_for("spool: unreadable-file lines", 5).allow())
      spdlog::warn("spool {}: cannot read pending deliveries: {}", path_, writer_->error());
    for (auto& [name, lane] : lanes_) to_disk_mode_locked(lane, /*counted=*/false);
    return false;
  }
  pending_ = pending;
  resync_counts_ = std::move(counts);
  ++resync_gen_;  // pending_ recounted from the file (see submit_add)
  std::erase_if(lanes_, [](const auto& kv) {
    return !kv.second.disk && kv.second.claimed.empty() && kv.second.cached.empty();
  });
  return true;
}

// ---------------------------------------------------------------------------------------------
// DeliveryStore

Status SqliteSpool::add(std::vector<Delivery> batch) {
  return submit_add(std::move(batch), true).get();
}

std::future<Status> SqliteSpool::add_async(std::vector<Delivery> batch) {
  return submit_add(std::move(batch), false);
}

std::future<Status> SqliteSpool::add_async_with_marks(std::vector<Delivery> batch,
                                                      StreamMarks marks) {
  if (batch.empty()) {
    write_stream_marks(std::move(marks));
    return submit_add({}, false);  // answers ok at once
  }
  return submit_add(std::move(batch), false, std::move(marks));
}

void SqliteSpool::keep_webhook_hold(const std::string& webhook, const WebhookHold& hold) {
  if (tools_) return;
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Hold;
  op->urgent = false;  // nobody waits: it goes with the next transaction
  op->webhook = webhook;
  op->hold = hold;
  (void)enqueue(std::move(op));  // closed: the next start finds the hold as it was
}

void SqliteSpool::write_stream_marks(StreamMarks marks) {
  if (marks.empty() || tools_) return;
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Marks;
  op->urgent = false;
  op->marks = std::move(marks);
  (void)enqueue(std::move(op));  // closed: the close writes the marks it is given
}

std::future<Status> SqliteSpool::submit_add(std::vector<Delivery> batch, bool urgent,
                                            StreamMarks marks) {
  auto answer = [](Status st) {
    std::promise<Status> p;
    p.set_value(std::move(st));
    return p.get_future();
  };
  if (batch.empty()) return answer({});
  const int64_t now = schedule_now_ms();
  std::unordered_set<std::string_view> ids;
  for (auto& d : batch) {
    if (d.id.empty() || d.webhook.empty())
      return answer(make_error("delivery without an id or a webhook"));
    if (!ids.insert(d.id).second) return answer(make_error("duplicate delivery id " + d.id));
    if (d.created_ms <= 0) d.created_ms = now;
    // "0 = now" is stored as the creation time so due order is also age order.
    if (d.next_attempt_ms <= 0) d.next_attempt_ms = d.created_ms;
  }
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Add;
  op->urgent = urgent;
  op->batch = std::move(batch);
  op->marks = std::move(marks);
  op->accepted = std::make_unique<std::promise<Status>>();
  auto fut = op->accepted->get_future();
  // Deliveries of webhooks whose lane is in memory become claimable now, while the writer
  // commits them: the dispatcher's first attempt no longer waits for the commit (and for
  // whatever the disk does to it, docs/spool.md "Dispatch before the commit"). The event is
  // still accepted only when the commit lands; if it fails, they are withdrawn by a resync.
  // All under mu_, with the op queued first: no claim, hence no outcome, can overtake the add.
  bool published = false;
  {
    std::lock_guard lock(mu_);
    Op& add = *op;
    add.rowids.resize(add.batch.size());
    add.published.assign(add.batch.size(), false);
    add.published_gen = resync_gen_;
    for (auto& rowid : add.rowids) rowid = next_rowid_++;
    std::vector<std::pair<size_t, Lane*>> publish;
    for (size_t i = 0; i < add.batch.size(); ++i) {
      if (add.batch[i].state != DeliveryState::Pending) continue;
      auto it = lanes_.find(add.batch[i].webhook);
      if (it == lanes_.end()) it = lanes_.try_emplace(add.batch[i].webhook).first;
      if (it->second.disk) {
        add.urgent = true;  // this delivery waits for the commit (to be read from the file)
      } else {
        publish.emplace_back(i, &it->second);
      }
    }
    if (auto st = enqueue(std::move(op)); !st) return answer(std::move(st));
    for (auto [i, lane] : publish) {
      add.published[i] = true;
      ++pending_;
      cache_locked(*lane, add.batch[i], add.rowids[i]);
    }
    published = !publish.empty();
    if (published) enforce_cap_locked();
  }
  if (published) notify_ready();
  return fut;
}

std::vector<Delivery> SqliteSpool::claim_due(const std::string& webhook, int64_t now_ms,
                                             size_t limit) {
  std::vector<Delivery> out;
  if (limit == 0 || tools_) return out;
  {
    std::lock_guard lock(mu_);
    if (completing_ >= tuning_.max_unrecorded_outcomes) {
      claims_capped_ = true;  // the writer's next commit below the cap calls on_ready
      return out;
    }
    auto it = lanes_.find(webhook);
    if (it == lanes_.end()) return out;
    Lane& lane = it->second;
    if (!lane.disk) {
      claim_cached_locked(lane, webhook, now_ms, limit, out);
      return out;
    }
    // Rows read ahead, in due order. Until the page is used up, the file is not read again.
    if (!lane.page.empty()) lane.page_used_ns = now_steady_ns();
    while (out.size() < limit && !lane.page.empty() &&
           lane.page.front().second.next_attempt_ms <= now_ms) {
      const size_t bytes = cached_size(lane.page.front().second);
      lane.page_bytes -= bytes;
      page_bytes_ -= bytes;
      hand_out_locked(lane, webhook, lane.page.front().first, std::move(lane.page.front().second),
                      out);
      lane.page.pop_front();
    }
    if (out.size() == limit || !lane.page.empty()) return out;
    if (lane.disk_next_due > now_ms) return out;  // nothing on disk is due yet: no I/O
  }
  std::vector<Delivery> more = claim_from_disk(webhook, now_ms, limit - out.size());
  if (out.empty()) return more;
  std::move(more.begin(), more.end(), std::back_inserter(out));
  return out;
}

void SqliteSpool::claim_cached_locked(Lane& lane, const std::string& webhook, int64_t now_ms,
                                      size_t limit, std::vector<Delivery>& out) {
  while (out.size() < limit && !lane.cached.empty() && lane.cached.begin()->first.first <= now_ms) {
    auto node = lane.cached.extract(lane.cached.begin());
    const size_t bytes = cached_size(node.mapped());
    lane.cached_bytes -= bytes;
    cached_bytes_ -= bytes;
    --cached_;
    hand_out_locked(lane, webhook, node.key().second, std::move(node.mapped()), out);
  }
}

void SqliteSpool::hand_out_locked(Lane& lane, const std::string& webhook, int64_t rowid,
                                  Delivery delivery, std::vector<Delivery>& out) {
  // An id already in flight is not handed out twice. Only a copy add() published for an id that
  // is already spooled can get here (its savepoint will refuse it): it must not go out beside
  // the real delivery. One hash lookup serves both the check and the claim.
  const size_t bytes = cached_size(delivery);
  if (!in_flight_.try_emplace(delivery.id, InFlight{webhook, rowid, false, bytes}).second) return;
  claimed_bytes_ += bytes;
  lane.claimed.insert(delivery.id);
  out.push_back(std::move(delivery));
}

std::vector<Delivery> SqliteSpool::claim_from_disk(const std::string& webhook, int64_t now_ms,
                                                   size_t limit) {
  std::vector<Delivery> out;
  // Held throughout: the writer cannot publish (so claims of this lane cannot end and its mode
  // cannot change) while this claim compares the file with memory.
  std::lock_guard disk_lock(disk_mu_);
  std::unordered_set<std::string> busy;  // this lane's claims (release waits for disk_mu_)
  size_t ahead_budget = 0;               // read-ahead bytes this claim may add to the pages
  RefillRoom refill_room;                // what a drained lane may bring back into memory
  size_t page_bytes = 0;                 // of this lane's page
  size_t claimed_before = 0;             // this lane's claims (counted in refill_room already)
  {
    std::lock_guard lock(mu_);
    auto it = lanes_.find(webhook);
    if (it == lanes_.end()) return out;
    if (!it->second.disk) {  // a concurrent claim drained the backlog and switched modes
      claim_cached_locked(it->second, webhook, now_ms, limit, out);
      return out;
    }
    if (it->second.disk_next_due > now_ms) return out;
    busy.insert(it->second.claimed.begin(), it->second.claimed.end());
    for (const auto& [rowid, d] : it->second.page) busy.insert(d.id);
    if (page_bytes_ + tuning_.read_ahead_bytes > tuning_.max_page_bytes)
      drop_idle_pages_locked(webhook);
    ahead_budget = std::min(tuning_.read_ahead_bytes,
                            tuning_.max_page_bytes - std::min(tuning_.max_page_bytes, page_bytes_));
    refill_room = refill_room_locked();
    page_bytes = it->second.page_bytes;
    claimed_before = it->second.claimed.size();
  }

  std::vector<std::pair<int64_t, Delivery>> due;
  std::vector<std::pair<int64_t, Delivery>> refill;  // loaded back into memory when small enough
  bool drained = false;  // every pending, unclaimed row is in `due` or `refill`
  std::optional<int64_t> next_due;
  bool none_left = false;  // every pending row is in flight or in `due`
  {
    std::lock_guard rl(read_mu_);
    if (!reader_) return out;
    Conn& c = *reader_;
    disk_reads_.fetch_add(1, std::memory_order_relaxed);
    spool_metrics().file_claims.inc();
    bool ok = c.exec("BEGIN");  // one snapshot for the due page and the look at what remains
    sqlite3_stmt* s = ok ? c.stmt(kClaimDue) : nullptr;
    ok = s != nullptr;
    bool exhausted = false;  // saw every due row
    if (ok) {
      StmtScope scope(s);
      bind_text(s, 1, webhook);
      sqlite3_bind_int64(s, 2, now_ms);
      // This claim's rows, then a page read ahead for the next claims.
      const size_t want = limit + tuning_.read_ahead_rows;
      sqlite3_bind_int64(s, 3, static_cast<int64_t>(want + busy.size()));
      size_t ahead_bytes = 0;
      int rc = SQLITE_ROW;
      while (due.size() < want && ahead_bytes <= ahead_budget &&
             (rc = sqlite3_step(s)) == SQLITE_ROW) {
        // Claimed rows are skipped before their body is copied out.
        if (busy.count(column_text(s, 1)) != 0) continue;
        due.push_back(read_row(s));
        if (due.size() > limit) ahead_bytes += cached_size(due.back().second);
      }
      if (rc != SQLITE_ROW) {
        ok = rc == SQLITE_DONE;
        exhausted = true;
      }
    }
    // No more due rows: either stay in disk mode, knowing when the next one is due, or load the
    // (small) remainder back into memory.
    if (ok && exhausted) {
      for (const auto& r : due) busy.insert(r.second.id);
      // The lane's whole backlog must fit, in count and in bytes: its page, this claim's rows
      // (in flight from now on, and a retry brings each back) and the rest. Its earlier claims
      // are held already (refill_room_locked).
      const size_t backlog_count = busy.size() - std::min(busy.size(), claimed_before);
      size_t backlog_bytes = page_bytes;
      for (const auto& r : due) backlog_bytes += cached_size(r.second);
      const bool may_return =
          backlog_count <= refill_room.count && backlog_bytes <= refill_room.bytes;
      const size_t room_for_keys = may_return ? refill_room.count - backlog_count : 0;
      sqlite3_stmt* k = c.stmt(may_return ? kPendingKeysSized : kPendingKeys);
      ok = k != nullptr;
      std::vector<std::pair<int64_t, int64_t>> keys;  // (rowid, next_attempt_ms)
      if (ok) {
        StmtScope scope(k);
        bind_text(k, 1, webhook);
        // Without room, only the next due time: one row past the claimed ones.
        sqlite3_bind_int64(k, 2, static_cast<int64_t>(busy.size() + room_for_keys + 1));
        int rc;
        while ((rc = sqlite3_step(k)) == SQLITE_ROW) {
          if (busy.count(column_text(k, 1)) != 0) continue;
          keys.emplace_back(sqlite3_column_int64(k, 0), sqlite3_column_int64(k, 2));
          backlog_bytes += kCachedOverhead + static_cast<size_t>(sqlite3_column_int64(k, 3));
        }
        ok = rc == SQLITE_DONE;
      }
      if (ok && !keys.empty()) next_due = keys.front().second;
      none_left = ok && keys.empty();
      if (ok && may_return && backlog_count + keys.size() <= refill_room.count &&
          backlog_bytes <= refill_room.bytes) {
        drained = true;
        sqlite3_stmt* r = c.stmt(kByRowid);
        ok = r != nullptr;
        for (size_t i = 0; ok && i < keys.size(); ++i) {
          StmtScope scope(r);
          sqlite3_bind_int64(r, 1, keys[i].first);
          const int rc = sqlite3_step(r);
          if (rc == SQLITE_ROW) refill.push_back(read_row(r));
          ok = rc == SQLITE_ROW || rc == SQLITE_DONE;
        }
      }
    }
    const std::string err = ok ? "" : c.error();
    c.exec("COMMIT");
    if (!ok) {
      if (log_limiter_for("spool: unreadable-file lines", 5).allow())
        spdlog::warn("spool {}: reading due deliveries of {} failed: {}", path_, webhook, err);
      return out;
    }
  }

  std::lock_guard lock(mu_);
  Lane& lane = lanes_[webhook];
  const size_t claimed = std::min(limit, due.size());
  for (size_t i = 0; i < claimed; ++i) {
    hand_out_locked(lane, webhook, due[i].first, std::move(due[i].second), out);
  }
  if (drained) {
    // Everything left fits in memory: back to the hot path. The writer's later publishing of
    // commits this snapshot already saw is deduplicated in cache_locked.
    to_memory_mode_locked(lane);
    for (auto& [rowid, d] : lane.page) cache_locked(lane, std::move(d), rowid);
    drop_page_locked(lane);
    for (size_t i = claimed; i < due.size(); ++i)
      cache_locked(lane, std::move(due[i].second), due[i].first);
    for (auto& [rowid, d] : refill) cache_locked(lane, std::move(d), rowid);
    enforce_cap_locked();
  } else {
    // The page keeps what fits in the budget all lanes share; the rest of the due rows stay in
    // the file for the next read (a webhook backlog each must not add up to 4 MiB per lane).
    size_t kept = claimed;
    for (; kept < due.size(); ++kept) {
      const size_t bytes = cached_size(due[kept].second);
      if (page_bytes_ + bytes > tuning_.max_page_bytes) break;
      lane.page_bytes += bytes;
      page_bytes_ += bytes;
      lane.page.push_back(std::move(due[kept]));
    }
    lane.page_used_ns = now_steady_ns();
    if (kept < due.size()) {
      lane.disk_next_due = due[kept].second.next_attempt_ms;  // due now: read again next claim
    } else if (next_due) {
      lane.disk_next_due = *next_due;
    } else if (none_left) {
      // Its claims may come back (retries) or not: cache_locked lowers this when they do, so
      // nothing reads the file for this lane meanwhile.
      lane.disk_next_due = kNothingDue;
    }
  }
  return out;
}

void SqliteSpool::complete(const Delivery& delivery, const AttemptOutcome& outcome) {
  if (tools_) return;
  int64_t rowid = 0;
  {
    // Like the memory store: only a claim can be completed, and only once. A second outcome
    // for the same claim would otherwise cache the delivery twice.
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(delivery.id);
    if (it == in_flight_.end() || it->second.completing) {
      spdlog::debug("spool {}: outcome for unclaimed delivery {} ignored", path_, delivery.id);
      return;
    }
    it->second.completing = true;
    ++completing_;
    rowid = it->second.rowid;
  }
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::Complete;
  op->urgent = false;
  op->rowid = rowid;
  op->delivery = delivery;
  op->outcome = outcome;
  if (auto st = enqueue(std::move(op)); !st) {
    // Closed: the row stays pending in the file and is retried after the restart.
    spdlog::warn("spool {}: outcome of {} not recorded: {}", path_, delivery.id,
                 st.error().message);
  }
}

void SqliteSpool::release(const Delivery& delivery) {
  // Claims exist only in memory, so releasing touches no file. disk_mu_ too: a disk-mode claim of
  // this lane that is reading the file skips this delivery as claimed, and if it then moves the
  // lane back to memory ("drained"), a release that slipped in meanwhile would have updated only
  // the disk-mode due time, leaving the delivery in neither place (found by
  // ConcurrentAddClaimCompleteLosesNothing, about 1 run in 12 under load).
  std::scoped_lock lock(disk_mu_, mu_);
  auto it = in_flight_.find(delivery.id);
  if (it == in_flight_.end() || it->second.completing) return;
  const InFlight claim = it->second;
  claimed_bytes_ -= claim.bytes;
  in_flight_.erase(it);
  Lane& lane = lanes_[claim.webhook];
  lane.claimed.erase(delivery.id);
  Delivery d = delivery;
  d.state = DeliveryState::Pending;
  cache_locked(lane, std::move(d), claim.rowid);
  enforce_cap_locked();
}

std::optional<int64_t> SqliteSpool::next_due(const std::string& webhook) {
  if (tools_) {
    std::lock_guard rl(read_mu_);
    if (!reader_) return std::nullopt;
    sqlite3_stmt* s = reader_->stmt(kNextDue);
    if (s == nullptr) return std::nullopt;
    StmtScope scope(s);
    bind_text(s, 1, webhook);
    if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL)
      return std::nullopt;
    return sqlite3_column_int64(s, 0);
  }
  std::lock_guard lock(mu_);
  auto it = lanes_.find(webhook);
  if (it == lanes_.end()) return std::nullopt;
  const Lane& lane = it->second;
  if (lane.disk) {
    if (!lane.page.empty()) return lane.page.front().second.next_attempt_ms;
    if (lane.disk_next_due == kNothingDue) return std::nullopt;
    return lane.disk_next_due;  // a lower bound: at worst one early, empty claim
  }
  if (lane.cached.empty()) return std::nullopt;
  return lane.cached.begin()->first.first;
}

void SqliteSpool::set_on_ready(std::function<void()> on_ready) {
  {
    std::lock_guard lock(cb_mu_);
    on_ready_ = std::move(on_ready);
    announce_backlog_ = true;  // recovered deliveries: the writer says so once, off this thread
  }
  {
    std::lock_guard lock(mu_);
    ready_.name_all();  // a new listener: whatever is pending
  }
  {
    std::lock_guard lock(q_mu_);
    wake_ = true;
  }
  q_cv_.notify_one();
}

bool SqliteSpool::read_lanes(Conn& conn,
                             const std::function<void(std::string, int64_t, size_t)>& each) {
  sqlite3_stmt* s = conn.stmt(kLanes);
  if (s == nullptr) return false;
  StmtScope scope(s);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW)
    each(column_text(s, 0), sqlite3_column_int64(s, 1),
         static_cast<size_t>(sqlite3_column_int64(s, 2)));
  return rc == SQLITE_DONE;
}

void SqliteSpool::take_pending_snapshot() {
  std::map<std::string, size_t> counts;
  if (!read_lanes(*checkpointer_, [&](std::string name, int64_t, size_t count) {
        counts[std::move(name)] = count;
      }))
    return;  // the last counts stay; tried again next interval
  std::lock_guard lock(snapshot_mu_);
  pending_snapshot_ = std::move(counts);
}

std::map<std::string, size_t> SqliteSpool::pending_by_webhook_snapshot() {
  std::lock_guard lock(snapshot_mu_);
  return pending_snapshot_;
}

std::map<std::string, size_t> SqliteSpool::pending_by_webhook_after_external_change() {
  std::lock_guard lock(mu_);
  return resync_counts_;
}

}  // namespace hookgate::webhooks
