// Checkpoints that are well formed (checksums recomputed) but hold an absurd state are refused
// by --resume, eval and sample, naming the file and the entry: a step past the run's end, a
// file named for another step, step counters past the step, masters the working dtype cannot
// hold, entries nothing reads, and a tokenizer replaced at the same path.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "mixprec/data/sentencepiece_tokenizer.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/train/checkpoint_plausibility.h"
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

constexpr int64_t kHuge = int64_t{1} << 62;

fs::path checkpoint_dir(const TempDir& dir) {
  return dir / "run/checkpoint";
}
fs::path step_file(const TempDir& dir, int64_t step) {
  return io::CheckpointStore(checkpoint_dir(dir).string(), 0).path_for(step);
}

// A 4-step run with checkpoints at 2 and 4.
void train4(const TempDir& dir, std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {"training.steps=4", "checkpoint.interval=2"});
  Trainer(tiny_config(dir, extra), quiet()).run();
}

// Rewrites checkpoint `from` as `to` (through the store: fresh checksums) after `edit`.
template <class Edit>
void rewrite(const TempDir& dir, int64_t from, int64_t to, Edit edit) {
  io::Checkpoint c = io::load_checkpoint(step_file(dir, from).string());
  edit(c);
  io::CheckpointStore(checkpoint_dir(dir).string(), 0).save(to, c.tensors, c.metadata);
}

Tensor i64_scalar(int64_t v) {
  return Tensor::from_vector(std::vector<int64_t>{v}, {});
}

std::string resume_error(const TempDir& dir, std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), "training.steps=8");
  return error_of([&] { Trainer(tiny_config(dir, extra), quiet(true)); });
}

void expect_has(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    EXPECT_NE(text.find(p), std::string::npos) << p << "\n" << text;
}

TEST(AbsurdCheckpoint, AStepPastTheRunsEndIsRefusedNotNothingToTrain) {
  TempDir dir;
  train4(dir);
  rewrite(dir, 4, 4, [](io::Checkpoint& c) {
    c.tensors["train.step"] = i64_scalar(kHuge);
    c.tensors["scaler.steps_taken"] = i64_scalar(kHuge);  // consistent counters
    c.tensors["scaler.steps_skipped"] = i64_scalar(0);
  });
  // Named step-4 but holding 2^62: the name and the content disagree.
  expect_has(resume_error(dir), {step_file(dir, 4).string(), "is named for step 4",
                                 "train.step = 4611686018427387904"});
  // Renamed consistently, it is past training.steps.
  rewrite(dir, 4, 5, [](io::Checkpoint& c) {
    c.tensors["train.step"] = i64_scalar(5);
    c.tensors["scaler.steps_taken"] = i64_scalar(5);
  });
  expect_has(resume_error(dir, {"training.steps=4"}),
             {step_file(dir, 5).string(), "train.step = 5", "past training.steps = 4"});
  // A finished run (step == training.steps) still resumes to "nothing to train".
  TempDir finished;
  train4(finished);
  EXPECT_EQ(Trainer(tiny_config(finished, {"training.steps=4"}), quiet(true)).next_step(), 4);
}

TEST(AbsurdCheckpoint, AFileNamedForALaterStepIsRefusedAndRotationDeletesNothing) {
  TempDir dir;
  train4(dir);
  // step-6 holds step 2's state: resuming it would retrain 3..6 and rotate out step-4.
  rewrite(dir, 2, 6, [](io::Checkpoint&) {});
  expect_has(resume_error(dir, {"checkpoint.keep_last=1"}),
             {step_file(dir, 6).string(), "is named for step 6", "train.step = 2"});
  EXPECT_TRUE(fs::exists(step_file(dir, 4)));
  EXPECT_TRUE(fs::exists(step_file(dir, 2)));
  // eval and sample read the name too.
  expect_has(error_of([&] { load_model(step_file(dir, 6).string()); }), {"is named for step 6"});
}

TEST(AbsurdCheckpoint, StepCountersPastTheStepAreRefused) {
  struct Case {
    const char* key;
    int64_t value;
  };
  for (const Case& k : {Case{"scaler.steps_taken", kHuge}, Case{"scaler.steps_skipped", 1},
                        Case{"scaler.steps_taken", -1}}) {
    TempDir dir;
    train4(dir);
    rewrite(dir, 4, 4, [&](io::Checkpoint& c) { c.tensors[k.key] = i64_scalar(k.value); });
    expect_has(resume_error(dir),
               {step_file(dir, 4).string(), k.key, "do not add up to train.step = 4"});
  }
  TempDir dir;
  train4(dir);
  rewrite(dir, 4, 4, [&](io::Checkpoint& c) {
    const Tensor& step = c.tensors.at("optim.step");
    c.tensors["optim.step"] = Tensor::full(step.shape(), 4000.0, step.dtype());
  });
  expect_has(resume_error(dir), {step_file(dir, 4).string(), "optim.step = 4000"});
}

// A master past the working dtype's largest finite value makes every step overflow: an fp16
// run's 1e5.
TEST(AbsurdCheckpoint, MastersTheWorkingDtypeCannotHoldAreRefused) {
  TempDir dir;
  train4(dir, {"training.precision=fp16-mixed"});
  rewrite(dir, 4, 4, [](io::Checkpoint& c) {
    Tensor t = c.tensors.at("model.tok_emb.weight").contiguous().clone();
    t.data<float>()[3] = 1e5f;
    c.tensors["model.tok_emb.weight"] = t;
  });
  const std::string e = resume_error(dir, {"training.precision=fp16-mixed"});
  expect_has(e, {step_file(dir, 4).string(), "'model.tok_emb.weight' holds 1e+05", "past 6.55e+04",
                 "f16 working copy"});
  expect_has(error_of([&] { load_model(step_file(dir, 4).string()); }), {"holds 1e+05"});
  // bf16 holds 1e5: the same file resumes under bf16-mixed (the policy is no model key).
  EXPECT_EQ(
      Trainer(tiny_config(dir, {"training.steps=8", "training.precision=bf16-mixed"}), quiet(true))
          .next_step(),
      4);
}

// Finite masters of 3e38 fit bf16, but every norm's sum of squares overflows f32: the model's
// output is flat and its gradients zero or NaN. Refused past sqrt(f32 max) = 1.8e19.
TEST(AbsurdCheckpoint, HugeFiniteMastersAreRefusedInEveryWorkingDtype) {
  TempDir dir;
  train4(dir);
  rewrite(dir, 4, 4, [](io::Checkpoint& c) {
    Tensor& t = c.tensors.at("model.tok_emb.weight");
    t = Tensor::full(t.shape(), 3e38, t.dtype());
  });
  expect_has(resume_error(dir), {step_file(dir, 4).string(), "'model.tok_emb.weight' holds 3e+38",
                                 "past 1.845e+19", "bf16 working copy"});
  expect_has(resume_error(dir, {"training.precision=fp32"}), {"holds 3e+38", "f32 working copy"});
  expect_has(error_of([&] { load_model(step_file(dir, 4).string()); }), {"holds 3e+38"});
}

TEST(AbsurdCheckpoint, AnEntryNoLoaderReadsIsRefusedByResumeEvalAndSample) {
  TempDir dir;
  train4(dir);
  rewrite(dir, 4, 4, [](io::Checkpoint& c) { c.tensors["stray.tensor"] = i64_scalar(1); });
  expect_has(resume_error(dir), {step_file(dir, 4).string(), "entry 'stray.tensor'"});
  expect_has(error_of([&] { load_model(step_file(dir, 4).string()); }),
             {step_file(dir, 4).string(), "entry 'stray.tensor'"});
}

// eval, sample and export name a symbolic link loop instead of a raw filesystem exception.
TEST(AbsurdCheckpoint, ASymbolicLinkLoopIsNamed) {
  TempDir dir;
  fs::create_symlink(dir / "loop", dir / "loop");
  expect_has(error_of([&] { load_model((dir / "loop").string()); }),
             {"[checkpoint] cannot examine " + (dir / "loop").string(), "symbolic link loop"});
  expect_has(error_of([&] { load_model((dir / "absent").string()); }), {"does not exist"});
}

// The sentencepiece model is replaced at the same path between runs: its ids mean other text.
TEST(AbsurdCheckpoint, ATokenizerReplacedAtTheSamePathIsRefused) {
  TempDir dir;
  auto train_tokenizer = [&](const std::string& words, const fs::path& out) {
    std::string text;
    for (int i = 0; i < 300; ++i) text += words + " " + std::to_string(i % 29) + "\n";
    mixprec::testing::write_file(dir / "tok_corpus.txt", text);
    data::SentencepieceTraining o;
    o.files = {(dir / "tok_corpus.txt").string()};
    o.output = out.string();
    o.vocab_size = 400;
    data::train_sentencepiece(o);
  };
  const fs::path model = dir / "tok.model";
  train_tokenizer("the quick brown fox jumps over the lazy dog", model);
  const std::vector<std::string> with_tok{"model.tokenizer=" + model.string(),
                                          "model.vocab_size=448"};
  train4(dir, with_tok);
  const std::string recorded = data::open_sentencepiece(model.string())->id();
  EXPECT_EQ(io::load_checkpoint(step_file(dir, 4).string()).metadata.at(kTokenizerKey), recorded);
  // The same file resumes; a different model at the same path does not.
  EXPECT_EQ(Trainer(tiny_config(dir,
                                [&] {
                                  auto o = with_tok;
                                  o.push_back("training.steps=8");
                                  return o;
                                }()),
                    quiet(true))
                .next_step(),
            4);
  fs::remove(dir / "run/.mixprec.lock");
  train_tokenizer("pack my box with five dozen liquor jugs", dir / "other.model");
  fs::rename(dir / "other.model", model);
  expect_has(resume_error(dir, with_tok),
             {step_file(dir, 4).string(), "was trained with tokenizer " + recorded,
              "model.tokenizer " + model.string()});
  LoadedModel loaded = load_model(step_file(dir, 4).string());
  expect_has(error_of([&] { open_checkpoint_tokenizer(loaded); }),
             {"was trained with tokenizer " + recorded});
}

// lr = 1e30 sends every weight past what a forward pass survives after one step: the run
// stops at step 2 with an error, in every precision and optimizer, not 29 skipped steps later
// with exit 0.
TEST(DivergedRun, ANonFiniteLossStopsTheRunHoweverShort) {
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"training.precision=bf16-mixed"},
           {"training.precision=fp32"},
           {"optimizer.name=sgd"},
           {"model.kind=llama3", "training.local_batch_size=2"}}) {
    TempDir dir;
    std::vector<std::string> o{"optimizer.lr=1e30", "lr_scheduler.warmup_steps=0",
                               "training.steps=30"};
    o.insert(o.end(), extra.begin(), extra.end());
    Trainer t(tiny_config(dir, o), quiet());
    const std::string e = error_of([&] { t.run(); });
    expect_has(e, {"diverged at step 2", "training.max_nonfinite_steps = 1"});
    EXPECT_LE(t.next_step(), 2) << extra[0];
  }
}

// Tolerating non-finite training losses, the evaluation's non-finite loss still stops the run:
// fp16 masters of 6e4 fit f16 but every product overflows it.
TEST(DivergedRun, ANonFiniteValidationLossStopsTheRun) {
  TempDir dir;
  train4(dir, {"training.precision=fp16-mixed"});
  rewrite(dir, 4, 4, [](io::Checkpoint& c) {
    for (auto& [key, t] : c.tensors)
      if (key.starts_with("model.") && key.ends_with(".weight") && t.ndim() == 2)
        t = Tensor::full(t.shape(), 6e4, t.dtype());
  });
  Trainer t(tiny_config(dir, {"training.precision=fp16-mixed", "training.steps=8",
                              "training.max_nonfinite_steps=5", "training.eval_every=1"}),
            quiet(true));
  expect_has(error_of([&] { t.run(); }),
             {"diverged at step 5", "the validation loss is", "training.max_nonfinite_steps = 5"});
  // 0 turns both checks off: the old rule (training.max_skipped_steps) ends it.
  TempDir off;
  Trainer u(tiny_config(off, {"optimizer.lr=1e30", "lr_scheduler.warmup_steps=0",
                              "training.steps=30", "training.max_nonfinite_steps=0",
                              "training.max_skipped_steps=4", "training.eval_every=1"}),
            quiet());
  expect_has(error_of([&] { u.run(); }), {"4 steps in a row were skipped"});
}

}  // namespace
}  // namespace mixprec::train
