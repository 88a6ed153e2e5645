#include <rapidjson/document.h>

#include <cstdint>
#include <cstdio>

#include "bus/publisher.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/log.hpp"

namespace hookgate::cli {

int cmd_publish(const std::vector<std::string>& argv) {
  Args args(argv, {});
  if (auto code = check_usage(
          args,
          {"endpoint", "type", "data", "data-file", "source", "wait-ms", "server-key", "client-key",
           "max-message-bytes"},
          "Usage: hookgate publish --endpoint EP --type TYPE [--data JSON | --data-file FILE|-] "
          "[--source S]\n"
          "       [--wait-ms 3000] [--server-key Z85|FILE --client-key FILE]\n"
          "       [--max-message-bytes 1MiB]\n"
          "Publishes one CloudEvent on the bus. Waits up to --wait-ms for the gateway's "
          "subscription\n"
          "so the event is not dropped by ZeroMQ's slow-joiner effect; prints the event id.\n"
          "An event over --max-message-bytes (give the gateway's bus.max_message_bytes, in bytes "
          "or\n"
          "with its units: 4MiB, 2MB) is refused.\n"))
    return *code;
  auto endpoint = args.get("endpoint");
  auto type = args.get("type");
  if (!endpoint || !type || type->empty()) return fail("--endpoint and --type are required", 2);
  std::string data = args.get_or("data", "");
  std::string data_from = "--data";
  const auto max_bytes = max_message_bytes_option(args);
  if (!max_bytes) return 2;
  if (auto file = args.get("data-file")) {
    if (args.has("data")) return fail("use --data or --data-file, not both", 2);
    // Bounded by what an event could take, with room for spacing, which compact data sheds:
    // /dev/zero or an endless pipe used to be read until the memory ran out (found in an
    // exploratory run: std::bad_alloc, an abort).
    const size_t read_limit = static_cast<size_t>(*max_bytes) * 4;
    auto text = read_input_file(*file, read_limit);
    if (!text) return fail(text.error().message);
    if (text->size() > read_limit)
      return fail("--data-file " + *file + ": more than " + std::to_string(read_limit) +
                      " bytes, which no event within max_message_bytes " +
                      std::to_string(*max_bytes) +
                      " can hold (--max-message-bytes; give the gateway's "
                      "bus.max_message_bytes): nothing was sent",
                  2);
    // An empty file is more likely a truncated one than a wish to send no data.
    if (text->empty())
      return fail("--data-file " + *file +
                      " is empty; leave --data-file out to send an event "
                      "without data",
                  2);
    data = std::move(text).value();
    data_from = "--data-file " + *file;
  }
  // Before connecting: what the caller must fix is said at once, not as a "no subscriber" after
  // a wait. The size is a lower bound here; the publisher checks the whole event when it sends.
  if (is_diagnostic_type(*type)) return fail("--type '" + *type + "': " + kReservedTypeReason, 2);
  size_t data_bytes = 0;  // as sent: compact
  if (!data.empty()) {
    auto checked = bus::check_data_json(data);
    if (!checked) return fail(data_from + ": " + checked.error().message, 2);
    data_bytes = *checked;
    // Found in review: a whole event (the quickstart's sample-event.json, made for `hooks test
    // --event`) went out as the data of a new one, so the redact hook missed data.data.password.
    // Still sent: a payload may have such keys of its own.
    rapidjson::Document doc;
    doc.Parse(data.data(), data.size());
    if (doc.IsObject() && doc.HasMember("type") && doc["type"].IsString() &&
        (doc.HasMember("data") || doc.HasMember("specversion")))
      std::fprintf(stderr,
                   "hookgate: warning: %s looks like a whole event (it has \"type\" and "
                   "\"data\" or \"specversion\"); it is sent as the data of a new '%s' event, so "
                   "hooks see its fields under data.data. To send its data: jq .data FILE\n",
                   data_from.c_str(), escape_controls(*type).c_str());
  }
  // The data and the type alone: the envelope only adds to them.
  if (data_bytes + type->size() > static_cast<uint64_t>(*max_bytes))
    return fail(data_from + ": an event with these " + std::to_string(data_bytes) +
                    " bytes of data (compact) exceeds max_message_bytes " +
                    std::to_string(*max_bytes) +
                    " (--max-message-bytes; give the gateway's bus.max_message_bytes): nothing "
                    "was sent",
                2);
  bus::PublisherOptions options{.endpoints = {*endpoint},
                                .source = args.get_or("source", "unknown"),
                                .max_message_bytes = static_cast<size_t>(*max_bytes)};
  // Alone, a client key would be ignored and the "no subscriber" that follows would send the
  // caller looking at the wrong thing.
  if (args.has("client-key") && !args.has("server-key"))
    return fail("--client-key needs --server-key Z85|FILE (the bus's public key)", 2);
  if (auto server = args.get("server-key")) {
    auto server_key = bus::read_server_key(*server);
    if (!server_key) return fail(server_key.error().message);
    auto client_file = args.get("client-key");
    if (!client_file)
      return fail("--server-key needs --client-key FILE (from `hookgate keygen`)", 2);
    auto client = bus::read_key_file(*client_file);
    if (!client) return fail(client.error().message);
    options.server_public_key = server_key.value();
    options.client_keys = client.value();
  }
  auto pub = bus::Publisher::connect(std::move(options));
  // An endpoint libzmq refuses outright (its form, its transport) is a usage error, like a
  // malformed --wait-ms; anything else (no file descriptors left) is not.
  if (!pub)
    return fail(pub.error().message,
                pub.error().message.starts_with(bus::kEndpointRefused) ? 2 : 1);
  // The whole envelope (a type too long, bytes that are not UTF-8, the size with every
  // attribute), before the wait: found in an exploratory run, these came after it, as exit 1.
  if (auto st = pub.value()->check(*type, data); !st) return fail(st.error().message, 2);
  const auto wait_option = positive_option(args, "wait-ms", "3000");
  if (!wait_option || *wait_option > INT32_MAX)
    return fail("--wait-ms: expected a positive number of milliseconds, got '" +
                    args.get_or("wait-ms", "") + "'",
                2);
  const int wait_ms = static_cast<int>(*wait_option);
  if (!pub.value()->wait_for_subscriber(std::chrono::milliseconds(wait_ms), *type)) {
    const std::string refusal = pub.value()->refusal();
    return fail("no subscriber for '" + *type + "' on " + *endpoint + " within " +
                std::to_string(wait_ms) + " ms (" +
                (refusal.empty()
                     ? "is the gateway running? do its bus.topics take this type? is this "
                       "client's key allowed?"
                     : refusal) +
                ")");
  }
  if (auto st = pub.value()->publish(*type, data); !st) return fail(st.error().message);
  std::printf("%s\n", pub.value()->last_id().c_str());
  return 0;
}

}  // namespace hookgate::cli
