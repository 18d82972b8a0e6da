#include "config_options.h"

namespace mixprec::cli {

config::TrainConfig load_config_with(const std::string& path, const std::string& precision,
                                     const std::vector<std::string>& sets) {
  return config::load_config(path, config::run_overrides({precision, "", "", std::nullopt}, sets));
}

}  // namespace mixprec::cli
