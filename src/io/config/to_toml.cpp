// to_toml: every key of the table, section by section, in the form load_config reads back.
#include "config_fields.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {

std::string to_toml(const TrainConfig& config) {
  TrainConfig copy = config;  // the key table binds non-const members
  std::string out = "# mixprec training config (written by to_toml)\n";
  std::string section;  // top-level keys come first, as TOML requires
  for (const detail::Field& f : detail::fields()) {
    if (f.section != section) {
      section = f.section;
      out += "\n[" + section + "]\n";
    }
    out += f.name + " = " + detail::format_value(f.bind(copy)) + "\n";
  }
  return out;
}

std::optional<KeyDifference> first_difference(const TrainConfig& a, const TrainConfig& b,
                                              std::string_view prefix) {
  TrainConfig x = a, y = b;  // the key table binds non-const members
  for (const detail::Field& f : detail::fields()) {
    const std::string key = f.key();
    if (!key.starts_with(prefix)) continue;
    std::string va = detail::format_value(f.bind(x)), vb = detail::format_value(f.bind(y));
    if (va != vb) return KeyDifference{key, std::move(va), std::move(vb)};
  }
  return std::nullopt;
}

}  // namespace mixprec::config
