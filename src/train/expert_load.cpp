// The band expert loads keep (see expert_load.h).
#include "mixprec/train/expert_load.h"

#include <fmt/format.h>

#include <algorithm>

#include "upper_median.h"

namespace mixprec::train {

std::string describe_expert_load_band(const std::vector<StepMetrics>& steps) {
  std::vector<const StepMetrics*> with;
  for (const StepMetrics& m : steps)
    if (!m.expert_load.empty()) with.push_back(&m);
  if (with.empty()) return "";
  const std::size_t from = with.size() - std::max<std::size_t>(1, with.size() / 4);
  std::vector<double> highs, lows;
  for (std::size_t i = from; i < with.size(); ++i) {
    double hi = 0, lo = 1e300;
    for (const auto& block : with[i]->expert_load)
      for (double load : block) {
        hi = std::max(hi, load);
        lo = std::min(lo, load);
      }
    highs.push_back(hi);
    lows.push_back(lo);
  }
  const StepMetrics& first = *with[from];
  return fmt::format(
      "expert load (tokens / mean; {} MoE blocks x {} experts) over steps {}-{}: max {:.2f} "
      "(median {:.2f}), min {:.2f} (median {:.2f})",
      first.expert_load.size(), first.expert_load.front().size(), first.step, with.back()->step,
      *std::max_element(highs.begin(), highs.end()), upper_median(highs),
      *std::min_element(lows.begin(), lows.end()), upper_median(lows));
}

}  // namespace mixprec::train
