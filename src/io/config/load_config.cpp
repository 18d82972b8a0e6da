// load_config: TOML text -> TrainConfig through the key table, then "section.key=value"
// overrides, then policy resolution and validation. Strict: anything the table does not know
// is an error that lists what it does know.
#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <sstream>

#include "../text_bounds.h"
#include "config_fields.h"
#include "mixprec/config/train_config.h"
#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "mixprec/io/config_file.h"
#include "mixprec/io/regular_file.h"
#include "validate_config.h"

namespace mixprec::config {
namespace {

using detail::Field;
using detail::Origins;
using detail::ValueRef;

// Far above any real config (about 2 KB), far below what could flood memory or messages.
constexpr std::size_t kMaxConfigBytes = 1 << 20;

const char* type_name(const ValueRef& ref) {
  switch (ref.index()) {
    case 0:
      return "a boolean (true or false)";
    case 1:
      return "an integer";
    case 2:
      return "a number";
    case 3:
      return "a string";
    default:
      return "a list of strings";
  }
}

std::string line_of(const toml::source_region& where) {
  return where.begin.line ? "line " + std::to_string(where.begin.line) : "line ?";
}

// Reads a TOML file's tables into a config, recording each key's line.
class TableReader {
 public:
  TableReader(TrainConfig& config, Origins& origins, const std::string& where)
      : config_(config), origins_(origins), where_(where) {}

  void read(const toml::table& table, const std::string& section) {
    for (const detail::KeyAlias& a : detail::key_aliases()) {
      if (section != a.section || !table.contains(a.target) || !table.contains(a.alias)) continue;
      // One would silently win over the other.
      throw Error(where_, std::string(a.target) + " (" + line_of(table.get(a.target)->source()) +
                              ") and " + a.alias + " (" + line_of(table.get(a.alias)->source()) +
                              ") are both given; use one");
    }
    for (auto&& [k, node] : table) {
      const std::string name(k.str());
      const std::string line = line_of(k.source());
      const std::string path = section.empty() ? name : section + "." + name;
      if (node.is_table() && detail::is_section(path)) {
        read(*node.as_table(), path);
        continue;
      }
      const Field* field = find(section, name);
      if (field == nullptr) {
        throw Error(where_, line + ": " + unknown_key_message(section, name, node.is_table()));
      }
      set(*field, node, line);
    }
  }

 private:
  const Field* find(const std::string& section, const std::string& name) {
    return detail::find_field(section, detail::resolve_alias(section, name));
  }

  void set(const Field& field, const toml::node& node, const std::string& line) {
    const ValueRef ref = field.bind(config_);
    bool ok = false;
    if (auto b = std::get_if<bool*>(&ref); b && node.is_boolean()) {
      **b = node.as_boolean()->get();
      ok = true;
    } else if (auto i = std::get_if<std::int64_t*>(&ref); i && node.is_integer()) {
      **i = node.as_integer()->get();
      ok = true;
    } else if (auto d = std::get_if<double*>(&ref); d && (node.is_number())) {
      **d = node.is_integer() ? static_cast<double>(node.as_integer()->get())
                              : node.as_floating_point()->get();
      ok = true;
    } else if (auto s = std::get_if<std::string*>(&ref); s && node.is_string()) {
      **s = node.as_string()->get();
      ok = true;
    } else if (auto l = std::get_if<std::vector<std::string>*>(&ref); l && node.is_array()) {
      const toml::array& items = *node.as_array();
      ok = items.is_homogeneous(toml::node_type::string) || items.empty();
      if (ok) {
        (*l)->clear();
        for (const toml::node& item : items) (*l)->push_back(item.as_string()->get());
      }
    }
    if (!ok) {
      std::ostringstream text;
      if (node.is_string()) {
        text << detail::quote_string(node.as_string()->get());  // as the error tests spell it
      } else {
        node.visit([&](const auto& n) { text << n; });
      }
      throw Error(where_,
                  line + ": " + field.key() + " = " + text.str() + " must be " + type_name(ref));
    }
    origins_[field.key()] = line;
  }

  TrainConfig& config_;
  Origins& origins_;
  const std::string& where_;

 public:
  static std::string unknown_key_message(const std::string& section, const std::string& name,
                                         bool is_table) {
    const std::string path = section.empty() ? name : section + "." + name;
    const std::string shown = quote_prefix(path);
    if (section.empty() && is_table) {
      return "unknown section [" + shown + "]; valid at the top level: " + detail::valid_keys("");
    }
    if (detail::is_section(path)) {
      return "'" + shown + "' must be a table ([" + shown + "])";
    }
    const std::string in = section.empty() ? "at the top level" : "of [" + section + "]";
    const std::string near = detail::closest_key(path);
    return "unknown key '" + shown + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
           "; valid keys " + in + ": " + detail::valid_keys(section);
  }
};

std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return std::string(s.substr(begin, end - begin + 1));
}

std::string unquote(const std::string& value) {
  const bool quoted = value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
                      value.back() == value.front();
  return quoted ? value.substr(1, value.size() - 2) : value;
}

// An override's list: "a,b", or TOML's ["a", "b"]; "" and "[]" are the empty list.
std::vector<std::string> split_list(std::string text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(trim(std::string_view(text).substr(start, comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// Applies "section.key=value"; the value is read as the key's type.
void apply_override(TrainConfig& config, Origins& origins, const std::string& where,
                    const std::string& text) {
  // TOML is UTF-8: a value that is not could not be written back into a stored config.
  MIXPREC_CHECK(
      is_valid_utf8(text), where,
      "an override is not valid UTF-8 (a config is UTF-8 text): '" + quote_prefix(text) + "'");
  const std::string origin = "override '" + quote_prefix(text) + "'";
  const auto eq = text.find('=');
  MIXPREC_CHECK(eq != std::string::npos, where, origin + ": expected section.key=value");
  std::string key = trim(std::string_view(text).substr(0, eq));
  const std::string value = trim(std::string_view(text).substr(eq + 1));
  const auto dot = key.rfind('.');
  const std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string name =
      detail::resolve_alias(section, dot == std::string::npos ? key : key.substr(dot + 1));
  if (!section.empty() && !detail::is_section(section)) {
    std::string valid;
    for (const std::string& s : detail::sections()) valid += (valid.empty() ? "" : ", ") + s;
    throw Error(where, origin + ": unknown section [" + section + "]; valid sections: " + valid);
  }
  const Field* field = detail::find_field(section, name);
  MIXPREC_CHECK(field != nullptr, where,
                origin + ": " + TableReader::unknown_key_message(section, name, false));

  const ValueRef ref = field->bind(config);
  const std::string bad =
      origin + ": " + key + " = " + quote_prefix(value) + " must be " + type_name(ref);
  const char* first = value.data();
  const char* last = value.data() + value.size();
  if (auto b = std::get_if<bool*>(&ref)) {
    MIXPREC_CHECK(value == "true" || value == "false", where, bad);
    **b = value == "true";
  } else if (auto i = std::get_if<std::int64_t*>(&ref)) {
    std::int64_t parsed = 0;
    const auto [end, ec] = std::from_chars(first, last, parsed);
    MIXPREC_CHECK(!value.empty() && ec == std::errc() && end == last, where, bad);
    **i = parsed;
  } else if (auto d = std::get_if<double*>(&ref)) {
    double parsed = 0;
    const auto [end, ec] = std::from_chars(first, last, parsed);
    MIXPREC_CHECK(!value.empty() && ec == std::errc() && end == last && std::isfinite(parsed),
                  where, bad);
    **d = parsed;
  } else if (auto l = std::get_if<std::vector<std::string>*>(&ref)) {
    (*l)->clear();
    for (const std::string& item : split_list(value)) (*l)->push_back(unquote(item));
  } else {
    *std::get<std::string*>(ref) = unquote(value);
  }
  origins[field->key()] = origin;
}

}  // namespace

TrainConfig load_config_text(std::string_view toml_text, const std::string& source_name,
                             const std::vector<std::string>& overrides) {
  const std::string where = "config " + source_name;
  // Bounded first: toml++ nests a table per dotted part, and tables are read and freed
  // recursively, so a key 20k parts deep would overflow the stack.
  MIXPREC_CHECK(toml_text.size() <= kMaxConfigBytes, where,
                "is " + std::to_string(toml_text.size()) + " bytes (a config is at most " +
                    std::to_string(kMaxConfigBytes) + ")");
  int line = 0;
  if (const int depth = io::toml_key_depth(toml_text, &line); depth > io::kMaxNesting)
    throw Error(where, "line " + std::to_string(line) + ": a key of " + std::to_string(depth) +
                           " dotted parts (at most " + std::to_string(io::kMaxNesting) + ")");
  toml::table table;
  try {
    table = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw Error(where, "syntax error at line " + std::to_string(begin.line) + ", column " +
                           std::to_string(begin.column) + ": " + std::string(e.description()));
  }
  TrainConfig config;
  Origins origins;
  TableReader(config, origins, where).read(table, "");
  for (const std::string& o : overrides) apply_override(config, origins, where, o);
  detail::resolve_policy(config, origins, where);
  detail::resolve_model_sizes(config, origins, where);
  detail::validate(config, origins, where);
  return config;
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // A FIFO, a directory or /dev/zero is refused here, before anything is read.
  const std::string text = io::read_regular_file(path, kMaxConfigBytes, "config " + path);
  return load_config_text(text, path, overrides);
}

}  // namespace mixprec::config
