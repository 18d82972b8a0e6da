// The one table of config keys: section, name, type (from the member it binds) and, for
// strings with a fixed set of values, the choices. Loading, overrides, validation and to_toml
// all read it, so a new key is one line here plus its member in train_config.h.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "mixprec/config/train_config.h"

namespace mixprec::config::detail {

using ValueRef =
    std::variant<bool*, std::int64_t*, double*, std::string*, std::vector<std::string>*>;

struct Field {
  std::string section;  // "" = top level; "model.moe" for [model.moe]
  std::string name;
  ValueRef (*bind)(TrainConfig&);
  std::vector<std::string> choices;  // empty = any string (for a list: any element)

  std::string key() const { return section.empty() ? name : section + "." + name; }
};

const std::vector<Field>& fields();

// torchtitan's spellings of keys, read as the key they name; a file giving both is refused.
struct KeyAlias {
  const char* section;
  const char* alias;   // "dump_folder"
  const char* target;  // "run_dir"
};
const std::vector<KeyAlias>& key_aliases();
// The key `name` in `section` stands for: itself, or an alias's target.
std::string resolve_alias(const std::string& section, const std::string& name);
// Sections in file order ("model", "model.moe", "training", ...); the top level is not one.
const std::vector<std::string>& sections();
// nullptr when the section has no such key.
const Field* find_field(const std::string& section, const std::string& name);
const Field* find_field(const std::string& key);
bool is_section(const std::string& section);
// "steps, batch_size, ..." plus the subsections ("moe (a table)"); for "" the top-level keys
// and every section.
std::string valid_keys(const std::string& section);
// The valid key nearest to `path` ("model.d_modle" -> "model.d_model", "training.lr" ->
// "optimizer.lr"), or "" when none is close enough to be a likely typo.
std::string closest_key(const std::string& path);

// A value as TOML writes it: strings quoted and escaped, floats with a '.' or exponent.
std::string format_value(const ValueRef& value);
std::string quote_string(const std::string& s);

}  // namespace mixprec::config::detail
