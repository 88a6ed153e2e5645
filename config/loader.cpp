#include "config/loader.hpp"

#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

#include "bus/wire.hpp"
#include "config/yaml_reader.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/socket_address.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::config {
namespace fs = std::filesystem;
namespace {

std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty()) return path;
  if (path == "~" || path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    fs::path p = fs::path(home ? home : "/");
    if (path.size() > 2) p /= path.substr(2);  // `~` alone: no trailing slash from an empty part
    return p.lexically_normal().string();
  }
  fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  return (fs::path(base_dir) / p).lexically_normal().string();
}

constexpr size_t kMaxWebhookNameBytes = 128;

bool valid_webhook_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), is_name_char);
}

// A ${VAR} that is only part of a secret value (`Splunk ${HEC_TOKEN}`) holds a secret as well.
// Not a short one: in `${ENV}-${KEY}` an ENV of `prod` would blank every "prod" in the logs (a
// webhook named siem-prod), and the whole value is registered anyway.
constexpr size_t kMinSecretPart = 8;

void register_secret_parts(const YAML::Node& value) {
  if (value.IsScalar())
    for (const auto& part : substituted_values(value.Scalar()))
      if (part.size() >= kMinSecretPart) register_secret(part);
}

// A value taken for a credential by its name (a header's, a query parameter's): not a short one,
// which would keep `DEBUG=true` from every hook for an `X-Session-Debug: true`. Values that are
// credentials by their key (`secret`, the admin token, a URL's password) count at any length.
void register_named_secret(const std::string& value) {
  if (value.size() >= 4) register_secret(value);
}

// Header (and query parameter) names whose values are credentials: never logged. Whole words of
// the name, split at '-', '_' and '.': X-Api-Key and access_token, not X-Bypass-Cache or author.
bool is_credential_name(std::string name) {
  static const std::set<std::string, std::less<>> kWords = {
      "auth",      "authorization", "authentication", "token",   "accesstoken", "apitoken",
      "authtoken", "secret",        "clientsecret",   "key",     "apikey",      "cookie",
      "signature", "sig",           "pass",           "passwd",  "password",    "passphrase",
      "pwd",       "credential",    "credentials",    "session", "sessionid",   "sid"};
  name = ascii_lower(std::move(name));
  for (size_t start = 0; start <= name.size();) {
    const size_t end = std::min(name.find_first_of("-_.", start), name.size());
    if (kWords.count(std::string_view(name).substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

void read_bus(MapReader r, BusConfig& bus, const std::string& base_dir) {
  if (r.has("bind") || r.has("connect")) bus.bind.reset();
  std::string bind;
  r.get("bind", bind);
  if (!bind.empty()) bus.bind = bind;
  r.get("connect", bus.connect);
  r.get("topics", bus.topics);
  r.get_bytes("max_message_bytes", bus.max_message_bytes);
  r.get("receive_hwm", bus.receive_hwm);
  MapReader curve = r.section("curve", "bus.curve");
  curve.get("enabled", bus.curve.enabled);
  curve.get("secret_key_file", bus.curve.secret_key_file);
  curve.get("allowed_clients", bus.curve.allowed_clients);
  curve.get("server_key", bus.curve.server_key);
  bus.curve.secret_key_file_where = curve.pos("secret_key_file");
  bus.curve.allowed_clients_where = curve.pos("allowed_clients");
  bus.curve.server_key_where = curve.pos("server_key");
  bus.curve.secret_key_file = resolve_path(bus.curve.secret_key_file, base_dir);
  bus.curve.allowed_clients = resolve_path(bus.curve.allowed_clients, base_dir);
  // A key file, unless it is a 40-character Z85 key itself (and no file has that name).
  std::error_code ec;
  if (const std::string as_path = resolve_path(bus.curve.server_key, base_dir);
      bus.curve.server_key.size() != 40 || std::filesystem::is_regular_file(as_path, ec))
    bus.curve.server_key = as_path;
  // Keys without `enabled: true` used to be ignored: a bus the operator meant to lock ran in
  // plaintext, and `check` said ok. `enabled: false`, written, still turns CURVE off on purpose.
  if (!curve.has("enabled"))
    for (const char* key : {"secret_key_file", "allowed_clients", "server_key"})
      if (curve.has(key)) {
        curve.error(curve.pos(key), std::string("bus.curve.") + key +
                                        " is set but bus.curve.enabled is not: the bus would "
                                        "run without CURVE; add `enabled: true` (or `enabled: "
                                        "false` to run without it on purpose)");
        break;
      }
  curve.finish();
  if (!bus.bind && bus.connect.empty()) r.error(r.pos(), "bus needs `bind` or `connect`");
  // ZeroMQ endpoints are TRANSPORT://ADDRESS; anything else fails only when `run` binds.
  auto check_endpoint = [&](const char* key, std::string& endpoint, std::optional<size_t> item) {
    static constexpr std::string_view kTransports[] = {"tcp://",  "ipc://",  "inproc://", "ws://",
                                                       "wss://",  "pgm://",  "epgm://",   "tipc://",
                                                       "vmci://", "norm://", "udp://"};
    const bool known =
        std::any_of(std::begin(kTransports), std::end(kTransports), [&](std::string_view t) {
          return endpoint.size() > t.size() && endpoint.compare(0, t.size(), t) == 0;
        });
    const Position where = item ? r.pos(key, *item) : r.pos(key);
    if (!known) {
      r.error(where, std::string("bus.") + key +
                         ": expected a ZeroMQ endpoint such as tcp://127.0.0.1:5556 or "
                         "ipc:///run/hookgate/bus, got " +
                         r.as_written(key, endpoint, item));
      return;
    }
    // Transports the bus socket (SUB) cannot use, or that no publisher can reach: `run` would
    // refuse the first, and start deaf on the second.
    const auto refuse_transport = [&](std::string_view transport, const char* why) {
      if (!endpoint.starts_with(transport)) return false;
      r.error(where, std::string("bus.") + key + ": " + r.as_written(key, endpoint, item) + ": " +
                         why + "; use tcp:// or ipc://");
      return true;
    };
    if (refuse_transport("udp://",
                         "udp:// is for ZeroMQ's RADIO/DISH sockets, not the bus's SUB") ||
        refuse_transport("inproc://",
                         "inproc:// reaches only this process, where no publisher runs"))
      return;
    // What libzmq would refuse only at `run` (EINVAL), or take and never reach: `check` is the
    // pre-start that must catch it.
    if (auto problem = bus::tcp_endpoint_problem(endpoint, std::string_view(key) == "bind"))
      r.error(where, std::string("bus.") + key + ": " + r.as_written(key, endpoint, item) + ": " +
                         *problem);
    // A socket file is a path: relative, it resolves against the config's folder as every other
    // path does, not against wherever the gateway was started (`/` under systemd). `@name` is
    // Linux's abstract namespace, not a file.
    constexpr std::string_view kIpc = "ipc://";
    if (endpoint.compare(0, kIpc.size(), kIpc) != 0) return;
    const std::string socket_path = endpoint.substr(kIpc.size());
    if (socket_path.front() != '@' && socket_path.front() != '*')
      endpoint = std::string(kIpc) + resolve_path(socket_path, base_dir);
    // sockaddr_un holds 107 bytes and a NUL; libzmq refuses a longer path only when it binds.
    constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;
    if (endpoint.size() - kIpc.size() > kMaxSocketPath)
      r.error(where, std::string("bus.") + key + ": " + endpoint + ": a socket path is at most " +
                         std::to_string(kMaxSocketPath) + " bytes here; use a shorter one");
  };
  if (bus.bind) {
    check_endpoint("bind", *bus.bind, std::nullopt);
    bus.bind_where = r.pos("bind");
  }
  bus.connect_where.clear();
  for (size_t i = 0; i < bus.connect.size(); ++i) {
    check_endpoint("connect", bus.connect[i], i);
    bus.connect_where.push_back(r.pos("connect", i));
    // Two connections to one peer would receive every event twice.
    if (std::find(bus.connect.begin(), bus.connect.begin() + static_cast<std::ptrdiff_t>(i),
                  bus.connect[i]) != bus.connect.begin() + static_cast<std::ptrdiff_t>(i))
      r.error(r.pos("connect", i), "bus.connect lists " +
                                       r.as_written("connect", bus.connect[i], i) +
                                       " twice (each event would arrive twice)");
  }
  if (bus.max_message_bytes < kMinMessageBytes || bus.max_message_bytes > kMaxMessageBytesLimit)
    r.error(r.pos("max_message_bytes"), "bus.max_message_bytes: expected " +
                                            std::to_string(kMinMessageBytes) + " up to " +
                                            std::to_string(kMaxMessageBytesLimit));
  if (bus.receive_hwm < 1) r.error(r.pos("receive_hwm"), "bus.receive_hwm must be positive");
  for (size_t i = 0; i < bus.topics.size(); ++i) {
    const std::string& topic = bus.topics[i];
    if (topic.size() > kMaxTopicBytes)
      r.error(r.pos("topics", i), "bus.topics: a prefix is " + std::to_string(topic.size()) +
                                      " bytes; at most " + std::to_string(kMaxTopicBytes));
    // ZeroMQ subscriptions are byte prefixes: `auth.*` would take only types starting with those
    // five characters, so every auth.failure would be dropped unseen (found in a publisher's
    // test; webhooks' and hooks' events: are patterns, which makes the mistake easy). Quoted as
    // written: a ${VAR}'s value is not repeated in an error.
    const std::string written = r.as_written("topics", topic, i);
    if (const size_t star = topic.find('*'); star != std::string::npos)
      r.error(r.pos("topics", i),
              "bus.topics: " + written +
                  " is a pattern, but topics are prefixes of event types (ZeroMQ "
                  "subscriptions): write " +
                  (written == "'" + topic + "'" ? "'" + topic.substr(0, star) + "'"
                                                : std::string("its part before the *")) +
                  " for the types it means" + (star == 0 ? " ([\"\"] is every type)" : ""));
  }
  // The gateway refuses hookgate.* types from the bus (its own diagnostics never come that way).
  if (!bus.topics.empty() && std::all_of(bus.topics.begin(), bus.topics.end(), is_diagnostic_type))
    r.error(r.pos("topics"),
            "bus.topics takes only hookgate.* types, which publishers may not send (the gateway "
            "refuses them from the bus, and its own diagnostics never pass through it): list "
            "the prefixes of your events");
  if (r.has("topics") && bus.topics.empty())
    r.error(r.pos("topics"),
            "bus.topics is empty, so the gateway would receive nothing; list prefixes, or [\"\"] "
            "(the default) for every type");
  if (bus.curve.client_mode()) {
    // One socket is either a CURVE server or a CURVE client: with server_key it connects.
    if (bus.curve.secret_key_file.empty())
      r.error(r.pos("curve"),
              "bus.curve.server_key needs secret_key_file (this gateway's keypair)");
    if (!bus.curve.allowed_clients.empty())
      r.error(r.pos("curve"),
              "bus.curve: allowed_clients is for a CURVE server; with server_key the gateway is "
              "a client (the proxy checks its key)");
    if (bus.bind)
      r.error(r.pos("curve"),
              "bus.curve.server_key makes the bus socket a CURVE client: use bus.connect, not "
              "bus.bind");
  } else if (bus.curve.enabled &&
             (bus.curve.secret_key_file.empty() || bus.curve.allowed_clients.empty())) {
    r.error(r.pos("curve"),
            "bus.curve needs secret_key_file and allowed_clients when enabled (or server_key "
            "and secret_key_file to connect to a CURVE proxy)");
  }
  r.finish();
}

constexpr double kMaxRatePerSecond = 1'000'000;
constexpr double kMinRatePerSecond = 0.001;

void read_hooks(MapReader r, HooksConfig& hooks) {
  r.get("enabled", hooks.enabled);
  r.get("directories", hooks.directories);
  r.get("hot_reload", hooks.hot_reload);
  r.get("default_timeout_ms", hooks.default_timeout_ms);
  r.get("fail_open", hooks.fail_open);
  r.get("observer_queue", hooks.observer_queue);
  r.get("observer_threads", hooks.observer_threads);
  if (hooks.default_timeout_ms <= 0)
    r.error(r.pos("default_timeout_ms"), "hooks.default_timeout_ms must be positive");
  if (hooks.observer_queue < 1)
    r.error(r.pos("observer_queue"), "hooks.observer_queue must be positive");
  // Each is a thread at start: beyond a few hundred the process limit ends the gateway instead.
  if (hooks.observer_threads < 1 || hooks.observer_threads > 256)
    r.error(r.pos("observer_threads"), "hooks.observer_threads: expected 1 up to 256");
  r.finish();
}

// A credential in a URL is one too (found in a security pass: a collector that authenticates by
// URL, HEC's `?token=` or a secret path, had its token in every hook's environment): the
// userinfo, a query parameter named like a credential, and each ${VAR} of 8 bytes or more that
// lands past the host (the path, query or fragment) or in the userinfo. A ${VAR} naming the host
// or port is where, not a credential: it stays in the logs.
void register_url_secrets(const YAML::Node& raw, const std::string& url) {
  // As written: the scheme is lowercased only after this, and a ${VAR} may hold it.
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return;
  const size_t authority = scheme + 3;
  const size_t host_end = std::min(url.find_first_of("/?#", authority), url.size());
  const size_t at = url.rfind('@', host_end == 0 ? 0 : host_end - 1);
  const bool has_userinfo = at != std::string::npos && at >= authority;
  if (has_userinfo) {
    const std::string userinfo = url.substr(authority, at - authority);
    // A password at any length; a bare user name (`https://hookgate@host/`) only when long enough
    // to be a token, or from a ${VAR} (below): a short one would blank that word in every log.
    if (const size_t colon = userinfo.find(':'); colon != std::string::npos)
      register_secret(userinfo.substr(colon + 1));
    else if (userinfo.size() >= 16)
      register_secret(userinfo);
  }
  if (const size_t query = url.find('?', host_end); query != std::string::npos) {
    const size_t query_end = std::min(url.find('#', query), url.size());
    for (size_t start = query + 1; start < query_end;) {
      const size_t end = std::min(url.find('&', start), query_end);
      const std::string pair = url.substr(start, end - start);
      if (const size_t equals = pair.find('='); equals != std::string::npos)
        if (is_credential_name(pair.substr(0, equals)))
          register_named_secret(pair.substr(equals + 1));
      start = end + 1;
    }
  }
  if (!raw.IsScalar()) return;
  for (const auto& part : substituted_values(raw.Scalar())) {
    if (part.size() < kMinSecretPart) continue;
    // One that reaches past the host counts: `url: ${SLACK_WEBHOOK_URL}` holds its secret path.
    for (size_t pos = url.find(part); pos != std::string::npos; pos = url.find(part, pos + 1))
      if (pos + part.size() > host_end || (has_userinfo && pos < at)) {
        register_secret(part);
        break;
      }
  }
}

// A webhook's URL as read: a scheme is case-insensitive (RFC 3986 3.1), so `HTTPS://` is https
// for every check and for the name an alias derives from it. The rest stays as written.
void read_url(MapReader& r, std::string& url) {
  r.get("url", url);
  register_url_secrets(r.node("url"), url);
  if (const size_t end = url.find("://"); end != std::string::npos && end <= 5)
    url = ascii_lower(url.substr(0, end)) + url.substr(end);
}

// `timeout_key` is the key the timeout was read from (`timeout` in `extensions.webhooks`).
void validate_webhook(MapReader& r, WebhookConfig& w, const char* timeout_key = "timeout_ms") {
  w.where = r.pos();
  w.label = r.context();
  w.url_where = r.pos("url");
  const char* secrets_key = r.has("secrets") ? "secrets" : "secret";
  w.secrets_where = r.pos(secrets_key);
  if (!r.valid()) return;  // not a mapping, which is said: its keys would only repeat it
  if (w.name.empty()) {
    r.error(r.pos(), r.context() + ": `name` is required");
  } else if (!valid_webhook_name(w.name)) {
    r.error(r.pos("name"), r.context() + ".name: use ASCII letters, digits, '_', '-' and '.' only");
  } else if (w.name.size() > kMaxWebhookNameBytes) {
    // It labels every series of the webhook: a Prometheus with label_value_length_limit set
    // fails the whole scrape on one long name (found in a scale pass: 5,000 characters passed).
    r.error(r.pos("name"), r.context() + ".name: at most " + std::to_string(kMaxWebhookNameBytes) +
                               " characters (it labels the webhook's metrics)");
  }
  if (w.url.empty()) {
    r.error(r.pos(), r.context() + ": `url` is required");
  } else if (w.url.rfind("http://", 0) != 0 && w.url.rfind("https://", 0) != 0) {
    r.error(r.pos("url"), r.context() + ".url: must start with http:// or https://");
  }
  if (w.events.empty())
    r.error(r.pos("events"), r.context() + ".events: needs at least one pattern");
  // An empty pattern matches no event type: that webhook would never get an event.
  if (std::find(w.events.begin(), w.events.end(), "") != w.events.end())
    r.error(r.pos("events"), r.context() +
                                 ".events: an empty pattern matches nothing (\"*\" is "
                                 "every event)");
  if (w.timeout_ms <= 0)
    r.error(r.pos(timeout_key), r.context() + "." + timeout_key + " must be positive");
  if (w.max_in_flight < 1)
    r.error(r.pos("max_in_flight"), r.context() + ".max_in_flight must be at least 1");
  // Also refuses inf/nan: "unlimited" is 0, and a token bucket cannot hold infinity.
  // Below kMinRatePerSecond the bucket's wait (1 / rate) would overflow a ms count.
  if (!(w.rate_limit_per_s == 0 ||
        (w.rate_limit_per_s >= kMinRatePerSecond && w.rate_limit_per_s <= kMaxRatePerSecond)))
    r.error(r.pos("rate_limit_per_s"),
            r.context() + ".rate_limit_per_s: expected 0 (no limit), or 0.001 up to " +
                std::to_string(static_cast<int>(kMaxRatePerSecond)) + " requests a second");
  for (size_t k = 0; k < w.secrets.size(); ++k) {
    const std::string& s = w.secrets[k];
    // An unset ${VAR}, or a value that is not a string, was reported already where it is
    // written: that is why the secret is empty.
    auto said = [&] {
      auto at = [&](const Position& p) {
        return std::any_of(r.errors().begin(), r.errors().end(), [&](const Diagnostic& d) {
          return d.where.line == p.line && d.where.column == p.column && d.where.file == p.file;
        });
      };
      return at(r.pos(secrets_key, k)) || at(r.pos(secrets_key));
    };
    w.secret_where.push_back(r.pos(secrets_key, k));
    if (s.empty() && !said())
      r.error(r.pos(secrets_key, k),
              r.context() +
                  ": a secret is empty (an unset or empty ${VAR}?); leave the key out to send "
                  "unsigned");
    register_secret(s);
  }
  for (const auto& [name, value] : w.headers)
    if (is_credential_name(name)) register_named_secret(value);
  register_secret_parts(r.node("secret"));
}

void read_retry(MapReader r, RetryConfig& retry) {
  r.get("max_attempts", retry.max_attempts);
  r.get("initial_backoff_ms", retry.initial_backoff_ms);
  r.get("max_backoff_ms", retry.max_backoff_ms);
  r.get("max_retry_after_ms", retry.max_retry_after_ms);
  if (retry.max_attempts < 1)
    r.error(r.pos("max_attempts"), r.context() + ".max_attempts must be at least 1");
  // 0 would keep every backoff at 0: all attempts within a second.
  if (retry.initial_backoff_ms < 1 || retry.max_backoff_ms < retry.initial_backoff_ms ||
      retry.max_backoff_ms > kMaxDurationMs)
    // At the key that is written (found in review: an initial backoff over the default maximum
    // pointed at the retry map).
    r.error(r.pos(retry.initial_backoff_ms < 1 || !r.has("max_backoff_ms") ? "initial_backoff_ms"
                                                                           : "max_backoff_ms"),
            r.context() + ": need 1 <= initial_backoff_ms <= max_backoff_ms <= " +
                std::to_string(kMaxDurationMs) + " (30 days)");
  if (retry.max_retry_after_ms < 0 || retry.max_retry_after_ms > kMaxDurationMs)
    r.error(r.pos("max_retry_after_ms"), r.context() + ".max_retry_after_ms: expected 0 to " +
                                             std::to_string(kMaxDurationMs) + " (30 days)");
  r.finish();
}

void read_tls(MapReader r, WebhookConfig& w, const std::string& base_dir) {
  TlsConfig& tls = w.tls;
  w.tls_ca_file_where = r.pos("ca_file");
  w.tls_cert_file_where = r.pos("cert_file");
  w.tls_key_file_where = r.pos("key_file");
  r.get("ca_file", tls.ca_file);
  r.get("cert_file", tls.cert_file);
  r.get("key_file", tls.key_file);
  r.get("key_password", tls.key_password);
  register_secret(tls.key_password);
  register_secret_parts(r.node("key_password"));
  if (!tls.key_password.empty() && tls.key_file.empty())
    r.error(r.pos("key_password"), r.context() + ".key_password: there is no key_file to unlock");
  const bool any = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
  if (any && w.url.rfind("https://", 0) != 0)
    r.error(r.pos(), r.context() + ": applies to https:// URLs only");
  if (tls.cert_file.empty() != tls.key_file.empty())
    r.error(r.pos(), r.context() + ": cert_file and key_file go together");
  for (auto [key, path] :
       {std::pair{"ca_file", &tls.ca_file}, std::pair{"cert_file", &tls.cert_file},
        std::pair{"key_file", &tls.key_file}}) {
    if (path->empty()) continue;
    const std::string written = r.as_written(key, *path);  // before resolving: a ${VAR} stays
    *path = resolve_path(*path, base_dir);
    std::error_code ec;
    if (!std::ifstream(*path) || fs::is_directory(*path, ec))
      r.error(r.pos(key), r.context() + "." + key + ": cannot read " +
                              (written.find("${") != std::string::npos ? written : *path));
  }
  r.finish();
}

WebhookConfig read_webhook(const YAML::Node& node, const std::string& file,
                           const std::string& context, Diagnostics& errors,
                           const std::string& base_dir) {
  WebhookConfig w;
  MapReader r(node, file, context, errors);
  r.get("name", w.name);
  read_url(r, w.url);
  r.get("events", w.events);
  std::string secret;
  r.get("secret", secret);
  const size_t errors_before_secrets = errors.size();
  r.get("secrets", w.secrets);
  // Present but empty (an unset or empty ${VAR}, a list whose items are commented out) is an
  // error, not "send unsigned"; items refused on the way (a tag) were reported already.
  if (r.has("secrets") && w.secrets.empty() && errors.size() == errors_before_secrets)
    r.error(r.pos("secrets"),
            context + ".secrets: the list is empty; leave the key out to send unsigned");
  if (r.has("secret")) {
    if (r.has("secrets"))
      r.error(r.pos("secret"), context + ": use `secret` or `secrets`, not both");
    w.secrets = {secret};
  }
  r.get("timeout_ms", w.timeout_ms);
  r.get("headers", w.headers);
  // HTTP header names ignore case: `Authorization` and `authorization` would both be sent, and
  // which one a receiver reads is up to it.
  // Each name once, against the first it repeats (an exact repeat is a duplicate key, reported
  // as such), where it is written.
  // One pass with a map by lower-cased name (found in a config torture pass: comparing every
  // pair took 23 s for 20,000 headers).
  std::map<std::string, std::string> first_by_lower;  // lower-cased name → the name first written
  std::set<std::string> written;
  for (const auto& [name, value] : w.headers) {
    if (!written.insert(name).second) continue;  // an exact repeat: reported as a duplicate key
    auto [first, fresh] = first_by_lower.try_emplace(ascii_lower(name), name);
    if (!fresh)
      r.error(key_position(r.node("headers"), name, file).value_or(r.pos("headers")),
              context + ".headers: '" + first->second + "' and '" + name +
                  "' are one header (names ignore case)");
  }
  read_retry(r.section("retry", context + ".retry"), w.retry);
  r.get("max_in_flight", w.max_in_flight);
  r.get("rate_limit_per_s", w.rate_limit_per_s);
  std::string body = "cloudevent";
  r.get_keyword("body", body);
  if (body == "cloudevent" || body == "cloudevents") {
    w.body = BodyMode::CloudEvent;
  } else if (body == "data") {
    w.body = BodyMode::Data;
  } else if (body == "splunk_hec") {
    w.body = BodyMode::SplunkHec;
  } else {
    r.error(r.pos("body"), context + ".body: expected cloudevent, data or splunk_hec, got " +
                               r.as_written("body", body));
  }
  // Only a splunk_hec body has these fields: set for another body, the receiver (HEC, by the
  // look of it) would get CloudEvents and refuse each with a final 400.
  if (r.has("hec") && body != "splunk_hec")
    r.error(r.pos("hec"), context + ".hec: only for body: splunk_hec (this webhook's body is " +
                              r.as_written("body", body) + ")");
  MapReader hec = r.section("hec", context + ".hec");
  hec.get("sourcetype", w.hec_sourcetype);
  hec.get("index", w.hec_index);
  hec.get("host_field", w.hec_host_field);
  // A dotted path like data.host or source; an empty segment could never match.
  if (w.hec_host_field.empty() || w.hec_host_field.front() == '.' ||
      w.hec_host_field.back() == '.' || w.hec_host_field.find("..") != std::string::npos)
    hec.error(hec.pos("host_field"),
              context +
                  ".hec.host_field: expected a dotted field path such as data.host or "
                  "source");
  hec.finish();
  std::vector<std::string> signatures;
  r.get("signatures", signatures);
  for (size_t i = 0; i < signatures.size(); ++i) {
    const std::string s = ascii_lower(signatures[i]);  // a keyword: any case
    if (s == "github") {
      w.sign_github = true;
    } else if (s != "standard" && s != "hookgate") {
      r.error(r.pos("signatures"),
              context + ".signatures: unknown scheme " + r.as_written("signatures", s, i) +
                  " (X-Signature and Standard Webhooks are always sent; add: github)");
    }
  }
  r.get("allow_cidrs", w.allow_cidrs);
  r.get("deny_cidrs", w.deny_cidrs);
  w.allow_cidrs_where = r.pos("allow_cidrs");
  w.deny_cidrs_where = r.pos("deny_cidrs");
  for (size_t i = 0; i < w.allow_cidrs.size(); ++i)
    w.allow_cidr_where.push_back(r.pos("allow_cidrs", i));
  for (size_t i = 0; i < w.deny_cidrs.size(); ++i)
    w.deny_cidr_where.push_back(r.pos("deny_cidrs", i));
  std::string http_client = "auto";
  r.get_keyword("http_client", http_client);
  if (http_client == "auto") {
    w.http_client = WebhookConfig::HttpClient::Auto;
  } else if (http_client == "libcurl") {
    w.http_client = WebhookConfig::HttpClient::Libcurl;
  } else {
    r.error(r.pos("http_client"), context + ".http_client: expected auto or libcurl, got " +
                                      r.as_written("http_client", http_client));
  }
  // Asked for even when absent, so an unknown key's hint lists `tls` (a `tsl:` typo).
  MapReader tls = r.section("tls", context + ".tls");
  if (r.has("tls")) read_tls(std::move(tls), w, base_dir);
  validate_webhook(r, w);
  // Here, not in validate_webhook: node() marks a key as read, and the `extensions.webhooks`
  // form has neither key, so there they must stay unknown.
  if (YAML::Node list = r.node("secrets"); list.IsSequence())
    for (const auto& item : list) register_secret_parts(item);
  if (YAML::Node headers = r.node("headers"); headers.IsMap())
    for (const auto& entry : headers) {
      w.header_where.push_back(position_of(entry.first, file));
      if (entry.first.IsScalar() && is_credential_name(entry.first.Scalar()))
        register_secret_parts(entry.second);
    }
  r.finish();
  return w;
}

void read_webhooks(const YAML::Node& node, const std::string& file, Diagnostics& errors,
                   const std::string& base_dir, std::vector<WebhookConfig>& out) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsSequence()) {
    errors.push_back({position_of(node, file), "webhooks: expected a list"});
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string context = "webhooks[" + std::to_string(i) + "]";
    // yaml-cpp places an empty item where the next token starts, so the message names the `-`.
    if (node[i].IsNull()) {
      errors.push_back({position_of(node[i], file),
                        context + " is empty: a `-` with nothing after it, just before here "
                                  "(remove it, or indent the webhook's keys under it)"});
      continue;
    }
    out.push_back(read_webhook(node[i], file, context, errors, base_dir));
  }
}

void read_spool(MapReader r, SpoolConfig& spool, const std::string& base_dir) {
  std::string mode = "sqlite";
  r.get_keyword("mode", mode);
  if (mode == "sqlite" || mode == "durable") {
    spool.mode = SpoolConfig::Mode::Sqlite;
  } else if (mode == "memory") {
    spool.mode = SpoolConfig::Mode::Memory;
  } else {
    r.error(r.pos("mode"),
            "spool.mode: expected sqlite or memory, got " + r.as_written("mode", mode));
  }
  r.get("path", spool.path);
  r.get_keyword("synchronous", spool.synchronous);
  spool.synchronous = ascii_upper(spool.synchronous);  // as the PRAGMA spells it
  if (spool.synchronous != "NORMAL" && spool.synchronous != "FULL")
    r.error(r.pos("synchronous"), "spool.synchronous: expected NORMAL or FULL, got " +
                                      r.as_written("synchronous", spool.synchronous));
  r.get("retention_ms", spool.retention_ms);
  r.get("dead_retention_ms", spool.dead_retention_ms);
  r.get_bytes("retention_max_bytes", spool.retention_max_bytes);
  r.get_bytes("max_bytes", spool.max_bytes);
  r.get("shutdown_grace_ms", spool.shutdown_grace_ms);
  r.get("memory_max_pending", spool.memory_max_pending);
  // SQLite opens "" as a private temporary database: the gateway would run, and keep nothing.
  if (spool.mode == SpoolConfig::Mode::Sqlite && spool.path.empty())
    r.error(r.pos("path"), "spool.path is empty (an empty ${VAR}?)");
  for (auto [key, value] : {std::pair<const char*, int64_t>{"retention_ms", spool.retention_ms},
                            {"dead_retention_ms", spool.dead_retention_ms},
                            {"retention_max_bytes", spool.retention_max_bytes},
                            {"max_bytes", spool.max_bytes},
                            {"shutdown_grace_ms", spool.shutdown_grace_ms},
                            {"memory_max_pending", spool.memory_max_pending}})
    if (value < 0) r.error(r.pos(key), std::string("spool.") + key + " must not be negative");
  if (spool.shutdown_grace_ms > kMaxDurationMs)
    r.error(r.pos("shutdown_grace_ms"), "spool.shutdown_grace_ms: at most 30 days");
  if (spool.max_bytes > 0 && spool.max_bytes < kMinSpoolMaxBytes)
    r.error(r.pos("max_bytes"), "spool.max_bytes: at least " + std::to_string(kMinSpoolMaxBytes) +
                                    " (1 MiB), or 0 for no bound");
  if (spool.max_bytes > 0 && spool.mode == SpoolConfig::Mode::Memory)
    r.error(r.pos("max_bytes"),
            "spool.max_bytes bounds the durable spool's rows: with spool.mode memory, use "
            "spool.memory_max_pending");
  spool.path = resolve_path(spool.path, base_dir);
  spool.path_where = r.pos("path");
  spool.max_bytes_where = r.pos("max_bytes");
  r.finish();
}

void read_admin(MapReader r, AdminConfig& admin) {
  r.get("enabled", admin.enabled);
  r.get("listen", admin.listen);
  r.get("token", admin.token);
  register_secret(admin.token);
  register_secret_parts(r.node("token"));
  admin.listen_where = r.pos("listen");
  // The listener takes a literal address (no resolver at start), as `run` would find out.
  const auto host_port = split_host_port(admin.listen);
  const bool host_ok =
      host_port && (host_port->host.empty() || host_port->host == "*" ||
                    host_port->host == "localhost" || numeric_socket_address(host_port->host, 0));
  if (admin.enabled && !host_ok)
    r.error(r.pos("listen"),
            "admin.listen: expected ADDRESS:PORT (an IP address, localhost or *, and a port from "
            "0 to 65535), got " +
                r.as_written("listen", admin.listen));
  // Set but empty (an unset or empty ${VAR}) would silently run the endpoint without auth.
  if (admin.enabled && r.has("token") && admin.token.empty())
    r.error(r.pos("token"),
            "admin.token is empty (an unset or empty ${VAR}?); leave the key out to run the admin "
            "endpoint without a token");
  // The endpoint trims the whitespace HTTP puts around a bearer token: such a token never matches.
  // One inside it would, but clients and proxies that split or fold the header would not send it
  // intact.
  if (!admin.token.empty())
    if (const std::string problem = bearer_token_problem(admin.token); !problem.empty())
      r.error(r.pos("token"), "admin.token " + problem);
  r.finish();
}

void read_log(MapReader r, LogConfig& log) {
  r.get_keyword("level", log.level);
  r.get_keyword("format", log.format);
  if (!is_log_level(log.level))
    r.error(r.pos("level"),
            "log.level: expected one of trace, debug, info, warn (or warning), error, off, got " +
                r.as_written("level", log.level));
  if (log.format != "text" && log.format != "json")
    r.error(r.pos("format"),
            "log.format: expected text or json, got " + r.as_written("format", log.format));
  r.finish();
}

// An alias webhook's name, from what the entry is rather than where it sits: deliveries are
// queued by name, so a name that moved with the list position would hand one endpoint's backlog
// to another. The URL is hashed (FNV-1a), never spelled out: it may carry a token; its query and
// user info are left out of the hash, so rotating a token kept there keeps the name.
std::string alias_webhook_name(const std::string& event, const std::string& url) {
  std::string where = url.substr(0, url.find_first_of("?#"));
  if (auto scheme = where.find("://"); scheme != std::string::npos) {
    const size_t host = scheme + 3;
    const size_t at = where.find('@', host);
    if (at != std::string::npos && at < where.find('/', host)) where.erase(host, at + 1 - host);
  }
  uint32_t hash = 2166136261u;
  for (unsigned char c : where) hash = (hash ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", hash);
  std::string name = "extensions-" + (event.empty() ? std::string("all") : event) + "-" + hex;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !is_name_char(c); }, '_');
  return name;
}

// The seed design's spelling (PRODUCT.md "Operations"): extensions: {enabled, directories,
// hotReload, maxExecutionTime, failOpen, webhooks: [{hook, url, secret, timeout}]}.
void read_extensions_alias(MapReader r, Config& cfg) {
  r.get("enabled", cfg.hooks.enabled);
  r.get("directories", cfg.hooks.directories);
  r.get("hotReload", cfg.hooks.hot_reload);
  r.get("maxExecutionTime", cfg.hooks.default_timeout_ms);
  if (cfg.hooks.default_timeout_ms <= 0)
    r.error(r.pos("maxExecutionTime"), "extensions.maxExecutionTime must be positive");
  r.get("failOpen", cfg.hooks.fail_open);
  YAML::Node hooks = r.list("webhooks", "extensions.webhooks");
  if (hooks.IsDefined() && !hooks.IsNull()) {
    if (!hooks.IsSequence()) {
      r.error(position_of(hooks, r.file()), "extensions.webhooks: expected a list");
    } else {
      for (size_t i = 0; i < hooks.size(); ++i) {
        std::string ctx = "extensions.webhooks[" + std::to_string(i) + "]";
        MapReader w(hooks[i], r.file(), ctx, r.errors());
        WebhookConfig hook;
        std::string event;
        w.get("hook", event);
        read_url(w, hook.url);
        std::string secret;
        w.get("secret", secret);
        if (w.has("secret")) hook.secrets = {secret};
        w.get("timeout", hook.timeout_ms);
        hook.events = {event.empty() ? std::string("*") : event};
        w.get("name", hook.name);
        if (!w.has("name")) hook.name = alias_webhook_name(event, hook.url);
        validate_webhook(w, hook, "timeout");
        w.finish();
        // Not a mapping (said): its made-up name would also be "used twice" by the next such item.
        if (w.valid()) cfg.webhooks.push_back(std::move(hook));
      }
    }
  }
  r.finish();
}

ConfigResult load_root(const YAML::Node& root, const std::string& file,
                       const std::string& base_dir) {
  Diagnostics errors;
  Config cfg = default_config(base_dir);
  cfg.file = file;
  MapReader r(root, file, "config", errors);
  if (!r.valid()) return errors;
  // `x-` keys are the operator's own: a place for `&anchors` to merge from, as in Compose files.
  // A file cut off after them (a reload mid-write) holds no settings either.
  r.allow_keys_starting_with("x-");
  cfg.holds_no_settings =
      root.IsMap() && std::none_of(root.begin(), root.end(), [](const auto& it) {
        return !it.first.IsScalar() || !it.first.Scalar().starts_with("x-");
      });
  read_bus(r.section("bus", "bus"), cfg.bus, base_dir);
  bool explicit_dirs = false;
  {
    MapReader hooks = r.section("hooks", "hooks");
    explicit_dirs = hooks.has("directories");
    if (explicit_dirs) cfg.hooks.directories_where = hooks.pos("directories");
    read_hooks(std::move(hooks), cfg.hooks);
  }
  if (r.node("extensions").IsDefined()) {  // node(): a known key, named in the unknown-key hint
    MapReader ext = r.section("extensions", "extensions");
    if (ext.has("directories")) cfg.hooks.directories_where = ext.pos("directories");
    explicit_dirs = explicit_dirs || ext.has("directories");
    read_extensions_alias(std::move(ext), cfg);
  }
  if (explicit_dirs) {
    for (auto& d : cfg.hooks.directories) d = resolve_path(d, base_dir);
  }
  // With every webhook commented out (or a file caught half-written by a reload), not "none".
  read_webhooks(r.list("webhooks", "webhooks"), file, errors, base_dir, cfg.webhooks);
  read_spool(r.section("spool", "spool"), cfg.spool, base_dir);
  read_admin(r.section("admin", "admin"), cfg.admin);
  read_log(r.section("log", "log"), cfg.log);
  r.finish();
  cfg.hooks.max_event_bytes = cfg.bus.max_message_bytes;

  // Named by their place too: a YAML alias (`- *hook`) repeats a webhook at its anchor's position.
  std::map<std::string, const std::string*> names;  // name → label of its first webhook
  for (const auto& w : cfg.webhooks) {
    auto [first, fresh] = names.emplace(w.name, &w.label);
    if (!w.name.empty() && !fresh)
      errors.push_back({w.where, w.label + ": webhook name '" + w.name +
                                     "' is used twice (first by " + *first->second + ")" +
                                     (w.name.rfind("extensions-", 0) == 0
                                          ? " (two extensions.webhooks entries with the same hook "
                                            "and URL: give each a name:)"
                                          : "")});
  }
  if (!errors.empty()) {
    in_file_order_once(errors);
    return errors;
  }
  return cfg;
}

}  // namespace

std::vector<std::string> default_hook_directories(const std::string& base_dir) {
  std::vector<std::string> dirs = {HOOKGATE_SHARE_DIR};
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg) {
    dirs.push_back((fs::path(xdg) / "hookgate" / "hooks").string());
  } else if (home && *home) {
    dirs.push_back((fs::path(home) / ".config" / "hookgate" / "hooks").string());
  }
  dirs.push_back((fs::path(base_dir) / "hooks").lexically_normal().string());
  return dirs;
}

Config default_config(const std::string& base_dir) {
  Config cfg;
  cfg.base_dir = base_dir;
  cfg.hooks.directories = default_hook_directories(base_dir);
  cfg.spool.path = resolve_path(cfg.spool.path, base_dir);
  return cfg;
}

ConfigResult load_config_text(const std::string& text, const std::string& file,
                              const std::string& base_dir) {
  auto root = parse_yaml(text, file);
  if (!root) return std::move(root).error();
  return load_root(root.value(), file, base_dir);
}

ConfigResult load_config_file(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  auto root = parse_yaml_file(path);
  if (!root) return std::move(root).error();
  return load_root(root.value(), path, abs.parent_path().string());
}

}  // namespace hookgate::config
