#include "gateway/router.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <ctime>
#include <optional>

#include "gateway/common/clock.hpp"
#include "gateway/common/ids.hpp"

namespace hookgate {
namespace {

// RFC 3339 → epoch seconds with milliseconds (Splunk's `time`); nullopt when it is not RFC 3339
// (a "+0200" offset, a space for the T, an epoch number): the caller then uses the time the
// gateway took the event in, rather than file it hours off or under 1970.
std::optional<double> epoch_seconds(std::string_view t) {
  // strptime takes one-digit fields ("24-1-2T3:4:5Z" is year 24): the shape is checked first.
  auto digits_at = [&](std::initializer_list<size_t> at) {
    return std::all_of(at.begin(), at.end(), [&](size_t i) { return t[i] >= '0' && t[i] <= '9'; });
  };
  if (t.size() < 20 || !digits_at({0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18}) ||
      t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' || t[16] != ':')
    return std::nullopt;
  std::tm tm{};
  int ms = 0;
  if (t.find('\0') != std::string_view::npos) return std::nullopt;  // strptime would stop there
  std::string s(t);
  s[10] = 'T';
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  if (*rest == '.') {
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest)
      if (digits++ < 3) ms = ms * 10 + (*rest - '0');
    while (digits++ < 3) ms *= 10;
  }
  // strptime takes day 30 in February (timegm would roll it into March): not a real date. A
  // leap second (:60) is, and timegm counts it as the next second, as POSIX time does.
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int year = tm.tm_year + 1900;
  const bool leap_year = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (tm.tm_mon < 0 || tm.tm_mon > 11 ||
      tm.tm_mday > kDaysIn[tm.tm_mon] + (tm.tm_mon == 1 && leap_year ? 1 : 0))
    return std::nullopt;
  time_t secs = timegm(&tm);
  int offset = 0;
  // RFC 3339 ends in Z or an offset of exactly "+hh:mm"; anything else (a publisher's "+0200"
  // or "+99999999:00") is not read at all, rather than misread or parsed into an overflow.
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const bool utc = (*rest == 'Z' || *rest == 'z') && rest[1] == '\0';
  if (!utc) {
    if (!((*rest == '+' || *rest == '-') && digit(rest[1]) && digit(rest[2]) && rest[3] == ':' &&
          digit(rest[4]) && digit(rest[5]) && rest[6] == '\0'))
      return std::nullopt;
    const int hh = (rest[1] - '0') * 10 + (rest[2] - '0');
    const int mm = (rest[4] - '0') * 10 + (rest[5] - '0');
    if (hh > 23 || mm > 59) return std::nullopt;
    offset = (hh * 60 + mm) * 60 * (*rest == '+' ? 1 : -1);
  }
  // No check for timegm's -1: with four-digit years and a 64-bit time_t it cannot overflow, and
  // -1 is a real second (1969-12-31T23:59:59Z, found in an exploratory run filed at the intake
  // time).
  static_assert(sizeof(time_t) >= 8);
  return static_cast<double>(secs - offset) + ms / 1000.0;
}

std::string hec_body(const Event& event, const config::WebhookConfig& w, int64_t schedule_ms) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> out(buf);
  out.StartObject();
  out.Key("time");
  const JsonValue* time = event.find("time");
  std::optional<double> seconds;
  if (time && time->IsString())
    seconds = epoch_seconds(std::string_view(time->GetString(), time->GetStringLength()));
  // schedule_ms is the deliveries' clock; Splunk wants the wall clock's.
  out.Double(seconds ? *seconds
                     : static_cast<double>(schedule_ms - schedule_clock().skew_ms()) / 1000.0);
  out.Key("host");
  const JsonValue* host = event.find(w.hec_host_field);
  if (host && host->IsString()) {
    out.String(host->GetString(), host->GetStringLength());  // whole, a \u0000 included
  } else {
    out.String("hookgate");
  }
  out.Key("source");
  std::string_view source = event.source();
  out.String(source.data(), static_cast<rapidjson::SizeType>(source.size()));
  out.Key("sourcetype");
  std::string sourcetype =
      w.hec_sourcetype.empty() ? "hookgate:" + std::string(event.type()) : w.hec_sourcetype;
  out.String(sourcetype.c_str(), static_cast<rapidjson::SizeType>(sourcetype.size()));
  if (!w.hec_index.empty()) {
    out.Key("index");
    out.String(w.hec_index.c_str(), static_cast<rapidjson::SizeType>(w.hec_index.size()));
  }
  out.Key("event");
  event.doc().Accept(out);
  out.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

}  // namespace

Router::Router(const std::vector<config::WebhookConfig>& webhooks) {
  for (const auto& w : webhooks) routes_.push_back({PatternSet(w.events), w});
}

size_t Router::route(const Event& event, int64_t schedule_ms, std::vector<webhooks::Delivery>& out,
                     std::string_view except_webhook) const {
  std::string_view type = event.type();
  std::shared_ptr<const std::string> cloudevent_body, data_body;
  size_t added = 0;
  for (const auto& r : routes_) {
    if (!r.patterns.matches(type)) continue;
    if (!except_webhook.empty() && r.webhook.name == except_webhook) continue;
    std::shared_ptr<const std::string> body;
    switch (r.webhook.body) {
      case config::BodyMode::CloudEvent:
        if (!cloudevent_body)
          cloudevent_body = std::make_shared<const std::string>(event.to_json());
        body = cloudevent_body;
        break;
      case config::BodyMode::Data:
        if (!data_body) data_body = std::make_shared<const std::string>(event.data_json());
        body = data_body;
        break;
      case config::BodyMode::SplunkHec:
        body = std::make_shared<const std::string>(hec_body(event, r.webhook, schedule_ms));
        break;
    }
    webhooks::Delivery d;
    d.id = new_delivery_id();
    d.webhook = r.webhook.name;
    d.event_id = std::string(event.id());
    d.event_type = std::string(type);
    d.body = std::move(body);
    d.created_ms = schedule_ms;
    d.next_attempt_ms = schedule_ms;
    out.push_back(std::move(d));
    ++added;
  }
  return added;
}

bool Router::has_webhook(std::string_view name) const {
  return std::any_of(routes_.begin(), routes_.end(),
                     [&](const Route& r) { return r.webhook.name == name; });
}

std::vector<std::string> Router::matching(std::string_view type) const {
  std::vector<std::string> names;
  for (const auto& r : routes_)
    if (r.patterns.matches(type)) names.push_back(r.webhook.name);
  return names;
}

}  // namespace hookgate
