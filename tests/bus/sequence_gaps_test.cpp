#include "bus/sequence_gaps.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hookgate::bus {
namespace {

TEST(SequenceGapsTest, CountsSkippedNumbersPerStream) {
  SequenceGaps gaps;
  EXPECT_EQ(gaps.observe("a", 1), 0u);
  EXPECT_EQ(gaps.observe("a", 2), 0u);
  EXPECT_EQ(gaps.observe("a", 5), 2u);  // 3 and 4 never arrived
  EXPECT_EQ(gaps.observe("b", 1), 0u);  // streams are independent
  EXPECT_EQ(gaps.observe("a", 6), 0u);
  EXPECT_EQ(gaps.observe("b", 11), 9u);
}

TEST(SequenceGapsTest, FirstSightOfAStreamAndLateNumbersCountNothing) {
  SequenceGaps gaps;
  EXPECT_EQ(gaps.observe("restarted-gateway-sees-this-late", 5000), 0u);
  EXPECT_EQ(gaps.observe("restarted-gateway-sees-this-late", 5001), 0u);
  EXPECT_EQ(gaps.observe("restarted-gateway-sees-this-late", 4000), 0u);  // late or repeated
  EXPECT_EQ(gaps.observe("restarted-gateway-sees-this-late", 5001), 0u);
  EXPECT_EQ(gaps.observe("restarted-gateway-sees-this-late", 5003), 1u);
}

TEST(SequenceGapsTest, TableIsBoundedAndStartsOverWithoutInventingGaps) {
  SequenceGaps gaps;
  for (size_t i = 0; i < SequenceGaps::kMaxStreams; ++i)
    EXPECT_EQ(gaps.observe("s" + std::to_string(i), 1), 0u);
  EXPECT_EQ(gaps.streams(), SequenceGaps::kMaxStreams);
  EXPECT_EQ(gaps.observe("one-more", 1), 0u);
  EXPECT_EQ(gaps.streams(), 1u);
  EXPECT_EQ(gaps.observe("s0", 9), 0u);  // forgotten: first sight again
}

}  // namespace
}  // namespace hookgate::bus
