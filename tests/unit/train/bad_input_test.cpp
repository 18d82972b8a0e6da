// Bad input to the trainer: a clear error naming the key, file or value at fault, and nothing
// lost (checkpoints on disk untouched).
#include <gtest/gtest.h>

#include <filesystem>

#include "mixprec/train/trainer.h"
#include "support/op_testing.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;
using mixprec::testing::read_file;
using mixprec::testing::write_file;
using testing::quiet;
using testing::TempDir;
using testing::tiny_config;

std::string train_error(const config::TrainConfig& c, bool resume = false) {
  return error_of([&] { Trainer(c, quiet(resume)).run(); });
}

TEST(TrainerBadInput, ExistingCheckpointsNeedResumeAndAreLeftAlone) {
  TempDir dir;
  Trainer(tiny_config(dir, {"training.steps=4"}), quiet()).run();
  const fs::path ckpt = dir / "run/checkpoint/step-00000004.safetensors";
  const std::string before = read_file(ckpt);
  const std::string e = train_error(tiny_config(dir));
  EXPECT_NE(e.find("already holds checkpoints (newest: step 4)"), std::string::npos) << e;
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
  EXPECT_EQ(read_file(ckpt), before);
}

TEST(TrainerBadInput, CheckpointOfAnotherModelNamesTheKeyAndTheFirstTensor) {
  TempDir dir;
  Trainer(tiny_config(dir, {"training.steps=4"}), quiet()).run();
  const fs::path ckpt = dir / "run/checkpoint/step-00000004.safetensors";
  const std::string before = read_file(ckpt);
  const std::string e = train_error(tiny_config(dir, {"model.d_model=48"}), true);
  EXPECT_NE(e.find("step-00000004.safetensors was written for another model"), std::string::npos)
      << e;
  EXPECT_NE(e.find("model.d_model = 32 in the checkpoint, 48 in the config"), std::string::npos)
      << e;
  EXPECT_NE(e.find("first mismatching tensor: model.tok_emb.weight [256, 48] f32 (checkpoint: "
                   "[256, 32] f32)"),
            std::string::npos)
      << e;
  EXPECT_EQ(read_file(ckpt), before);
  // Another seed would replay other batches: refused too.
  const std::string seed = train_error(tiny_config(dir, {"training.seed=5"}), true);
  EXPECT_NE(seed.find("training.seed = 0 in the checkpoint, 5 in the config"), std::string::npos)
      << seed;
}

TEST(TrainerBadInput, VocabularyTooSmallForTheTokensNamesTheTokenAndTheKey) {
  TempDir dir;
  const std::string e = train_error(tiny_config(dir, {"model.vocab_size=100"}));
  EXPECT_NE(e.find("token id 121"), std::string::npos) << e;  // 'y', the largest byte
  EXPECT_NE(e.find("model.vocab_size = 100"), std::string::npos) << e;
}

TEST(TrainerBadInput, MissingOrEmptyDataNamesThePath) {
  TempDir dir;
  const std::string missing = (dir / "no-such-corpus").string();
  const std::string e1 = train_error(tiny_config(dir, {"training.data=" + missing}));
  EXPECT_NE(e1.find("training.data"), std::string::npos) << e1;
  EXPECT_NE(e1.find(missing), std::string::npos) << e1;

  write_file(dir / "empty.txt", "");
  const std::string e2 =
      train_error(tiny_config(dir, {"training.data=" + (dir / "empty.txt").string()}));
  EXPECT_NE(e2.find("empty.txt"), std::string::npos) << e2;
}

TEST(TrainerBadInput, SequenceLongerThanTheModelNamesBothKeys) {
  TempDir dir;
  const std::string e = error_of([&] { tiny_config(dir, {"training.seq_len=64"}); });
  EXPECT_NE(e.find("training.seq_len = 64 must be <= model.max_seq_len = 32"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace mixprec::train
