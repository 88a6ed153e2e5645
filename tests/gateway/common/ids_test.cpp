#include "gateway/common/ids.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gateway/common/clock.hpp"

namespace hookgate {
namespace {

// PRODUCT.md: event ids are unique and time-ordered. Minted in a tight loop, many share a
// millisecond, so this covers the in-millisecond counter (and, when one millisecond mints more
// than 4,096, the borrowing of the next one).
TEST(IdsTest, EventIdsAreUniqueAndStrictlyIncreasing) {
  const std::regex shape("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  const int64_t before_ms = now_unix_ms();
  std::vector<std::string> ids;
  for (int i = 0; i < 20'000; ++i) ids.push_back(new_uuid_v7());
  const int64_t after_ms = now_unix_ms();
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(std::regex_match(ids[i], shape)) << ids[i];
    if (i > 0) {
      ASSERT_LT(ids[i - 1], ids[i]) << "at " << i;  // fixed-width lower-case hex
    }
  }
  // The first 48 bits are the millisecond it was minted in.
  const auto ms_of = [](const std::string& id) {
    return std::stoll(id.substr(0, 8) + id.substr(9, 4), nullptr, 16);
  };
  EXPECT_GE(ms_of(ids.front()), before_ms);
  // A millisecond holds at least 3,584 ids (the counter starts below 512), and each further
  // 4,096 borrow one more: never more than this far ahead.
  EXPECT_LE(ms_of(ids.back()), after_ms + 20'000 / 3'584 + 1);
}

TEST(IdsTest, IdsFromManyThreadsNeverRepeat) {
  std::vector<std::vector<std::string>> minted(4);
  std::vector<std::thread> threads;
  for (auto& out : minted)
    threads.emplace_back([&out] {
      for (int i = 0; i < 5'000; ++i) out.push_back(i % 2 ? new_uuid_v7() : new_delivery_id());
    });
  for (auto& t : threads) t.join();
  std::set<std::string> all;
  for (const auto& out : minted)
    for (size_t i = 0; i < out.size(); ++i) {
      if (i >= 2) {
        EXPECT_LT(out[i - 2], out[i]);  // each thread's own ids of a kind still rise
      }
      all.insert(out[i]);
    }
  EXPECT_EQ(all.size(), 20'000u);
}

TEST(IdsTest, DeliveryIdsAreMsgPrefixedHex) {
  const std::string id = new_delivery_id();
  EXPECT_TRUE(std::regex_match(id, std::regex("msg_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}")))
      << id;
}

}  // namespace
}  // namespace hookgate
