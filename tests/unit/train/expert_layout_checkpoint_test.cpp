// Checkpoints and model.moe.idle_experts: stacked ("step") and per-expert ("skip") experts name
// their parameters differently, so --resume under the other layout is refused naming the key
// and the value to set; a checkpoint written before the key existed (per-expert tensors, a
// stored config without the key, which reads as "step") resumes under "skip", says so under
// "step", and loads for eval and sample as it is.
#include <gtest/gtest.h>

#include <filesystem>

#include "mixprec/io/checkpoint_store.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/trainer.h"
#include "support/op_testing.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;
using testing::quiet;
using testing::TempDir;
using testing::tiny_config;

const std::string kSkip = "model.moe.idle_experts=skip";

void expect_has(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    EXPECT_NE(text.find(p), std::string::npos) << p << "\n" << text;
}

// A 4-step run with checkpoints at 2 and 4.
void train4(const TempDir& dir, std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"training.steps=4", "checkpoint.interval=2"});
  Trainer(tiny_config(dir, extra), quiet()).run();
}

std::string resume_error(const TempDir& dir, std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), "training.steps=8");
  return error_of([&] { Trainer(tiny_config(dir, extra), quiet(true)); });
}

TEST(ExpertLayoutCheckpoint, ResumingUnderTheOtherLayoutNamesTheKeyAndTheValue) {
  TempDir per_expert, stacked;
  train4(per_expert, {kSkip});
  expect_has(resume_error(per_expert),
             {"was written for another model",
              "model.moe.idle_experts = \"skip\" in the checkpoint, \"step\" in the config",
              "model.blocks.0.moe.experts.w_gate [4, 48, 32] f32 (not in the checkpoint)",
              "its parameters are named as under model.moe.idle_experts = \"skip\": set that "
              "to load it"});
  train4(stacked, {});
  expect_has(resume_error(stacked, {kSkip}),
             {"model.moe.idle_experts = \"step\" in the checkpoint, \"skip\" in the config",
              "named as under model.moe.idle_experts = \"step\": set that to load it"});
  // Each resumes under its own.
  EXPECT_EQ(
      Trainer(tiny_config(per_expert, {"training.steps=6", kSkip}), quiet(true)).run().start_step,
      4);
  EXPECT_EQ(Trainer(tiny_config(stacked, {"training.steps=6"}), quiet(true)).run().start_step, 4);
}

// The newest checkpoint of a per-expert run with its stored config as a checkpoint written
// before model.moe.idle_experts existed holds it: without the key.
fs::path predate_the_key(const TempDir& dir) {
  const fs::path folder = dir / "run/checkpoint";
  io::Checkpoint c = io::load_checkpoint(io::CheckpointStore(folder.string(), 0).path_for(4));
  std::string& config = c.metadata.at("config");
  // Plain string search: GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitizer build.
  const std::string line = "idle_experts = \"skip\"\n";
  if (const std::size_t at = config.find(line); at != std::string::npos)
    config.erase(at, line.size());
  EXPECT_EQ(config.find("idle_experts"), std::string::npos);
  io::CheckpointStore(folder.string(), 0).save(4, c.tensors, c.metadata);
  return io::CheckpointStore(folder.string(), 0).path_for(4);
}

TEST(ExpertLayoutCheckpoint, ACheckpointFromBeforeTheKeyResumesUnderSkipAndLoadsForEval) {
  TempDir dir;
  train4(dir, {kSkip});
  const fs::path file = predate_the_key(dir);
  // Its stored config reads as "step", as this one does: the entries tell.
  expect_has(resume_error(dir),
             {"does not fit this run", "no entry 'model.blocks.0.moe.experts.w_gate'",
              "its parameters are named as under model.moe.idle_experts = \"skip\": set that "
              "to load it"});
  // eval / sample take the layout its entries have.
  const LoadedModel loaded = load_model(file.string());
  EXPECT_EQ(loaded.config.model.moe.idle_experts, "skip");
  EXPECT_TRUE(loaded.model->parameters().contains("blocks.1.moe.experts.3.w_down"));
  // Set as the hint says, it resumes.
  EXPECT_EQ(Trainer(tiny_config(dir, {"training.steps=6", kSkip}), quiet(true)).run().start_step,
            4);
}

}  // namespace
}  // namespace mixprec::train
