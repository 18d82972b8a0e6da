#include "config_options.h"

namespace mixprec::cli {

std::vector<std::string> precision_overrides(const std::string& precision) {
  if (precision.empty()) return {};
  return {"training.precision=" + precision,
          "training.mixed_precision_param=", "training.mixed_precision_reduce="};
}

config::TrainConfig load_config_with(const std::string& path, const std::string& precision,
                                     const std::vector<std::string>& sets) {
  std::vector<std::string> overrides = precision_overrides(precision);
  overrides.insert(overrides.end(), sets.begin(), sets.end());
  return config::load_config(path, overrides);
}

}  // namespace mixprec::cli
