#include "bus/publisher.hpp"

#include <gtest/gtest.h>

#include "bus/sequence_gaps.hpp"
#include "bus/subscriber.hpp"
#include "bus/wire.hpp"
#include "tests/support/receiving_thread.hpp"

namespace hookgate::bus {
namespace {

config::BusConfig loopback_bus() {
  config::BusConfig cfg;
  cfg.bind = "tcp://127.0.0.1:*";
  return cfg;
}

TEST(PublisherTest, DeliversToBoundSubscriberAfterWaitingForSubscription) {
  zmq::context_t ctx;
  auto sub = Subscriber::open(ctx, loopback_bus());
  ASSERT_TRUE(sub) << sub.error().message;
  testing::ReceivingThread rx(*sub.value());
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}, .source = "svc"});
  ASSERT_TRUE(pub) << pub.error().message;
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("user.created", R"({"user":"ann"})"));
  auto parts = rx.next(std::chrono::seconds(5));
  ASSERT_EQ(parts.size(), 2u);
  std::vector<zmq::message_t> frames;
  for (auto& p : parts) frames.emplace_back(p.data(), p.size());
  EXPECT_EQ(frames[0].to_string(), "user.created");
  auto ev = decode_message(frames, 1 << 20, 0);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->source(), "svc");
  EXPECT_EQ(ev->id(), pub.value()->last_id());
  EXPECT_STREQ(ev->find("data.user")->GetString(), "ann");
}

// Every event carries the publisher's stream id and a sequence number that grows by one, so the
// gateway can count messages that never arrived (bus/sequence_gaps.hpp).
TEST(PublisherTest, StampsStreamAndConsecutiveSequenceNumbers) {
  zmq::context_t ctx;
  auto sub = Subscriber::open(ctx, loopback_bus());
  ASSERT_TRUE(sub) << sub.error().message;
  testing::ReceivingThread rx(*sub.value());
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}});
  ASSERT_TRUE(pub) << pub.error().message;
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  std::string stream;
  for (uint64_t want = 1; want <= 3; ++want) {
    ASSERT_TRUE(pub.value()->publish("app.event", "{}"));
    auto parts = rx.next(std::chrono::seconds(5));
    ASSERT_EQ(parts.size(), 2u);
    std::vector<zmq::message_t> frames;
    for (auto& p : parts) frames.emplace_back(p.data(), p.size());
    auto ev = decode_message(frames, 1 << 20, 0);
    ASSERT_TRUE(ev);
    const JsonValue* s = ev->find(kStreamAttribute);
    const JsonValue* seq = ev->find(kSequenceAttribute);
    ASSERT_TRUE(s != nullptr && s->IsString() && seq != nullptr && seq->IsUint64());
    if (want == 1) stream = s->GetString();
    EXPECT_EQ(std::string(s->GetString()), stream);
    EXPECT_EQ(seq->GetUint64(), want);
  }
  EXPECT_FALSE(stream.empty());
}

TEST(PublisherTest, TopicFilterSelectsByPrefix) {
  zmq::context_t ctx;
  auto cfg = loopback_bus();
  cfg.topics = {"auth."};
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub);
  testing::ReceivingThread rx(*sub.value());
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("user.created", "{}"));
  ASSERT_TRUE(pub.value()->publish("auth.failure", "{}"));
  auto parts = rx.next(std::chrono::seconds(5));
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts[0], "auth.failure");
}

TEST(PublisherTest, RejectsInvalidData) {
  auto pub = Publisher::connect({.endpoints = {"tcp://127.0.0.1:1"}});
  ASSERT_TRUE(pub);
  EXPECT_FALSE(pub.value()->publish("t", "{not json"));
}

// Over max_message_bytes but under the socket's hard cap: received, then rejected by the decoder
// alone (the connection survives and the next message arrives).
TEST(SubscriberTest, SlightlyOversizeMessageReachesTheDecoderAndIsRejected) {
  zmq::context_t ctx;
  auto cfg = loopback_bus();
  cfg.max_message_bytes = 1024;
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub);
  testing::ReceivingThread rx(*sub.value());
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("big", "\"" + std::string(1500, 'x') + "\""));
  ASSERT_TRUE(pub.value()->publish("small", "{}"));
  auto big = rx.next(std::chrono::seconds(5));
  ASSERT_EQ(big.size(), 2u);
  std::vector<zmq::message_t> frames;
  for (auto& p : big) frames.emplace_back(p.data(), p.size());
  auto decoded = decode_message(frames, 1024, 0);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().reason.find("exceeds max_message_bytes 1024"), std::string::npos)
      << decoded.error().reason;
  EXPECT_EQ(rx.next(std::chrono::seconds(5)).size(), 2u) << "the connection survived";
}

// Beyond twice the limit the socket drops the sender's connection before buffering the frame.
TEST(SubscriberTest, OversizeMessageRefusedBySocket) {
  zmq::context_t ctx;
  auto cfg = loopback_bus();
  cfg.max_message_bytes = 1024;
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub);
  testing::ReceivingThread rx(*sub.value());
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("big", "\"" + std::string(4096, 'x') + "\""));
  EXPECT_TRUE(rx.next(std::chrono::milliseconds(300)).empty());
}

}  // namespace
}  // namespace hookgate::bus
