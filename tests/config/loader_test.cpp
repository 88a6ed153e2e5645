#include "config/loader.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/yaml_reader.hpp"
#include "gateway/common/log.hpp"
#include "tests/support/gateway_process.hpp"

namespace hookgate::config {
namespace {

ConfigResult load(const std::string& text) {
  return load_config_text(text, "test.yaml", "/etc/hg");
}

std::string first_error(const ConfigResult& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() || r.error().empty() ? std::string() : r.error().front().str();
}

TEST(ConfigLoaderTest, EmptyFileGivesDefaults) {
  auto cfg = load("");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(*cfg->bus.bind, "tcp://127.0.0.1:5556");
  EXPECT_EQ(cfg->bus.max_message_bytes, 1 << 20);
  EXPECT_EQ(cfg->hooks.default_timeout_ms, 5000);
  EXPECT_TRUE(cfg->hooks.fail_open);
  EXPECT_EQ(cfg->hooks.directories.back(), "/etc/hg/hooks");
  EXPECT_EQ(cfg->spool.path, "/etc/hg/hookgate-spool.db");
  EXPECT_EQ(cfg->admin.listen, "127.0.0.1:9464");
  EXPECT_EQ(cfg->spool.memory_max_pending, 100000);
}

// Found in an exploratory run: `synchronous: full` and `True` were taken, `level: INFO`,
// `format: JSON`, `mode: Memory` and an `HTTPS://` URL refused. Keywords and schemes take any case.
TEST(ConfigLoaderTest, KeywordsAndUrlSchemesTakeAnyCase) {
  testing::TempDir dir;
  const std::string ca = dir.write("ca.pem", "readable: all the loader asks of it\n");
  auto cfg = load(
      "log: { level: INFO, format: Json }\nspool: { mode: Memory, synchronous: Full }\n"
      "webhooks:\n"
      "  - name: a\n    url: HTTPS://Example.com/Hook?Key=AbC\n    body: Splunk_HEC\n"
      "    http_client: LibCurl\n    signatures: [GitHub]\n"
      "    tls: { ca_file: " +
      ca +
      " }\n"
      "extensions:\n  webhooks:\n    - hook: x.y\n      url: Http://127.0.0.1:9/\n");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->log.level, "info");
  EXPECT_EQ(cfg->log.format, "json");
  EXPECT_EQ(cfg->spool.mode, SpoolConfig::Mode::Memory);
  ASSERT_EQ(cfg->webhooks.size(), 2u);
  const WebhookConfig& a = cfg->webhooks[0].name == "a" ? cfg->webhooks[0] : cfg->webhooks[1];
  const WebhookConfig& alias = &a == &cfg->webhooks[0] ? cfg->webhooks[1] : cfg->webhooks[0];
  EXPECT_EQ(a.url, "https://Example.com/Hook?Key=AbC");  // only the scheme
  EXPECT_EQ(a.body, BodyMode::SplunkHec);
  EXPECT_EQ(a.http_client, WebhookConfig::HttpClient::Libcurl);
  EXPECT_TRUE(a.sign_github);
  EXPECT_EQ(alias.url, "http://127.0.0.1:9/");
  EXPECT_EQ(cfg->spool.synchronous, "FULL");
  // Still one of the set: a misspelling is said as written.
  for (const auto& [yaml, said] : std::vector<std::pair<std::string, std::string>>{
           {"log: { level: Verbose }\n", "test.yaml:1:15: log.level: "},
           {"log: { format: Logfmt }\n", "test.yaml:1:16: log.format: "},
           {"spool: { synchronous: Extra }\n", "test.yaml:1:23: spool.synchronous: "}}) {
    const std::string error = first_error(load(yaml));
    EXPECT_EQ(error.rfind(said, 0), 0u) << error;
    const std::string written = yaml.substr(yaml.find(": ", yaml.find("{")) + 2);
    EXPECT_NE(error.find("got '" + written.substr(0, written.find(' ')) + "'"), std::string::npos)
        << error;
  }
  EXPECT_NE(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    body: SplunkHEC\n"))
                .find("got 'SplunkHEC'"),
            std::string::npos);
  // One alias however its scheme is written: two would deliver each event twice.
  EXPECT_NE(first_error(load("extensions:\n  webhooks:\n    - { hook: x.y, url: \"http://h/\" }\n"
                             "    - { hook: x.y, url: \"HTTP://h/\" }\n"))
                .find("twice"),
            std::string::npos);
}

// Found in an exploratory run: `bind: ipc://bus.sock` made the socket wherever the gateway was
// started (`/` under systemd), though relative paths resolve against the config's folder.
TEST(ConfigLoaderTest, ARelativeIpcEndpointResolvesAgainstTheConfigsFolder) {
  auto cfg = load(
      "bus:\n  bind: ipc://run/bus.sock\n"
      "  connect: [\"ipc:///var/run/pub.sock\", \"ipc://@abstract\", \"ipc://../up.sock\", "
      "\"tcp://127.0.0.1:5557\"]\n");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(*cfg->bus.bind, "ipc:///etc/hg/run/bus.sock");
  EXPECT_EQ(cfg->bus.connect,
            (std::vector<std::string>{"ipc:///var/run/pub.sock", "ipc://@abstract",
                                      "ipc:///etc/up.sock", "tcp://127.0.0.1:5557"}));
  // Two spellings of one socket file are one peer.
  EXPECT_NE(first_error(load("bus:\n  connect: [\"ipc://a.sock\", \"ipc:///etc/hg/a.sock\"]\n"))
                .find("twice"),
            std::string::npos);
  // Past what sockaddr_un holds: said at `check`, not first at bind.
  EXPECT_NE(first_error(load("bus: { bind: \"ipc://" + std::string(120, 'x') + "\" }\n"))
                .find("a socket path is at most 107 bytes"),
            std::string::npos);
}

// PRODUCT.md's default hook folders, in order: the built-in ones, the user's
// ($XDG_CONFIG_HOME/hookgate/hooks, else ~/.config/hookgate/hooks), then ./hooks beside the
// config. And a path starting with ~/ is the user's home.
TEST(ConfigLoaderTest, DefaultHookFoldersAndHomePaths) {
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  setenv("XDG_CONFIG_HOME", "/xdg", 1);
  setenv("HOME", "/home/ann", 1);
  EXPECT_EQ(default_hook_directories("/etc/hg"),
            (std::vector<std::string>{HOOKGATE_SHARE_DIR, "/xdg/hookgate/hooks", "/etc/hg/hooks"}));
  unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(default_hook_directories("/etc/hg"),
            (std::vector<std::string>{HOOKGATE_SHARE_DIR, "/home/ann/.config/hookgate/hooks",
                                      "/etc/hg/hooks"}));
  auto cfg = load("hooks: { directories: [~/hooks, \"~\"] }\nspool: { path: ~/spool.db }\n");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->hooks.directories, (std::vector<std::string>{"/home/ann/hooks", "/home/ann"}));
  EXPECT_EQ(cfg->spool.path, "/home/ann/spool.db");
  if (old_xdg) setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1);
  if (old_home)
    setenv("HOME", saved_home.c_str(), 1);
  else
    unsetenv("HOME");
}

TEST(ConfigLoaderTest, FullProductExample) {
  setenv("HG_TEST_SECRET", "s3cr3t-value", 1);
  unsetenv("HG_TEST_TOKEN");
  auto cfg = load(R"(
bus:
  connect: [tcp://bus.internal:5556]
  topics: ["auth."]
  max_message_bytes: 2048
hooks:
  directories: [hooks-a, /abs/hooks]
  hot_reload: false
  default_timeout_ms: 250
  fail_open: false
webhooks:
  - name: siem
    url: https://siem.example.com/services/collector/event
    events: ["auth.failure", "auth.*"]
    secret: ${HG_TEST_SECRET}
    timeout_ms: 1500
    headers: { Authorization: "Splunk ${HG_TEST_TOKEN:-dev-token}" }
    retry: { max_attempts: 3, initial_backoff_ms: 10, max_backoff_ms: 100 }
    max_in_flight: 4
    body: data
    signatures: [github]
spool: { mode: memory }
admin: { listen: 127.0.0.1:0 }
log: { level: debug, format: json }
)");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_FALSE(cfg->bus.bind.has_value());
  EXPECT_EQ(cfg->bus.connect.at(0), "tcp://bus.internal:5556");
  EXPECT_EQ(cfg->bus.topics, std::vector<std::string>{"auth."});
  EXPECT_EQ(cfg->bus.max_message_bytes, 2048);
  EXPECT_EQ(cfg->hooks.max_event_bytes, 2048);   // a replacement may not outgrow the bus
  EXPECT_EQ(cfg->hooks.directories.size(), 2u);  // listed: the default folders are not added
  EXPECT_EQ(cfg->hooks.directories.at(0), "/etc/hg/hooks-a");
  EXPECT_EQ(cfg->hooks.directories.at(1), "/abs/hooks");
  EXPECT_FALSE(cfg->hooks.hot_reload);
  EXPECT_EQ(cfg->hooks.default_timeout_ms, 250);
  EXPECT_FALSE(cfg->hooks.fail_open);
  ASSERT_EQ(cfg->webhooks.size(), 1u);
  const auto& w = cfg->webhooks[0];
  EXPECT_EQ(w.name, "siem");
  EXPECT_EQ(w.url, "https://siem.example.com/services/collector/event");
  EXPECT_EQ(w.events, (std::vector<std::string>{"auth.failure", "auth.*"}));
  EXPECT_EQ(w.secrets, std::vector<std::string>{"s3cr3t-value"});
  EXPECT_EQ(w.timeout_ms, 1500);
  EXPECT_EQ(w.max_in_flight, 4);
  EXPECT_EQ(w.headers.at(0).first, "Authorization");
  EXPECT_EQ(w.headers.at(0).second, "Splunk dev-token");
  EXPECT_EQ(w.retry.max_attempts, 3);
  EXPECT_EQ(w.retry.initial_backoff_ms, 10);
  EXPECT_EQ(w.retry.max_backoff_ms, 100);
  EXPECT_EQ(cfg->admin.listen, "127.0.0.1:0");
  EXPECT_EQ(cfg->log.level, "debug");
  EXPECT_EQ(w.body, BodyMode::Data);
  EXPECT_TRUE(w.sign_github);
  EXPECT_EQ(cfg->spool.mode, SpoolConfig::Mode::Memory);
  EXPECT_EQ(cfg->log.format, "json");
}

// Found in a scale pass: a 5,000-character name passed, and it labels every series of the
// webhook (a Prometheus with label_value_length_limit fails the whole scrape); `sïem` was told
// to use letters.
TEST(ConfigLoaderTest, AWebhookNameIsShortAsciiText) {
  auto long_name =
      load("webhooks:\n  - { name: " + std::string(129, 'a') + ", url: 'http://x/' }\n");
  EXPECT_NE(first_error(long_name).find("test.yaml:2:13: webhooks[0].name: at most 128 characters"),
            std::string::npos)
      << first_error(long_name);
  EXPECT_TRUE(load("webhooks:\n  - { name: " + std::string(128, 'a') + ", url: 'http://x/' }\n"));
  auto accented = load(
      "webhooks:\n  - { name: s\xC3\xAF"
      "em, url: 'http://x/' }\n");
  EXPECT_NE(first_error(accented).find("use ASCII letters"), std::string::npos)
      << first_error(accented);
}

TEST(ConfigLoaderTest, UnknownKeyReportedAtItsPosition) {
  auto cfg = load("bus:\n  bind: tcp://127.0.0.1:1\n  bnid: x\n");
  EXPECT_EQ(first_error(cfg).substr(0, 16), "test.yaml:3:3: u");
  EXPECT_NE(first_error(cfg).find("unknown key 'bnid' in bus"), std::string::npos);
  auto top = load("webhook: []\n");
  EXPECT_NE(first_error(top).find("test.yaml:1:1: unknown key 'webhook'"), std::string::npos);
  // The seed design's `extensions:` is a known key too (the hint left it out).
  auto alias = load("extension: {}\n");
  EXPECT_NE(first_error(alias).find("admin, bus, extensions, hooks"), std::string::npos)
      << first_error(alias);
  // Optional sections are in the hint too, set or not.
  auto typo = load("webhooks:\n  - name: a\n    url: https://x/\n    tsl: {}\n");
  EXPECT_NE(first_error(typo).find("tls, url)"), std::string::npos) << first_error(typo);
}

// Found in review: yaml-cpp keeps both copies of a repeated key and the first one won, so a
// second `webhooks:` block (or a second `secret:`) vanished without a word.
TEST(ConfigLoaderTest, DuplicateKeysAreErrorsAtTheSecondOne) {
  auto top = load(
      "webhooks:\n  - {name: a, url: \"http://x/\"}\nwebhooks:\n  - {name: b, url: "
      "\"http://y/\"}\n");
  EXPECT_EQ(first_error(top),
            "test.yaml:3:1: duplicate key 'webhooks' in config (first at line 1)");
  auto nested = load("webhooks:\n  - name: a\n    url: \"http://x/\"\n    url: \"http://y/\"\n");
  EXPECT_EQ(first_error(nested),
            "test.yaml:4:5: duplicate key 'url' in webhooks[0] (first at line 3)");
  auto headers =
      load("webhooks:\n  - name: a\n    url: \"http://x/\"\n    headers: { X-A: 1, X-A: 2 }\n");
  EXPECT_NE(first_error(headers).find("test.yaml:4:24: duplicate key 'X-A' in webhooks[0].headers"),
            std::string::npos)
      << first_error(headers);
}

TEST(ConfigLoaderTest, SyntaxErrorHasLineAndColumn) {
  auto cfg = load("bus:\n  bind: [unclosed\nhooks: {}\n");
  std::string e = first_error(cfg);
  EXPECT_EQ(e.rfind("test.yaml:", 0), 0u) << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  EXPECT_NE(e.find(":3:"), std::string::npos) << e;
}

TEST(ConfigLoaderTest, TypeErrorsPointAtTheValue) {
  auto cfg = load("hooks:\n  default_timeout_ms: soon\n");
  EXPECT_EQ(first_error(cfg),
            "test.yaml:2:23: hooks.default_timeout_ms: expected an integer, got 'soon'");
}

TEST(ConfigLoaderTest, WebhookValidation) {
  auto cfg = load(R"(webhooks:
  - name: a
    url: ftp://x
  - name: a
    url: http://ok/
  - url: http://no-name/
)");
  ASSERT_FALSE(cfg);
  std::string all;
  for (const auto& d : cfg.error()) all += d.str() + "\n";
  EXPECT_NE(all.find("test.yaml:3:10: webhooks[0].url: must start with http"), std::string::npos)
      << all;
  EXPECT_NE(all.find("webhook name 'a' is used twice"), std::string::npos) << all;
  EXPECT_NE(all.find("webhooks[2]: `name` is required"), std::string::npos) << all;
  // An item that is not a mapping is said to be that, once: not also each key it lacks.
  auto scalar_item = load("webhooks:\n  - just-a-string\n");
  ASSERT_FALSE(scalar_item);
  ASSERT_EQ(scalar_item.error().size(), 1u) << scalar_item.error().back().str();
  EXPECT_EQ(scalar_item.error()[0].str(), "test.yaml:2:5: webhooks[0] must be a mapping");
  // So in the seed design's spelling, where two such items also shared a made-up name.
  auto scalar_hooks = load("extensions:\n  webhooks:\n    - one\n    - two\n");
  ASSERT_FALSE(scalar_hooks);
  ASSERT_EQ(scalar_hooks.error().size(), 2u) << scalar_hooks.error().back().str();
  EXPECT_EQ(scalar_hooks.error()[1].str(),
            "test.yaml:4:7: extensions.webhooks[1] must be a mapping");
}

TEST(ConfigLoaderTest, HttpClientIsAutoOrLibcurl) {
  auto cfg = load(R"(webhooks:
  - { name: a, url: "http://a/" }
  - { name: b, url: "http://b/", http_client: libcurl }
)");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->webhooks[0].http_client, WebhookConfig::HttpClient::Auto);
  EXPECT_EQ(cfg->webhooks[1].http_client, WebhookConfig::HttpClient::Libcurl);
  EXPECT_EQ(first_error(load(R"(webhooks:
  - { name: a, url: "http://a/", http_client: curl }
)")),
            "test.yaml:2:47: webhooks[0].http_client: expected auto or libcurl, got 'curl'");
}

// tls: what an https:// webhook trusts and which certificate it shows. Paths resolve against the
// config's folder; there is no switch that turns verification off.
TEST(ConfigLoaderTest, TlsSettingsForHttpsWebhooks) {
  char folder[] = "/tmp/hookgate-tls-config-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::string dir = folder;
  for (const char* name : {"ca.pem", "client.pem", "client.key"})
    std::ofstream(dir + "/" + name) << "PEM\n";
  auto load_in_dir = [&](const std::string& tls, const std::string& url = "https://siem/") {
    return load_config_text(
        "webhooks:\n  - name: siem\n    url: " + url + "\n    tls: " + tls + "\n", "test.yaml",
        dir);
  };
  auto cfg = load_in_dir("{ ca_file: ca.pem, cert_file: client.pem, key_file: client.key }");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->webhooks[0].tls.ca_file, dir + "/ca.pem");
  EXPECT_EQ(cfg->webhooks[0].tls.cert_file, dir + "/client.pem");
  EXPECT_EQ(cfg->webhooks[0].tls.key_file, dir + "/client.key");

  EXPECT_EQ(first_error(load_in_dir("{ ca_file: ca.pem }", "http://siem/")),
            "test.yaml:4:10: webhooks[0].tls: applies to https:// URLs only");
  EXPECT_EQ(first_error(load_in_dir("{ cert_file: client.pem }")),
            "test.yaml:4:10: webhooks[0].tls: cert_file and key_file go together");
  EXPECT_EQ(first_error(load_in_dir("{ ca_file: missing.pem }")),
            "test.yaml:4:21: webhooks[0].tls.ca_file: cannot read " + dir + "/missing.pem");
  EXPECT_NE(first_error(load_in_dir("{ verify: false }")).find("verify"), std::string::npos);
  EXPECT_EQ(first_error(load_in_dir("{ key_password: s3cret-phrase }")),
            "test.yaml:4:26: webhooks[0].tls.key_password: there is no key_file to unlock");
  std::filesystem::remove_all(dir);
}

TEST(ConfigLoaderTest, HecHostFieldIsADottedPath) {
  auto cfg = load(R"(webhooks:
  - { name: siem, url: "http://s/", body: splunk_hec, hec: { host_field: source } }
  - { name: plain, url: "http://p/", body: splunk_hec }
)");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->webhooks[0].hec_host_field, "source");
  EXPECT_EQ(cfg->webhooks[1].hec_host_field, "data.host");
  EXPECT_EQ(first_error(load(R"(webhooks:
  - { name: siem, url: "http://s/", body: splunk_hec, hec: { host_field: "data..host" } }
)")),
            "test.yaml:2:74: webhooks[0].hec.host_field: expected a dotted field path such as "
            "data.host or source");
}

// bus.curve: server mode (bind, allow-list) or client mode (server_key: connect to a CURVE proxy).
TEST(ConfigLoaderTest, CurveServerOrClientMode) {
  auto client = load(
      "bus:\n  connect: [tcp://proxy:5557]\n"
      "  curve: { enabled: true, server_key: keys/proxy.key.pub, secret_key_file: gw.key }\n");
  ASSERT_TRUE(client.ok()) << first_error(client);
  EXPECT_TRUE(client.value().bus.curve.client_mode());
  EXPECT_EQ(client.value().bus.curve.server_key, "/etc/hg/keys/proxy.key.pub");
  auto inline_key = load(
      "bus:\n  connect: [tcp://proxy:5557]\n"
      "  curve: { enabled: true, server_key: \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\", "
      "secret_key_file: gw.key }\n");
  ASSERT_TRUE(inline_key.ok()) << first_error(inline_key);
  EXPECT_EQ(inline_key.value().bus.curve.server_key, "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
  auto bound = load(
      "bus:\n  bind: tcp://127.0.0.1:5556\n"
      "  curve: { enabled: true, server_key: proxy.pub, secret_key_file: gw.key }\n");
  EXPECT_NE(first_error(bound).find("use bus.connect, not bus.bind"), std::string::npos)
      << first_error(bound);
  auto both = load(
      "bus:\n  connect: [tcp://proxy:5557]\n"
      "  curve: { enabled: true, server_key: p.pub, secret_key_file: g.key, allowed_clients: c "
      "}\n");
  EXPECT_NE(first_error(both).find("allowed_clients is for a CURVE server"), std::string::npos)
      << first_error(both);
  auto server = load("bus:\n  curve: { enabled: true, secret_key_file: s.key }\n");
  EXPECT_NE(first_error(server).find("needs secret_key_file and allowed_clients"),
            std::string::npos)
      << first_error(server);
}

// Found in an exploratory run: a gateway whose topics are all reserved receives nothing.
TEST(ConfigLoaderTest, TopicsThatTakeOnlyReservedTypesAreAnError) {
  EXPECT_NE(first_error(load("bus: { topics: [\"hookgate.\", hookgate.delivery] }\n"))
                .find("bus.topics takes only hookgate.* types"),
            std::string::npos);
  EXPECT_TRUE(load("bus: { topics: [\"hookgate.\", auth.] }\n"));
  EXPECT_TRUE(load("bus: { topics: [hook] }\n"));
}

// Found in a publisher's test: `topics: ["auth.*"]` subscribed to the literal prefix, so no
// auth.failure arrived, and `check` said ok.
TEST(ConfigLoaderTest, APatternInTopicsIsAnError) {
  EXPECT_EQ(first_error(load("bus:\n  topics: [\"auth.*\"]\n")),
            "test.yaml:2:12: bus.topics: 'auth.*' is a pattern, but topics are prefixes of event "
            "types (ZeroMQ subscriptions): write 'auth.' for the types it means");
  // Found in a config torture pass: a ${VAR}'s value was repeated in the error.
  setenv("HG_TEST_TOPIC", "SuperSecretValue12345*", 1);
  const std::string from_variable = first_error(load("bus:\n  topics: [\"${HG_TEST_TOPIC}\"]\n"));
  unsetenv("HG_TEST_TOPIC");
  EXPECT_NE(from_variable.find("'${HG_TEST_TOPIC}' is a pattern"), std::string::npos)
      << from_variable;
  EXPECT_EQ(from_variable.find("SuperSecret"), std::string::npos) << from_variable;
  EXPECT_NE(first_error(load("bus:\n  topics: [\"*\"]\n")).find("([\"\"] is every type)"),
            std::string::npos);
  EXPECT_TRUE(load("bus:\n  topics: [auth., user.created]\n"));
}

// Found in an exploratory run: keys without `enabled: true` were ignored, so a bus meant to be
// locked ran in plaintext and `check` said ok.
TEST(ConfigLoaderTest, CurveKeysWithoutEnabledAreAnError) {
  EXPECT_EQ(first_error(load("bus:\n  curve:\n    secret_key_file: s.key\n"
                             "    allowed_clients: clients\n")),
            "test.yaml:3:22: bus.curve.secret_key_file is set but bus.curve.enabled is not: the "
            "bus would run without CURVE; add `enabled: true` (or `enabled: false` to run "
            "without it on purpose)");
  EXPECT_NE(
      first_error(load("bus:\n  connect: [tcp://proxy:5557]\n  curve: { server_key: p.pub }\n"))
          .find("bus.curve.server_key is set but bus.curve.enabled is not"),
      std::string::npos);
  auto off =
      load("bus:\n  curve: { enabled: false, secret_key_file: s.key, allowed_clients: c }\n");
  ASSERT_TRUE(off) << first_error(off);
  EXPECT_FALSE(off.value().bus.curve.enabled);
}

// Found in review: PRODUCT.md's own `Authorization: "Splunk ${HEC_TOKEN}"` registered only the
// whole header value, so the variable holding the bare token was handed to every hook and a
// hook's `env >&2` put it in the log unredacted.
TEST(ConfigLoaderTest, AVariableThatIsPartOfASecretHeaderIsASecretToo) {
  setenv("HG_TEST_HEC_TOKEN", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 1);
  setenv("HG_TEST_HEC_REGION", "eu", 1);  // too short to count as a secret
  auto cfg = load(
      "webhooks:\n  - name: siem\n    url: https://splunk-${HG_TEST_HEC_REGION}.example/\n"
      "    headers: { Authorization: \"Splunk ${HG_TEST_HEC_TOKEN}\" }\n");
  unsetenv("HG_TEST_HEC_TOKEN");
  unsetenv("HG_TEST_HEC_REGION");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_TRUE(holds_secret("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"));
  EXPECT_EQ(redact_secrets("token=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "token=[REDACTED]");
  EXPECT_FALSE(holds_secret("eu"));
  // Only what the config put into a secret counts: an unrelated variable of the same text does
  // not make ordinary words secrets (it used to be any 8+ character variable found inside one).
  setenv("HG_TEST_SPLUNK_USER", "hookgate-svc", 1);
  setenv("HG_TEST_SPLUNK_PASS", "pa55-w0rd-for-hec", 1);
  setenv("HG_TEST_UNRELATED", "w0rd-for-hec", 1);
  auto basic = load(
      "webhooks:\n  - name: siem\n    url: https://splunk-hec.example/\n"
      "    headers: { Authorization: \"Basic ${HG_TEST_SPLUNK_USER}:${HG_TEST_SPLUNK_PASS}\" }\n");
  unsetenv("HG_TEST_SPLUNK_USER");
  unsetenv("HG_TEST_SPLUNK_PASS");
  unsetenv("HG_TEST_UNRELATED");
  ASSERT_TRUE(basic) << first_error(basic);
  EXPECT_TRUE(holds_secret("pa55-w0rd-for-hec"));
  EXPECT_FALSE(holds_secret("w0rd-for-hec"));
}

// Found in a security pass: a collector that authenticates by URL (HEC's ?token=, a secret path,
// user:pass@) had its credential in every hook's environment, and so did headers whose names the
// word list missed (X-Auth, X-Api-Pass). A ${VAR} naming the host stays ordinary text.
TEST(ConfigLoaderTest, AUrlsCredentialsAreSecrets) {
  const std::vector<std::pair<const char*, const char*>> vars = {
      {"HG_T_URL_TOKEN", "urltok-1111-2222-3333"},
      {"HG_T_URL_PASS", "urlpass-4444-5555"},
      {"HG_T_URL_HOST", "collector.internal.example"},
      {"HG_T_URL_PATH", "ZaVnC4dhaV2-secret-path"},
      {"HG_T_XAUTH", "xauth-value-6666"},
      {"HG_T_XPASS", "xpass-value-7777"},
      {"HG_T_WHOLE_URL", "HTTPS://hooks.slack.example/services/T0/B0/whole-url-path-9999"}};
  for (const auto& [name, value] : vars) setenv(name, value, 1);
  auto cfg = load(
      "webhooks:\n"
      "  - { name: hec, events: ['*'], url: 'https://${HG_T_URL_HOST}:8088/c?channel=chan-0000-1111"
      "&token=${HG_T_URL_TOKEN}' }\n"
      "  - { name: basic, events: ['*'], url: 'https://svc:${HG_T_URL_PASS}@${HG_T_URL_HOST}/x' }\n"
      "  - { name: sumo, events: ['*'], url: "
      "'https://sumo.example/receiver/v1/http/${HG_T_URL_PATH}' }\n"
      "  - { name: literal, events: ['*'], url: 'https://k.example/?api_key=literal-key-8888' }\n"
      "  - name: hdr\n    events: ['*']\n    url: https://h.example/\n"
      "    headers: { X-Auth: '${HG_T_XAUTH}', X-Api-Pass: '${HG_T_XPASS}' }\n"
      "  - { name: short, events: ['*'], url: 'https://s.example/', secret: abc }\n"
      "  - { name: whole, events: ['*'], url: '${HG_T_WHOLE_URL}' }\n"
      "  - name: words\n    events: ['*']\n    url: 'https://hookgate@w.example/?passive=true'\n"
      "    headers: { X-Bypass-Cache: 'bypass-cache-1', Author: 'author-name-2' }\n");
  for (const auto& [name, value] : vars) unsetenv(name);
  ASSERT_TRUE(cfg) << first_error(cfg);
  for (const char* secret :
       {"urltok-1111-2222-3333", "urlpass-4444-5555", "ZaVnC4dhaV2-secret-path", "literal-key-8888",
        "xauth-value-6666", "xpass-value-7777", "abc"})
    EXPECT_TRUE(holds_secret(secret)) << secret;
  // A URL held whole in one ${VAR} (its secret path), matched as written (its scheme upper-case).
  EXPECT_TRUE(holds_secret("HTTPS://hooks.slack.example/services/T0/B0/whole-url-path-9999"));
  // Names are matched by whole words, and a bare user name is no token.
  for (const char* ordinary : {"true", "bypass-cache-1", "author-name-2", "hookgate"})
    EXPECT_FALSE(holds_secret(ordinary)) << ordinary;
  EXPECT_FALSE(holds_secret("collector.internal.example"));  // where, not a credential
  EXPECT_FALSE(holds_secret("chan-0000-1111"));              // a parameter not named like one
  EXPECT_EQ(
      redact_secrets("to collector.internal.example with abc"),
      "to collector.internal.example with abc");  // too short to redact, still kept from hooks
  EXPECT_EQ(redact_secrets("token urltok-1111-2222-3333"), "token [REDACTED]");
}

// Found in review: secrets were redacted in text order, so a registered part of a longer secret
// went first and left the rest of it in the line; and a short ${VAR} part (an environment name)
// blanked that word everywhere in the logs.
TEST(ConfigLoaderTest, ALongerSecretIsRedactedWholeAndShortPartsAreNotSecrets) {
  setenv("HG_TEST_KEY_HEAD", "aaaa1111bbbb2222", 1);
  setenv("HG_TEST_KEY_TAIL", "z9", 1);
  setenv("HG_TEST_ENV", "prodlike", 1);  // 8: a part long enough to count
  setenv("HG_TEST_SHORT_ENV", "stage", 1);
  auto cfg = load(
      "webhooks:\n  - name: siem-stage\n    url: https://siem.example/\n"
      "    headers: { X-Api-Key: \"${HG_TEST_KEY_HEAD}${HG_TEST_KEY_TAIL}\", "
      "Authorization: \"${HG_TEST_SHORT_ENV}-${HG_TEST_ENV}-key\" }\n");
  for (const char* name :
       {"HG_TEST_KEY_HEAD", "HG_TEST_KEY_TAIL", "HG_TEST_ENV", "HG_TEST_SHORT_ENV"})
    unsetenv(name);
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(redact_secrets("key aaaa1111bbbb2222z9 sent"), "key [REDACTED] sent");
  EXPECT_EQ(redact_secrets("webhook siem-stage"), "webhook siem-stage");
  EXPECT_EQ(redact_secrets("auth stage-prodlike-key"), "auth [REDACTED]");
}

// Found in review: these passed `hookgate check` and then failed (or worse, silently changed
// behaviour) only when `run` used them.
TEST(ConfigLoaderTest, SettingsRunWouldRefuseAreErrorsAtTheirPosition) {
  setenv("HG_TEST_EMPTY_TOKEN", "", 1);
  EXPECT_EQ(first_error(load("admin:\n  token: ${HG_TEST_EMPTY_TOKEN}\n"))
                .rfind("test.yaml:2:10: admin.token is empty", 0),
            0u)
      << first_error(load("admin:\n  token: ${HG_TEST_EMPTY_TOKEN}\n"));
  unsetenv("HG_TEST_EMPTY_TOKEN");
  EXPECT_NE(first_error(load("admin: { listen: \"gw1.internal:9464\" }\n"))
                .find("admin.listen: expected ADDRESS:PORT"),
            std::string::npos);
  for (const char* ok : {"127.0.0.1:0", "[::1]:9464", "localhost:9464", "*:9464", ":9464"})
    EXPECT_TRUE(load(std::string("admin: { listen: \"") + ok + "\" }\n")) << ok;
  EXPECT_NE(first_error(load("bus: { bind: \"127.0.0.1:5556\" }\n"))
                .find("bus.bind: expected a ZeroMQ endpoint"),
            std::string::npos);
  EXPECT_NE(first_error(load("bus: { connect: [\"tcp://proxy:5557\", \"proxy:5558\"] }\n"))
                .find("bus.connect: expected a ZeroMQ endpoint"),
            std::string::npos);
  EXPECT_TRUE(load("bus: { bind: \"ipc:///run/hookgate/bus\" }\n"));
  EXPECT_NE(first_error(load("hooks: { observer_threads: 100000 }\n"))
                .find("hooks.observer_threads: expected 1 up to 256"),
            std::string::npos);
}

TEST(ConfigLoaderTest, UnsetVariableIsAnErrorAndSecretsStayOut) {
  unsetenv("HG_DOES_NOT_EXIST");
  auto cfg = load("webhooks:\n  - name: a\n    url: http://x/\n    secret: ${HG_DOES_NOT_EXIST}\n");
  EXPECT_NE(first_error(cfg).find("environment variable HG_DOES_NOT_EXIST is not set"),
            std::string::npos);
  setenv("HG_SECRET_X", "very-secret-value", 1);
  auto bad = load(
      "webhooks:\n  - name: a\n    url: http://x/\n    secret: ${HG_SECRET_X}\n    retry: 5\n");
  ASSERT_FALSE(bad);
  for (const auto& d : bad.error()) EXPECT_EQ(d.str().find("very-secret-value"), std::string::npos);
}

TEST(ConfigLoaderTest, AnEmptySecretIsAnErrorNotUnsignedDelivery) {
  setenv("HG_EMPTY_SECRET", "", 1);
  auto cfg = load("webhooks:\n  - name: a\n    url: http://x/\n    secret: ${HG_EMPTY_SECRET}\n");
  EXPECT_EQ(first_error(cfg),
            "test.yaml:4:13: webhooks[0]: a secret is empty (an unset or empty ${VAR}?); leave the "
            "key out to send unsigned");
  auto alias = load(
      "extensions:\n  webhooks:\n    - { hook: a, url: \"http://x/\", secret: "
      "\"${HG_EMPTY_SECRET}\" }\n");
  EXPECT_NE(first_error(alias).find("a secret is empty"), std::string::npos) << first_error(alias);
  // No secret key at all is the way to send unsigned.
  auto unsigned_ok = load("webhooks:\n  - name: a\n    url: http://x/\n");
  ASSERT_TRUE(unsigned_ok) << first_error(unsigned_ok);
  EXPECT_TRUE(unsigned_ok->webhooks[0].secrets.empty());
}

// One error for an unset ${VAR} in a secret (not a second about the empty secret it leaves); a
// webhook repeated through a YAML alias named by its index (an alias has its anchor's position);
// an empty list item said to be one (yaml-cpp places it at the next token, not at its `-`).
TEST(ConfigLoaderTest, ErrorsAreSaidOnceAndWhereTheirPositionIsWeakTheySayWhat) {
  auto dash = load("webhooks:\n  -\n  - name: a\n    url: http://x/\n");
  ASSERT_FALSE(dash);
  ASSERT_EQ(dash.error().size(), 1u) << dash.error().back().str();
  EXPECT_EQ(dash.error()[0].str(),
            "test.yaml:3:3: webhooks[0] is empty: a `-` with nothing after it, just before here "
            "(remove it, or indent the webhook's keys under it)");
  // A list where one secret goes is said to be one, without "a secret is empty" after it (found in
  // an exploratory run).
  auto listed = load("webhooks:\n  - name: a\n    url: http://x/\n    secret: [whsec_a]\n");
  ASSERT_FALSE(listed);
  ASSERT_EQ(listed.error().size(), 1u) << listed.error().back().str();
  EXPECT_EQ(listed.error()[0].str(), "test.yaml:4:13: webhooks[0].secret: expected a string");
  unsetenv("HG_DOES_NOT_EXIST");
  for (const char* secret :
       {"secret: ${HG_DOES_NOT_EXIST}", "secrets: [whsec_a, \"${HG_DOES_NOT_EXIST}\"]"}) {
    auto unset =
        load(std::string("webhooks:\n  - name: a\n    url: http://x/\n    ") + secret + "\n");
    ASSERT_FALSE(unset);
    ASSERT_EQ(unset.error().size(), 1u) << secret << ": " << unset.error().back().str();
    EXPECT_NE(unset.error()[0].message.find("HG_DOES_NOT_EXIST is not set"), std::string::npos);
  }
  // Labels are the file's: an empty item still counts, and extensions.webhooks are named so.
  auto shifted = load(
      "webhooks:\n  -\n  - name: a\n    url: http://x/\n  - name: a\n    url: "
      "http://y/\n");
  ASSERT_FALSE(shifted);
  ASSERT_EQ(shifted.error().size(), 2u);
  EXPECT_EQ(shifted.error()[1].str(),
            "test.yaml:5:5: webhooks[2]: webhook name 'a' is used twice (first by webhooks[1])");
  auto extensions = load(
      "extensions:\n  webhooks:\n    - { hook: a, url: \"http://x/\" }\n    - { hook: a, url: "
      "\"http://x/\" }\n");
  EXPECT_NE(first_error(extensions).find("extensions.webhooks[1]: webhook name 'extensions-a-"),
            std::string::npos)
      << first_error(extensions);
  EXPECT_NE(first_error(extensions).find("used twice (first by extensions.webhooks[0])"),
            std::string::npos)
      << first_error(extensions);
  auto alias = load(
      "webhooks:\n  - &hook\n    name: a\n    url: http://x/\n  - name: b\n    url: "
      "http://y/\n  - *hook\n");
  EXPECT_EQ(first_error(alias),
            "test.yaml:2:5: webhooks[2]: webhook name 'a' is used twice (first by webhooks[0])");
}

// YAML merge keys, as an operator used to Compose or Kubernetes writes them, with `x-` keys at
// the top to hold the anchors (yaml-cpp reads `<<` as a plain key, which was "unknown").
TEST(ConfigLoaderTest, MergeKeysFillInWhatAWebhookDoesNotSet) {
  auto cfg = load(
      "x-base: &base\n"
      "  timeout_ms: 3000\n"
      "  retry: {max_attempts: 3}\n"
      "x-signed: &signed\n"
      "  <<: *base\n"
      "  secret: whsec_b\n"
      "  timeout_ms: 2000\n"
      "webhooks:\n"
      "  - name: a\n"
      "    url: http://x/\n"
      "    timeout_ms: 1000\n"
      "    <<: [*signed, *base]\n"
      "  - name: b\n"
      "    url: http://y/\n"
      "    <<: [*base, *signed]\n"
      "  - name: c\n"
      "    url: http://z/\n"
      "    <<: *base\n");
  ASSERT_TRUE(cfg) << first_error(cfg);
  ASSERT_EQ(cfg->webhooks.size(), 3u);
  // Its own key first, then the merged maps in order; a base that merges another has it.
  EXPECT_EQ(cfg->webhooks[0].timeout_ms, 1000);
  EXPECT_EQ(cfg->webhooks[0].secrets, std::vector<std::string>{"whsec_b"});
  EXPECT_EQ(cfg->webhooks[0].retry.max_attempts, 3);
  EXPECT_EQ(cfg->webhooks[1].timeout_ms, 3000);
  EXPECT_EQ(cfg->webhooks[1].secrets, std::vector<std::string>{"whsec_b"});
  EXPECT_EQ(cfg->webhooks[2].timeout_ms, 3000);
  EXPECT_TRUE(cfg->webhooks[2].secrets.empty());
  EXPECT_EQ(cfg->webhooks[2].url, "http://z/");
}

TEST(ConfigLoaderTest, MergeKeyMistakesAreReportedWhereTheyAreWritten) {
  // A typo in a base is reported at the base, once per mapping it is merged into.
  auto typo = load(
      "x-base: &base\n  timout_ms: 3000\nwebhooks:\n  - name: a\n    url: http://x/\n"
      "    <<: *base\n");
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error()[0].str().substr(0, 54),
            "test.yaml:2:3: unknown key 'timout_ms' in webhooks[0] ");
  // One line for a mistake that reads the same wherever it was merged.
  unsetenv("HG_DOES_NOT_EXIST");
  auto unset = load(
      "x-base: &base\n  secret: ${HG_DOES_NOT_EXIST}\nwebhooks:\n  - name: a\n    url: "
      "http://x/\n    <<: *base\n  - name: b\n    url: http://y/\n    <<: *base\n");
  ASSERT_FALSE(unset);
  ASSERT_EQ(unset.error().size(), 1u) << unset.error().back().str();
  EXPECT_EQ(unset.error()[0].where.line, 2);
  // Only a mapping, or a list of them, can be merged: said at the `<<` (an alias would point at
  // its anchor), or at the list item, once however often the mapping is reached.
  const std::string not_a_map =
      ": a merge key `<<` takes a mapping or a list of mappings, such as `<<: *defaults` (quote "
      "it, \"<<\", for a key of that name)";
  for (auto [value, column] :
       {std::pair{"scalar", 5}, {"*text", 5}, {"[]", 5}, {"[*base, 3]", 17}}) {
    auto bad = load(std::string("x-base: &base\n  timeout_ms: 3000\nx-text: &text hi\nwebhooks:\n"
                                "  - &w\n    name: a\n    url: http://x/\n    <<: ") +
                    value + "\n  - *w\n");
    ASSERT_FALSE(bad) << value;
    ASSERT_EQ(bad.error().size(), 1u) << value << ": " << bad.error().back().str();
    EXPECT_EQ(bad.error()[0].str(), "test.yaml:8:" + std::to_string(column) + not_a_map) << value;
  }
  // A key written twice in a base is a duplicate where it is written, merged or not; so is a
  // second `<<` (`<<: [*a, *b]` merges several).
  auto twice = load(
      "x-base: &base\n  timeout_ms: 3000\n  timeout_ms: 4000\nwebhooks:\n  - name: a\n"
      "    url: http://x/\n    <<: *base\n");
  EXPECT_EQ(first_error(twice),
            "test.yaml:3:3: duplicate key 'timeout_ms' in webhooks[0] (first at line 2)");
  EXPECT_EQ(first_error(load("x-a: &a {timeout_ms: 1}\nwebhooks:\n  - name: a\n    url: "
                             "http://x/\n    <<: *a\n    <<: *a\n")),
            "test.yaml:6:5: a second merge key `<<` in one mapping (merge several with `<<: [*a, "
            "*b]`)");
  // The tag written out is a merge key too.
  auto tagged = load(
      "x-a: &a {timeout_ms: 1234}\nwebhooks:\n  - name: a\n    url: http://x/\n    !!merge <<: "
      "*a\n");
  ASSERT_TRUE(tagged) << first_error(tagged);
  EXPECT_EQ(tagged->webhooks[0].timeout_ms, 1234);
  // Quoted, it is a key like any other; and `x-` keys are the operator's at the top only.
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    \"<<\": {}\n"))
                .substr(0, 44),
            "test.yaml:4:5: unknown key '<<' in webhooks[");
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    x-note: hi\n"))
                .substr(0, 48),
            "test.yaml:4:5: unknown key 'x-note' in webhooks[");
  auto only_own = load("x-note: anything\nx-list: [1, 2]\n");
  ASSERT_TRUE(only_own);
  // A mapping used as a key shares its position with the mapping that holds it; its merge is
  // still resolved (found in review: it was skipped as already visited).
  for (const char* text : {"x-a: &a {url: \"http://x/\"}\nx-keys:\n  &k {<<: *a, name: k}: 1\n"
                           "webhooks:\n  - *k\n",
                           "x-a: &a {url: \"http://x/\"}\nx-l: [&k {<<: *a, name: k}: 1]\n"
                           "webhooks:\n  - *k\n"}) {
    auto keyed = load(text);
    ASSERT_TRUE(keyed) << text << first_error(keyed);
    EXPECT_EQ(keyed->webhooks[0].url, "http://x/");
  }
  // Merge errors come in file order, each once, at the `<<` when the bad item is an alias.
  auto twice_bad = load(
      "x-text: &text hi\nwebhooks:\n  - name: a\n    url: http://x/\n    <<: [*text]\n"
      "  - name: b\n    url: http://x/\n    <<: [*text]\nx-p:\n  <<: 5\n  c:\n    <<: 6\n");
  ASSERT_FALSE(twice_bad);
  std::vector<std::string> where;
  for (const auto& d : twice_bad.error())
    where.push_back(std::to_string(d.where.line) + ":" + std::to_string(d.where.column));
  EXPECT_EQ(where, (std::vector<std::string>{"5:5", "8:5", "10:3", "12:5"}));
  // A file cut off after its anchors holds no settings (a reload keeps the running config).
  EXPECT_TRUE(only_own->holds_no_settings);
  EXPECT_FALSE(load("x-note: anything\nwebhooks: []\n")->holds_no_settings);
}

// Aliases can make the tree far deeper and wider than the text; merging walks each node once.
TEST(ConfigLoaderTest, MergeKeysInADeeplyAliasedFileResolveEachNodeOnce) {
  // 70 levels, each the last one 400 lists deep: expanded, 28,000 levels, which a recursive
  // walk did not survive (found in review, under ASan).
  std::string deep = "x-0: &a0 {<<: {k: v}}\n";
  for (int level = 1; level < 70; ++level)
    deep += "x-" + std::to_string(level) + ": &a" + std::to_string(level) + " " +
            std::string(400, '[') + "*a" + std::to_string(level - 1) + std::string(400, ']') + "\n";
  EXPECT_TRUE(load(deep)) << first_error(load(deep));
  // A base with many keys: each merged key was looked up in a scan of the whole mapping, which
  // at this size runs past ctest's timeout (4 minutes at half of it, under ASan).
  std::string wide = "x-a: &a {";
  for (int k = 0; k < 40000; ++k) wide += (k ? ", k" : "k") + std::to_string(k) + ": 1";
  wide += "}\nx-b: {<<: *a}\n";
  EXPECT_TRUE(load(wide));
}

// Connecting twice to one peer would make it deliver every event twice (two pipes).
TEST(ConfigLoaderTest, AConnectEndpointListedTwiceIsAnError) {
  EXPECT_EQ(first_error(load("bus:\n  connect:\n    - tcp://proxy:5557\n    - tcp://other:5557\n"
                             "    - tcp://proxy:5557\n")),
            "test.yaml:5:7: bus.connect lists 'tcp://proxy:5557' twice (each event would arrive "
            "twice)");
  EXPECT_TRUE(load("bus:\n  connect: [tcp://proxy:5557, tcp://other:5557]\n"));
}

// What libzmq refuses at `run` (EINVAL), or takes and never reaches, is an error `check` sees.
TEST(ConfigLoaderTest, TcpEndpointsNeedAPortAndNoSpaces) {
  const std::pair<const char*, const char*> bad[] = {
      {"connect: [\"tcp://127.0.0.1:5557 \"]", "holds a space or line break"},
      {"connect: [tcp://127.0.0.1]", "no port (tcp://HOST:PORT)"},
      {"connect: [tcp://127.0.0.1:99999]", "the port is not a number from 1 to 65535"},
      {"connect: [tcp://127.0.0.1:0]", "the port is not a number from 1 to 65535"},
      {"connect: [\"tcp://127.0.0.1:*\"]", "port * is for bus.bind"},
      {"connect: [tcp://127.0.0.1:55x]", "the port is not a number from 1 to 65535"},
      {"bind: tcp://127.0.0.1", "no port (tcp://HOST:PORT, or tcp://HOST:* for any)"},
      // Found in an exploratory run: `check --config-only` passed these, and `run` refused the
      // first three or started deaf.
      {"connect: [\"tcp://*:5556\"]", "a connection needs the peer's host or address"},
      {"connect: [\"tcp://:5556\"]", "a connection needs the peer's host or address"},
      {"connect: [\"tcp://10.0.0.5:0;*:5556\"]", "a connection needs the peer's host"},
      {"bind: \"udp://127.0.0.1:5556\"", "udp:// is for ZeroMQ's RADIO/DISH sockets"},
      {"bind: inproc://bus", "inproc:// reaches only this process"},
      {"connect: [inproc://bus]", "inproc:// reaches only this process"},
  };
  for (const auto& [bus, why] : bad)
    EXPECT_NE(first_error(load(std::string("bus: { ") + bus + " }\n")).find(why), std::string::npos)
        << bus << ": " << first_error(load(std::string("bus: { ") + bus + " }\n"));
  EXPECT_EQ(first_error(load("bus:\n  connect:\n    - tcp://a:1\n    - tcp://b\n")),
            "test.yaml:4:7: bus.connect: 'tcp://b': no port (tcp://HOST:PORT)");
  for (const char* fine :
       {"bind: \"tcp://*:5556\"", "bind: \"tcp://127.0.0.1:*\"", "bind: \"tcp://[::1]:5556\"",
        "bind: tcp://eth0:5556", "connect: [\"tcp://10.0.0.5:0;10.0.0.1:5557\"]",
        "bind: \"ipc:///run/my bus\""})
    EXPECT_TRUE(load(std::string("bus: { ") + fine + " }\n")) << fine;
}

// The `extensions.webhooks` form has `secret` only: `secrets` and `headers` there used to be
// accepted and then ignored, so the webhook went out unsigned and without its headers.
TEST(ConfigLoaderTest, TheExtensionsFormRefusesKeysItDoesNotHave) {
  for (const char* key : {"secrets: [whsec_a, whsec_b]", "headers: { X-Token: t }"}) {
    auto cfg = load(std::string("extensions:\n  webhooks:\n    - { hook: a, url: \"http://x/\", ") +
                    key + " }\n");
    EXPECT_NE(first_error(cfg).find("unknown key '" + std::string(key).substr(0, 7)),
              std::string::npos)
        << first_error(cfg);
  }
}

TEST(ConfigLoaderTest, EmptyListsAndPathsThatWouldSilentlyDisableSomethingAreRefused) {
  // Every item commented out: not a way to send unsigned.
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    secrets: [\n"
                             "      # ${NEW},\n    ]\n")),
            "test.yaml:4:14: webhooks[0].secrets: the list is empty; leave the key out to send "
            "unsigned");
  setenv("HG_EMPTY_SPOOL", "", 1);
  EXPECT_EQ(first_error(load("spool: { path: \"${HG_EMPTY_SPOOL}\" }\n")),
            "test.yaml:1:16: spool.path is empty (an empty ${VAR}?)");
  EXPECT_TRUE(load("spool: { mode: memory, path: \"\" }\n"));
}

// Pointed at the repeat, which is where the operator looks (not at the first header).
TEST(ConfigLoaderTest, HeaderNamesDifferingOnlyInCaseAreOneHeader) {
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    headers: { "
                             "Authorization: a, authorization: b }\n")),
            "test.yaml:4:34: webhooks[0].headers: 'Authorization' and 'authorization' are one "
            "header (names ignore case)");
  // Once per name, with an exact repeat left to the duplicate-key error.
  auto three =
      load("webhooks:\n  - name: a\n    url: http://x/\n    headers: { X-A: 1, x-a: 2, X-A: 3 }\n");
  ASSERT_FALSE(three);
  std::string all;
  for (const auto& d : three.error()) all += d.str() + "\n";
  EXPECT_EQ(testing::count_occurrences(all, "are one header"), 1u) << all;
  EXPECT_EQ(testing::count_occurrences(all, "duplicate key 'X-A'"), 1u) << all;
}

// Load() reads only the first document: what follows a `---` used to vanish.
TEST(ConfigLoaderTest, ASecondYamlDocumentIsAnError) {
  EXPECT_EQ(first_error(load("log: { level: info }\n---\nwebhooks:\n  - { name: a, url: "
                             "\"http://x/\" }\n")),
            "test.yaml:3:1: a second YAML document (after `---` or `...`): a config is one "
            "document; merge the two");
  EXPECT_TRUE(load("log: { level: info }\n---\n"));  // a trailing separator holds nothing
  EXPECT_TRUE(load("--- # the first document's start\nlog: { level: info }\n...\n# end\n"));
  EXPECT_EQ(first_error(load("log: { level: info }\n--- { webhooks: [] }\n")).substr(0, 13),
            "test.yaml:2:1");
  // Inside a block scalar a line starting with --- is indented: not a marker.
  EXPECT_TRUE(
      load("extensions:\n  maxExecutionTime: 100\nlog:\n  level: info\n"
           "# ---\n"));
}

// Found in review: an empty first document (`---` `---`, or a comment and `...`) was the one
// Load read, so the config after it was dropped and `check` said ok with 0 webhooks.
TEST(ConfigLoaderTest, AConfigAfterAnEmptyFirstDocumentIsASecondDocument) {
  const std::string config = "webhooks:\n  - { name: a, url: \"http://x/\" }\n";
  EXPECT_EQ(first_error(load("---\n---\n" + config)).substr(0, 13), "test.yaml:3:1");
  EXPECT_EQ(first_error(load("# header\n...\n" + config)).substr(0, 13), "test.yaml:3:1");
  EXPECT_EQ(first_error(load("--- # x\n...\n---\n" + config)).substr(0, 13), "test.yaml:4:1");
  auto one = load("%YAML 1.2\n---\n" + config);
  ASSERT_TRUE(one) << first_error(one);
  EXPECT_EQ(one->webhooks.size(), 1u);
}

// Found in review: a byte-order mark made line 1 count as content, so a comment line and then
// `---` read as a second document.
TEST(ConfigLoaderTest, AByteOrderMarkIsNotContent) {
  auto cfg = load("\xEF\xBB\xBF# my config\n---\nwebhooks:\n  - { name: a, url: \"http://x/\" }\n");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->webhooks.size(), 1u);
}

// Found in review: yaml-cpp takes a quote left open at the end of a file as closed there, so
// the rest of the file (here the admin token) became the secret, and `check` said ok.
TEST(ConfigLoaderTest, AQuoteLeftOpenIsAnErrorWhereItOpens) {
  for (const char* quote : {"\"", "'"}) {
    SCOPED_TRACE(quote);
    const std::string text =
        std::string("webhooks:\n  - name: a\n    url: http://x/\n    secret: ") + quote +
        "my-shared-secret\nadmin:\n  token: abc\n";
    EXPECT_EQ(first_error(load(text)),
              "test.yaml:4:13: YAML syntax error: this quoted value is never closed (a closing "
              "quote is missing, so the rest of the file would be part of it)");
    EXPECT_FALSE(load(text.substr(0, text.size() - 1)));  // without the last newline too
    // Left open on the last line, without its newline: at the quote, not at the key (found in
    // review).
    EXPECT_EQ(first_error(load(std::string("log:\n  level: ") + quote + "info")).substr(0, 15),
              "test.yaml:2:10:");
  }
  // A keep-chomping block at the end keeps exactly its own line breaks.
  auto kept = load(
      "webhooks:\n  - name: a\n    url: http://x/\n    body: splunk_hec\n"
      "    hec:\n      sourcetype: |+\n        x\n");
  ASSERT_TRUE(kept) << first_error(kept);
  EXPECT_EQ(kept->webhooks.at(0).hec_sourcetype, "x\n");
  // Other errors at the end of the file are placed at the end of its last line with text (not at
  // the end of document appended, nor on a line past the text: found in review).
  EXPECT_EQ(first_error(load("log: { level: info\n")).substr(0, 15), "test.yaml:1:19:");
  EXPECT_EQ(first_error(load("log: {level: info,\n  format: text\n\n\n")).substr(0, 15),
            "test.yaml:2:15:");
  EXPECT_EQ(first_error(load("log: { level: info\n# the end\n")).substr(0, 15), "test.yaml:1:19:");
  // A closed quote, a block scalar and an explicit end at the end of the file stay fine.
  EXPECT_TRUE(load("log: { level: \"info\" }\n"));
  auto folded = load(
      "webhooks:\n  - name: a\n    url: http://x/\n    headers:\n      X-Note: >-\n"
      "        text\n        more\n");
  ASSERT_TRUE(folded) << first_error(folded);
  EXPECT_EQ(folded->webhooks.at(0).headers.at(0).second, "text more");
  EXPECT_TRUE(load("log: { level: info }\n...\n"));
}

// Found in review: a type error quoted the ${VAR}'s value, which may be a secret.
TEST(ConfigLoaderTest, AValueFromTheEnvironmentIsNotEchoedInAnError) {
  setenv("HG_TEST_NOT_A_NUMBER", "supersecretvalue123", 1);
  const std::string webhook = "webhooks:\n  - name: a\n    url: http://x/\n";
  for (const std::string& text :
       {webhook + "    max_in_flight: ${HG_TEST_NOT_A_NUMBER}\n",
        webhook + "    body: ${HG_TEST_NOT_A_NUMBER}\n",
        std::string("hooks:\n  fail_open: x${HG_TEST_NOT_A_NUMBER}\n"),
        std::string("spool:\n  mode: ${HG_TEST_NOT_A_NUMBER}\n"),
        std::string("admin:\n  listen: ${HG_TEST_NOT_A_NUMBER}\n"),
        // Found in a later review: list items and paths.
        std::string("bus:\n  connect: [\"${HG_TEST_NOT_A_NUMBER}\"]\n"),
        webhook + "    signatures: [\"${HG_TEST_NOT_A_NUMBER}\"]\n",
        std::string("webhooks:\n  - name: a\n    url: https://x/\n"
                    "    tls: { ca_file: \"/x/${HG_TEST_NOT_A_NUMBER}\" }\n")}) {
    const std::string error = first_error(load(text));
    EXPECT_EQ(error.find("supersecretvalue123"), std::string::npos) << error;
    EXPECT_NE(error.find("${HG_TEST_NOT_A_NUMBER}"), std::string::npos) << error;
  }
  // A value written out is still quoted back.
  EXPECT_NE(first_error(load("spool: { mode: fast }\n")).find("got 'fast'"), std::string::npos);
  unsetenv("HG_TEST_NOT_A_NUMBER");
}

// Found in review: `fail_open: # false` (a value commented out) kept the default silently.
TEST(ConfigLoaderTest, AKeyWithoutAValueIsAnError) {
  EXPECT_EQ(first_error(load("hooks:\n  fail_open: # false\n")),
            "test.yaml:2:3: hooks.fail_open: no value (give one, or leave the key out)");
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    max_in_flight:\n")),
            "test.yaml:4:5: webhooks[0].max_in_flight: no value (give one, or leave the key out)");
  EXPECT_FALSE(load("admin:\n  enabled:\n"));
}

// Found in review: `events: [""]` made a webhook that never matched, and `${:-x}` expanded to x.
TEST(ConfigLoaderTest, AnEmptyPatternOrVariableNameIsAnError) {
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    events: [\"\"]\n")),
            "test.yaml:4:13: webhooks[0].events: an empty pattern matches nothing (\"*\" is every "
            "event)");
  EXPECT_EQ(first_error(load("log:\n  level: ${:-info}\n")),
            "test.yaml:2:10: ${...} without a variable name");
}

// Found in an operator's test: yaml-cpp's messages ("illegal map value") said what broke, never
// why; a tab, an indentation off by one and an unquoted ${VAR} in a { } map now get their cause.
TEST(ConfigLoaderTest, ASyntaxErrorSaysItsLikelyCause) {
  EXPECT_EQ(first_error(load("bus:\n\tbind: tcp://127.0.0.1:5999\n")),
            "test.yaml:2:6: YAML syntax error: illegal map value (line 2 is indented with a tab: "
            "YAML indents with spaces only)");
  EXPECT_EQ(first_error(load("bus:\n  bind: tcp://127.0.0.1:5999\n   receive_hwm: 5\n")),
            "test.yaml:3:15: YAML syntax error: illegal map value (check this line's indentation "
            "against the lines above: the keys of one map start in the same column, and a "
            "value's own keys further in)");
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: https://x/\n"
                             "    tls: {key_password: ${TOK}, ca_file: a}\n")),
            "test.yaml:4:26: YAML syntax error: end of map flow not found (inside { } or [ ], "
            "quote a value that holds { } [ ] or a comma, \"${VAR}\" included, and close each "
            "bracket)");
}

// Found in an operator's test: docker-compose's forms read as a variable named "NOPE-def", and the
// hint suggested ${NOPE-def:-default}. Nothing after the name's valid start is quoted (a secret).
TEST(ConfigLoaderTest, AnotherToolsVariableFormIsNamedAsUnsupported) {
  const std::string hint =
      "; hookgate expands ${VAR} and ${VAR:-default} only (VAR: letters, digits and _; $${ is a "
      "literal ${)";
  const std::string tail = " cannot be in a variable name" + hint;
  EXPECT_EQ(first_error(load("log:\n  level: ${HG_NOPE-s3cret}\n")),
            "test.yaml:2:10: ${HG_NOPE...}: '-'" + tail);
  EXPECT_EQ(first_error(load("log:\n  level: ${HG_NOPE:?must be set}\n")),
            "test.yaml:2:10: ${HG_NOPE...}: ':'" + tail);
  EXPECT_EQ(first_error(load("log:\n  level: ${ HG_NOPE }\n")),
            "test.yaml:2:10: ${...}: a space" + tail);
  EXPECT_EQ(first_error(load("log:\n  level: ${1X}\n")),
            "test.yaml:2:10: ${...}: a variable name cannot start with a digit" + hint);
  ::setenv("HG_TEST_LEVEL_9", "debug", 1);
  EXPECT_TRUE(load("log:\n  level: ${HG_TEST_LEVEL_9}\n"));
  ::unsetenv("HG_TEST_LEVEL_9");
}

// Found in review: errors named `timeout_ms` for the `extensions.webhooks` form's `timeout`, and
// a bad initial backoff was reported at max_backoff_ms.
TEST(ConfigLoaderTest, AnErrorPointsAtTheKeyThatIsWrong) {
  EXPECT_EQ(first_error(load("extensions:\n  webhooks:\n    - hook: auth.failure\n"
                             "      url: http://x/\n      timeout: -1\n")),
            "test.yaml:5:16: extensions.webhooks[0].timeout must be positive");
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    retry:\n"
                             "      initial_backoff_ms: 0\n      max_backoff_ms: 100\n"))
                .substr(0, 14),
            "test.yaml:5:27");
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: http://x/\n    retry:\n"
                             "      max_attempts: 3\n      initial_backoff_ms: 7200000\n"))
                .substr(0, 14),
            "test.yaml:6:27");
}

// Found by fuzz_config: yaml-cpp's LoadAll (used for the check above) never returned on this
// malformed input, where Load reports a syntax error or a config. A config must never hang.
TEST(ConfigLoaderTest, MalformedInputThatHungLoadAllReturns) {
  std::ifstream in(
      std::string(HOOKGATE_SOURCE_DIR) + "/tests/fuzz/corpus/config/regression-loadall-hang",
      std::ios::binary);
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  // It returns (ctest's timeout would catch a hang), with the error at its place.
  EXPECT_EQ(first_error(load(text.str())), "test.yaml:3:3: config must be a mapping");
}

// Found in review: after an unclosed quote the error path walked the tree with aliases expanded,
// so `x: &a [*a]` overflowed the stack (a hook file saved so would kill the gateway through its
// watcher), and ten levels of ten aliases took minutes. Aliases are now sized on the parser's
// events, which never expand them.
TEST(ConfigLoaderTest, AliasesThatNeverEndOrExplodeAreErrors) {
  EXPECT_EQ(first_error(load("spool: { mode: memory }\nx: &a [*a]\nlast: \"unclosed\n")),
            "test.yaml:3:7: YAML syntax error: this quoted value is never closed (a closing quote "
            "is missing, so the rest of the file would be part of it)");
  EXPECT_EQ(first_error(load("x: &a [*a]\n")).substr(0, 15), "test.yaml:1:8: ");
  std::string bomb = "a0: &a0 x\n";
  for (int i = 1; i <= 7; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += (j ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  EXPECT_NE(first_error(load(bomb)).find("aliases expand this file to more than 1000000 values"),
            std::string::npos);
  // An alias of a finished node is fine, and read like the node itself.
  auto shared = load(
      "webhooks:\n  - name: a\n    url: http://x/\n    retry: &r { max_attempts: 3 }\n"
      "  - name: b\n    url: http://y/\n    retry: *r\n");
  ASSERT_TRUE(shared) << first_error(shared);
  EXPECT_EQ(shared->webhooks.at(1).retry.max_attempts, 3);
}

// Found in review: a quote left open inside a flow map ({ ... }, PRODUCT.md's own style) was
// reported at 1:1.
TEST(ConfigLoaderTest, AnUnclosedQuoteInAFlowMapIsPlacedWhereItOpens) {
  const std::string line = "    headers: { Authorization: \"Splunk ${HEC_TOKEN} }\n";
  const std::string text = "webhooks:\n  - name: siem\n    url: http://10.0.0.1/x\n" + line;
  const std::string where = "test.yaml:4:" + std::to_string(line.find('"') + 1) + ": YAML";
  EXPECT_EQ(first_error(load(text)).substr(0, where.size()), where);
}

// Found in review: these were read as if they were right.
TEST(ConfigLoaderTest, TagsEmptyHeadersAndAStrayHecBlockAreErrors) {
  const std::string webhook = "webhooks:\n  - name: a\n    url: http://x/\n";
  // A tag is not obeyed: !!binary would have signed with the base64 text.
  EXPECT_EQ(first_error(load(webhook + "    secret: !!binary aGVsbG8=\n")),
            "test.yaml:4:13: webhooks[0].secret: the YAML tag tag:yaml.org,2002:binary is not "
            "supported; write the plain value");
  EXPECT_TRUE(load(webhook + "    secret: !!str plain-text-secret\n"));
  // A headers: block whose entries are commented out sent none (no Authorization).
  EXPECT_EQ(first_error(load(webhook + "    headers:\n    #  Authorization: x\n")),
            "test.yaml:4:5: webhooks[0].headers: no value (give one, or leave the key out)");
  // hec: is for splunk_hec bodies; with another body HEC got CloudEvents and refused each.
  EXPECT_NE(first_error(load(webhook + "    hec: { index: main }\n"))
                .find("webhooks[0].hec: only for body: splunk_hec (this webhook's body is "
                      "'cloudevent')"),
            std::string::npos);
}

// A reload refuses a file with no settings (caught half-written); a start runs the defaults.
TEST(ConfigLoaderTest, AFileWithNoSettingsIsMarked) {
  EXPECT_TRUE(load("")->holds_no_settings);
  EXPECT_TRUE(load("# only a comment\n")->holds_no_settings);
  EXPECT_FALSE(load("webhooks: []\n")->holds_no_settings);
}

TEST(ConfigLoaderTest, ADirectoryIsNotAnEmptyConfig) {
  auto cfg = load_config_file(::testing::TempDir());
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().front().str().find("is a directory, not a config file"), std::string::npos)
      << cfg.error().front().str();
}

// Found in a config torture pass: yaml-cpp read a raw NUL in a plain value as the start of an
// escape (`de<NUL>x62ug` became `debug`), UTF-16 files took the appended end marker into their
// last value, an escaped "\0" cut a path short, and /dev/zero was read until memory ran out.
TEST(ConfigLoaderTest, ConfigFilesAreBoundedUtf8TextWithoutNul) {
  auto raw_nul = load(std::string("log:\n  level: de") + '\0' + "x62ug\n");
  ASSERT_FALSE(raw_nul);
  EXPECT_EQ(first_error(raw_nul).rfind("test.yaml:2:12: a NUL byte", 0), 0u)
      << first_error(raw_nul);
  auto utf16 = load(std::string("\xFF\xFEl\0o\0g\0", 8));
  ASSERT_FALSE(utf16);
  EXPECT_NE(first_error(utf16).find("UTF-16 or UTF-32"), std::string::npos) << first_error(utf16);
  auto escaped_nul = load("spool: { path: \"/tmp/x.db\\0junk\" }\n");
  ASSERT_FALSE(escaped_nul);
  EXPECT_NE(first_error(escaped_nul).find("spool.path: a NUL character"), std::string::npos)
      << first_error(escaped_nul);
  auto deep = load("x: " + std::string(10000, '[') + "\n");
  ASSERT_FALSE(deep);
  EXPECT_NE(first_error(deep).find("nesting far deeper"), std::string::npos) << first_error(deep);
  auto long_number = load("bus: { receive_hwm: " + std::string(100000, '9') + "x }\n");
  ASSERT_FALSE(long_number);
  EXPECT_LT(first_error(long_number).size(), 300u) << "a 100 KB value echoed whole";
  auto endless = load_config_file("/dev/zero");
  ASSERT_FALSE(endless);
  EXPECT_NE(endless.error().front().str().find("larger than 16 MiB"), std::string::npos)
      << endless.error().front().str();
}

// Found in a config torture pass: the header-name case check compared every pair (23 s for
// 20,000 headers under ASan). Still each case-twin is reported once, where it is written.
TEST(ConfigLoaderTest, ManyHeadersAreCheckedInOnePass) {
  std::string yaml = "webhooks:\n  - name: a\n    url: \"http://x/\"\n    headers:\n";
  for (int i = 0; i < 20000; ++i) yaml += "      X-H" + std::to_string(i) + ": v\n";
  yaml += "      x-h7: twin\n";
  auto cfg = load(yaml);
  ASSERT_FALSE(cfg);
  ASSERT_EQ(cfg.error().size(), 1u);
  EXPECT_NE(first_error(cfg).find("'X-H7' and 'x-h7' are one header"), std::string::npos)
      << first_error(cfg);
}

TEST(ConfigLoaderTest, NumbersOutsideTheirRangeAreRefused) {
  // Beyond a double: an overflow would be infinity, and an underflow 0, "no limit".
  for (const char* rate : {"1e400", "1e-400"}) {
    auto cfg =
        load(std::string("webhooks:\n  - { name: a, url: \"http://x/\", rate_limit_per_s: ") +
             rate + " }\n");
    EXPECT_EQ(first_error(cfg), "test.yaml:2:52: webhooks[0].rate_limit_per_s: number out of range")
        << rate;
  }
  for (const char* rate : {"inf", "nan", "-1", "2000000"}) {
    auto cfg =
        load(std::string("webhooks:\n  - { name: a, url: \"http://x/\", rate_limit_per_s: ") +
             rate + " }\n");
    EXPECT_NE(
        first_error(cfg).find("rate_limit_per_s: expected 0 (no limit), or 0.001 up to 1000000"),
        std::string::npos)
        << rate << ": " << first_error(cfg);
  }
  EXPECT_TRUE(load("webhooks:\n  - { name: a, url: \"http://x/\", rate_limit_per_s: 0.5 }\n"));
  EXPECT_EQ(first_error(load("extensions:\n  maxExecutionTime: 0\n")),
            "test.yaml:2:21: extensions.maxExecutionTime must be positive");
  for (const char* listen : {"127.0.0.1:99464", "127.0.0.1:", ":abc", "localhost"}) {
    EXPECT_NE(first_error(load(std::string("admin: { listen: \"") + listen + "\" }\n"))
                  .find("admin.listen: expected ADDRESS:PORT"),
              std::string::npos)
        << listen;
  }
  // Each file's first error, said where the value is written.
  for (const auto& [yaml, error] : std::initializer_list<std::pair<const char*, const char*>>{
           {"spool:\n  retention_ms: -1\n",
            "test.yaml:2:17: spool.retention_ms must not be negative"},
           {"spool:\n  dead_retention_ms: -5\n",
            "test.yaml:2:22: spool.dead_retention_ms must not be negative"},
           {"spool:\n  retention_max_bytes: -5\n",
            "test.yaml:2:24: spool.retention_max_bytes must not be negative"},
           {"spool: { max_bytes: 9000000 TiB }\n",
            "test.yaml:1:21: spool.max_bytes: out of range, got '9000000 TiB'"},
           {"spool: { max_bytes: -1 MiB }\n",
            "test.yaml:1:21: spool.max_bytes must not be negative"},
           {"spool: { max_bytes: 65536 }\n",
            "test.yaml:1:21: spool.max_bytes: at least 1048576 (1 MiB), or 0 for no bound"},
       })
    EXPECT_EQ(first_error(load(yaml)), error) << yaml;
  auto capped = load("spool: { retention_max_bytes: 10737418240 }\n");
  ASSERT_TRUE(capped) << first_error(capped);
  EXPECT_EQ(capped->spool.retention_max_bytes, 10737418240);
  // Sizes take a unit, each spelling with one meaning.
  auto sized = load(
      "bus: { max_message_bytes: 4 MiB }\nspool: { max_bytes: 2GiB, retention_max_bytes: 10 GB "
      "}\n");
  ASSERT_TRUE(sized) << first_error(sized);
  EXPECT_EQ(sized->bus.max_message_bytes, 4 << 20);
  EXPECT_EQ(sized->spool.max_bytes, int64_t{2} << 30);
  EXPECT_EQ(sized->spool.retention_max_bytes, 10'000'000'000);
  EXPECT_EQ(load("spool: { max_bytes: 1536kib }\n")->spool.max_bytes, 1536 * 1024);
  EXPECT_EQ(load("spool: { max_bytes: 2097152 B }\n")->spool.max_bytes, 2097152);
  for (const char* size : {"2M", "1.5GiB", "MiB", "2 MiB extra", "2  MiB", "2 "}) {
    const std::string error =
        first_error(load(std::string("spool: { max_bytes: \"") + size + "\" }\n"));
    EXPECT_NE(error.find("spool.max_bytes: expected bytes: an integer, or one with a unit"),
              std::string::npos)
        << size << ": " << error;
  }
  auto bounded = load("spool: { max_bytes: 10737418240 }\n");
  ASSERT_TRUE(bounded) << first_error(bounded);
  EXPECT_EQ(bounded->spool.max_bytes, 10737418240);
  EXPECT_EQ(first_error(load("spool: { max_bytes: -1 }\n")),
            "test.yaml:1:21: spool.max_bytes must not be negative");
  EXPECT_NE(first_error(load("spool: { mode: memory, max_bytes: 1048576 }\n"))
                .find("with spool.mode memory, use spool.memory_max_pending"),
            std::string::npos);
  EXPECT_EQ(first_error(load("spool: { mode: memory, memory_max_pending: -5 }\n")),
            "test.yaml:1:44: spool.memory_max_pending must not be negative");
  EXPECT_NE(first_error(load("spool: { shutdown_grace_ms: -100 }\n")).find("must not be negative"),
            std::string::npos);
  for (const char* retry : {"max_retry_after_ms: -1", "max_retry_after_ms: 9223372036854775807",
                            "initial_backoff_ms: 0", "max_backoff_ms: 9223372036854775807"}) {
    EXPECT_NE(
        first_error(load(std::string("webhooks:\n  - { name: a, url: \"http://x/\", retry: { ") +
                         retry + " } }\n"))
            .find("webhooks[0].retry"),
        std::string::npos)
        << retry;
  }
  EXPECT_NE(first_error(load("spool: { shutdown_grace_ms: 9223372036854775807 }\n"))
                .find("spool.shutdown_grace_ms"),
            std::string::npos);
  EXPECT_NE(first_error(load("bus: { max_message_bytes: 9223372036854775807 }\n"))
                .find("bus.max_message_bytes"),
            std::string::npos);
  EXPECT_NE(
      first_error(load("webhooks:\n  - { name: a, url: \"http://x/\", rate_limit_per_s: 1e-20 }\n"))
          .find("rate_limit_per_s"),
      std::string::npos);
  auto memory = load("spool: { mode: memory, memory_max_pending: 0 }\n");
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->spool.memory_max_pending, 0);
  EXPECT_TRUE(load("admin: { listen: \"[::1]:9464\" }\n"));
  EXPECT_TRUE(load("admin: { listen: \"127.0.0.1:0\" }\n"));
}

// Found in review: `topics: []` subscribed to nothing, silently.
TEST(ConfigLoaderTest, AnEmptyTopicListIsRefused) {
  EXPECT_NE(first_error(load("bus:\n  topics: []\n")).find("test.yaml:2:11: bus.topics is empty"),
            std::string::npos)
      << first_error(load("bus:\n  topics: []\n"));
  auto all = load("bus:\n  topics: [\"\"]\n");
  ASSERT_TRUE(all) << first_error(all);
  EXPECT_EQ(all->bus.topics, std::vector<std::string>{""});
}

TEST(ConfigLoaderTest, ExtensionsAliasFromSeedDesign) {
  auto cfg = load(R"(extensions:
  enabled: true
  directories: [ext]
  hotReload: false
  maxExecutionTime: 1234
  failOpen: false
  webhooks:
    - hook: auth_failure
      url: https://siem.internal/api/events
      secret: abcdef
      timeout: 700
)");
  ASSERT_TRUE(cfg) << first_error(cfg);
  EXPECT_EQ(cfg->hooks.directories, std::vector<std::string>{"/etc/hg/ext"});
  EXPECT_FALSE(cfg->hooks.hot_reload);
  EXPECT_EQ(cfg->hooks.default_timeout_ms, 1234);
  EXPECT_FALSE(cfg->hooks.fail_open);
  ASSERT_EQ(cfg->webhooks.size(), 1u);
  EXPECT_EQ(cfg->webhooks[0].events, std::vector<std::string>{"auth_failure"});
  EXPECT_EQ(cfg->webhooks[0].timeout_ms, 700);
  EXPECT_EQ(cfg->webhooks[0].secrets.at(0), "abcdef");
}

// Found in review: alias webhooks were named by list position, and queued deliveries follow the
// name, so inserting an entry sent another endpoint's backlog to the new URL. The name now comes
// from the entry itself (or an explicit `name:`), so reordering changes nothing.
TEST(ConfigLoaderTest, ExtensionsAliasNamesDoNotDependOnPosition) {
  const std::string a = "    - { hook: auth_failure, url: \"https://a.example/\" }\n";
  const std::string b = "    - { hook: auth_failure, url: \"https://b.example/\" }\n";
  auto before = load("extensions:\n  webhooks:\n" + a);
  auto after = load("extensions:\n  webhooks:\n" + b + a);
  ASSERT_TRUE(before) << first_error(before);
  ASSERT_TRUE(after) << first_error(after);
  EXPECT_EQ(before->webhooks[0].name, after->webhooks[1].name);
  EXPECT_NE(after->webhooks[0].name, after->webhooks[1].name);
  EXPECT_EQ(before->webhooks[0].name.rfind("extensions-auth_failure-", 0), 0u)
      << before->webhooks[0].name;
  auto named = load(
      "extensions:\n  webhooks:\n    - { name: siem, hook: auth_failure, url: \"https://a/\" }\n");
  ASSERT_TRUE(named) << first_error(named);
  EXPECT_EQ(named->webhooks[0].name, "siem");
  // A token in the query or the user info can rotate without renaming the webhook.
  auto token = [&](const std::string& url) {
    auto cfg = load("extensions:\n  webhooks:\n    - { hook: a, url: \"" + url + "\" }\n");
    return cfg ? cfg->webhooks[0].name : first_error(cfg);
  };
  EXPECT_EQ(token("https://x.example/in?token=1"), token("https://x.example/in?token=2"));
  EXPECT_EQ(token("https://u:1@x.example/in"), token("https://u:2@x.example/in"));
  EXPECT_NE(token("https://x.example/in"), token("https://x.example/other"));
  // An explicit name is checked like any webhook name, not quietly rewritten.
  EXPECT_NE(
      first_error(load("extensions:\n  webhooks:\n    - { name: \"a b\", url: \"https://a/\" }\n"))
          .find("name"),
      std::string::npos);
  EXPECT_NE(first_error(load("extensions:\n  webhooks:\n    - { hook: a, url: \"https://a/\" }\n"
                             "    - { hook: a, url: \"https://a/\", timeout: 100 }\n"))
                .find("give each a name:"),
            std::string::npos);
}

TEST(ExpandEnvTest, DefaultsAndEscapes) {
  Diagnostics errors;
  setenv("HG_X", "1", 1);
  EXPECT_EQ(expand_env("a${HG_X}b", {}, errors), "a1b");
  EXPECT_EQ(expand_env("${HG_UNSET_Y:-dflt}", {}, errors), "dflt");
  EXPECT_EQ(expand_env("$${HG_X}", {}, errors), "${HG_X}");
  EXPECT_TRUE(errors.empty());
  expand_env("${HG_X", {}, errors);
  EXPECT_EQ(errors.size(), 1u);
}

// Found in review: the default ended at the first `}`, so `${A:-${B}}` with A unset became the
// literal text "${B}" plus a stray "}" (a guessable signing secret), without a word.
TEST(ExpandEnvTest, ANestedVariableInADefaultIsAnError) {
  Diagnostics errors;
  setenv("HG_NESTED_B", "x", 1);
  unsetenv("HG_NESTED_A");
  expand_env("${HG_NESTED_A:-${HG_NESTED_B}}", {"f.yaml", 3, 9}, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("nested ${...}"), std::string::npos) << errors[0].message;
}

// Found in review: `events:` with every item commented out read as "no key", i.e. every event.
// Found in review: each of these loaded, three of them differently from what they say.
TEST(ConfigLoaderTest, TagsEmptySectionsAndSecretItemsAreCheckedEverywhere) {
  const std::string webhook = "webhooks:\n  - name: a\n    url: http://x/\n";
  // A tag is not obeyed in a list or a header either: the webhook would sign with the base64.
  for (const char* tagged :
       {"    secrets: [!!binary aGVsbG8=]\n",
        "    headers: {Authorization: !!binary QmVhcmVyIHg=}\n", "    events: !!binary Kg==\n"}) {
    auto cfg = load(webhook + tagged);
    EXPECT_NE(first_error(cfg).find(": the YAML tag tag:yaml.org,2002:binary is not supported"),
              std::string::npos)
        << tagged;
  }
  // A section or webhooks list whose keys are all commented out is not "the defaults".
  EXPECT_EQ(first_error(load("webhooks:\n#  - name: a\n")),
            "test.yaml:1:1: webhooks: no value (list the webhooks, or write `webhooks: []` for "
            "none)");
  EXPECT_EQ(first_error(load("admin:\n#  token: ${ADMIN_TOKEN}\n")),
            "test.yaml:1:1: admin: no value (give its keys, or leave the key out)");
  EXPECT_EQ(first_error(load(webhook + "    retry:\n")),
            "test.yaml:4:5: webhooks[0].retry: no value (give its keys, or leave the key out)");
  EXPECT_TRUE(load("webhooks: []\n"));
  // An admin token the endpoint could never match (it trims a header's whitespace).
  EXPECT_NE(first_error(load("admin: { token: \"abc \" }\n")).find("ends with whitespace"),
            std::string::npos);
  // Nor one with a space or a control character inside it; the message does not quote it.
  for (const char* token : {"\"ab cd\"", "\"ab\\tcd\"", "\"ab\\x01cd\""}) {
    const std::string error = first_error(load(std::string("admin: { token: ") + token + " }\n"));
    EXPECT_NE(error.find("test.yaml:1:17: admin.token has whitespace or a control character"),
              std::string::npos)
        << token << ": " << error;
    EXPECT_EQ(error.find("cd"), std::string::npos) << error;
  }
  // Nor bytes a client may not send as they are (one shared rule with the proxy's token file).
  EXPECT_NE(first_error(load("admin: { token: \"ab\\xe9cd\" }\n"))
                .find("admin.token has a byte outside printable ASCII"),
            std::string::npos);
  // An empty secret in a rotation list is reported at its item, not the first one.
  setenv("HG_EMPTY_ITEM", "", 1);
  EXPECT_EQ(
      first_error(load(webhook + "    secrets: [whsec_a, \"${HG_EMPTY_ITEM}\"]\n")).substr(0, 15),
      "test.yaml:4:24:");
  unsetenv("HG_EMPTY_ITEM");
  auto rotation = load(webhook + "    secrets:\n      - whsec_a\n      - whsec_b\n");
  ASSERT_TRUE(rotation) << first_error(rotation);
  ASSERT_EQ(rotation->webhooks[0].secret_where.size(), 2u);
  EXPECT_EQ(rotation->webhooks[0].secret_where[1].line, 6);
  // Booleans in YAML 1.1's spellings, in any of three cases; anything else is an error.
  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "on", "ON"}) {
    auto cfg = load(std::string("hooks:\n  fail_open: false\n  hot_reload: ") + yes + "\n");
    ASSERT_TRUE(cfg) << yes << ": " << first_error(cfg);
    EXPECT_TRUE(cfg->hooks.hot_reload) << yes;
  }
  for (const char* no : {"false", "False", "NO", "off", "Off"}) {
    auto cfg = load(std::string("hooks:\n  fail_open: ") + no + "\n");
    ASSERT_TRUE(cfg) << no << ": " << first_error(cfg);
    EXPECT_FALSE(cfg->hooks.fail_open) << no;
  }
  EXPECT_NE(first_error(load("hooks:\n  fail_open: tRUE\n")).find("expected true or false"),
            std::string::npos);
}

TEST(ConfigLoaderTest, AListKeyWithNoValueIsAnError) {
  EXPECT_EQ(first_error(load("webhooks:\n  - name: a\n    url: \"http://x/\"\n    events:\n"
                             "    # - auth.failure\n")),
            "test.yaml:4:5: webhooks[0].events: no value (list at least one item, or leave the "
            "key out)");
  EXPECT_NE(first_error(load("bus:\n  topics:\n")).find("bus.topics: no value"), std::string::npos);
}

}  // namespace
}  // namespace hookgate::config
