// How a broken config is reported. The config layer's loader implements it (the file's line
// and the key's value in every message); a model family states its rules against it, so the
// rules are written once and read both by load_config and by models::make_model.
#pragma once

#include <string>

namespace mixprec::config {

class ConfigRules {
 public:
  virtual ~ConfigRules() = default;
  // Throws mixprec::Error naming `key` (and, where the implementation knows them, its value
  // and where it was set) followed by `problem` ("must be > 0") when !ok.
  virtual void require(bool ok, const std::string& key, const std::string& problem) const = 0;
  // Another key of a relation as the message should show it ("model.d_model = 64").
  virtual std::string show(const std::string& key) const = 0;
};

}  // namespace mixprec::config
