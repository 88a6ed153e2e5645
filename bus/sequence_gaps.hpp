#pragma once
// Counting bus messages that never arrived. PUB/SUB loses messages silently: at a plain PUB's
// send HWM, and on a connection that breaks (a gateway restart, a network blip) with messages in
// flight. The subscriber cannot see that by itself, so hookgate's publisher library stamps each
// event with its stream (one random id per Publisher instance) and a sequence number that grows
// by one per message sent, and the gateway counts the numbers it never saw.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/common/stream_mark.hpp"

namespace hookgate::bus {

// The CloudEvents extension attributes the publisher library sets.
inline constexpr const char* kStreamAttribute = "hookgatestream";
inline constexpr const char* kSequenceAttribute = "hookgateseq";
inline constexpr size_t kMaxStreamIdBytes = 64;

class SequenceGaps {
 public:
  // Streams remembered at most; past it the table starts over (a gap right after that is missed,
  // never invented; the marks take_changed() owed are still handed over).
  static constexpr size_t kMaxStreams = 10000;
  // A forward jump beyond this is taken as a bogus stamp (the stream starts over), not as lost
  // messages. It is large on purpose: a gateway stalled for minutes behind a lossy proxy really
  // does miss millions, and that must show.
  static constexpr uint64_t kMaxPlausibleGap = uint64_t{1} << 32;
  // A number this far below the last one is the stream starting over (a publisher that stamps a
  // fixed stream id and restarted), not a late message: no queue holds a million messages.
  static constexpr uint64_t kMaxLateness = uint64_t{1} << 20;

  // Records `seq` of `stream`; returns how many numbers were skipped since the last one seen
  // (0 for the first message seen of a stream, and for a repeated or late number).
  [[nodiscard]] uint64_t observe(std::string_view stream, uint64_t seq);
  size_t streams() const { return last_.size(); }
  // Every stream's last number, to carry across a restart: a stream this instance saw is seen at
  // `now_ms`, one it only restored keeps the time it had.
  [[nodiscard]] StreamMarks marks(int64_t now_ms) const;
  // Continues the streams an earlier instance saw (marks()): their next number counts what was
  // skipped meanwhile, instead of being a first sight.
  void restore(const StreamMarks& marks);
  // The marks of the streams observed (or restored) since the last call, as marks() gives them:
  // the durable spool writes them with the deliveries of the same messages, so that after a
  // crash its marks say exactly which numbers were taken in.
  [[nodiscard]] StreamMarks take_changed(int64_t now_ms);

 private:
  // Transparent hashing: a lookup by string_view allocates nothing (once per bus message).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Last {
    uint64_t seq;
    int64_t restored_seen_ms;  // a restored stream not seen since: its mark's time; else 0
    bool changed = true;       // in changed_
  };
  std::unordered_map<std::string, Last, Hash, std::equal_to<>> last_;
  std::vector<std::string> changed_;  // streams take_changed() owes, each once (Last::changed)
  // Marks take_changed() owed when the table last started over (seen_ms 0: seen in this run).
  StreamMarks owed_;
};

}  // namespace hookgate::bus
