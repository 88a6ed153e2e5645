#pragma once
// The typed configuration (PRODUCT.md "Config file"). Every field has its default here; loader.cpp
// maps YAML onto these structs and rejects unknown keys with FILE:LINE:COL positions.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hookgate::config {

// The longest duration any setting may name (backoffs, Retry-After clamp, shutdown grace): 30
// days. Far beyond any sane value, and far from overflowing when added to a clock in ns.
inline constexpr int64_t kMaxDurationMs = 30LL * 24 * 3600 * 1000;

// Where a value came from, for error messages. line/column are 1-based; 0 = unknown.
struct Position {
  std::string file;
  int line = 0;
  int column = 0;
  std::string str() const;  // "file:line:col", or "file" when the position is unknown
};

struct Diagnostic {
  Position where;
  std::string message;
  std::string str() const;  // "file:line:col: message"
};
using Diagnostics = std::vector<Diagnostic>;

struct CurveConfig {
  bool enabled = false;
  std::string secret_key_file;  // the gateway's (server) secret key, z85, as written by keygen
  // A key file (one z85 public key a line) or a folder of *.pub files (and *.key files holding
  // only a public key; a keypair's .key is skipped, so removing its .pub revokes it).
  std::string allowed_clients;
  // Client mode (connecting to a CURVE `hookgate bus` proxy): the server's public key, Z85 or a
  // key file. Then secret_key_file is this gateway's client keypair and allowed_clients unused.
  std::string server_key;
  bool client_mode() const { return enabled && !server_key.empty(); }
  // Of each key's value (or of `bus.curve` when the key is not set): the files are read after
  // loading, and their errors point here.
  Position secret_key_file_where;
  Position allowed_clients_where;
  Position server_key_where;
};

// The largest bus.max_message_bytes (and --max-message-bytes) accepted: the sockets' hard cap is
// twice it, and both must stay far from overflowing.
inline constexpr int64_t kMaxMessageBytesLimit = int64_t{256} << 20;
// The smallest: an envelope with its required attributes takes most of it.
inline constexpr int64_t kMinMessageBytes = 64;

// The longest bus.topics prefix. A subscription travels as one frame (ZMTP 3.1's "\x09SUBSCRIBE"
// command or the older flag byte, then the prefix), and the sockets that receive subscriptions (a
// publisher's, the proxy's backend) refuse frames over kMaxSubscriptionFrameBytes: libzmq stores a
// subscription a node per byte, so one hostile 32 MiB frame cost a proxy and every publisher
// behind it gigabytes.
inline constexpr size_t kMaxTopicBytes = 1023;
inline constexpr int64_t kMaxSubscriptionFrameBytes = kMaxTopicBytes + 16;

struct BusConfig {
  std::optional<std::string> bind = std::string("tcp://127.0.0.1:5556");
  std::vector<std::string> connect;
  std::vector<std::string> topics{""};
  int64_t max_message_bytes = 1 << 20;
  // Messages queued in the SUB socket before ZeroMQ drops new ones (PUB/SUB drops at the HWM;
  // it never blocks publishers). 20,000 bounds a burst's RSS to about 10 MiB of queued
  // messages; see docs/design.md "Bus" for the trade-off with plain PUB publishers.
  int receive_hwm = 20000;
  CurveConfig curve;
  Position bind_where;  // of `bus.bind`, for what `check` finds about it on this machine
  std::vector<Position> connect_where;  // of each `bus.connect` item, likewise
};

struct HooksConfig {
  bool enabled = true;
  std::vector<std::string>
      directories;  // resolved to absolute paths; defaults filled by the loader
  // Of `hooks.directories` when the config lists them (a missing one is then worth a warning);
  // line 0 for the defaults, whose user and workspace folders are optional.
  Position directories_where;
  bool hot_reload = true;
  int default_timeout_ms = 5000;
  bool fail_open = true;
  int observer_queue = 10000;  // observer work items queued before new ones are dropped
  int observer_threads = 2;
  // Not a key of its own: bus.max_message_bytes, copied by the loader. A transform's replacement
  // may not be larger than the bus would accept (a hook bug must not grow events past what the
  // spool, memory bounds and receivers were sized for).
  int64_t max_event_bytes = 1 << 20;
};

struct RetryConfig {
  int max_attempts = 8;
  int64_t initial_backoff_ms = 1000;
  int64_t max_backoff_ms = 3600000;
  int64_t max_retry_after_ms = 3600000;  // a Retry-After longer than this is clamped
};

// cloudevent: the CloudEvents JSON; data: the bare `data` member; splunk_hec: Splunk's HTTP Event
// Collector shape {"time","host","source","sourcetype","index" (when set),"event": <CloudEvent>}.
enum class BodyMode { CloudEvent, Data, SplunkHec };

// TLS settings for an https:// webhook (libcurl). Verification is always on: there is no switch
// to turn it off; trust a private CA with ca_file instead.
struct TlsConfig {
  std::string ca_file;       // PEM CA certificates trusted instead of the system's store
  std::string cert_file;     // PEM client certificate, for receivers that require mutual TLS
  std::string key_file;      // its PEM private key
  std::string key_password;  // when key_file is encrypted (a secret: redacted from logs)
  bool operator==(const TlsConfig&) const = default;
};

struct WebhookConfig {
  std::string name;
  std::string url;
  std::vector<std::string> events{"*"};
  std::vector<std::string> secrets;  // newest first; `secret:` is the one-element form
  int timeout_ms = 5000;
  std::vector<std::pair<std::string, std::string>> headers;
  RetryConfig retry;
  int max_in_flight = 16;
  double rate_limit_per_s = 0;  // 0 = unlimited
  BodyMode body = BodyMode::CloudEvent;
  std::string hec_sourcetype;                // splunk_hec: default "hookgate:<event type>"
  std::string hec_index;                     // splunk_hec: optional index
  std::string hec_host_field = "data.host";  // splunk_hec: the event field `host` comes from
  bool sign_github = false;                  // `signatures: [github]` adds X-Hub-Signature-256
  std::vector<std::string> allow_cidrs;
  std::vector<std::string> deny_cidrs;
  // auto: hookgate's own HTTP/1.1 client for plain http:// URLs (webhooks/plain_http.hpp),
  // libcurl for https:// and URLs with credentials; libcurl: libcurl for every URL.
  enum class HttpClient { Auto, Libcurl };
  HttpClient http_client = HttpClient::Auto;
  TlsConfig tls;
  // Of the webhook's mapping, and of the values checked after loading (by `hookgate check`, and
  // by the dispatcher, which pauses a webhook it cannot use): each problem points at its key.
  Position where;
  std::string label;  // how messages name it: "webhooks[2]", "extensions.webhooks[0]"
  Position url_where;
  Position secrets_where;              // `secret` or `secrets`
  std::vector<Position> secret_where;  // one per secret: its `secrets` item, or the `secret` value
  Position allow_cidrs_where;
  Position deny_cidrs_where;
  std::vector<Position> allow_cidr_where;  // one per `allow_cidrs` item
  std::vector<Position> deny_cidr_where;   // one per `deny_cidrs` item
  std::vector<Position> header_where;      // one per `headers` entry, of its name
  Position tls_ca_file_where;
  Position tls_cert_file_where;
  Position tls_key_file_where;
};

inline constexpr int64_t kMinSpoolMaxBytes = 1 << 20;  // spool.max_bytes: room for the schema

struct SpoolConfig {
  enum class Mode { Sqlite, Memory };
  Mode mode = Mode::Sqlite;
  std::string path = "hookgate-spool.db";  // resolved against the config file's folder
  std::string synchronous = "NORMAL";  // NORMAL survives process crashes; FULL survives power loss
  int64_t retention_ms = 24LL * 3600 * 1000;  // delivered rows kept this long, then pruned
  // Dead letters kept this long after their last attempt, then pruned; 0 = until replayed or
  // purged (`hookgate deliveries purge`).
  int64_t dead_retention_ms = 0;
  // While the spool's rows take more than this many bytes, delivered rows are pruned before their
  // retention_ms is up, oldest first (pending and dead ones never are); 0 = no cap.
  int64_t retention_max_bytes = 0;
  // Once the spool's rows take this many bytes, intake waits (nothing more is read from the bus)
  // until deliveries free space, delivered rows pruned early first; nothing accepted is dropped.
  // 0 = no bound (the disk's size is the bound). At least kMinSpoolMaxBytes.
  int64_t max_bytes = 0;
  int64_t shutdown_grace_ms = 5000;
  // Memory mode only: pending deliveries one webhook may hold before its new ones are dropped
  // (counted in hookgate_deliveries_dropped_total); 0 = no bound.
  int64_t memory_max_pending = 100000;
  Position path_where;  // of `spool.path`, or of the `spool` section when it is not set
  Position max_bytes_where;
};

struct AdminConfig {
  bool enabled = true;
  std::string listen = "127.0.0.1:9464";
  std::string token;      // optional bearer token for /metrics and /status
  Position listen_where;  // of `admin.listen`, for what `check` finds about it on this machine
};

struct LogConfig {
  std::string level = "info";
  std::string format = "text";
  // `hookgate run --log-level`: never read from YAML; outranks `level`, across reloads too.
  std::string level_override;
  const std::string& effective_level() const {
    return level_override.empty() ? level : level_override;
  }
};

struct Config {
  std::string file;      // absolute path of the config file ("" for the embedded defaults)
  std::string base_dir;  // folder relative paths resolve against
  BusConfig bus;
  HooksConfig hooks;
  std::vector<WebhookConfig> webhooks;
  SpoolConfig spool;
  AdminConfig admin;
  LogConfig log;
  // The file held no key at all (empty, or comments only): the defaults. Fine to start on, but a
  // reload refuses it, since a file caught half-written would drop every webhook.
  bool holds_no_settings = false;
};

}  // namespace hookgate::config
