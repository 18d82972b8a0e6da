// Loading a TrainConfig the way every command that takes --config does: the file, then the
// --precision shorthand, then the --set overrides in order.
#pragma once

#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::cli {

// load_config(path, the overrides --precision stands for (config::run_overrides) + sets).
config::TrainConfig load_config_with(const std::string& path, const std::string& precision,
                                     const std::vector<std::string>& sets);

}  // namespace mixprec::cli
