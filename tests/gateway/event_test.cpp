#include "gateway/event.hpp"

#include <gtest/gtest.h>

namespace hookgate {
namespace {

TEST(EventTest, FillsCloudEventsDefaults) {
  auto ev =
      Event::parse_envelope(R"({"type":"user.created","data":{"user":"ann"}})", 1700000000123);
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->type(), "user.created");
  EXPECT_EQ(ev->source(), "unknown");
  EXPECT_EQ(ev->id().size(), 36u);
  EXPECT_EQ(ev->id()[14], '7');  // UUIDv7
  auto* time = ev->find("time");
  ASSERT_NE(time, nullptr);
  EXPECT_STREQ(time->GetString(), "2023-11-14T22:13:20.123Z");
  EXPECT_STREQ(ev->find("specversion")->GetString(), "1.0");
  EXPECT_STREQ(ev->find("datacontenttype")->GetString(), "application/json");
}

TEST(EventTest, KeepsPublisherAttributes) {
  auto ev = Event::parse_envelope(
      R"({"type":"t","id":"abc","source":"svc","time":"2020-01-01T00:00:00Z","specversion":"1.0"})",
      0);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->id(), "abc");
  EXPECT_EQ(ev->source(), "svc");
}

TEST(EventTest, RejectsWhatIsNotAnEvent) {
  EXPECT_FALSE(Event::parse_envelope(R"({"data":1})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":""})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":5})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"([1,2])", 0));
  EXPECT_FALSE(Event::parse_envelope(R"("x")", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t"} trailing)", 0));
  EXPECT_FALSE(Event::parse_envelope("{\"type\":\"\xff\xfe\"}", 0));  // not UTF-8
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","specversion":"0.3"})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","id":7})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","subject":{"a":1}})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","dataschema":true})", 0));
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","datacontenttype":7})", 0));
  EXPECT_TRUE(Event::parse_envelope(R"({"type":"t","subject":"ann"})", 0));
  // null or "": taken as absent, as CloudEvents' JSON format reads null (found in review: such
  // events were delivered before the check, and must not be refused now).
  auto absent = Event::parse_envelope(
      R"({"type":"t","subject":null,"dataschema":"","datacontenttype":null,"data":{}})", 0);
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->find("subject"), nullptr);
  EXPECT_EQ(absent->find("dataschema"), nullptr);
  ASSERT_NE(absent->find("datacontenttype"), nullptr);  // the default, as for any event with data
  EXPECT_STREQ(absent->find("datacontenttype")->GetString(), "application/json");
  EXPECT_FALSE(Event::parse_envelope("", 0));
  // Found in review: a raw NUL ended the input, so what followed it was dropped unseen.
  const std::string with_nul = std::string(R"({"type":"t"})") + '\0' + R"({"junk")";
  auto nul = Event::parse_envelope(with_nul, 0);
  ASSERT_FALSE(nul);
  EXPECT_NE(nul.error().message.find("a NUL byte"), std::string::npos) << nul.error().message;
  // One at the very end is a C publisher's strlen() + 1.
  EXPECT_TRUE(Event::parse_envelope(std::string(R"({"type":"t"})") + '\0', 0));
}

// Found in review: a type of any length was accepted, and went on as the topic frame, the
// X-Hookgate-Event header (receivers answer 431, a final error) and a one-shot hook's environment.
TEST(EventTest, ATypeIsAtMostAsLongAsATopic) {
  EXPECT_TRUE(Event::parse_envelope(R"({"type":")" + std::string(kMaxTypeBytes, 't') + R"("})", 0));
  auto long_type =
      Event::parse_envelope(R"({"type":")" + std::string(kMaxTypeBytes + 1, 't') + R"("})", 0);
  ASSERT_FALSE(long_type);
  EXPECT_EQ(long_type.error().message, "event \"type\" is 1024 bytes long, more than 1023");
}

// Found in review: the specversion check stopped at a NUL, so "1.0\u0000x" passed and
// receivers refused the event with a final 4xx.
TEST(EventTest, SpecversionIsComparedWhole) {
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"t","specversion":"1.0\u0000x"})", 0));
  EXPECT_TRUE(Event::parse_envelope(R"({"type":"t","specversion":"1.0"})", 0));
}

// Invalid UTF-8 is refused wherever it sits; valid multi-byte text and \u escapes (surrogate
// pairs included) are kept; lone surrogates and raw control characters are refused.
TEST(EventTest, Utf8RulesHoldWhereverTheBytesSit) {
  for (size_t pad = 0; pad < 9; ++pad) {
    const std::string fill(pad, 'x');
    EXPECT_FALSE(Event::parse_envelope("{\"type\":\"" + fill + "\xc3\"}", 0)) << pad;
    EXPECT_FALSE(Event::parse_envelope("{\"type\":\"" + fill + "\x80\"}", 0)) << pad;
    auto accented = Event::parse_envelope("{\"type\":\"" + fill + "caf\xc3\xa9\"}", 0);
    ASSERT_TRUE(accented) << pad;
    EXPECT_EQ(accented->type(), fill + "caf\xc3\xa9");
  }
  auto escaped = Event::parse_envelope(R"({"type":"caf\u00e9 \ud83d\ude00"})", 0);
  ASSERT_TRUE(escaped);
  EXPECT_EQ(escaped->type(), "caf\xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"\ud83d"})", 0));   // lone high surrogate
  EXPECT_FALSE(Event::parse_envelope(R"({"type":"\udc00"})", 0));   // lone low surrogate
  EXPECT_FALSE(Event::parse_envelope("{\"type\":\"a\x01b\"}", 0));  // raw control character
}

TEST(EventTest, DottedPathsSetRemoveRename) {
  auto ev = Event::parse(R"({"type":"t","data":{"user":"ann","ip":"1.2.3.4","list":[{"a":1}]}})");
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->set_string("data.env", "prod"));
  EXPECT_TRUE(ev->set_string("data.nested.deep", "x"));
  EXPECT_TRUE(ev->rename("data.ip", "data.source_ip"));
  EXPECT_TRUE(ev->remove("data.user"));
  EXPECT_FALSE(ev->remove("data.user"));
  EXPECT_EQ(ev->find("data.list.0.a")->GetInt(), 1);
  EXPECT_FALSE(ev->set_string("type.sub", "x"));  // a string is in the way
  EXPECT_EQ(ev->data_json(),
            R"({"list":[{"a":1}],"env":"prod","nested":{"deep":"x"},"source_ip":"1.2.3.4"})");
  Event copy = ev->clone();
  EXPECT_EQ(copy.to_json(), ev->to_json());
}

// `body: data` sends JSON: a binary event's payload goes as its base64 string, not as null.
TEST(EventTest, DataBodyOfABinaryEventIsItsBase64Text) {
  auto binary = Event::parse_envelope(
      R"({"type":"blob.stored","datacontenttype":"image/png","data_base64":"iVBORw0K"})", 0);
  ASSERT_TRUE(binary);
  EXPECT_EQ(binary->data_json(), R"("iVBORw0K")");
  auto empty = Event::parse_envelope(R"({"type":"ping"})", 0);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->data_json(), "null");
}

// A second member of one name would slip past a redaction (edits act on the first, receivers
// read the last) or re-type an event after routing: such text is not an event.
TEST(EventTest, RejectsDuplicateKeysAtAnyDepth) {
  auto redaction_bypass =
      Event::parse(R"({"type":"auth.failure","data":{"password":"x","password":"hunter2"}})");
  ASSERT_FALSE(redaction_bypass);
  EXPECT_EQ(redaction_bypass.error().message,
            "invalid JSON: the key \"password\" appears twice in one object");
  EXPECT_FALSE(Event::parse(R"({"type":"auth.failure","type":"admin.x"})"));
  EXPECT_FALSE(Event::parse(R"({"type":"t","data":{"a":[{"k":1,"k":2}]}})"));
  // The name is quoted for a log line and a diagnostic: its line breaks and non-ASCII bytes
  // (which a 64-byte cut could split mid-character) are shown as '?'.
  auto odd = Event::parse("{\"type\":\"t\",\"k\\n\\u00e9\":1,\"k\\n\\u00e9\":2}");
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().message, "invalid JSON: the key \"k???\" appears twice in one object");
  // Many members take the sorted path; still found, and distinct names still pass.
  std::string wide = R"({"type":"t","data":{)";
  for (int i = 0; i < 40; ++i) wide += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  EXPECT_TRUE(Event::parse(wide + R"("last":0}})"));
  EXPECT_FALSE(Event::parse(wide + R"("k7":0}})"));
  EXPECT_TRUE(Event::parse(R"({"type":"t","a":{"k":1},"b":{"k":1}})"));  // same name, two objects
}

}  // namespace
}  // namespace hookgate

namespace hookgate {
namespace {

// Found by fuzz_envelope: these parse, but could not be written back as valid JSON.
TEST(EventTest, RejectsWhatCannotBeSerialized) {
  EXPECT_FALSE(Event::parse(R"({"type":"t","n":777777700020000003000000e000000302})"));
  EXPECT_FALSE(Event::parse(R"({"type":"t","n":-1e400})"));
  std::string deep = "{\"type\":\"t\",\"d\":" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_FALSE(Event::parse(deep));
  std::string ok =
      "{\"type\":\"t\",\"d\":" + std::string(20, '[') + std::string(20, ']') + ",\"n\":1e300}";
  EXPECT_TRUE(Event::parse(ok));
  EXPECT_FALSE(Event::parse(R"({"type":"t","s":"a\uDDD0b"})"));  // lone low surrogate
  EXPECT_FALSE(Event::parse(R"({"type":"t","\uDC00":1})"));
  // Without a \u escape, surrogates can only come as raw bytes, which the parser's UTF-8
  // validation refuses itself (so parse() looks for them only when the text has an escape).
  EXPECT_FALSE(Event::parse("{\"type\":\"t\",\"s\":\"a\xed\xb0\x80\"}"));
  EXPECT_FALSE(Event::parse("{\"type\":\"t\",\"\xed\xa0\x80\":1}"));
  EXPECT_FALSE(Event::parse(R"({"type":"t","s":"\\u", "k":"\uDC01"})"));  // escaped \ then \u
  EXPECT_TRUE(Event::parse(R"({"type":"t","s":"\uD83D\uDE00 \u00e9 í¿"})"));  // pair, U+D7FF
  std::string very_deep = std::string(200000, '[');  // must not exhaust the stack
  EXPECT_FALSE(Event::parse(very_deep));
}

}  // namespace
}  // namespace hookgate
