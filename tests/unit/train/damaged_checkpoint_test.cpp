// Damaged or non-finite training state is refused on load, naming the file and the entry:
// NaN or inf in the masters or the optimizer state, a negative second moment, a flipped bit in
// tensor data (each tensor's checksum is in the metadata). eval/sample (load_model) and
// --resume both refuse; a resume falls back past a damaged newest file to the older one.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "mixprec/io/checkpoint_store.h"
#include "mixprec/io/config_file.h"
#include "mixprec/io/safetensors.h"
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

// A 4-step run with checkpoints at 2 and 4; returns the step-4 file.
fs::path trained(const TempDir& dir) {
  Trainer(tiny_config(dir, {"training.steps=4", "checkpoint.interval=2"}), quiet()).run();
  return dir / "run/checkpoint/step-00000004.safetensors";
}

// Rewrites `path` (through the store: valid layout, fresh checksums) with entry `key`'s first
// element set to `value`.
void poison(const fs::path& path, const std::string& key, float value) {
  io::Checkpoint c = io::load_checkpoint(path.string());
  Tensor t = c.tensors.at(key).contiguous().clone();
  ASSERT_EQ(t.dtype(), DType::f32) << key;
  t.data<float>()[0] = value;
  c.tensors[key] = t;
  io::CheckpointStore(path.parent_path().string(), 0)
      .save(io::CheckpointStore::step_of(path.filename().string()).value(), c.tensors, c.metadata);
}

std::string load_error(const fs::path& path) {
  return error_of([&] { load_model(path.string()); });
}

TEST(DamagedCheckpoint, NonFiniteMastersAreRefusedByEvalAndResumeNamingFileAndEntry) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    TempDir dir;
    const fs::path ckpt = trained(dir);
    poison(ckpt, "model.tok_emb.weight", bad);
    const std::string e = load_error(ckpt);
    EXPECT_NE(e.find(ckpt.string()), std::string::npos) << e;
    EXPECT_NE(e.find("model.tok_emb.weight' holds inf or NaN"), std::string::npos) << e;
    EXPECT_EQ(e.find("[restore_training_state]"), std::string::npos) << e;  // an internal name
    const std::string r =
        error_of([&] { Trainer(tiny_config(dir, {"training.steps=6"}), quiet(true)); });
    EXPECT_NE(r.find(ckpt.string()), std::string::npos) << r;
    EXPECT_NE(r.find("holds inf or NaN"), std::string::npos) << r;
  }
}

TEST(DamagedCheckpoint, NonFiniteOrNegativeOptimizerStateIsRefused) {
  struct Case {
    const char* suffix;
    float value;
    const char* message;
  };
  for (const Case& c : {Case{"exp_avg_sq", std::numeric_limits<float>::quiet_NaN(), "inf or NaN"},
                        Case{"exp_avg", std::numeric_limits<float>::infinity(), "inf or NaN"},
                        Case{"exp_avg_sq", -1.0f, "negative values"}}) {
    TempDir dir;
    const fs::path ckpt = trained(dir);
    std::string key;
    for (const auto& [name, t] : io::load_checkpoint(ckpt.string()).tensors)
      if (name.starts_with("optim.") && name.ends_with(std::string(".") + c.suffix)) key = name;
    ASSERT_FALSE(key.empty()) << c.suffix;
    poison(ckpt, key, c.value);
    const std::string r =
        error_of([&] { Trainer(tiny_config(dir, {"training.steps=6"}), quiet(true)); });
    EXPECT_NE(r.find(ckpt.string()), std::string::npos) << r;
    EXPECT_NE(r.find(c.message), std::string::npos) << c.suffix << ": " << r;
  }
}

// A stored config that claims an enormous model was described and materialised before its
// tensors were checked: refused at once, naming the file and the keys.
TEST(DamagedCheckpoint, AStoredConfigTooLargeForTheMachineIsRefusedBeforeBuilding) {
  TempDir dir;
  const fs::path ckpt = trained(dir);
  io::Checkpoint c = io::load_checkpoint(ckpt.string());
  config::TrainConfig claimed = checkpoint_config(c);
  claimed.model.n_layers = 1'000'000'000'000;  // no machine holds this
  c.metadata["config"] = config::to_toml(claimed);
  io::CheckpointStore(ckpt.parent_path().string(), 0).save(4, c.tensors, c.metadata);
  const auto start = std::chrono::steady_clock::now();
  const std::string e = load_error(ckpt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(e.find(ckpt.string()), std::string::npos) << e;
  EXPECT_NE(e.find("model.n_layers = 1000000000000"), std::string::npos) << e;
  EXPECT_NE(e.find("more than this machine's memory"), std::string::npos) << e;
}

TEST(DamagedCheckpoint, AFlippedBitIsFoundByTheChecksumAndResumeFallsBack) {
  TempDir dir;
  const fs::path ckpt = trained(dir);
  // Flip one bit of the last byte of the data section (some tensor's value; the layout holds).
  {
    std::fstream f(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    f.seekp(-1, std::ios::end);
    f.write(&byte, 1);
  }
  const std::string e = load_error(ckpt);
  EXPECT_NE(e.find(ckpt.string()), std::string::npos) << e;
  EXPECT_NE(e.find("does not match its checksum"), std::string::npos) << e;
  // The file still reads as safetensors (PyTorch would load it): only the checksum catches it.
  EXPECT_NO_THROW(io::load_safetensors(ckpt.string()));
  // --resume skips it, with a warning, for the step-2 checkpoint.
  Trainer resumed(tiny_config(dir, {"training.steps=4"}), quiet(true));
  EXPECT_EQ(resumed.next_step(), 2);
}

}  // namespace
}  // namespace mixprec::train
