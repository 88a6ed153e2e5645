#include "webhooks/memory_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

namespace hookgate::webhooks {
namespace {

Delivery make(const std::string& id, const std::string& webhook = "a",
              int64_t next_attempt_ms = 0) {
  Delivery delivery;
  delivery.id = id;
  delivery.webhook = webhook;
  delivery.event_id = "evt-" + id;
  delivery.event_type = "user.created";
  delivery.body = std::make_shared<const std::string>("{}");
  delivery.next_attempt_ms = next_attempt_ms;
  return delivery;
}

std::vector<std::string> ids(const std::vector<Delivery>& deliveries) {
  std::vector<std::string> out;
  for (const auto& delivery : deliveries) out.push_back(delivery.id);
  return out;
}

const AttemptOutcome kDelivered{AttemptOutcome::Kind::Delivered, 0, ""};
AttemptOutcome retry_at(int64_t when) {
  return {AttemptOutcome::Kind::Retry, when, "HTTP 503"};
}
const AttemptOutcome kDead{AttemptOutcome::Kind::Dead, 0, "HTTP 404"};

TEST(MemoryStoreTest, ClaimsInFifoOrderPerWebhookUpToTheLimit) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1"), make("m2", "b"), make("m3"), make("m4")}).ok());
  EXPECT_EQ(ids(store.claim_due("a", 1000, 2)), (std::vector<std::string>{"m1", "m3"}));
  EXPECT_EQ(ids(store.claim_due("a", 1000, 10)), (std::vector<std::string>{"m4"}));
  EXPECT_TRUE(store.claim_due("a", 1000, 10).empty());  // claimed ones are not handed out twice
  EXPECT_EQ(ids(store.claim_due("b", 1000, 10)), (std::vector<std::string>{"m2"}));
  EXPECT_TRUE(store.claim_due("unknown", 1000, 10).empty());
  EXPECT_EQ(store.pending_count(), 4u);  // in flight still counts as pending
}

// A receiver that stays down must not grow a memory store without end: past its bound a
// webhook's new deliveries are dropped and counted, other webhooks keep theirs, and a slot freed
// by a delivery is taken again.
TEST(MemoryStoreTest, APerWebhookBoundDropsNewDeliveriesOfThatWebhookOnly) {
  MemoryDeliveryStore store(0, 0, /*max_pending_per_webhook=*/3);
  ASSERT_TRUE(store.add({make("m1"), make("m2"), make("m3"), make("m4"), make("m5", "b")}).ok());
  ASSERT_TRUE(store.add({make("m6"), make("m7", "b")}).ok());
  EXPECT_EQ(store.pending_count(), 5u);
  EXPECT_EQ(store.dropped_count(), 2u);
  EXPECT_FALSE(store.get("m4").has_value());
  EXPECT_FALSE(store.get("m6").has_value());
  auto claimed = store.claim_due("a", 1000, 10);
  EXPECT_EQ(ids(claimed), (std::vector<std::string>{"m1", "m2", "m3"}));
  EXPECT_EQ(ids(store.claim_due("b", 1000, 10)), (std::vector<std::string>{"m5", "m7"}));
  // A retry keeps its slot; a delivered one frees it.
  store.complete(claimed[0], retry_at(2000));
  ASSERT_TRUE(store.add({make("m8")}).ok());
  EXPECT_EQ(store.dropped_count(), 3u);
  store.complete(claimed[1], kDelivered);
  store.complete(claimed[2], kDead);
  ASSERT_TRUE(store.add({make("m9"), make("m10"), make("m11")}).ok());
  EXPECT_EQ(store.dropped_count(), 4u);
  EXPECT_EQ(ids(store.claim_due("a", 3000, 10)), (std::vector<std::string>{"m9", "m10", "m1"}));
}

TEST(MemoryStoreTest, RejectsDuplicateAndIncompleteBatchesWhole) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1")}).ok());
  EXPECT_FALSE(store.add({make("m2"), make("m1")}).ok());
  EXPECT_FALSE(store.add({make("m3"), make("m3")}).ok());
  EXPECT_FALSE(store.add({make("")}).ok());
  EXPECT_EQ(store.pending_count(), 1u);
  EXPECT_FALSE(store.get("m2").has_value());
}

TEST(MemoryStoreTest, DelayedRetriesBecomeDueInTimeOrder) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1"), make("m2"), make("m3")}).ok());
  auto claimed = store.claim_due("a", 1000, 3);
  ASSERT_EQ(claimed.size(), 3u);
  store.complete(claimed[0], retry_at(5000));
  store.complete(claimed[1], retry_at(3000));
  store.complete(claimed[2], kDelivered);

  EXPECT_EQ(store.next_due("a"), 3000);
  EXPECT_TRUE(store.claim_due("a", 2999, 10).empty());
  EXPECT_EQ(ids(store.claim_due("a", 3000, 10)), (std::vector<std::string>{"m2"}));
  EXPECT_EQ(store.next_due("a"), 5000);
  auto later = store.claim_due("a", 9000, 10);
  ASSERT_EQ(ids(later), (std::vector<std::string>{"m1"}));
  EXPECT_EQ(later[0].attempts, 1);
  EXPECT_EQ(later[0].last_error, "HTTP 503");
  EXPECT_FALSE(store.next_due("a").has_value());
  EXPECT_EQ(store.pending_count(), 2u);
}

TEST(MemoryStoreTest, AddedWithAFutureAttemptTimeWaitsForIt) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("later", "a", 5000), make("now")}).ok());
  EXPECT_EQ(store.next_due("a"), 0);
  EXPECT_EQ(ids(store.claim_due("a", 1000, 10)), (std::vector<std::string>{"now"}));
  EXPECT_EQ(store.next_due("a"), 5000);
  EXPECT_EQ(ids(store.claim_due("a", 5000, 10)), (std::vector<std::string>{"later"}));
}

TEST(MemoryStoreTest, CompleteRecordsAttemptsAndFinalStates) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("ok"), make("bad")}).ok());
  auto claimed = store.claim_due("a", 0, 2);
  store.complete(claimed[0], kDelivered);
  store.complete(claimed[1], kDead);
  EXPECT_EQ(store.pending_count(), 0u);
  auto ok = store.get("ok");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->state, DeliveryState::Delivered);
  EXPECT_EQ(ok->attempts, 1);
  auto bad = store.get("bad");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->state, DeliveryState::Dead);
  EXPECT_EQ(bad->last_error, "HTTP 404");
  // A second complete of the same claim is ignored: attempts are counted once.
  store.complete(claimed[1], kDead);
  EXPECT_EQ(store.get("bad")->attempts, 1);
}

TEST(MemoryStoreTest, ReleaseReturnsToTheHeadWithoutCountingAnAttempt) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1"), make("m2"), make("m3")}).ok());
  auto first = store.claim_due("a", 0, 1);
  ASSERT_EQ(ids(first), (std::vector<std::string>{"m1"}));
  store.release(first[0]);
  auto again = store.claim_due("a", 0, 10);
  EXPECT_EQ(ids(again), (std::vector<std::string>{"m1", "m2", "m3"}));
  EXPECT_EQ(again[0].attempts, 0);
  store.release(make("never-claimed"));  // harmless
}

TEST(MemoryStoreTest, ListFiltersByStateAndWebhook) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1"), make("m2"), make("m3", "b")}).ok());
  auto claimed = store.claim_due("a", 0, 1);
  store.complete(claimed[0], kDead);
  EXPECT_EQ(ids(store.list(DeliveryState::Dead, "", 0)), (std::vector<std::string>{"m1"}));
  EXPECT_EQ(ids(store.list(DeliveryState::Pending, "", 0)), (std::vector<std::string>{"m2", "m3"}));
  EXPECT_EQ(ids(store.list(std::nullopt, "b", 0)), (std::vector<std::string>{"m3"}));
  EXPECT_EQ(store.list(std::nullopt, "", 2).size(), 2u);
}

TEST(MemoryStoreTest, ReplayMovesDeadBackToPendingWithAttemptsReset) {
  MemoryDeliveryStore store;
  ASSERT_TRUE(store.add({make("m1"), make("m2")}).ok());
  auto claimed = store.claim_due("a", 0, 2);
  store.complete(claimed[0], kDead);
  store.complete(claimed[1], kDelivered);

  EXPECT_EQ(store.replay({"m1", "m2", "missing"}).value(), 1u);  // only dead ones move
  EXPECT_EQ(store.pending_count(), 1u);
  auto replayed = store.claim_due("a", 0, 10);
  ASSERT_EQ(ids(replayed), (std::vector<std::string>{"m1"}));
  EXPECT_EQ(replayed[0].attempts, 0);
  EXPECT_EQ(replayed[0].state, DeliveryState::Pending);
  EXPECT_EQ(store.replay({"m1"}).value(), 0u);  // pending now, not dead
}

TEST(MemoryStoreTest, OnReadyFiresAfterAddAndReplayOnly) {
  MemoryDeliveryStore store;
  int calls = 0;
  size_t pending_seen = 0;
  // The callback may call back into the store: it runs outside the store's lock.
  store.set_on_ready([&] {
    ++calls;
    pending_seen = store.pending_count();
  });
  ASSERT_TRUE(store.add({make("m1")}).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(pending_seen, 1u);
  auto claimed = store.claim_due("a", 0, 1);
  store.complete(claimed[0], kDead);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(store.replay({"m1"}).value(), 1u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(store.replay({"m1"}).value(), 0u);
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(store.add({make("m1")}).ok());
  EXPECT_EQ(calls, 2);
}

TEST(MemoryStoreTest, KeepsOnlyTheNewestFinishedDeliveries) {
  MemoryDeliveryStore store(/*keep_delivered=*/2, /*keep_dead=*/1);
  ASSERT_TRUE(store.add({make("d1"), make("d2"), make("d3"), make("x1"), make("x2")}).ok());
  auto claimed = store.claim_due("a", 0, 5);
  for (int i = 0; i < 3; ++i) store.complete(claimed[i], kDelivered);
  store.complete(claimed[3], kDead);
  store.complete(claimed[4], kDead);
  EXPECT_FALSE(store.get("d1").has_value());
  EXPECT_TRUE(store.get("d2").has_value());
  EXPECT_TRUE(store.get("d3").has_value());
  EXPECT_FALSE(store.get("x1").has_value());
  EXPECT_TRUE(store.get("x2").has_value());
}

// Found in review: a replayed delivery stayed on the dead list, so dying again listed it twice and
// the older entry's trim removed it while only two dead letters had ever existed.
TEST(MemoryStoreTest, AReplayedDeliveryThatDiesAgainKeepsItsNewPlaceAmongTheDead) {
  MemoryDeliveryStore store(/*keep_delivered=*/10, /*keep_dead=*/2);
  ASSERT_TRUE(store.add({make("x1"), make("x2")}).ok());
  store.complete(store.claim_due("a", 0, 1)[0], kDead);  // x1
  ASSERT_EQ(store.replay({"x1"}).value(), 1u);
  auto claimed = store.claim_due("a", 0, 10);  // x2 and x1 again
  ASSERT_EQ(claimed.size(), 2u);
  if (claimed[0].id != "x1") std::swap(claimed[0], claimed[1]);
  store.complete(claimed[0], kDead);  // x1 dies again
  store.complete(claimed[1], kDead);  // then x2
  EXPECT_TRUE(store.get("x1").has_value()) << "trimmed while only two dead letters exist";
  EXPECT_TRUE(store.get("x2").has_value());
}

TEST(MemoryStoreTest, ConcurrentClaimersNeverShareADelivery) {
  MemoryDeliveryStore store;
  constexpr int kCount = 2000;
  std::vector<Delivery> batch;
  for (int i = 0; i < kCount; ++i) batch.push_back(make("m" + std::to_string(100000 + i)));
  ASSERT_TRUE(store.add(std::move(batch)).ok());

  std::mutex mu;
  std::set<std::string> seen;
  std::atomic<int> duplicates{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        auto claimed = store.claim_due("a", 0, 7);
        if (claimed.empty()) return;
        for (const auto& delivery : claimed) {
          {
            std::lock_guard lock(mu);
            if (!seen.insert(delivery.id).second) ++duplicates;
          }
          store.complete(delivery, kDelivered);
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(duplicates.load(), 0);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kCount));
  EXPECT_EQ(store.pending_count(), 0u);
}

}  // namespace
}  // namespace hookgate::webhooks
