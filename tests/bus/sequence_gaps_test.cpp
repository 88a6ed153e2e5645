#include "bus/sequence_gaps.hpp"

#include <algorithm>

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

// Found in review: one bogus number (seq 1, then 2^63) added ~9.2e18 to the dropped counter, and
// a publisher that restarted with the same stream id had its real gaps hidden below the old
// maximum. Implausible jumps start the stream over.
TEST(SequenceGapsTest, ImplausibleJumpsStartTheStreamOver) {
  SequenceGaps gaps;
  EXPECT_EQ(gaps.observe("s", 1), 0u);
  EXPECT_EQ(gaps.observe("s", uint64_t{1} << 63), 0u);  // not 9.2e18 lost messages
  EXPECT_EQ(gaps.observe("s", (uint64_t{1} << 63) + 3), 2u);
  SequenceGaps restarted;
  EXPECT_EQ(restarted.observe("svc", 5'000'000), 0u);
  EXPECT_EQ(restarted.observe("svc", 1), 0u);  // the publisher started over with the same id
  EXPECT_EQ(restarted.observe("svc", 4), 2u);  // its real gaps count again
  EXPECT_EQ(restarted.observe("svc", 3), 0u);  // a late number still counts nothing
  EXPECT_EQ(restarted.observe("svc", 4 + SequenceGaps::kMaxPlausibleGap),
            SequenceGaps::kMaxPlausibleGap - 1);  // the largest gap still believed
}

// Found in review: a gateway stalled for two minutes behind a lossy proxy at 10k events/s misses
// 1.2 million in a row, and a forward jump over 2^20 counted as nothing.
TEST(SequenceGapsTest, ALossOfMillionsInARowIsCounted) {
  SequenceGaps gaps;
  EXPECT_EQ(gaps.observe("s", 10), 0u);
  EXPECT_EQ(gaps.observe("s", 10 + 1'200'001), 1'200'000u);
  EXPECT_EQ(gaps.observe("s", 9), 0u);  // late, not a restart
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

// Marks carried over from an earlier instance continue their streams; a stream this instance has
// seen already keeps its own number; ids the wire would not accept are not restored.
TEST(SequenceGapsTest, RestoredStreamsCountWhatWasSkippedSinceTheirMark) {
  SequenceGaps before;
  EXPECT_EQ(before.observe("s1", 4), 0u);
  EXPECT_EQ(before.observe("s2", 9), 0u);
  SequenceGaps after;
  EXPECT_EQ(after.observe("s2", 20), 0u);
  auto marks = before.marks(1000);
  std::sort(marks.begin(), marks.end());
  EXPECT_EQ(marks, (StreamMarks{{"s1", 4, 1000}, {"s2", 9, 1000}}));
  marks.push_back({"s3", 7, 500});
  marks.push_back({std::string(kMaxStreamIdBytes + 1, 'x'), 1, 1000});
  after.restore(marks);
  EXPECT_EQ(after.streams(), 3u);
  EXPECT_EQ(after.observe("s1", 8), 3u);   // 5, 6, 7
  EXPECT_EQ(after.observe("s2", 21), 0u);  // its own number, not the mark's
  // Seen in this run: seen now; restored and not seen since: the time it had.
  marks = after.marks(2000);
  std::sort(marks.begin(), marks.end());
  EXPECT_EQ(marks, (StreamMarks{{"s1", 8, 2000}, {"s2", 21, 2000}, {"s3", 7, 500}}));
}

// What the spool writes with each batch: the streams observed or restored since the last take,
// each once, with the time marks() would give; nothing when nothing changed.
TEST(SequenceGapsTest, ChangedStreamsAreTakenOnceEach) {
  SequenceGaps gaps;
  EXPECT_EQ(gaps.observe("s1", 1), 0u);
  EXPECT_EQ(gaps.observe("s1", 2), 0u);
  EXPECT_EQ(gaps.observe("s2", 5), 0u);
  auto taken = gaps.take_changed(1000);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (StreamMarks{{"s1", 2, 1000}, {"s2", 5, 1000}}));
  EXPECT_TRUE(gaps.take_changed(1100).empty());
  EXPECT_EQ(gaps.observe("s2", 4), 0u);             // late: its mark stays 5, but it was seen
  gaps.restore({{"s3", 7, 500}, {"s1", 99, 500}});  // s1 is this run's already
  taken = gaps.take_changed(2000);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (StreamMarks{{"s2", 5, 2000}, {"s3", 7, 500}}));
  // A table that starts over still hands over what it owed for the streams it forgot (their
  // marks in the spool would lag otherwise), and nothing more.
  SequenceGaps full;
  for (size_t i = 0; i < SequenceGaps::kMaxStreams; ++i)
    (void)full.observe("t" + std::to_string(i), 1);
  EXPECT_EQ(full.take_changed(1000).size(), SequenceGaps::kMaxStreams);
  EXPECT_EQ(full.observe("t7", 2), 0u);
  EXPECT_EQ(full.observe("t8", 5), 3u);  // 2, 3, 4
  EXPECT_EQ(full.observe("new", 1), 0u);  // the table is full: it starts over
  EXPECT_EQ(full.streams(), 1u);
  // Seen again since: a late number does not move the mark back; a later one does move it on.
  EXPECT_EQ(full.observe("t7", 1), 0u);
  EXPECT_EQ(full.observe("t8", 9), 0u);
  taken = full.take_changed(2000);
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (StreamMarks{{"new", 1, 2000}, {"t7", 2, 2000}, {"t8", 9, 2000}}));
  EXPECT_TRUE(full.take_changed(2100).empty());
}

}  // namespace
}  // namespace hookgate::bus
