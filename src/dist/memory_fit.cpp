// The combinations that fit a memory (dist/memory_fit.h).
#include "mixprec/dist/memory_fit.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace mixprec::dist {

std::vector<FitOption> fit_options(const config::TrainConfig& config, int world_size,
                                   std::size_t memory_bytes, int threads) {
  check_batch_splits(config, world_size);
  const int64_t rows = config.training.batch_size / world_size;
  std::vector<std::string> optimizers{config.optimizer.name};
  for (const char* o : {"adamw", "adam-mini"})
    if (config.optimizer.name != o) optimizers.emplace_back(o);
  constexpr std::array<const char*, 3> kModes{"none", "selective", "full"};
  std::vector<FitOption> out;
  for (size_t o = 0; o < optimizers.size(); ++o)
    for (const char* mode : kModes)
      for (int64_t local = rows; local >= 1; --local) {  // every split of the rows
        if (rows % local != 0) continue;
        config::TrainConfig c = config;
        c.optimizer.name = optimizers[o];
        c.activation_checkpoint.mode = mode;
        c.training.local_batch_size = local;
        FitOption f{optimizers[o], mode, local, plan_memory(c, world_size), 0, false};
        f.rss = predict_rss(f.plan, threads, 0);
        f.fits = f.rss <= memory_bytes;
        out.push_back(std::move(f));
      }
  auto rank = [&](const FitOption& f) {
    const auto o =
        std::find(optimizers.begin(), optimizers.end(), f.optimizer) - optimizers.begin();
    const auto m =
        std::find(kModes.begin(), kModes.end(), f.activation_checkpoint) - kModes.begin();
    return std::make_tuple(!f.fits, o, m, -f.local_batch_size);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const FitOption& a, const FitOption& b) { return rank(a) < rank(b); });
  return out;
}

}  // namespace mixprec::dist
