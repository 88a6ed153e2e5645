#include "bus/redial.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace hookgate::bus {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

TEST(RedialScheduleTest, NothingIsDueBeforeItsBackoff) {
  RedialSchedule schedule;
  EXPECT_TRUE(schedule.take_due(steady_clock::now()).empty());
  EXPECT_EQ(schedule.schedule("tcp://a:1"), seconds(1));
  EXPECT_TRUE(schedule.take_due(steady_clock::now()).empty());
  EXPECT_EQ(schedule.take_due(steady_clock::now() + seconds(2)),
            std::vector<std::string>{"tcp://a:1"});
  EXPECT_TRUE(schedule.take_due(steady_clock::now() + seconds(2)).empty());  // taken once
}

// Refused again after its redial: the wait doubles up to 30 s; a handshake that succeeds resets it.
TEST(RedialScheduleTest, TheBackoffDoublesAfterEachRedialAndResetsWhenForgotten) {
  RedialSchedule schedule;
  std::vector<milliseconds> waits;
  for (int i = 0; i < 7; ++i) {
    waits.push_back(schedule.schedule("tcp://a:1"));
    ASSERT_EQ(schedule.take_due(steady_clock::now() + seconds(60)).size(), 1u);
  }
  EXPECT_EQ(waits, (std::vector<milliseconds>{seconds(1), seconds(2), seconds(4), seconds(8),
                                              seconds(16), seconds(30), seconds(30)}));
  schedule.forget("tcp://a:1");
  EXPECT_EQ(schedule.schedule("tcp://a:1"), seconds(1));
}

// An endpoint whose connection ended in a protocol error starts from a shorter wait: it was
// connected, and everything behind it is lost until the redial.
TEST(RedialScheduleTest, AFirstWaitOfItsOwnDoublesToo) {
  RedialSchedule schedule;
  EXPECT_EQ(schedule.schedule("tcp://a:1", milliseconds(100)), milliseconds(100));
  ASSERT_EQ(schedule.take_due(steady_clock::now() + seconds(1)).size(), 1u);
  EXPECT_EQ(schedule.schedule("tcp://a:1", milliseconds(100)), milliseconds(200));
}

// Two refusal events for one attempt (libzmq may report a handshake failure and the disconnect)
// must not double the wait.
TEST(RedialScheduleTest, TwoRefusalsBeforeTheRedialKeepTheWait) {
  RedialSchedule schedule;
  EXPECT_EQ(schedule.schedule("tcp://a:1"), seconds(1));
  EXPECT_EQ(schedule.schedule("tcp://a:1"), seconds(1));
}

TEST(RedialScheduleTest, EndpointsWaitEachOnTheirOwn) {
  RedialSchedule schedule;
  (void)schedule.schedule("tcp://a:1");
  ASSERT_EQ(schedule.take_due(steady_clock::now() + seconds(60)).size(), 1u);
  EXPECT_EQ(schedule.schedule("tcp://a:1"), seconds(2));
  EXPECT_EQ(schedule.schedule("tcp://b:2"), seconds(1));
  const auto due = schedule.take_due(steady_clock::now() + milliseconds(1500));
  EXPECT_EQ(due, std::vector<std::string>{"tcp://b:2"});
}

// libzmq names a connection by the address it resolved: for a socket that only connects to one
// endpoint, any name is that endpoint.
TEST(ConnectEndpointNamedTest, MatchesByTextOrByBeingTheOnlyConnect) {
  const std::vector<std::string> one{"tcp://bus-proxy:5557"};
  ASSERT_NE(connect_endpoint_named(one, false, "tcp://10.0.0.5:5557"), nullptr);
  EXPECT_EQ(*connect_endpoint_named(one, false, "tcp://10.0.0.5:5557"), one[0]);
  EXPECT_EQ(connect_endpoint_named(one, true, "tcp://10.0.0.5:5557"), nullptr);  // binds too
  const std::vector<std::string> two{"tcp://a:1", "tcp://b:2"};
  ASSERT_NE(connect_endpoint_named(two, true, "tcp://b:2"), nullptr);
  EXPECT_EQ(*connect_endpoint_named(two, true, "tcp://b:2"), "tcp://b:2");
  EXPECT_EQ(connect_endpoint_named(two, false, "tcp://10.0.0.5:1"), nullptr);
}

}  // namespace
}  // namespace hookgate::bus
