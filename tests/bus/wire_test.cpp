#include "bus/wire.hpp"

#include <gtest/gtest.h>

#include "bus/sequence_gaps.hpp"

namespace hookgate::bus {
namespace {

std::vector<zmq::message_t> frames_of(std::initializer_list<std::string> parts) {
  std::vector<zmq::message_t> out;
  for (const auto& p : parts) out.emplace_back(p.data(), p.size());
  return out;
}

// Two spellings of one peer in bus.connect would deliver every event twice (`check` warns).
TEST(WireTest, TwoEndpointsThatReachOnePeerAreFound) {
  auto same = same_peer({"tcp://127.0.0.1:5557", "tcp://localhost:5556", "tcp://127.0.0.1:5556"});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->first, 1u);
  EXPECT_EQ(same->second, 2u);
  EXPECT_EQ(same->peer, "127.0.0.1:5556");
  EXPECT_FALSE(same_peer({"tcp://127.0.0.1:5556", "tcp://127.0.0.1:5557", "tcp://[::1]:5556"}));
  EXPECT_TRUE(same_peer({"ipc:///tmp/hg-bus/../hg-bus/sock", "ipc:///tmp/hg-bus/sock"}));
  EXPECT_FALSE(same_peer({"ipc:///tmp/hg-bus/a", "ipc:///tmp/hg-bus/b"}));
  EXPECT_TRUE(same_peer({"tcp://127.0.0.1:05556", "tcp://127.0.0.1:5556"}));  // one port
  auto v6 = same_peer({"tcp://[::1]:5556", "tcp://[0:0::1]:5556"});
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->peer, "[::1]:5556");
  EXPECT_FALSE(same_peer({"tcp://127.0.0.1:5556"}));
}

TEST(WireTest, TwoFramesTopicAndEnvelope) {
  auto f = frames_of({"user.created", R"({"type":"user.created","data":{"u":1}})"});
  auto ev = decode_message(f, 1 << 20, 0);
  ASSERT_TRUE(ev) << ev.error().reason;
  EXPECT_EQ(ev->type(), "user.created");
  EXPECT_FALSE(ev->id().empty());
}

// Found in review: any length of stream id was kept as a key of the gateway's stream table (up to
// 10,000 of them), so 1 MiB ids could hold gigabytes.
TEST(WireTest, AStreamStampWithAnOverlongStreamIdIsIgnored) {
  auto stamped = [](size_t stream_bytes) {
    auto f = frames_of({R"({"type":"a.b","hookgatestream":")" + std::string(stream_bytes, 's') +
                        R"(","hookgateseq":7})"});
    auto ev = decode_message(f, 1 << 20, 0);
    EXPECT_TRUE(ev);
    return stream_stamp(*ev).has_value();
  };
  EXPECT_TRUE(stamped(kMaxStreamIdBytes));
  EXPECT_FALSE(stamped(kMaxStreamIdBytes + 1));
}

TEST(WireTest, SingleFrameAndTopicStandsInForMissingType) {
  auto one = frames_of({R"({"type":"a.b"})"});
  EXPECT_TRUE(decode_message(one, 1 << 20, 0));
  auto topic_only = frames_of({"auth.failure", R"({"data":{"user":"x"}})"});
  auto ev = decode_message(topic_only, 1 << 20, 0);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->type(), "auth.failure");
}

TEST(WireTest, RejectsMalformed) {
  auto mismatch = frames_of({"a", R"({"type":"b"})"});
  EXPECT_NE(decode_message(mismatch, 1 << 20, 0).error().reason.find("does not match"),
            std::string::npos);
  auto three = frames_of({"a", "b", "c"});
  EXPECT_NE(decode_message(three, 1 << 20, 0).error().reason.find("1 or 2 frames"),
            std::string::npos);
  auto not_json = frames_of({"a", "\xff\xfe garbage"});
  EXPECT_FALSE(decode_message(not_json, 1 << 20, 0));
  auto no_type = frames_of({R"({"data":1})"});
  EXPECT_NE(decode_message(no_type, 1 << 20, 0).error().reason.find("no \"type\""),
            std::string::npos);
  auto big = frames_of({std::string(200, ' ') + R"({"type":"x"})"});
  EXPECT_NE(decode_message(big, 100, 0).error().reason.find("exceeds max_message_bytes"),
            std::string::npos);
}

// Found in review: a payload that failed to parse was quoted (64 bytes) in the rejection reason,
// which goes to the log and, as hookgate.event.rejected, to webhooks: a password the redaction
// hooks never got to see went out with it.
TEST(WireTest, ARejectionDoesNotQuoteThePayload) {
  const std::string payload =
      R"({"type":"auth.failure","data":{"password":"hunter2","password":"x"}})";
  for (const auto& body : {payload, std::string(R"({"type":"a","data":{"password":"hunter2",)"),
                           std::string(R"({"type":"a","password":"hunter2","n":NaN})")}) {
    auto frames = frames_of({"auth.failure", body});
    auto rejected = decode_message(frames, 1 << 20, 0);
    ASSERT_FALSE(rejected) << body;
    EXPECT_EQ(rejected.error().reason.find("hunter2"), std::string::npos)
        << rejected.error().reason;
    EXPECT_NE(rejected.error().reason.find(std::to_string(body.size()) + " bytes"),
              std::string::npos)
        << rejected.error().reason;
  }
}

// Found in review: hookgate.* types are the gateway's own diagnostics; accepted from the bus, a
// publisher could forge a hookgate.delivery.dead alert, and its own events would never raise
// delivery diagnostics. The prefix is reserved.
TEST(WireTest, TheDiagnosticTypePrefixIsReserved) {
  auto forged = frames_of({"hookgate.delivery.dead", R"({"type":"hookgate.delivery.dead"})"});
  auto rejected = decode_message(forged, 1 << 20, 0);
  ASSERT_FALSE(rejected);
  EXPECT_NE(rejected.error().reason.find("reserved for the gateway's own diagnostic events"),
            std::string::npos)
      << rejected.error().reason;
  auto single = frames_of({R"({"type":"hookgate.hooks.reloaded"})"});
  EXPECT_FALSE(decode_message(single, 1 << 20, 0));
  auto lookalike = frames_of({R"({"type":"hookgateway.started"})"});
  EXPECT_TRUE(decode_message(lookalike, 1 << 20, 0));
}

TEST(WireTest, EncodeRoundTrip) {
  auto ev = Event::parse_envelope(R"({"type":"t.x","data":[1,2]})", 5);
  ASSERT_TRUE(ev);
  std::vector<zmq::message_t> frames;
  encode_message(*ev, frames);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].to_string(), "t.x");
  auto back = decode_message(frames, 1 << 20, 0);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), ev->to_json());
}

}  // namespace
}  // namespace hookgate::bus

namespace hookgate::bus {
namespace {

// Found by fuzz_envelope: a non-UTF-8 topic standing in for a missing type made invalid JSON.
TEST(WireTest, TopicMustBeUtf8) {
  std::vector<zmq::message_t> frames;
  std::string topic = "user\xff.created";
  std::string json = R"({"data":{}})";
  frames.emplace_back(topic.data(), topic.size());
  frames.emplace_back(json.data(), json.size());
  auto ev = decode_message(frames, 1 << 20, 0);
  ASSERT_FALSE(ev);
  EXPECT_NE(ev.error().reason.find("UTF-8"), std::string::npos);
}

// Found in review: messages refused before their envelope was read (over max_message_bytes, a
// topic that is not UTF-8) lost their sequence stamp, so the gap they left was also counted as
// messages that never arrived.
// Found in a later review: they named neither type nor id, so an operator could not tell who sent
// oversize events.
TEST(WireTest, MessagesRefusedBeforeTheirEnvelopeKeepTheirSequenceStampAndName) {
  const std::string json =
      R"({"type":"a.b","id":"e1","hookgatestream":"s1","hookgateseq":7,"data":{}})";
  auto oversize = frames_of({"a.b", json});
  auto big = decode_message(oversize, 16, 0);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().reason.find("exceeds max_message_bytes"), std::string::npos);
  EXPECT_EQ(big.error().stream, "s1");
  EXPECT_EQ(big.error().sequence, std::optional<uint64_t>(7));
  EXPECT_EQ(big.error().event_type, "a.b");
  EXPECT_EQ(big.error().event_id, "e1");
  auto single_frame = frames_of({json});
  auto big_single = decode_message(single_frame, 16, 0);
  ASSERT_FALSE(big_single);
  EXPECT_EQ(big_single.error().event_type, "a.b");  // from the envelope, with no topic frame
  EXPECT_EQ(big_single.error().event_id, "e1");
  auto bad_topic = frames_of({"a\xff", json});
  auto bad = decode_message(bad_topic, 1 << 20, 0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().sequence, std::optional<uint64_t>(7));
  EXPECT_NE(bad.error().event_type.find('a'), std::string::npos) << bad.error().event_type;
  EXPECT_EQ(bad.error().event_id, "e1");
}

}  // namespace
}  // namespace hookgate::bus
