#include "gateway/router.hpp"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

namespace hookgate {
namespace {

config::WebhookConfig hook(std::string name, std::vector<std::string> events,
                           config::BodyMode body = config::BodyMode::CloudEvent) {
  config::WebhookConfig w;
  w.name = std::move(name);
  w.url = "http://x/";
  w.events = std::move(events);
  w.body = body;
  return w;
}

// The one delivery `router` makes of `envelope`, its body parsed.
rapidjson::Document routed_body(const Router& router, const std::string& envelope,
                                int64_t schedule_ms = 0) {
  rapidjson::Document d;
  auto ev = Event::parse_envelope(envelope, 0);
  EXPECT_TRUE(ev);
  if (!ev) return d;
  std::vector<webhooks::Delivery> out;
  EXPECT_EQ(router.route(*ev, schedule_ms, out), 1u);
  if (out.size() == 1) d.Parse(out[0].body->c_str());
  EXPECT_TRUE(d.IsObject());
  return d;
}

TEST(RouterTest, OneDeliveryPerMatchingWebhookWithSharedBody) {
  Router router({hook("a", {"auth.*"}), hook("b", {"*"}), hook("c", {"user.*"}),
                 hook("d", {"auth.failure"}, config::BodyMode::Data)});
  auto ev = Event::parse_envelope(R"({"type":"auth.failure","data":{"user":"ann"}})", 1000);
  ASSERT_TRUE(ev);
  std::vector<webhooks::Delivery> out;
  EXPECT_EQ(router.route(*ev, 1000, out), 3u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].webhook, "a");
  EXPECT_EQ(out[1].webhook, "b");
  EXPECT_EQ(out[2].webhook, "d");
  EXPECT_EQ(out[0].body.get(), out[1].body.get());  // serialized once
  EXPECT_EQ(*out[2].body, R"({"user":"ann"})");
  EXPECT_NE(out[0].id, out[1].id);
  EXPECT_EQ(out[0].event_id, std::string(ev->id()));
  EXPECT_EQ(router.matching("user.created"), (std::vector<std::string>{"b", "c"}));
}

TEST(RouterTest, SplunkHecShape) {
  auto w = hook("siem", {"*"}, config::BodyMode::SplunkHec);
  w.hec_index = "security";
  Router router({w});
  auto d = routed_body(
      router,
      R"({"type":"auth.failure","source":"auth-svc","time":"2024-01-02T03:04:05.250Z","data":{"host":"web-1","user":"ann"}})");
  ASSERT_TRUE(d.IsObject());
  EXPECT_DOUBLE_EQ(d["time"].GetDouble(), 1704164645.25);
  EXPECT_STREQ(d["host"].GetString(), "web-1");
  EXPECT_STREQ(d["source"].GetString(), "auth-svc");
  EXPECT_STREQ(d["sourcetype"].GetString(), "hookgate:auth.failure");
  EXPECT_STREQ(d["index"].GetString(), "security");
  EXPECT_STREQ(d["event"]["data"]["user"].GetString(), "ann");
}

TEST(RouterTest, SplunkHecTimeHonoursOffsetsAndFallsBackToIntakeTime) {
  auto w = hook("siem", {"*"}, config::BodyMode::SplunkHec);
  Router router({w});
  constexpr int64_t kIntakeMs = 1'700'000'000'250;
  auto hec_time = [&](const std::string& time) {
    auto d = routed_body(router, R"({"type":"auth.failure","time":")" + time + R"("})", kIntakeMs);
    return d.IsObject() ? d["time"].GetDouble() : -1.0;
  };
  EXPECT_DOUBLE_EQ(hec_time("2024-01-02T08:34:05+05:30"), 1704164645);
  EXPECT_DOUBLE_EQ(hec_time("2024-01-01T22:04:05-05:00"), 1704164645);
  EXPECT_DOUBLE_EQ(hec_time("2024-01-02T03:04:05.5z"), 1704164645.5);
  // Not RFC 3339: filed at the time the gateway took the event in, not hours off or in 1970
  // (and an absurd offset is not parsed into an overflow).
  for (const char* odd :
       {"2024-01-02T03:04:05+0200", "2024-01-02 03:04:05Z", "1704164645",
        "2024-01-02T03:04:05+99999999:00", "2024-01-02T03:04:05", "24-1-2T3:4:5Z",
        "2024-01-02T03:04:05+99:99",
        // Found in review: day 30 of February rolled into March 1.
        "2024-02-30T03:04:05Z", "2023-04-31T00:00:00Z", "2024-01-02T03:04:05Z\\u0000junk"})
    EXPECT_DOUBLE_EQ(hec_time(odd), 1700000000.25) << odd;
  EXPECT_DOUBLE_EQ(hec_time("2024-02-29T00:00:00Z"), 1709164800);  // a leap day is a date
  EXPECT_DOUBLE_EQ(hec_time("2016-12-31T23:59:60Z"), 1483228800);  // a leap second, as POSIX
  EXPECT_DOUBLE_EQ(hec_time("1969-12-31T23:59:59Z"), -1);          // timegm's -1 is a second too
  EXPECT_DOUBLE_EQ(hec_time("1970-01-01T01:59:59+02:00"), -1);
  EXPECT_DOUBLE_EQ(hec_time("0000-01-01T00:00:00Z"), -62167219200);
}

// Found in review: `host` could only come from data.host, which the SIEM example's enrich hook
// sets to the gateway's own name; hec.host_field picks the field (here the CloudEvents source).
TEST(RouterTest, SplunkHecHostComesFromTheConfiguredField) {
  auto w = hook("siem", {"*"}, config::BodyMode::SplunkHec);
  w.hec_host_field = "data.client.host";
  auto by_source = hook("by-source", {"*"}, config::BodyMode::SplunkHec);
  by_source.hec_host_field = "source";
  Router router({w, by_source});
  std::vector<webhooks::Delivery> out;
  auto ev = Event::parse(
      R"({"type":"t","source":"auth-svc-7","data":{"host":"gw-1","client":{"host":"web-3"}}})");
  ASSERT_TRUE(ev);
  ASSERT_EQ(router.route(*ev, 0, out), 2u);
  rapidjson::Document first, second;
  first.Parse(out[0].body->c_str());
  second.Parse(out[1].body->c_str());
  EXPECT_STREQ(first["host"].GetString(), "web-3");
  EXPECT_STREQ(second["host"].GetString(), "auth-svc-7");
  // A field that is missing or not a string: "hookgate", as before.
  auto bare = Event::parse(R"({"type":"t","data":{"client":{"host":7}}})");
  ASSERT_TRUE(bare);
  out.clear();
  ASSERT_EQ(router.route(*bare, 0, out), 2u);
  first.Parse(out[0].body->c_str());
  EXPECT_STREQ(first["host"].GetString(), "hookgate");
}

TEST(RouterTest, SplunkHecHostKeepsTextAfterANul) {
  Router router({hook("siem", {"*"}, config::BodyMode::SplunkHec)});
  auto d = routed_body(router, R"({"type":"t","data":{"host":"web\u0000-1"}})");
  ASSERT_TRUE(d.IsObject());
  EXPECT_EQ(std::string(d["host"].GetString(), d["host"].GetStringLength()),
            std::string("web\0-1", 6));
}

}  // namespace
}  // namespace hookgate
