// fit_options: every combination planned, each one's plan the planner's for that config, the
// fitting ones first in the order of preference.
#include "mixprec/dist/memory_fit.h"

#include <gtest/gtest.h>

#include "mixprec/io/config_file.h"

namespace mixprec::dist {
namespace {

config::TrainConfig small() {
  return config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/llama3_debug.toml",
                             {"training.batch_size=8", "optimizer.name=adamw"});
}

TEST(MemoryFit, EveryCombinationIsTheConfigsOwnPlan) {
  const config::TrainConfig c = small();
  const std::vector<FitOption> all = fit_options(c, 1, std::size_t{1} << 40, 2);
  ASSERT_EQ(all.size(), 2u * 3u * 4u);  // adamw, adam-mini x none, selective, full x 8, 4, 2, 1
  for (const FitOption& f : all) {
    config::TrainConfig v = c;
    v.optimizer.name = f.optimizer;
    v.activation_checkpoint.mode = f.activation_checkpoint;
    v.training.local_batch_size = f.local_batch_size;
    const MemoryPlan p = plan_memory(v, 1);
    EXPECT_EQ(f.plan.peak, p.peak);
    EXPECT_EQ(f.rss, predict_rss(p, 2, 0));
    EXPECT_TRUE(f.fits);
  }
  // Everything fits: the config's own way, with the most rows, is the first.
  EXPECT_EQ(all.front().optimizer, "adamw");
  EXPECT_EQ(all.front().activation_checkpoint, "none");
  EXPECT_EQ(all.front().local_batch_size, 8);
}

TEST(MemoryFit, TheFittingOnesComeFirst) {
  const config::TrainConfig c = small();
  const std::vector<FitOption> all = fit_options(c, 1, std::size_t{1} << 40, 2);
  std::vector<std::size_t> rss;
  for (const FitOption& f : all) rss.push_back(f.rss);
  std::sort(rss.begin(), rss.end());
  const std::size_t memory = rss[rss.size() / 2];  // half of them fit
  const std::vector<FitOption> some = fit_options(c, 1, memory, 2);
  bool seen_misfit = false;
  for (const FitOption& f : some) {
    EXPECT_EQ(f.fits, f.rss <= memory);
    if (!f.fits) seen_misfit = true;
    EXPECT_FALSE(f.fits && seen_misfit) << "a fitting option after one that does not fit";
  }
  EXPECT_TRUE(some.front().fits);
  EXPECT_FALSE(fit_options(c, 1, 1000, 2).front().fits);
}

}  // namespace
}  // namespace mixprec::dist
