// [activation_checkpoint] in training runs: every mode gives mode none's per-step losses and
// gradient norms bit for bit (so the same updates), and the trainer reports what it uses.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mixprec/train/trainer.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

using testing::TempDir;
using testing::tiny_config;

struct StepBits {
  double loss, ce, aux, z, grad_norm, val_loss;
  bool operator==(const StepBits& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};

// Five steps of the tiny model (MoE unless `kind` says otherwise) with the given section.
std::vector<StepBits> losses(const std::string& mode, const std::string& option,
                             const std::string& precision, const std::string& kind = "moe") {
  const TempDir dir;
  const config::TrainConfig c =
      tiny_config(dir, {"training.steps=5", "training.eval_every=5", "checkpoint.enable=false",
                        "model.n_layers=3", "model.kind=" + kind, "training.precision=" + precision,
                        "training.mixed_precision_param=", "training.mixed_precision_reduce=",
                        "activation_checkpoint.mode=" + mode,
                        "activation_checkpoint.selective_ac_option=" + option});
  Trainer trainer(c, testing::quiet());
  const TrainSummary s = trainer.run();
  std::vector<StepBits> out;
  for (const StepMetrics& m : s.steps)
    out.push_back({m.loss, m.ce, m.term("aux"), m.term("z"), m.grad_norm, 0});
  EXPECT_EQ(s.evals.size(), 1u);
  if (!s.evals.empty()) out.push_back({0, 0, 0, 0, 0, s.evals.back().val_loss});
  return out;
}

void expect_every_mode_matches_none(const std::string& precision, const std::string& kind) {
  const std::vector<StepBits> none = losses("none", "2", precision, kind);
  ASSERT_EQ(none.size(), 6u);
  for (const auto& [mode, option] : std::vector<std::pair<std::string, std::string>>{
           {"selective", "op"}, {"selective", "2"}, {"full", "2"}}) {
    const std::vector<StepBits> got = losses(mode, option, precision, kind);
    ASSERT_EQ(got.size(), none.size()) << mode << " " << option;
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i] == none[i])
          << mode << " " << option << ", step " << i + 1 << ": loss " << got[i].loss << " vs "
          << none[i].loss << ", grad norm " << got[i].grad_norm << " vs " << none[i].grad_norm;
  }
}

TEST(ActivationCheckpointTraining, MoeBf16StepsAreModeNonesBitForBit) {
  expect_every_mode_matches_none("bf16-mixed", "moe");
}

TEST(ActivationCheckpointTraining, LlamaFp16WithLossScalingStepsAreModeNonesBitForBit) {
  expect_every_mode_matches_none("fp16-mixed", "llama3");
}

// NVFP4's stochastic casts under recompute: the recomputed forward's linears capture the same
// rounding key (the autocast state the checkpoint keeps), so the gradients draw alike.
TEST(ActivationCheckpointTraining, LlamaTeNvfp4StepsAreModeNonesBitForBit) {
  expect_every_mode_matches_none("te_nvfp4", "llama3");
}

TEST(ActivationCheckpointTraining, GptFp32StepsAreModeNonesBitForBit) {
  expect_every_mode_matches_none("fp32", "gpt");
}

}  // namespace
}  // namespace mixprec::train
