#include "gateway/hooks/declarative_hook.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "gateway/hooks/hook_loader.hpp"
#include "tests/gateway/hooks/hook_test_util.hpp"

namespace hookgate::hooks {
namespace {

using testing::make_event;
using testing::TempDir;
using testing::write_file;

class DeclarativeHookTest : public ::testing::Test {
 protected:
  LoadResult load(const std::string& file_name, const std::string& text,
                  config::Diagnostics& errors) {
    std::string dir = tmp_.dir("hooks");
    HookFile f;
    f.path = write_file(dir, file_name, text);
    f.directory = dir;
    auto parsed = parse_hook_file_name(std::filesystem::path(file_name).stem().string());
    f.name = parsed->name;
    f.order_number = parsed->order_number;
    f.form = HookForm::Declarative;
    return load_yaml_hook(f, defaults_, errors);
  }

  HookPtr load_ok(const std::string& file_name, const std::string& text) {
    config::Diagnostics errors;
    auto r = load(file_name, text, errors);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    for (const auto& e : errors) ADD_FAILURE() << e.str();
    return r.ok() ? r.value() : nullptr;
  }

  // Loads a file that must fail; returns its diagnostics.
  config::Diagnostics load_err(const std::string& text,
                               const std::string& file_name = "_1_bad.yaml") {
    config::Diagnostics errors;
    auto r = load(file_name, text, errors);
    EXPECT_FALSE(r.ok()) << "expected a load error for:\n" << text;
    EXPECT_FALSE(errors.empty());
    if (!r.ok() && !errors.empty()) {
      EXPECT_EQ(r.error().rfind(errors[0].str(), 0), 0u) << r.error();
    }
    return errors;
  }

  std::string path_of(const std::string& file_name) {
    return (tmp_.path() / "hooks" / file_name).string();
  }

  TempDir tmp_;
  config::HooksConfig defaults_;
};

bool has_message(const config::Diagnostics& errors, const std::string& part) {
  for (const auto& e : errors)
    if (e.message.find(part) != std::string::npos) return true;
  return false;
}

std::string dump(const config::Diagnostics& errors) {
  std::string out;
  for (const auto& e : errors) out += e.str() + "\n";
  return out;
}

Action run(Hook& hook, Event& ev) {
  auto r = hook.handle(ev);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().reason);
  return r.ok() ? r.value().action : Action::Skip;
}

// ----- the two PRODUCT.md examples, verbatim

const char* kRedactYaml = R"(# _10_redact.yaml
kind: transform
events: ["auth.*"]
actions:                       # applied in order; paths are dotted into the envelope
  - remove: [data.password, data.token]
  - set: { data.env: prod, data.pipeline: hookgate }
  - rename: { data.ip: data.source_ip }
  - copy: { data.user: subject }
)";

const char* kDropHealthchecksYaml = R"(# _20_drop_healthchecks.yaml
kind: veto
events: ["auth.*"]
when: { any: [ { field: data.user, matches: "healthcheck*" },
               { field: data.ip, in: ["127.0.0.1", "::1"] } ] }
reason: health-check noise
)";

TEST_F(DeclarativeHookTest, ProductRedactExample) {
  auto hook = load_ok("_10_redact.yaml", kRedactYaml);
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook->spec().name, "redact");
  EXPECT_EQ(hook->spec().kind, HookKind::Transform);
  EXPECT_EQ(hook->spec().form, HookForm::Declarative);
  EXPECT_TRUE(hook->matches("auth.failure"));
  EXPECT_FALSE(hook->matches("user.created"));

  Event ev = make_event(
      R"({"type":"auth.failure","id":"e1","data":{"user":"ann","password":"hunter2","token":"t0k",
          "ip":"10.0.0.7","attempts":3}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  EXPECT_EQ(ev.find("data.password"), nullptr);
  EXPECT_EQ(ev.find("data.token"), nullptr);
  EXPECT_STREQ(ev.find("data.env")->GetString(), "prod");
  EXPECT_STREQ(ev.find("data.pipeline")->GetString(), "hookgate");
  EXPECT_EQ(ev.find("data.ip"), nullptr);
  EXPECT_STREQ(ev.find("data.source_ip")->GetString(), "10.0.0.7");
  EXPECT_STREQ(ev.find("subject")->GetString(), "ann");
  EXPECT_STREQ(ev.find("data.user")->GetString(), "ann");  // copy keeps the source
  EXPECT_EQ(ev.find("data.attempts")->GetInt(), 3);
  EXPECT_EQ(ev.id(), "e1");
}

TEST_F(DeclarativeHookTest, ProductDropHealthchecksExample) {
  auto hook = load_ok("_20_drop_healthchecks.yaml", kDropHealthchecksYaml);
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook->spec().name, "drop_healthchecks");
  EXPECT_EQ(hook->spec().kind, HookKind::Veto);

  for (const char* json :
       {R"({"type":"auth.failure","data":{"user":"healthcheck-bot","ip":"1.2.3.4"}})",
        R"({"type":"auth.failure","data":{"user":"ann","ip":"127.0.0.1"}})",
        R"({"type":"auth.failure","data":{"user":"ann","ip":"::1"}})"}) {
    Event ev = make_event(json);
    auto r = hook->handle(ev);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value().action, Action::Veto) << json;
    EXPECT_EQ(r.value().reason, "health-check noise");
  }
  for (const char* json : {R"({"type":"auth.failure","data":{"user":"ann","ip":"10.0.0.1"}})",
                           R"({"type":"auth.failure","data":{"user":"my-healthcheck"}})",
                           R"({"type":"auth.failure"})"}) {
    Event ev = make_event(json);
    EXPECT_EQ(run(*hook, ev), Action::Continue) << json;
  }
}

// ----- actions

TEST_F(DeclarativeHookTest, SetKeepsYamlTypesAndBuildsNestedValues) {
  auto hook = load_ok("_10_types.yaml", R"(
kind: transform
actions:
  - set:
      data.int: 5
      data.negative: -12
      data.float: 1.5
      data.exp: 2e3
      data.yes: true
      data.no: false
      data.nothing: null
      data.tilde: ~
      data.quoted_int: "5"
      data.quoted_bool: 'true'
      data.word: hello
      data.norway: no
      data.nested: { a: [1, "two", { b: x }], c: { d: 1.25 } }
      data.deep.er.path: 7
)");
  ASSERT_TRUE(hook);
  Event ev = make_event(R"({"type":"t","data":{"keep":1}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  EXPECT_TRUE(ev.find("data.int")->IsInt64());
  EXPECT_EQ(ev.find("data.int")->GetInt64(), 5);
  EXPECT_EQ(ev.find("data.negative")->GetInt64(), -12);
  EXPECT_TRUE(ev.find("data.float")->IsDouble());
  EXPECT_DOUBLE_EQ(ev.find("data.float")->GetDouble(), 1.5);
  EXPECT_DOUBLE_EQ(ev.find("data.exp")->GetDouble(), 2000.0);
  EXPECT_TRUE(ev.find("data.yes")->IsTrue());
  EXPECT_TRUE(ev.find("data.no")->IsFalse());
  EXPECT_TRUE(ev.find("data.nothing")->IsNull());
  EXPECT_TRUE(ev.find("data.tilde")->IsNull());
  ASSERT_TRUE(ev.find("data.quoted_int")->IsString());
  EXPECT_STREQ(ev.find("data.quoted_int")->GetString(), "5");
  ASSERT_TRUE(ev.find("data.quoted_bool")->IsString());
  EXPECT_STREQ(ev.find("data.word")->GetString(), "hello");
  EXPECT_STREQ(ev.find("data.norway")->GetString(), "no");  // YAML 1.2: `no` is a string
  EXPECT_EQ(to_json(*ev.find("data.nested")), R"({"a":[1,"two",{"b":"x"}],"c":{"d":1.25}})");
  EXPECT_EQ(ev.find("data.deep.er.path")->GetInt(), 7);
  EXPECT_EQ(ev.find("data.keep")->GetInt(), 1);
}

TEST_F(DeclarativeHookTest, RemoveRenameCopyInOrderAndMissingSourcesAreNoOps) {
  auto hook = load_ok("_10_moves.yaml", R"(
kind: transform
actions:
  - copy: { data.user: data.original_user, data.absent: data.never }
  - set: { data.user: redacted }
  - rename: { data.meta.host: data.host, data.gone: data.nowhere }
  - remove: data.meta
  - remove: [data.not_there]
)");
  ASSERT_TRUE(hook);
  Event ev = make_event(R"({"type":"t","data":{"user":"ann","meta":{"host":"h1","x":1}}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  EXPECT_STREQ(ev.find("data.original_user")->GetString(), "ann");  // copy ran before set
  EXPECT_STREQ(ev.find("data.user")->GetString(), "redacted");
  EXPECT_STREQ(ev.find("data.host")->GetString(), "h1");
  EXPECT_EQ(ev.find("data.meta"), nullptr);
  EXPECT_EQ(ev.find("data.never"), nullptr);
  EXPECT_EQ(ev.find("data.nowhere"), nullptr);
}

// A transform says whether it changed the event, so the chain counts it as `replace` (as a
// program's replacement is) and a dashboard shows whether a redactor is redacting.
TEST_F(DeclarativeHookTest, ATransformSaysWhetherItChangedTheEvent) {
  auto remover = load_ok("_10_redact.yaml", "kind: transform\nactions:\n  - remove: data.pw\n");
  auto setter = load_ok("_20_env.yaml", "kind: transform\nactions:\n  - set: { data.env: prod }\n");
  auto mover = load_ok("_30_move.yaml",
                       "kind: transform\nactions:\n  - rename: { data.a: data.b }\n"
                       "  - set: { data.n: [1, 2] }\n");
  ASSERT_TRUE(remover && setter && mover);
  auto edited = [](Hook& hook, Event& ev) {
    auto result = hook.handle(ev);
    EXPECT_TRUE(result.ok());
    return result.ok() && result.value().edited_in_place;
  };
  Event with = make_event(R"({"type":"t","data":{"pw":"x","env":"prod","a":1}})");
  EXPECT_TRUE(edited(*remover, with));
  EXPECT_FALSE(edited(*remover, with));  // nothing left to remove
  EXPECT_FALSE(edited(*setter, with));   // already that value
  EXPECT_TRUE(edited(*mover, with));     // the copy path (rename, set)
  EXPECT_FALSE(edited(*mover, with));    // data.a is gone and data.n already [1, 2]
  Event without = make_event(R"({"type":"t","data":{"env":"dev"}})");
  EXPECT_TRUE(edited(*setter, without));
  // Equal numbers of another type are still written (found in review: rapidjson calls 1 and
  // 1.0 equal, and the set was skipped).
  auto doubler = load_ok("_40_n.yaml", "kind: transform\nactions:\n  - set: { data.n: 1.0 }\n");
  ASSERT_TRUE(doubler);
  Event integer = make_event(R"({"type":"t","data":{"n":1}})");
  EXPECT_TRUE(edited(*doubler, integer));
  EXPECT_TRUE(integer.find("data.n")->IsDouble());
}

// Found in review: remove: on a list element did nothing (no error either), and rename: from one
// copied the value, leaving it at the source too, although the docs index lists with numbers.
TEST_F(DeclarativeHookTest, RemoveAndRenameReachListElements) {
  // Several indexes of one list in one step all name elements as they were before it.
  auto hook = load_ok("_10_lists.yaml", R"(
kind: transform
actions:
  - remove: [data.cards.0, data.cards.1, data.cards.10]
  - rename: { data.keys.0: data.first_key }
)");
  ASSERT_TRUE(hook);
  Event ev = make_event(
      R"({"type":"t","data":{"cards":["4111111111111111","5500000000000004","c2","c3","c4","c5",)"
      R"("c6","c7","c8","c9","3400000000000009","x"],"keys":["k-secret","k2"]}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  for (const char* card : {"4111111111111111", "5500000000000004", "3400000000000009"})
    EXPECT_EQ(ev.to_json().find(card), std::string::npos) << card << " in " << ev.to_json();
  EXPECT_STREQ(ev.find("data.cards.0")->GetString(), "c2");  // the rest moved up
  EXPECT_STREQ(ev.find("data.cards.8")->GetString(), "x");
  EXPECT_STREQ(ev.find("data.first_key")->GetString(), "k-secret");
  EXPECT_EQ(ev.to_json().find("k-secret"), ev.to_json().rfind("k-secret")) << ev.to_json();
  EXPECT_STREQ(ev.find("data.keys.0")->GetString(), "k2");
}

// Found in review: the order of remove: paths compared numeric segments as numbers but a number
// and a name as text, which is not transitive (10 < 9 < 1a < 10 in removal order): with 16 paths
// or fewer the wrong list element went first, with more std::sort had undefined behaviour.
TEST_F(DeclarativeHookTest, RemovingListElementsBesideNamedSiblingsTakesTheRightOnes) {
  for (int extra : {0, 20}) {  // insertion sort below 17 paths, introsort above
    std::string paths = "data.c.10, data.c.1a, data.c.9";
    for (int i = 0; i < extra; ++i) paths += ", data.extra.k" + std::to_string(i);
    auto hook =
        load_ok("_10_mixed.yaml", "kind: transform\nactions:\n  - remove: [" + paths + "]\n");
    ASSERT_TRUE(hook);
    // data.c is a list here: 1a names nothing in it; elements 9 and 10 go.
    Event ev = make_event(
        R"({"type":"t","data":{"c":["e0","e1","e2","e3","e4","e5","e6","e7","e8","e9","e10","e11"]}})");
    EXPECT_EQ(run(*hook, ev), Action::Continue);
    const std::string json = ev.to_json();
    EXPECT_EQ(json.find("\"e9\""), std::string::npos) << extra << ": " << json;
    EXPECT_EQ(json.find("\"e10\""), std::string::npos) << extra << ": " << json;
    EXPECT_NE(json.find("\"e8\""), std::string::npos) << extra << ": " << json;
    EXPECT_NE(json.find("\"e11\""), std::string::npos) << extra << ": " << json;
  }
  // A path given twice removes one element, and "01" is not an index (one spelling per element).
  auto hook = load_ok("_10_twice.yaml",
                      "kind: transform\nactions:\n  - remove: [data.c.0, data.c.0, data.c.01]\n");
  ASSERT_TRUE(hook);
  Event ev = make_event(R"({"type":"t","data":{"c":["e0","e1","e2"]}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  EXPECT_STREQ(ev.find("data.c.0")->GetString(), "e1") << ev.to_json();
  EXPECT_STREQ(ev.find("data.c.1")->GetString(), "e2") << ev.to_json();
}

// Found in review: the hand-walked set:/rename:/copy: maps let a repeated key through, and the
// first copy won ({data.a: data.b, data.a: data.c} never created data.c).
// Found in review: a set: value was not checked as UTF-8, so a ${VAR} holding Latin-1 went into
// every edited event and on to receivers, who may refuse it with a final 4xx.
TEST_F(DeclarativeHookTest, ASetValueThatIsNotUtf8IsALoadErrorThatDoesNotQuoteIt) {
  ::setenv("HG_TEST_LATIN1_VALUE", "caf\xe9-s3cret", 1);
  auto errors =
      load_err("kind: transform\nactions:\n  - set: {data.x: \"${HG_TEST_LATIN1_VALUE}\"}\n");
  ::unsetenv("HG_TEST_LATIN1_VALUE");
  EXPECT_TRUE(has_message(errors, "this value is not UTF-8 text")) << dump(errors);
  EXPECT_EQ(dump(errors).find("s3cret"), std::string::npos) << dump(errors);
}

// Found in review: kind: and on_error: quoted a bad value after ${VAR} expansion, so a secret in
// the variable reached the log, `hooks list` and the hookgate.hook.failed diagnostic.
TEST_F(DeclarativeHookTest, ABadKindOrOnErrorIsQuotedAsWritten) {
  ::setenv("HG_TEST_HOOK_SECRET", "topsecretkey42", 1);
  auto errors = load_err(
      "kind: \"${HG_TEST_HOOK_SECRET}\"\non_error: \"${HG_TEST_HOOK_SECRET}\"\nactions: []\n");
  ::unsetenv("HG_TEST_HOOK_SECRET");
  EXPECT_TRUE(has_message(errors,
                          "hook.kind: expected veto, transform or observe, got "
                          "'${HG_TEST_HOOK_SECRET}'"))
      << dump(errors);
  EXPECT_TRUE(has_message(errors,
                          "hook.on_error: expected open or closed, got "
                          "'${HG_TEST_HOOK_SECRET}'"))
      << dump(errors);
  EXPECT_EQ(dump(errors).find("topsecretkey42"), std::string::npos) << dump(errors);
}

// Found in review: a program that could not start, or a library dlopen() refused, was reported
// without a position (FILE: message), the library's path twice.
TEST_F(DeclarativeHookTest, AProgramOrLibraryThatCannotLoadIsPlacedAtItsKey) {
  auto run = load_err("kind: veto\nrun: /nonexistent/hook\n");
  EXPECT_NE(dump(run).find(path_of("_1_bad.yaml") + ":2:6: cannot start /nonexistent/hook"),
            std::string::npos)
      << dump(run);
  auto library = load_err("kind: veto\nlibrary: ./missing.so\n");
  const std::string text = dump(library);
  EXPECT_NE(text.find(path_of("_1_bad.yaml") + ":2:10: cannot load "), std::string::npos) << text;
  EXPECT_EQ(text.find("missing.so"), text.rfind("missing.so")) << text;
  // A path from a ${VAR} names the variable (the examples' `${HOOKGATE_NATIVE_HOOKS:-...}`).
  unsetenv("HG_TEST_NO_SUCH_LIBS");
  auto from_var = load_err("kind: veto\nlibrary: ${HG_TEST_NO_SUCH_LIBS:-./nolibs}/x.so\n");
  EXPECT_NE(dump(from_var).find(
                "(library: is written as '${HG_TEST_NO_SUCH_LIBS:-./nolibs}/x.so'; check that "
                "variable, or build the library where it points)"),
            std::string::npos)
      << dump(from_var);
}

TEST_F(DeclarativeHookTest, RepeatedKeysInActionMapsAreErrors) {
  auto renamed =
      load_err("kind: transform\nactions:\n  - rename: {data.a: data.b, data.a: data.c}\n");
  EXPECT_TRUE(has_message(renamed, "duplicate key 'data.a'")) << dump(renamed);
  auto set = load_err("kind: transform\nactions:\n  - set:\n      data.x: 1\n      data.x: 2\n");
  EXPECT_TRUE(has_message(set, "duplicate key 'data.x'")) << dump(set);
  auto top = load_err("kind: transform\nkind: veto\nactions:\n  - set: {data.x: 1}\n");
  EXPECT_TRUE(has_message(top, "duplicate key 'kind'")) << dump(top);
}

// A hook cannot dress an event up as one of the gateway's own diagnostics either.
TEST_F(DeclarativeHookTest, AHookCannotGiveAnEventADiagnosticType) {
  auto hook = load_ok("_10_forge.yaml",
                      "kind: transform\nactions:\n  - set: { type: hookgate.delivery.dead }\n");
  ASSERT_TRUE(hook);
  Event ev = make_event(R"({"type":"t","data":{}})");
  const std::string before = ev.to_json();
  auto r = hook->handle(ev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().reason.find("reserved"), std::string::npos) << r.error().reason;
  EXPECT_EQ(ev.to_json(), before);
}

// A failed hook leaves the event as it was, except that its removals still apply. Found in
// review: a publisher could send `"meta":"x"` to make the set: below fail, and under the default
// on_error: open the event then went on with the password the hook removes.
TEST_F(DeclarativeHookTest, FailedSetLeavesTheEventUnchangedButForItsRemovals) {
  auto hook = load_ok("_10_clash.yaml", R"(
kind: transform
actions:
  - remove: [data.password]
  - set: { data.meta.redacted: true }
  - rename: { data.user: data.login }
)");
  ASSERT_TRUE(hook);
  Event ev = make_event(R"({"type":"t","data":{"password":"p","meta":"x","user":"ann"}})");
  auto r = hook->handle(ev);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, HookFailure::Kind::Error);
  EXPECT_NE(r.error().reason.find("data.meta.redacted"), std::string::npos) << r.error().reason;
  EXPECT_EQ(ev.find("data.password"), nullptr) << ev.to_json();
  EXPECT_STREQ(ev.find("data.meta")->GetString(), "x");
  EXPECT_STREQ(ev.find("data.user")->GetString(), "ann");  // the rename after it did not run
  EXPECT_EQ(ev.find("data.login"), nullptr);
}

// Found in review: the removals applied to the untouched event at the paths they name, so a value
// renamed into a removed path (or into an object that is removed) went on under its old name.
TEST_F(DeclarativeHookTest, AFailedHookRemovesWhatARenameWouldHaveMovedIntoARemoval) {
  auto hook = load_ok("_10_moved.yaml", R"(
kind: transform
actions:
  - rename: { data.pwd: data.password, data.cred.key: data.secret.key, data.auth: data.vault.auth }
  - copy: { data.note: data.copied }
  - remove: [data.password, data.secret, data.vault.auth.token, data.copied]
  - set: { data.meta.site: lab }
)");
  ASSERT_TRUE(hook);
  Event ev = make_event(
      R"({"type":"t","data":{"pwd":"p","cred":{"key":"k","id":7},"auth":{"token":"t","user":"u"},)"
      R"("note":"n","meta":"x"}})");
  auto r = hook->handle(ev);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ev.find("data.pwd"), nullptr) << ev.to_json();
  EXPECT_EQ(ev.find("data.cred.key"), nullptr) << ev.to_json();     // moved into a removed object
  EXPECT_EQ(ev.find("data.cred.id")->GetInt(), 7) << ev.to_json();  // not moved
  EXPECT_EQ(ev.find("data.auth.token"), nullptr) << ev.to_json();   // a part of what moved
  EXPECT_STREQ(ev.find("data.auth.user")->GetString(), "u");        // the rest of it stays
  EXPECT_STREQ(ev.find("data.note")->GetString(), "n");  // a copy leaves its source in place
  EXPECT_STREQ(ev.find("data.meta")->GetString(), "x");
}

// Found in review: renaming a list element away moves the later ones up, which the mapping back
// to the untouched event ignored (and it removed the origins in text order, 0 before 1).
TEST_F(DeclarativeHookTest, AFailedHookRemovesRenamedListElementsWhereTheyWere) {
  auto hook = load_ok("_10_cards.yaml", R"(
kind: transform
actions:
  - rename: { data.cards.0: data.a, data.cards.1: data.z }
  - remove: [data.a, data.z]
  - set: { data.meta.site: lab }
)");
  ASSERT_TRUE(hook);
  // Applied whole, the hook would leave cards [c1, c3]: c0 and c2 were renamed, then removed.
  Event ev = make_event(R"({"type":"t","data":{"cards":["c0","c1","c2","c3"],"meta":"x"}})");
  auto r = hook->handle(ev);
  ASSERT_FALSE(r.ok());
  ASSERT_NE(ev.find("data.cards"), nullptr) << ev.to_json();
  const JsonValue& cards = *ev.find("data.cards");
  ASSERT_EQ(cards.Size(), 2u) << ev.to_json();
  EXPECT_STREQ(cards[0].GetString(), "c1");
  EXPECT_STREQ(cards[1].GetString(), "c3");
}

// The redact example edits the event in place (its paths are independent and under data.);
// events where that could fail or break the envelope take the copy path, with its guarantees.
TEST_F(DeclarativeHookTest, InPlaceEditsFallBackToTheCopyWhenTheyCouldFail) {
  auto hook = load_ok("_10_redact.yaml", kRedactYaml);
  ASSERT_TRUE(hook);

  Event ev = make_event(
      R"({"type":"auth.failure","data":{"user":"ann","ip":"10.0.0.1","password":"pw","n":[1,2]}})");
  EXPECT_EQ(run(*hook, ev), Action::Continue);
  EXPECT_EQ(ev.find("data.password"), nullptr);
  EXPECT_EQ(ev.find("data.ip"), nullptr);
  EXPECT_STREQ(ev.find("data.source_ip")->GetString(), "10.0.0.1");
  EXPECT_STREQ(ev.find("data.env")->GetString(), "prod");
  EXPECT_STREQ(ev.find("data.pipeline")->GetString(), "hookgate");
  EXPECT_STREQ(ev.find("subject")->GetString(), "ann");
  EXPECT_EQ(ev.find("data.n")->Size(), 2u);

  // No data yet: creating it needs normalize() to add datacontenttype.
  Event bare = make_event(R"({"type":"auth.failure"})");
  EXPECT_EQ(run(*hook, bare), Action::Continue);
  EXPECT_STREQ(bare.find("data.env")->GetString(), "prod");
  ASSERT_NE(bare.find("datacontenttype"), nullptr);
  EXPECT_STREQ(bare.find("datacontenttype")->GetString(), "application/json");

  // An object at a destination is simply replaced.
  Event clash = make_event(R"({"type":"auth.failure","data":{"password":"pw","env":{"a":1}}})");
  EXPECT_EQ(run(*hook, clash), Action::Continue);
  EXPECT_STREQ(clash.find("data.env")->GetString(), "prod");
  // A set that cannot apply: the hook fails and the event is untouched.
  Event string_data = make_event(R"({"type":"auth.failure","data":"pw=secret","token":1})");
  const std::string before = string_data.to_json();
  auto r = hook->handle(string_data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(string_data.to_json(), before);
}

// Found in review: paths that only look independent. Both must behave as the copy path does:
// fail, and leave the event as it was.
TEST_F(DeclarativeHookTest, AliasedIndexesAndEnvelopeSubpathsTakeTheCopyPath) {
  auto aliased = load_ok("_10_alias.yaml", R"(
kind: transform
actions:
  - set: { data.items.0: x }
  - set: { data.items.00.flag: true }
)");
  ASSERT_TRUE(aliased);
  Event ev = make_event(R"({"type":"t","data":{"items":[{}]}})");
  const std::string before = ev.to_json();
  EXPECT_FALSE(aliased->handle(ev).ok());
  EXPECT_EQ(ev.to_json(), before);

  auto subpath = load_ok("_10_sub.yaml", R"(
kind: transform
actions:
  - set: { data.x: 1, time.tz: UTC }
)");
  ASSERT_TRUE(subpath);
  Event timeless = make_event(R"({"type":"t","data":{}})");
  ASSERT_TRUE(timeless.remove("time"));  // as an earlier remove-only hook may do
  const std::string untouched = timeless.to_json();
  EXPECT_FALSE(subpath->handle(timeless).ok());
  EXPECT_EQ(timeless.to_json(), untouched);
}

TEST(EventTest, CanSetAgreesWithSet) {
  const char* doc = R"({"type":"t","data":{"s":"x","o":{"k":1},"a":[{"q":1},2]}})";
  for (const char* path :
       {"data.s", "data.s.x", "data.o.k", "data.o.k.z", "data.new.deep", "data.a.0.q",
        "data.a.0.new", "data.a.1.x", "data.a.5", "top", "data..x", ""}) {
    Event probe = make_event(doc);
    Event target = probe.clone();
    const std::string before = probe.to_json();
    JsonValue value("v");
    EXPECT_EQ(probe.can_set(path), target.set(path, value)) << path;
    EXPECT_EQ(probe.to_json(), before) << "can_set changed the event";
  }
}

TEST_F(DeclarativeHookTest, SetMayRetypeButNotBreakTheEnvelope) {
  auto retype = load_ok("_10_retype.yaml", "kind: transform\nactions:\n  - set: {type: a.b}\n");
  ASSERT_TRUE(retype);
  Event ev = make_event(R"({"type":"t"})");
  EXPECT_EQ(run(*retype, ev), Action::Continue);
  EXPECT_EQ(ev.type(), "a.b");

  auto breaks = load_ok("_10_breaks.yaml", "kind: transform\nactions:\n  - set: {type: 5}\n");
  ASSERT_TRUE(breaks);
  Event ev2 = make_event(R"({"type":"t"})");
  auto r = breaks->handle(ev2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().reason.find("invalid event"), std::string::npos);
  EXPECT_EQ(ev2.type(), "t");

  auto errors = load_err("kind: transform\nactions:\n  - remove: [data.x, id]\n");
  EXPECT_TRUE(has_message(errors, "'id' is a required event attribute")) << dump(errors);
  // Placed at the item, not at remove:.
  EXPECT_EQ(errors[0].where.column, 22) << dump(errors);
}

// Found in a SIEM pass: `copy: {data.user: subject}` of an object delivered "subject": {...}
// (the in-place path skipped the envelope check, and the check knew only the required
// attributes). A string copy still works.
TEST_F(DeclarativeHookTest, ACopyIntoSubjectMustLeaveAString) {
  auto copy =
      load_ok("_10_subject.yaml", "kind: transform\nactions:\n  - copy: {data.user: subject}\n");
  ASSERT_TRUE(copy);
  Event object_user = make_event(R"({"type":"t","data":{"user":{"name":"ann"}}})");
  auto r = copy->handle(object_user);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().reason.find("\"subject\" must be a string"), std::string::npos)
      << r.error().reason;
  EXPECT_EQ(object_user.find("subject"), nullptr);
  Event string_user = make_event(R"({"type":"t","data":{"user":"ann"}})");
  EXPECT_EQ(run(*copy, string_user), Action::Continue);
  ASSERT_NE(string_user.find("subject"), nullptr);
  EXPECT_STREQ(string_user.find("subject")->GetString(), "ann");
}

// Found in review: a path's error quoted the environment's value, which may be a secret (config
// errors quote what is written).
TEST_F(DeclarativeHookTest, PathErrorsQuoteTheTextAsWrittenNotItsExpansion) {
  setenv("HG_HOOK_PATH_SECRET", "s3cr3t..value", 1);
  auto errors = load_err(
      "kind: transform\nactions:\n  - remove: [\"${HG_HOOK_PATH_SECRET}\"]\n"
      "  - rename: { data.a: \"${HG_HOOK_PATH_SECRET}\" }\n");
  unsetenv("HG_HOOK_PATH_SECRET");
  EXPECT_EQ(errors.size(), 2u) << dump(errors);
  for (const auto& e : errors) {
    EXPECT_EQ(e.message.find("s3cr3t"), std::string::npos) << e.str();
    EXPECT_NE(e.message.find("'${HG_HOOK_PATH_SECRET}' is not a dotted path"), std::string::npos)
        << e.str();
  }
}

// ----- conditions

TEST_F(DeclarativeHookTest, EqualsAndInCompareTextSoNumbersMatchStrings) {
  auto hook = load_ok("_10_eq.yaml", R"(
kind: veto
when: { any: [ { field: data.code, equals: 5 },
               { field: data.flag, equals: true },
               { field: data.level, in: [warn, 2.5, null] } ] }
)");
  ASSERT_TRUE(hook);
  auto verdict = [&](const char* json) {
    Event ev = make_event(json);
    return run(*hook, ev);
  };
  EXPECT_EQ(verdict(R"({"type":"t","data":{"code":5}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"code":"5"}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"code":6}})"), Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"flag":true}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"flag":"true"}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"flag":false}})"), Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"level":"warn"}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"level":2.5}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"level":null}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"t","data":{"level":"error"}})"), Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"t"})"), Action::Continue);  // missing never equals
  // The veto's default reason names the hook.
  Event ev = make_event(R"({"type":"t","data":{"code":5}})");
  EXPECT_EQ(hook->handle(ev).value().reason, "vetoed by hook eq");
}

TEST_F(DeclarativeHookTest, MatchesExistsAllAnyNot) {
  auto hook = load_ok("_10_combo.yaml", R"(
kind: veto
when:
  all:
    - { field: type, matches: "plan:*:failed" }
    - { field: data.ticket, exists: false }
    - not: { field: data.env, equals: dev }
    - any:
        - { field: data.retry, exists: true }
        - { field: source, matches: "*.internal" }
reason: untracked failure
)");
  ASSERT_TRUE(hook);
  auto verdict = [&](const char* json) {
    Event ev = make_event(json);
    return run(*hook, ev);
  };
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","data":{"retry":1}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","source":"ci.internal"})"), Action::Veto);
  // not: a missing field "does not equal dev", so the not-branch holds.
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","data":{"retry":null}})"), Action::Veto);
  EXPECT_EQ(verdict(R"({"type":"plan:build:ok","data":{"retry":1}})"), Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","data":{"retry":1,"ticket":"T-1"}})"),
            Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","data":{"retry":1,"env":"dev"}})"),
            Action::Continue);
  EXPECT_EQ(verdict(R"({"type":"plan:build:failed","source":"ci.example.com"})"), Action::Continue);
  // matches is the Patterns glob: the dot is literal, `*` spans `:` and `.`.
  auto dots = load_ok("_10_dots.yaml", R"(
kind: veto
when: { field: data.host, matches: "db.*" }
)");
  Event a = make_event(R"({"type":"t","data":{"host":"db.eu:5432"}})");
  Event b = make_event(R"({"type":"t","data":{"host":"dbx"}})");
  EXPECT_EQ(run(*dots, a), Action::Veto);
  EXPECT_EQ(run(*dots, b), Action::Continue);
}

TEST_F(DeclarativeHookTest, TransformWhenFalseSkipsAndLeavesEventAlone) {
  auto hook = load_ok("_10_tag_prod.yaml", R"(
kind: transform
when: { field: data.env, equals: prod }
actions:
  - set: { data.tier: gold }
)");
  ASSERT_TRUE(hook);
  Event other = make_event(R"({"type":"t","data":{"env":"dev"}})");
  std::string before = other.to_json();
  EXPECT_EQ(run(*hook, other), Action::Skip);
  EXPECT_EQ(other.to_json(), before);
  Event prod = make_event(R"({"type":"t","data":{"env":"prod"}})");
  EXPECT_EQ(run(*hook, prod), Action::Continue);
  EXPECT_STREQ(prod.find("data.tier")->GetString(), "gold");
}

// ----- common keys

TEST_F(DeclarativeHookTest, CommonKeysAndDefaults) {
  defaults_.default_timeout_ms = 1234;
  defaults_.fail_open = false;
  auto plain = load_ok("_10_plain.yaml", "kind: observe\nactions: [ { log: seen } ]\n");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->spec().timeout_ms, 1234);
  EXPECT_EQ(plain->spec().on_error, FailurePolicy::Closed);
  EXPECT_EQ(plain->spec().events, (std::vector<std::string>{"*"}));
  EXPECT_EQ(plain->spec().config_json, "{}");
  EXPECT_EQ(plain->spec().file, path_of("_10_plain.yaml"));

  auto set = load_ok("_10_set.yaml", R"(
kind: observe
events: user.*
timeout_ms: 250
on_error: open
config: { threshold: 3, labels: [a, b], nested: { on: true, name: "x" } }
actions: [ { log: seen } ]
)");
  ASSERT_TRUE(set);
  EXPECT_EQ(set->spec().timeout_ms, 250);
  EXPECT_EQ(set->spec().on_error, FailurePolicy::Open);
  EXPECT_EQ(set->spec().events, (std::vector<std::string>{"user.*"}));
  EXPECT_EQ(set->spec().config_json,
            R"({"threshold":3,"labels":["a","b"],"nested":{"on":true,"name":"x"}})");
  Event ev = make_event(R"({"type":"user.created"})");
  EXPECT_EQ(run(*set, ev), Action::Continue);
}

TEST_F(DeclarativeHookTest, ObserveHooksMayOnlyLog) {
  auto errors = load_err("kind: observe\nactions:\n  - log: fine\n  - set: { data.x: 1 }\n");
  EXPECT_TRUE(has_message(errors, "observe hooks are read-only")) << dump(errors);
  EXPECT_EQ(errors[0].where.line, 4);
}

// ----- schema errors carry positions

TEST_F(DeclarativeHookTest, UnknownKeyHasLineAndColumn) {
  auto errors = load_err("kind: veto\nwhen: { field: data.user, exists: true }\nreasn: typo\n");
  ASSERT_EQ(errors.size(), 1u) << dump(errors);
  EXPECT_EQ(errors[0].where.file, path_of("_1_bad.yaml"));
  EXPECT_EQ(errors[0].where.line, 3);
  EXPECT_EQ(errors[0].where.column, 1);
  EXPECT_NE(errors[0].message.find("unknown key 'reasn'"), std::string::npos);

  // Inside a condition and inside an action, too.
  auto nested = load_err("kind: veto\nwhen:\n  any:\n    - { field: a, equal: 1 }\n");
  ASSERT_FALSE(nested.empty());
  EXPECT_TRUE(has_message(nested, "unknown key 'equal'")) << dump(nested);
  bool positioned = false;
  for (const auto& e : nested)
    if (e.message.find("unknown key 'equal'") != std::string::npos)
      positioned = e.where.line == 4 && e.where.column == 19;
  EXPECT_TRUE(positioned) << dump(nested);

  auto action = load_err("kind: transform\nactions:\n  - set: { a: 1 }\n    sett: 2\n");
  ASSERT_EQ(action.size(), 1u) << dump(action);
  EXPECT_NE(action[0].message.find("unknown key 'sett' in actions[0]"), std::string::npos);
  EXPECT_EQ(action[0].where.line, 4);
  EXPECT_EQ(action[0].where.column, 5);
}

TEST_F(DeclarativeHookTest, SchemaErrors) {
  struct Case {
    const char* yaml;
    const char* message;
    int line;
  };
  const Case cases[] = {
      {"events: [a]\n", "hook.kind: missing", 1},
      {"kind: bogus\nwhen: {field: a, exists: true}\n", "expected veto, transform or observe", 1},
      {"kind: veto\nreason: no condition\n", "a veto hook needs when:", 1},
      {"kind: veto\nwhen: {field: a, exists: true}\non_error: maybe\n", "expected open or closed",
       3},
      {"kind: veto\nwhen: {field: a, exists: true}\ntimeout_ms: -5\n", "must be positive", 3},
      {"kind: veto\nwhen: {field: a, exists: true}\nevents: []\n", "at least one pattern", 3},
      {"kind: veto\nwhen: {field: a, exists: true}\nactions: [ {remove: [x]} ]\n",
       "veto hooks have no actions", 3},
      {"kind: transform\n", "needs a list of actions", 1},
      {"kind: transform\nreason: x\nactions: [ {remove: [x]} ]\n", "only veto hooks have a reason",
       2},
      {"kind: transform\nactions: [ {set: {data.x: .inf}} ]\n", "no infinity", 2},
      {"kind: transform\nactions: [ {remove: [data..x]} ]\n", "not a dotted path", 2},
      {"kind: veto\nwhen: {field: a, equals: 1, all: [{field: b, exists: true}]}\n",
       "cannot share a mapping", 2},
      {"kind: veto\nwhen: {field: a}\n", "exactly one of equals, in, matches, exists", 2},
      {"kind: veto\nwhen: {all: []}\n", "non-empty list of conditions", 2},
      {"kind: veto\nwhen: {field: a, in: x}\n", "non-empty list of values", 2},
      {"kind: veto\nwhen: {field: a, equals: [1]}\n", "expected a scalar", 2},
      {"kind: veto\nwhen: [ {field: a, exists: true} ]\n", "a condition is a mapping", 2},
      {"kind: veto\nwhen: {field: a, exists: true}\nconfig: [1]\n",
       "hook.config: expected a mapping", 3},
      // At the end of the last line with text, where the `}` is missing.
      {"kind: veto\nwhen: {field: a, exists: true\n", "YAML syntax error", 2},
      {"- just\n- a list\n", "a hook file is a YAML mapping", 1},
      {"run: ./x\nactions: [ {remove: [a]} ]\n", "only declarative hooks", 2},
      {"run: ./x\ncommand: echo\n", "only one of run:, command:, library:", 1},
      {"command: exit 1\n", "a command: hook must say its kind", 1},
      {"kind: veto\ncommand: exit 1\nveto_exit_codes: [0]\n", "from 1 to 255", 3},
      {"run: ./x\nevents: [a.*]\n", "must set kind: too", 2},
      // An alias inside its own anchor is a cycle in yaml-cpp: an error, not a stack overflow.
      // Refused as the file is parsed, before anything walks it.
      {"kind: veto\nwhen: &w {not: *w}\n", "an alias inside the node its anchor names", 2},
      {"kind: transform\nactions: [ {set: &v {data.x: [*v]}} ]\n",
       "an alias inside the node its anchor names", 2},
      {"kind: veto\nwhen: {field: a, exists: true}\nconfig: &c {x: *c}\n",
       "an alias inside the node its anchor names", 3},
  };
  for (const auto& c : cases) {
    auto errors = load_err(c.yaml);
    ASSERT_FALSE(errors.empty()) << c.yaml;
    EXPECT_TRUE(has_message(errors, c.message)) << c.yaml << "\n" << dump(errors);
    EXPECT_EQ(errors[0].where.line, c.line) << c.yaml << "\n" << dump(errors);
    EXPECT_EQ(errors[0].where.file, path_of("_1_bad.yaml"));
  }
}

// ----- descriptors for the other forms (the forms themselves are tested in their own files)

// A program hook in shell: prints `handshake`, then answers every request with `answer` (JSON
// members after the id, e.g. "action":"continue").
void write_program_hook(const std::string& dir, const std::string& name,
                        const std::string& handshake, const std::string& answer) {
  write_file(dir, name,
             "#!/bin/sh\necho '" + handshake +
                 "'\nwhile IFS= read -r line; do\n  id=${line#*:}\n  id=${id%%,*}\n"
                 "  printf '{\"id\":%s," +
                 answer + "}\\n' \"$id\"\ndone\n",
             /*executable=*/true);
}

TEST_F(DeclarativeHookTest, RunDescriptorResolvesItsProgramBesideTheYamlAndSetsKind) {
  std::string bin = tmp_.dir("hooks/bin");
  // Answers every request with a veto; the handshake leaves kind and events to the descriptor.
  write_program_hook(bin, "gate.sh", R"({"hookgate":1})",
                     R"("action":"veto","reason":"gate says no")");
  auto hook = load_ok("_10_gate.yaml",
                      "kind: veto\nevents: [\"auth.*\"]\ntimeout_ms: 3000\nrun: ./bin/gate.sh\n");
  ASSERT_TRUE(hook);
  EXPECT_EQ(hook->spec().kind, HookKind::Veto);
  EXPECT_EQ(hook->spec().form, HookForm::Program);
  EXPECT_EQ(hook->spec().events, (std::vector<std::string>{"auth.*"}));
  EXPECT_EQ(hook->spec().timeout_ms, 3000);
  Event ev = make_event(R"({"type":"auth.failure"})");
  auto r = hook->handle(ev);
  ASSERT_TRUE(r.ok()) << r.error().reason;
  EXPECT_EQ(r.value().action, Action::Veto);
  EXPECT_EQ(r.value().reason, "gate says no");
}

// Found in review: a descriptor with kind: but no events: applied the hook to every event,
// ignoring the patterns the program's handshake announced.
TEST_F(DeclarativeHookTest, RunDescriptorWithKindOnlyKeepsTheHandshakesEvents) {
  std::string bin = tmp_.dir("hooks/bin");
  write_program_hook(bin, "tag.sh", R"({"hookgate":1,"kind":"observe","events":["deploy.*"]})",
                     R"("action":"continue")");
  auto kind_only = load_ok("_10_tag.yaml", "kind: transform\nrun: ./bin/tag.sh\n");
  ASSERT_TRUE(kind_only);
  EXPECT_EQ(kind_only->spec().kind, HookKind::Transform);                       // the descriptor's
  EXPECT_EQ(kind_only->spec().events, (std::vector<std::string>{"deploy.*"}));  // the program's
  auto both = load_ok("_10_tag2.yaml", "kind: transform\nevents: [a.*]\nrun: ./bin/tag.sh\n");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->spec().events, (std::vector<std::string>{"a.*"}));
  // Events the descriptor overrides are not read, so a handshake's odd ones do not matter.
  write_program_hook(bin, "odd.sh", R"({"hookgate":1,"events":"*"})", R"("action":"continue")");
  EXPECT_TRUE(load_ok("_10_odd.yaml", "kind: transform\nevents: [a.*]\nrun: ./bin/odd.sh\n"));
}

TEST_F(DeclarativeHookTest, CommandDescriptorPassesVetoExitCodes) {
  auto custom = load_ok("_10_custom.yaml", "kind: veto\ncommand: exit 3\nveto_exit_codes: [3]\n");
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom->spec().form, HookForm::OneShot);
  Event ev = make_event(R"({"type":"t"})");
  auto r = custom->handle(ev);
  ASSERT_TRUE(r.ok()) << r.error().reason;
  EXPECT_EQ(r.value().action, Action::Veto);

  auto by_default = load_ok("_10_default.yaml", "kind: veto\ncommand: exit 1\n");
  ASSERT_TRUE(by_default);
  Event ev2 = make_event(R"({"type":"t"})");
  auto r2 = by_default->handle(ev2);
  ASSERT_TRUE(r2.ok()) << r2.error().reason;
  EXPECT_EQ(r2.value().action, Action::Veto);
  // Exit 3 is not in the default list: a failure, not a veto.
  auto not_listed = load_ok("_10_other.yaml", "kind: veto\ncommand: exit 3\n");
  ASSERT_TRUE(not_listed);
  Event ev3 = make_event(R"({"type":"t"})");
  EXPECT_FALSE(not_listed->handle(ev3).ok());
}

// Found in review: exit 1 vetoed by default for every kind, so a one-shot transform that
// crashed (an uncaught exception exits 1) dropped the event instead of failing open.
TEST_F(DeclarativeHookTest, ExitOneOfAOneShotTransformIsAFailureNotAVeto) {
  auto transform = load_ok("_10_t.yaml", "kind: transform\ncommand: exit 1\n");
  ASSERT_TRUE(transform);
  Event ev = make_event(R"({"type":"t"})");
  auto r = transform->handle(ev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().reason.find("exit"), std::string::npos) << r.error().reason;
  // Listed explicitly, a transform may still veto by exit code.
  auto listed = load_ok("_10_l.yaml", "kind: transform\ncommand: exit 1\nveto_exit_codes: [1]\n");
  ASSERT_TRUE(listed);
  Event ev2 = make_event(R"({"type":"t"})");
  auto r2 = listed->handle(ev2);
  ASSERT_TRUE(r2.ok()) << r2.error().reason;
  EXPECT_EQ(r2.value().action, Action::Veto);
}

TEST_F(DeclarativeHookTest, LoadHookRefusesFilesDiscoveryMarkedBroken) {
  HookFile f;
  f.path = "/nowhere/_20_dup.yaml";
  f.name = "dup";
  f.error = "duplicate hook name 'dup'";
  config::Diagnostics errors;
  auto r = load_hook(f, defaults_, errors);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "duplicate hook name 'dup'");
}

TEST_F(DeclarativeHookTest, LoadHookDispatchesYamlToTheDeclarativeLoader) {
  std::string dir = tmp_.dir("hooks");
  write_file(dir, "_10_redact.yaml", kRedactYaml);
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 1u);
  auto r = load_hook(files[0], defaults_, errors);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.value()->spec().name, "redact");
  EXPECT_EQ(r.value()->spec().directory, dir);
}

}  // namespace
}  // namespace hookgate::hooks
