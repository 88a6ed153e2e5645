#pragma once
// Typed access to YAML mappings with source positions, in the manner of Fluent Bit's config maps:
// every key a reader does not ask for is reported as unknown, every type error points at the value
// as FILE:LINE:COL. Shared by the config loader and the declarative hook loader.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::config {

Position position_of(const YAML::Node& node, const std::string& file);

// How a value read from `node` appears in a message: as written (a ${VAR} as its name, since the
// environment's value may be a secret and the name is what the operator needs; a keyword in the
// case it was written in). `value` stands in for a node that is not a scalar.
std::string quoted_as_written(const YAML::Node& node, const std::string& value);
// Where `key` is written in `map` (the key itself); nullopt when `map` has no such key.
std::optional<Position> key_position(const YAML::Node& map, const std::string& key,
                                     const std::string& file);

// Parses YAML text; a syntax error becomes one Diagnostic at the parser's position.
Result<YAML::Node, Diagnostics> parse_yaml(const std::string& text, const std::string& file);
Result<YAML::Node, Diagnostics> parse_yaml_file(const std::string& path);

// Expands ${VAR} and ${VAR:-default} from the environment; `$${` is a literal `${`. An unset
// variable without a default is an error (an empty secret would silently turn signing off).
// With `substituted`, each value a ${VAR} (or its default) put into the result is appended to it.
std::string expand_env(std::string_view text, const Position& where, Diagnostics& errors,
                       std::vector<std::string>* substituted = nullptr);
// The values ${VAR}s put into `raw`: the parts of a secret value that must count as secrets on
// their own (`Authorization: "Splunk ${HEC_TOKEN}"` → the token, which is all HEC_TOKEN holds).
std::vector<std::string> substituted_values(std::string_view raw);

// A size: an integer, or one with a unit (B; KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB
// in powers of 1024; any case, one optional space). The error says what was expected, or "out of
// range". Shared by the config's size keys and the CLI's size flags.
[[nodiscard]] Result<int64_t> parse_byte_size(std::string_view text);

// Drops each diagnostic from `from` on that says what an earlier one from `from` on says (same
// place, same words): a value merged or aliased into several places is read, and found wrong,
// at each.
void drop_repeated(Diagnostics& errors, size_t from = 0);
// Sorts by line and column (keeping the order of those at one place), then drop_repeated().
void in_file_order_once(Diagnostics& errors);

// Each repeated key of `map` is an error at the repeat, naming the first's line. yaml-cpp keeps
// every copy and lookups find the first, so a repeated block would vanish silently. MapReader
// checks every mapping it reads; code that walks a mapping by hand calls this.
void report_duplicate_keys(const YAML::Node& map, const std::string& file,
                           const std::string& context, Diagnostics& errors);

class MapReader {
 public:
  // `context` names the mapping in messages ("hooks", "webhooks[2]").
  MapReader(YAML::Node node, std::string file, std::string context, Diagnostics& errors);

  bool valid() const { return valid_; }
  bool has(const char* key) const;
  Position pos(const char* key) const;  // of the value, or of the mapping if the key is absent
  Position pos() const;                 // of the mapping itself
  // Of item `index` when the value is a list, else as pos(key).
  Position pos(const char* key, size_t index) const;

  // Each getter leaves `out` untouched when the key is absent and records a Diagnostic on a
  // type error. Strings are ${VAR}-expanded.
  void get(const char* key, std::string& out);
  // A keyword from a fixed set (`json`, `memory`, `info`): as get(), in ASCII lower case, so
  // `INFO` and `Memory` read as they do in Fluent Bit and as booleans' `True` do here.
  void get_keyword(const char* key, std::string& out);
  void get(const char* key, bool& out);
  void get(const char* key, int& out);
  void get(const char* key, int64_t& out);
  void get(const char* key, double& out);
  // A size in bytes: an integer, or one with a unit, B, KB/MB/GB/TB (powers of 1000) or
  // KiB/MiB/GiB/TiB (powers of 1024), any case, one space between allowed ("64MiB", "10 GB").
  void get_bytes(const char* key, int64_t& out);
  // Accepts a sequence of scalars, or a single scalar as a one-element list.
  void get(const char* key, std::vector<std::string>& out);
  // A mapping of scalar to scalar, order kept.
  void get(const char* key, std::vector<std::pair<std::string, std::string>>& out);
  // Marks the key as known and hands out the raw node (undefined node if absent).
  YAML::Node node(const char* key);
  // A reader for the mapping under `key`, named `context` in messages. A key given with no value
  // (its keys all commented out) is an error, as for every other key: `admin:` with its token
  // commented out must not quietly mean an admin endpoint without one.
  MapReader section(const char* key, std::string context);
  // The list under `key` as a raw node (undefined if absent). A key with every item commented out
  // is an error: it would read as "none" (`key: []` says that).
  YAML::Node list(const char* key, const std::string& context);

  // `value` (read from `key`, or from its list's `item`) quoted for a message, or its text as
  // written when a ${VAR} went into it: the environment's value may be a secret.
  std::string as_written(const char* key, const std::string& value,
                         std::optional<size_t> item = std::nullopt) const;

  // Keys that start with `prefix` are the user's own: finish() lets them be.
  void allow_keys_starting_with(std::string prefix) { own_prefix_ = std::move(prefix); }

  void error(const Position& where, std::string message);
  // Reports every key nobody asked for. Call once, after all getters.
  void finish();

  const std::string& file() const { return file_; }
  const std::string& context() const { return context_; }
  Diagnostics& errors() { return errors_; }

 private:
  YAML::Node find(const char* key);
  bool scalar(const char* key, YAML::Node& value, const char* expected);
  // False (and an error) when `value` carries a YAML tag, which is never obeyed, or holds a NUL
  // character, which no setting may (a path or name would be cut off at it).
  bool plain_scalar(const YAML::Node& value, const std::string& label);

  YAML::Node node_;
  std::string file_;
  std::string context_;
  Diagnostics& errors_;
  std::set<std::string> known_;
  std::string own_prefix_;  // allow_keys_starting_with
  bool valid_ = true;
};

}  // namespace hookgate::config
