// Loading a TrainConfig the way every command that takes --config does: the file, then the
// --precision shorthand, then the --set overrides in order.
#pragma once

#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::cli {

// The overrides --precision stands for: training.precision = `precision`, and torchtitan's
// pair cleared, so the shorthand replaces whichever spelling the file used. Empty: none.
std::vector<std::string> precision_overrides(const std::string& precision);

// load_config(path, precision_overrides(precision) + sets).
config::TrainConfig load_config_with(const std::string& path, const std::string& precision,
                                     const std::vector<std::string>& sets);

}  // namespace mixprec::cli
