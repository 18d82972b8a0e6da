#include "mixprec/io/config_file.h"

namespace mixprec::config {

std::vector<std::string> run_overrides(const RunFlags& flags,
                                       const std::vector<std::string>& sets) {
  std::vector<std::string> o;
  if (!flags.precision.empty())
    o = {"training.precision=" + flags.precision,
         "training.mixed_precision_param=", "training.mixed_precision_reduce="};
  if (!flags.data.empty()) o.push_back("training.data=" + flags.data);
  if (!flags.run_dir.empty()) o.push_back("run_dir=" + flags.run_dir);
  if (flags.steps) o.push_back("training.steps=" + std::to_string(*flags.steps));
  o.insert(o.end(), sets.begin(), sets.end());
  return o;
}

}  // namespace mixprec::config
