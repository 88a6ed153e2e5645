#include "config/yaml_reader.hpp"

#include "gateway/common/log.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gateway/common/text.hpp"

namespace hookgate::config {

// One problem, one line (found in an SRE pass: a hook file named with a newline broke `check`'s
// FILE:LINE:COL lines): control characters in a file name or message are escaped as in the log.
std::string Position::str() const {
  if (line == 0) return file.empty() ? "(config)" : escape_controls(file);
  return escape_controls(file) + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string Diagnostic::str() const {
  return where.str() + ": " + escape_controls(message);
}

Position position_of(const YAML::Node& node, const std::string& file) {
  auto mark = node.Mark();
  if (mark.is_null()) return {file, 0, 0};
  return {file, mark.line + 1, mark.column + 1};
}

std::optional<Position> key_position(const YAML::Node& map, const std::string& key,
                                     const std::string& file) {
  if (!map || !map.IsMap()) return std::nullopt;
  for (auto it : map)
    if (it.first.IsScalar() && it.first.Scalar() == key) return position_of(it.first, file);
  return std::nullopt;
}

std::string quoted_as_written(const YAML::Node& node, const std::string& value) {
  // The scalar itself: a ${VAR} stays a name, and a keyword read in lower case (`Verbose`) or a
  // resolved path is shown as the operator wrote it.
  return "'" + (node.IsScalar() ? node.Scalar() : value) + "'";
}

namespace {

constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

// The 1-based line of the first content of a second document; 0 when there is none. A document
// ends at `...`, and at a `---` once a first `---` or content came (so `---` `---` CONFIG, or
// `# header` `...` CONFIG, is an empty document and then the config, which Load would drop). A
// marker at column 0 cannot be part of a scalar (YAML ends a document there), so a line scan is
// exact. Not YAML::LoadAll: yaml-cpp 0.7 loops forever on some malformed input there (found by
// fuzz_config), where Load returns.
int second_document_line(std::string_view text) {
  if (text.starts_with(kUtf8ByteOrderMark)) text.remove_prefix(kUtf8ByteOrderMark.size());
  bool begun = false;  // the first document has begun (a `---` or content)
  bool ended = false;  // ... and has ended: content from here on is a second document
  int line_no = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto blank_or_comment = [](std::string_view rest) {
      const size_t first = rest.find_first_not_of(" \t");
      return first == std::string_view::npos || rest[first] == '#';
    };
    const bool start_marker = line.starts_with("---");
    const bool marker = (start_marker || line.starts_with("...")) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    if (marker) {
      if (!start_marker || begun) ended = true;
      begun = true;
      if (!blank_or_comment(line.substr(3)) && ended) return line_no;  // `--- value`
      continue;
    }
    if (blank_or_comment(line) || (!begun && line.starts_with('%'))) continue;  // directives
    if (ended) return line_no;
    begun = true;
  }
  return 0;
}

// How many nodes a tree would hold with its aliases expanded. yaml-cpp shares an aliased node,
// but everything that walks the tree (the readers, a hook's config: turned into JSON) visits it
// once per alias: ten levels of ten aliases are 10^10 visits, and an alias inside its own anchor
// (`x: &a [*a]`) never ends. Past this many, a config is refused before anything walks it.
constexpr uint64_t kMaxExpandedNodes = 1'000'000;
// A config file's size at most: a real one is kilobytes.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;

// One pass over the parser's events (which never expand an alias): the expanded size, whether an
// alias refers to a node still open, and where the last scalar starts (after an unclosed quote,
// the quoted value that ran on to the end of the file).
class EventScan final : public YAML::EventHandler {
 public:
  uint64_t expanded = 0;
  std::optional<YAML::Mark> recursive_alias;
  YAML::Mark last_scalar;  // line 0, column 0 until a scalar is seen

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { leaf(anchor); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto done = sizes_.find(anchor);
    if (done == sizes_.end()) {  // its node has not ended: it contains this alias
      if (!recursive_alias) recursive_alias = mark;
      return;
    }
    add(done->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    if (mark.line > last_scalar.line ||
        (mark.line == last_scalar.line && mark.column > last_scalar.column))
      last_scalar = mark;
    leaf(anchor);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open_.push_back({anchor, 1});
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open_.push_back({anchor, 1});
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    uint64_t nodes;
  };
  void add(uint64_t nodes) {
    uint64_t& to = open_.empty() ? expanded : open_.back().nodes;
    to = std::min(to + nodes, kMaxExpandedNodes + 1);  // saturates: 10^10 must not wrap
  }
  void leaf(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) sizes_[anchor] = 1;
    add(1);
  }
  void close() {
    if (open_.empty()) return;
    const Open done = open_.back();
    open_.pop_back();
    if (done.anchor != YAML::NullAnchor) sizes_[done.anchor] = done.nodes;
    add(done.nodes);
  }
  std::vector<Open> open_;
  std::map<YAML::anchor_t, uint64_t> sizes_;
};

// Runs the scan over `text`; a syntax error ends it where it is (what it saw so far stays).
EventScan scan_events(const std::string& text) {
  EventScan scan;
  std::istringstream in(text);
  try {
    // The first document only (a second one was refused already): a loop over documents is
    // what hangs yaml-cpp 0.7 on some malformed input (see second_document_line).
    YAML::Parser parser(in);
    (void)parser.HandleNextDocument(scan);
  } catch (const YAML::Exception&) {
  }
  return scan;
}

// The 1-based line of the last line with text (not blank, not only a comment), and the column
// just past its last character; {1, 1} when there is none.
std::pair<int, int> end_of_last_text_line(std::string_view text) {
  int line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (size_t end = text.size();; --line) {
    const size_t newline = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    const size_t first = newline == std::string_view::npos ? 0 : newline + 1;
    const std::string_view content = text.substr(first, end - first);
    const size_t last = content.find_last_not_of(" \t\r");
    const size_t lead = content.find_first_not_of(" \t");
    if (last != std::string_view::npos && content[lead] != '#')
      return {line, static_cast<int>(last) + 2};
    if (first == 0) return {1, 1};
    end = newline;
  }
}

// yaml-cpp names what broke ("illegal map value"), not why: the usual causes of the messages
// hand-written configs get. `line` is 0-based, the error's.
std::string syntax_hint(std::string_view text, int line, const std::string& msg) {
  auto line_text = [&](int wanted) -> std::string_view {
    size_t start = 0;
    for (int l = 0; l < wanted; ++l) {
      start = text.find('\n', start);
      if (start == std::string_view::npos) return {};
      ++start;
    }
    return text.substr(start, text.find('\n', start) - start);
  };
  for (int l : {line, line - 1}) {
    if (l < 0) continue;
    const std::string_view indent = line_text(l).substr(0, line_text(l).find_first_not_of(" \t"));
    if (indent.find('\t') != std::string_view::npos)
      return " (line " + std::to_string(l + 1) +
             " is indented with a tab: YAML indents with spaces only)";
  }
  // yaml-cpp's words when it gives up on depth (found in a config torture pass).
  if (msg == "bad file") return " (an unclosed [ or {, or nesting far deeper than a config needs)";
  if (msg == YAML::ErrorMsg::END_OF_MAP_FLOW || msg == YAML::ErrorMsg::END_OF_SEQ_FLOW ||
      msg == YAML::ErrorMsg::FLOW_END)
    return " (inside { } or [ ], quote a value that holds { } [ ] or a comma, \"${VAR}\" "
           "included, and close each bracket)";
  if (msg == YAML::ErrorMsg::MAP_VALUE || msg == YAML::ErrorMsg::MAP_KEY ||
      msg == YAML::ErrorMsg::END_OF_MAP || msg == YAML::ErrorMsg::BLOCK_ENTRY ||
      msg == YAML::ErrorMsg::END_OF_SEQ)
    return " (check this line's indentation against the lines above: the keys of one map start "
           "in the same column, and a value's own keys further in)";
  return "";
}

int line_count(std::string_view text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n')) +
         (!text.empty() && text.back() != '\n' ? 1 : 0);
}

bool is_merge_key(const YAML::Node& key) {
  // Plain `<<` (yaml-cpp tags it "?"; a quoted one "!"), or with the YAML 1.1 tag written out.
  return key.IsScalar() && key.Scalar() == "<<" &&
         (key.Tag() == "?" || key.Tag() == "tag:yaml.org,2002:merge");
}

// Merges the `<<` keys of `map`, whose bases are resolved already (see resolve_merge_keys).
void merge_into(YAML::Node map, const std::string& file, Diagnostics& errors) {
  std::vector<std::pair<YAML::Node, YAML::Node>> merges;  // (the `<<` key, its value)
  std::unordered_set<std::string> present;                // keys the mapping sets itself
  for (auto it : map) {
    if (is_merge_key(it.first)) {
      merges.emplace_back(it.first, it.second);
    } else if (it.first.IsScalar()) {
      present.insert(it.first.Scalar());
    }
  }
  if (merges.empty()) return;
  for (const auto& [key, value] : merges) map.remove(key);
  if (merges.size() > 1) {
    errors.push_back(
        {position_of(merges[1].first, file),
         "a second merge key `<<` in one mapping (merge several with `<<: [*a, *b]`)"});
    return;
  }
  const YAML::Node& value = merges[0].second;
  std::vector<YAML::Node> bases;
  if (value.IsMap()) bases.push_back(value);
  if (value.IsSequence())
    for (auto item : value) bases.push_back(item);
  auto not_a_map = std::find_if(bases.begin(), bases.end(),
                                [](const YAML::Node& base) { return !base.IsMap(); });
  if (bases.empty() || not_a_map != bases.end()) {
    // At the `<<`, or at a list item written there: an alias would point at its anchor, away
    // from the `<<`.
    const bool item =
        value.IsSequence() && not_a_map != bases.end() && not_a_map->Mark().pos > value.Mark().pos;
    errors.push_back({position_of(item ? *not_a_map : merges[0].first, file),
                      "a merge key `<<` takes a mapping or a list of mappings, such as "
                      "`<<: *defaults` (quote it, \"<<\", for a key of that name)"});
    return;
  }
  for (const YAML::Node& base : bases) {
    // Against the keys before this base, not the ones it brings: a key written twice in a base
    // lands twice, for the duplicate-key check to report where it is written.
    std::vector<std::string> brought;
    for (auto it : base) {
      if (it.first.IsScalar() && present.count(it.first.Scalar())) continue;
      map.force_insert(it.first, it.second);
      if (it.first.IsScalar()) brought.push_back(it.first.Scalar());
    }
    present.insert(brought.begin(), brought.end());
  }
}

// YAML 1.1 merge keys, which yaml-cpp 0.7 reads as an ordinary key named `<<`: `<<: *base` copies
// base's keys that the mapping does not set itself, and `<<: [*a, *b]` does so for each, the
// earlier winning. Resolved in place, by reference: a merged key and value keep their positions
// (at the anchor), so a mistake in `base` is reported where it is written.
// Children before their parent, each node once (an alias shares its anchor's node, and the
// anchor comes first, so a base is complete before it is merged), and with a stack of our own:
// aliases can make the tree far deeper than the text (the scan caps them at a million values).
void resolve_merge_keys(const YAML::Node& root, const std::string& file, Diagnostics& errors) {
  // Containers whose children were pushed (in work, or done), by position in the text, then by
  // identity (an alias shares its anchor's node): a mapping whose first key is a collection has
  // that key's position (found in review).
  std::unordered_map<int64_t, std::vector<YAML::Node>> opened;
  auto open = [&](const YAML::Node& n) {
    auto& at = opened[static_cast<int64_t>(n.Mark().pos)];
    if (std::any_of(at.begin(), at.end(), [&](const YAML::Node& o) { return o.is(n); }))
      return false;
    at.push_back(n);
    return true;
  };
  struct Frame {
    YAML::Node node;
    bool children_pushed = false;
  };
  std::vector<Frame> stack;
  stack.push_back({root});
  while (!stack.empty()) {
    if (stack.back().children_pushed) {
      YAML::Node done = stack.back().node;
      stack.pop_back();
      if (done.IsMap()) merge_into(done, file, errors);
      continue;
    }
    YAML::Node node = stack.back().node;
    if (!open(node)) {
      stack.pop_back();  // reached before, by another path: resolved, or resolving below
      continue;
    }
    stack.back().children_pushed = true;
    std::vector<YAML::Node> children;
    if (node.IsSequence())
      for (auto item : node) children.push_back(item);
    if (node.IsMap())
      for (auto it : node) children.push_back(it.second);
    for (auto child = children.rbegin(); child != children.rend(); ++child)
      if (child->IsMap() || child->IsSequence()) stack.push_back({*child});
  }
}

}  // namespace

Result<YAML::Node, Diagnostics> parse_yaml(const std::string& text, const std::string& file) {
  // A config is UTF-8 text (found in a config torture pass): yaml-cpp reads UTF-16 and UTF-32
  // but not the ASCII end marker appended below, which became part of the last value (a secret
  // of 9 bytes where 3 were written); and in a plain scalar it takes a raw NUL as the start of a
  // backslash escape (`de<NUL>x62ug` read as `debug`).
  if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF") ||
      text.starts_with(std::string_view("\0\0\xFE\xFF", 4)))
    return Diagnostics{{{file, 1, 1}, "the file is UTF-16 or UTF-32 text: save it as UTF-8"}};
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const size_t line_start = text.rfind('\n', nul);
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + nul, '\n'));
    const int column =
        1 + static_cast<int>(line_start == std::string::npos ? nul : nul - line_start - 1);
    return Diagnostics{{{file, line, column},
                        "a NUL byte: a config file is UTF-8 text (saved as UTF-16? a binary "
                        "file?)"}};
  }
  // Load reads the first document only: a config pasted together from pieces with `---` would
  // lose everything after it without a word.
  if (const int line = second_document_line(text))
    return Diagnostics{{{file, line, 1},
                        "a second YAML document (after `---` or `...`): a config is one "
                        "document; merge the two"}};
  try {
    // yaml-cpp 0.7 takes a quote left open at the end of a file as closed there, so the rest of
    // the file became that value without a word. An explicit end of document after the text
    // makes it an error ("illegal document indicator in scalar").
    // Only the line break that is missing goes before it: a keep-chomping `|+` value at the end
    // would take an extra one.
    const std::string ended = text + (text.empty() || text.back() == '\n' ? "" : "\n") + "...\n";
    YAML::Node root = YAML::Load(ended);
    // Aliases need an anchor (`&`): most files have none and are not parsed a second time.
    const EventScan scan = ended.find('&') == std::string::npos ? EventScan{} : scan_events(ended);
    if (scan.recursive_alias)
      return Diagnostics{{{file, scan.recursive_alias->line + 1, scan.recursive_alias->column + 1},
                          "an alias inside the node its anchor names (it would repeat without "
                          "end)"}};
    if (scan.expanded > kMaxExpandedNodes)
      return Diagnostics{{{file, 1, 1},
                          "aliases expand this file to more than " +
                              std::to_string(kMaxExpandedNodes) + " values"}};
    if (!root || root.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (ended.find("<<") != std::string::npos) {
      Diagnostics errors;
      resolve_merge_keys(root, file, errors);
      in_file_order_once(errors);  // found children first
      if (!errors.empty()) return errors;
    }
    return root;
  } catch (const YAML::Exception& e) {
    const int lines = line_count(text);
    const bool past_the_text = e.mark.line + 1 > lines;
    if (past_the_text && e.msg == YAML::ErrorMsg::DOC_IN_SCALAR) {
      // The events up to where the text breaks off (an unclosed flow map stops the parser).
      // With its line break: without one, the scan stops before the quoted value it opens.
      const YAML::Mark opened =
          scan_events(!text.empty() && text.back() != '\n' ? text + "\n" : text).last_scalar;
      return Diagnostics{{{file, opened.line + 1, opened.column + 1},
                          "YAML syntax error: this quoted value is never closed (a closing quote "
                          "is missing, so the rest of the file would be part of it)"}};
    }
    // e.msg is the parser's message without the position prefix that e.what() carries. Errors
    // found at the appended end of document are placed at the end of the file's last line with
    // text (an unclosed `{`), not on a line past it.
    if (past_the_text) {
      const auto [line, column] = end_of_last_text_line(text);
      return Diagnostics{{{file, line, column},
                          "YAML syntax error: " + e.msg + syntax_hint(text, line - 1, e.msg)}};
    }
    return Diagnostics{{{file, e.mark.line + 1, e.mark.column + 1},
                        "YAML syntax error: " + e.msg + syntax_hint(text, e.mark.line, e.msg)}};
  }
}

Result<YAML::Node, Diagnostics> parse_yaml_file(const std::string& path) {
  // A directory opens as an empty stream on Linux: without this it would read as an empty
  // config, i.e. the defaults.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Diagnostics{{{path, 0, 0}, "is a directory, not a config file"}};
  std::ifstream in(path, std::ios::binary);
  // errno says why: a service user that may not read it is the common case.
  if (!in)
    return Diagnostics{{{path, 0, 0}, std::string("cannot read file: ") + std::strerror(errno)}};
  // Bounded: a pipe is fine (`--config <(envsubst < tmpl.yaml)`), but /dev/zero or an endless
  // one was read until memory ran out (found in a config torture pass: 2.3 GB in 3 s, then
  // std::bad_alloc).
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes)
      return Diagnostics{
          {{path, 0, 0},
           "larger than " + std::to_string(kMaxConfigBytes >> 20) + " MiB: not a config file"}};
  }
  return parse_yaml(text, path);
}

std::string expand_env(std::string_view text, const Position& where, Diagnostics& errors,
                       std::vector<std::string>* substituted) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "$${") == 0) {
      out += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out.push_back(text[i++]);
      continue;
    }
    size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      errors.push_back(
          {where, "unterminated ${ in value (write $${ for a literal ${, e.g. in a pasted key)"});
      return out;
    }
    std::string_view inner = text.substr(i + 2, close - i - 2);
    if (inner.find("${") != std::string_view::npos) {
      errors.push_back({where,
                        "nested ${...} inside a ${VAR:-default} is not supported; the "
                        "default must be plain text"});
      return out;
    }
    std::string_view name = inner;
    std::optional<std::string_view> fallback;
    if (auto sep = inner.find(":-"); sep != std::string_view::npos) {
      name = inner.substr(0, sep);
      fallback = inner.substr(sep + 2);
    }
    std::string var(name);
    if (var.empty()) {  // `${:-x}` or `${}`: a typo, most likely, not a way to write x
      errors.push_back({where, "${...} without a variable name"});
      return out;
    }
    // Other tools' forms (${VAR-x}, ${VAR:?message}, ${ VAR }) must not read as a variable named
    // "VAR-x". Only the name's valid start is quoted: what follows may be a default's secret.
    const size_t name_end =
        var.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
    const bool digit_first = std::isdigit(static_cast<unsigned char>(var[0]));
    if (name_end != std::string::npos || digit_first) {
      const std::string what =
          digit_first            ? "${...}: a variable name cannot start with a digit"
          : var[name_end] == ' ' ? "${" + var.substr(0, name_end) + "...}: a space"
                                 : "${" + var.substr(0, name_end) + "...}: '" + var[name_end] + "'";
      errors.push_back({where, what + (digit_first ? "" : " cannot be in a variable name") +
                                   "; hookgate expands ${VAR} and ${VAR:-default} only (VAR: "
                                   "letters, digits and _; $${ is a literal ${)"});
      return out;
    }
    const char* value = std::getenv(var.c_str());
    if (value && *value) {
      out += value;
      if (substituted) substituted->emplace_back(value);
    } else if (fallback) {
      out += *fallback;
      if (substituted) substituted->emplace_back(*fallback);
    } else if (value) {
      // Set but empty: honour it (the operator said so explicitly).
    } else {
      errors.push_back({where, "environment variable " + var + " is not set (use ${" + var +
                                   ":-default} for a default)"});
    }
    i = close + 1;
  }
  return out;
}

std::vector<std::string> substituted_values(std::string_view raw) {
  std::vector<std::string> values;
  Diagnostics ignored;  // the value was expanded (and its errors reported) when it was read
  (void)expand_env(raw, Position{}, ignored, &values);
  return values;
}

void drop_repeated(Diagnostics& errors, size_t from) {
  std::unordered_set<std::string> said;
  size_t kept = from;
  for (size_t i = from; i < errors.size(); ++i)
    if (said.insert(errors[i].str()).second) {
      if (kept != i) errors[kept] = std::move(errors[i]);
      ++kept;
    }
  if (kept < errors.size()) errors.resize(kept);
}

void in_file_order_once(Diagnostics& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
  });
  drop_repeated(errors);
}

void report_duplicate_keys(const YAML::Node& map, const std::string& file,
                           const std::string& context, Diagnostics& errors) {
  std::map<std::string, int> first_line;
  for (auto it : map) {
    if (!it.first.IsScalar()) continue;
    const Position at = position_of(it.first, file);
    auto [seen, fresh] = first_line.emplace(it.first.Scalar(), at.line);
    if (!fresh)
      errors.push_back({at, "duplicate key '" + it.first.Scalar() + "' in " + context +
                                " (first at line " + std::to_string(seen->second) + ")"});
  }
}

MapReader::MapReader(YAML::Node node, std::string file, std::string context, Diagnostics& errors)
    : node_(std::move(node)),
      file_(std::move(file)),
      context_(std::move(context)),
      errors_(errors) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    error(pos(), context_ + " must be a mapping");
    valid_ = false;
  }
  if (valid_ && node_ && node_.IsMap()) report_duplicate_keys(node_, file_, context_, errors_);
}

YAML::Node MapReader::find(const char* key) {
  known_.insert(key);
  if (!valid_ || !node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it : node_) {
    if (it.first.IsScalar() && it.first.Scalar() == key) return it.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool MapReader::has(const char* key) const {
  if (!valid_ || !node_ || !node_.IsMap()) return false;
  for (auto it : node_)
    if (it.first.IsScalar() && it.first.Scalar() == key) return true;
  return false;
}

Position MapReader::pos() const {
  return position_of(node_, file_);
}

Position MapReader::pos(const char* key, size_t index) const {
  if (valid_ && node_ && node_.IsMap()) {
    for (auto it : node_)
      if (it.first.IsScalar() && it.first.Scalar() == key && it.second.IsSequence() &&
          index < it.second.size())
        return position_of(it.second[index], file_);
  }
  return pos(key);
}

Position MapReader::pos(const char* key) const {
  if (valid_ && node_ && node_.IsMap()) {
    for (auto it : node_)
      if (it.first.IsScalar() && it.first.Scalar() == key) {
        // A null value has no text of its own (yaml-cpp places it after any comments): the
        // key is where the operator looks.
        auto p = it.second.IsNull() ? Position{} : position_of(it.second, file_);
        return p.line ? p : position_of(it.first, file_);
      }
  }
  return pos();
}

std::string MapReader::as_written(const char* key, const std::string& value,
                                  std::optional<size_t> item) const {
  if (valid_ && node_ && node_.IsMap())
    for (auto it : node_)
      if (it.first.IsScalar() && it.first.Scalar() == key) {
        if (!item) return quoted_as_written(it.second, value);
        // A list's item, or a single scalar read as a one-item list.
        if (it.second.IsSequence() && *item < it.second.size())
          return quoted_as_written(it.second[*item], value);
        if (it.second.IsScalar()) return quoted_as_written(it.second, value);
      }
  return "'" + value + "'";
}

void MapReader::error(const Position& where, std::string message) {
  errors_.push_back({where, std::move(message)});
}

bool MapReader::scalar(const char* key, YAML::Node& value, const char* expected) {
  value = find(key);
  if (!value.IsDefined()) return false;
  // `key:` with its value commented out must not quietly keep the default (`fail_open: # false`).
  if (value.IsNull()) {
    error(pos(key), context_ + "." + key + ": no value (give one, or leave the key out)");
    return false;
  }
  if (!value.IsScalar()) {
    error(position_of(value, file_), context_ + "." + key + ": expected " + expected);
    return false;
  }
  return plain_scalar(value, context_ + "." + key);
}

bool MapReader::plain_scalar(const YAML::Node& value, const std::string& label) {
  // A tag is not obeyed: `secret: !!binary aGVsbG8=` would sign with the base64 text itself.
  if (const std::string& tag = value.Tag();
      !tag.empty() && tag != "?" && tag != "!" && tag != "tag:yaml.org,2002:str") {
    error(position_of(value, file_),
          label + ": the YAML tag " + tag + " is not supported; write the plain value");
    return false;
  }
  // Found in a config torture pass: spool.path "x.db\0junk" passed `check`, and the gateway
  // then locked and opened x.db.
  if (value.Scalar().find('\0') != std::string::npos) {
    error(position_of(value, file_), label + ": a NUL character (\\0) is not allowed here");
    return false;
  }
  return true;
}

YAML::Node MapReader::list(const char* key, const std::string& context) {
  YAML::Node value = find(key);
  if (value.IsDefined() && value.IsNull())
    error(pos(key),
          context + ": no value (list the " + key + ", or write `" + key + ": []` for none)");
  return value;
}

MapReader MapReader::section(const char* key, std::string context) {
  YAML::Node value = find(key);
  if (value.IsDefined() && value.IsNull())
    error(pos(key), context + ": no value (give its keys, or leave the key out)");
  return MapReader(value, file_, std::move(context), errors_);
}

void MapReader::get(const char* key, std::string& out) {
  YAML::Node v;
  if (!scalar(key, v, "a string")) return;
  out = expand_env(v.Scalar(), position_of(v, file_), errors_);
}

void MapReader::get(const char* key, bool& out) {
  YAML::Node v;
  if (!scalar(key, v, "true or false")) return;
  std::string s = expand_env(v.Scalar(), position_of(v, file_), errors_);
  // YAML 1.1's spellings, as yaml-cpp and Fluent Bit take them: lower, Capitalized or UPPER.
  auto spelled = [&](std::initializer_list<const char*> words) {
    for (const char* word : words) {
      std::string capitalized = word;
      capitalized[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      std::string upper = word;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (s == word || s == capitalized || s == upper) return true;
    }
    return false;
  };
  if (spelled({"true", "yes", "on"})) {
    out = true;
  } else if (spelled({"false", "no", "off"})) {
    out = false;
  } else {
    error(position_of(v, file_), context_ + "." + key +
                                     ": expected true or false (or yes/no, on/off), got " +
                                     quoted_as_written(v, s));
  }
}

void MapReader::get_keyword(const char* key, std::string& out) {
  get(key, out);
  out = ascii_lower(std::move(out));
}

void MapReader::get(const char* key, int64_t& out) {
  YAML::Node v;
  if (!scalar(key, v, "an integer")) return;
  std::string s = expand_env(v.Scalar(), position_of(v, file_), errors_);
  int64_t parsed = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), parsed);
  if (ec == std::errc::result_out_of_range) {
    error(position_of(v, file_), context_ + "." + key + ": integer out of range, got " +
                                     excerpt(quoted_as_written(v, s), 80));
    return;
  }
  if (ec != std::errc{} || p != s.data() + s.size()) {
    // A cut excerpt: a 1 MB value made a 1 MB error line (found in a config torture pass).
    error(position_of(v, file_), context_ + "." + key + ": expected an integer, got " +
                                     excerpt(quoted_as_written(v, s), 80));
    return;
  }
  out = parsed;
}

Result<int64_t> parse_byte_size(std::string_view text) {
  constexpr const char* kExpected =
      "expected bytes: an integer, or one with a unit (KB, MB, GB, TB: powers of 1000; KiB, MiB, "
      "GiB, TiB: powers of 1024)";
  int64_t number = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec == std::errc::result_out_of_range) return make_error("out of range");
  if (ec != std::errc{}) return make_error(kExpected);
  std::string unit(p, text.data() + text.size());
  if (unit.size() > 1 && unit.front() == ' ') unit.erase(0, 1);  // "10 GB"; not "10 " alone
  unit = ascii_lower(std::move(unit));
  // Both conventions are in use (disk vendors, `df -H` vs `ls -h`, Kubernetes' Mi/M): each
  // spelling means one thing, and a bare K or M, which could mean either, is refused.
  static const std::pair<const char*, int64_t> kUnits[] = {{"", 1},
                                                           {"b", 1},
                                                           {"kb", 1000},
                                                           {"mb", 1000 * 1000},
                                                           {"gb", 1000LL * 1000 * 1000},
                                                           {"tb", 1000LL * 1000 * 1000 * 1000},
                                                           {"kib", 1LL << 10},
                                                           {"mib", 1LL << 20},
                                                           {"gib", 1LL << 30},
                                                           {"tib", 1LL << 40}};
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const auto& u) { return unit == u.first; });
  if (found == std::end(kUnits)) return make_error(kExpected);
  if (number != 0 && (number > INT64_MAX / found->second || number < INT64_MIN / found->second))
    return make_error("out of range");
  return number * found->second;
}

void MapReader::get_bytes(const char* key, int64_t& out) {
  YAML::Node v;
  if (!scalar(key, v, "a size in bytes")) return;
  const std::string s = expand_env(v.Scalar(), position_of(v, file_), errors_);
  auto bytes = parse_byte_size(s);
  if (!bytes) {
    error(position_of(v, file_),
          context_ + "." + key + ": " + bytes.error().message + ", got " + quoted_as_written(v, s));
    return;
  }
  out = *bytes;
}

void MapReader::get(const char* key, int& out) {
  int64_t wide = out;
  size_t before = errors_.size();
  get(key, wide);
  if (errors_.size() != before) return;
  if (wide < INT32_MIN || wide > INT32_MAX) {
    error(pos(key), context_ + "." + key + ": integer out of range (at most " +
                        std::to_string(INT32_MAX) + ")");
    return;
  }
  out = static_cast<int>(wide);
}

void MapReader::get(const char* key, double& out) {
  YAML::Node v;
  if (!scalar(key, v, "a number")) return;
  std::string s = expand_env(v.Scalar(), position_of(v, file_), errors_);
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    error(position_of(v, file_),
          context_ + "." + key + ": expected a number, got " + quoted_as_written(v, s));
    return;
  }
  // An underflow comes back as 0, which may mean "no limit"; an overflow as infinity.
  if (errno == ERANGE) {
    error(position_of(v, file_), context_ + "." + key + ": number out of range");
    return;
  }
  out = d;
}

void MapReader::get(const char* key, std::vector<std::string>& out) {
  YAML::Node v = find(key);
  if (!v.IsDefined()) return;
  // A key with every item commented out must not fall back to the default ("*", everything).
  if (v.IsNull()) {
    error(pos(key),
          context_ + "." + key + ": no value (list at least one item, or leave the key out)");
    return;
  }
  if (v.IsScalar()) {
    if (plain_scalar(v, context_ + "." + key))
      out = {expand_env(v.Scalar(), position_of(v, file_), errors_)};
    return;
  }
  if (!v.IsSequence()) {
    error(position_of(v, file_), context_ + "." + key + ": expected a list of strings");
    return;
  }
  out.clear();
  for (const auto& item : v) {
    if (!item.IsScalar()) {
      error(position_of(item, file_), context_ + "." + key + ": expected a string");
      continue;
    }
    if (!plain_scalar(item, context_ + "." + key)) continue;
    out.push_back(expand_env(item.Scalar(), position_of(item, file_), errors_));
  }
}

void MapReader::get(const char* key, std::vector<std::pair<std::string, std::string>>& out) {
  YAML::Node v = find(key);
  if (!v.IsDefined()) return;
  // `headers:` with its only entry commented out would quietly send none (no Authorization).
  if (v.IsNull()) {
    error(pos(key), context_ + "." + key + ": no value (give one, or leave the key out)");
    return;
  }
  if (!v.IsMap()) {
    error(position_of(v, file_), context_ + "." + key + ": expected a mapping");
    return;
  }
  out.clear();
  report_duplicate_keys(v, file_, context_ + "." + key, errors_);
  for (auto it : v) {
    if (!it.first.IsScalar() || !it.second.IsScalar()) {
      error(position_of(it.first, file_), context_ + "." + key + ": expected string: string pairs");
      continue;
    }
    if (!plain_scalar(it.second, context_ + "." + key + "." + it.first.Scalar())) continue;
    out.emplace_back(it.first.Scalar(),
                     expand_env(it.second.Scalar(), position_of(it.second, file_), errors_));
  }
}

YAML::Node MapReader::node(const char* key) {
  return find(key);
}

void MapReader::finish() {
  if (!valid_ || !node_ || !node_.IsMap()) return;
  for (auto it : node_) {
    std::string key = it.first.IsScalar() ? it.first.Scalar() : "?";
    if (known_.count(key) || (!own_prefix_.empty() && key.starts_with(own_prefix_))) continue;
    std::string known;
    for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
    error(position_of(it.first, file_),
          "unknown key '" + key + "' in " + context_ + " (known keys: " + known + ")");
  }
}

}  // namespace hookgate::config
