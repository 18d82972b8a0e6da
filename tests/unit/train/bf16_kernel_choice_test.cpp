// Choosing the bf16 kernel of a run: measured once per host and cached, so that every later
// run takes the same kernel (and gives the same bits); the setting and a resumed checkpoint's
// kernel win; a broken cache is measured around. And the trainer: the choice in the run line,
// the checkpoint and the summary, and kept on resume.
#include "mixprec/train/bf16_kernel_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/train/run_checkpoint.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::tiny_config;

// MIXPREC_CACHE_DIR pointed at a fresh folder, and the kernel put back, for one test.
class Bf16KernelChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("MIXPREC_CACHE_DIR");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("MIXPREC_CACHE_DIR", cache_.path().c_str(), 1);
  }
  void TearDown() override {
    if (had_)
      setenv("MIXPREC_CACHE_DIR", old_.c_str(), 1);
    else
      unsetenv("MIXPREC_CACHE_DIR");
    backend::current().use_bf16_kernel(before_, "test");
  }
  nlohmann::json cache() const {
    std::ifstream in(bf16_kernel_cache_path());
    return nlohmann::json::parse(in);
  }
  void write_cache(const std::string& text) const {
    mixprec::testing::write_file(bf16_kernel_cache_path(), text);
  }
  // A cache entry for this host naming `kernel`.
  std::string entry(const std::string& kernel) const {
    nlohmann::json j{{"format", "mixprec.bf16_kernels/1"},
                     {"hosts", {{bf16_kernel_host(), {{"kernel", kernel}}}}}};
    return j.dump();
  }
  std::vector<std::string> warnings_;
  std::function<void(const std::string&)> warn_ = [this](const std::string& w) {
    warnings_.push_back(w);
  };
  TempDir cache_;
  bool had_ = false;
  std::string old_, before_ = backend::current().current_bf16_kernel();
  bool several_ = backend::current().bf16_kernels().size() > 1;
};

TEST_F(Bf16KernelChoiceTest, FirstRunMeasuresTheFastestAndLaterRunsKeepIt) {
  EXPECT_EQ(bf16_kernel_cache_path(), (cache_ / "bf16_kernels.json").string());
  const Bf16KernelChoice first = choose_bf16_kernel("auto", "", warn_);
  EXPECT_EQ(backend::current().current_bf16_kernel(), first.kernel);
  if (!several_) {
    EXPECT_EQ(first.reason, "only one");
    return;
  }
  EXPECT_EQ(first.reason, "measured");
  ASSERT_EQ(first.timings.size(), backend::current().bf16_kernels().size());
  double best = 0;
  std::string fastest;
  for (const auto& t : first.timings)
    if (t.gflops > best) best = t.gflops, fastest = t.kernel;
  EXPECT_EQ(first.kernel, fastest);
  EXPECT_EQ(cache()["hosts"][bf16_kernel_host()]["kernel"], first.kernel);

  const Bf16KernelChoice again = choose_bf16_kernel("auto", "", warn_);
  EXPECT_EQ(again.reason, "cached");
  EXPECT_EQ(again.kernel, first.kernel);
  EXPECT_EQ(again.timings.size(), first.timings.size()) << "the timings that chose it are kept";
  EXPECT_THAT(again.describe(), HasSubstr("measured earlier"));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(Bf16KernelChoiceTest, TheCacheDecidesEvenAgainstTheMeasurement) {
  // A host keeps its bits: whatever was chosen first stays chosen (here the widened path,
  // slower on hosts with native bf16 products).
  write_cache(entry("widened"));
  const Bf16KernelChoice c = choose_bf16_kernel("auto", "", warn_);
  EXPECT_EQ(c.kernel, "widened");
  EXPECT_EQ(backend::current().current_bf16_kernel(), "widened");
  if (several_) {
    EXPECT_EQ(c.reason, "cached");
  }
  EXPECT_TRUE(forget_bf16_kernel_choice(warn_));  // the entry written above
  EXPECT_FALSE(cache()["hosts"].contains(bf16_kernel_host()));
}

TEST_F(Bf16KernelChoiceTest, SettingAndCheckpointWin) {
  write_cache(entry(backend::current().bf16_kernels().front()));
  const Bf16KernelChoice set = choose_bf16_kernel("widened", "", warn_);
  EXPECT_EQ(set.kernel, "widened");
  EXPECT_EQ(set.reason, "training.bf16_kernel");
  EXPECT_THAT(set.describe(), HasSubstr("set by training.bf16_kernel"));
  const Bf16KernelChoice resumed = choose_bf16_kernel("auto", "widened", warn_);
  EXPECT_EQ(resumed.kernel, "widened");
  EXPECT_EQ(resumed.reason, "checkpoint");
  EXPECT_THROW(choose_bf16_kernel("wide", "", warn_), Error);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(Bf16KernelChoiceTest, ACheckpointKernelThisHostLacksIsChosenAgainWithAWarning) {
  if (!several_) GTEST_SKIP() << "one kernel here: nothing to choose";
  const Bf16KernelChoice c = choose_bf16_kernel("auto", "quantum", warn_);
  EXPECT_NE(c.kernel, "quantum");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("'quantum' is not available"));
}

TEST_F(Bf16KernelChoiceTest, BrokenCachesAreMeasuredAroundAndReplaced) {
  if (!several_) GTEST_SKIP() << "one kernel here: the cache is never read";
  for (const std::string& text :
       {std::string("[1,2]"), entry("quantum"), std::string(R"({"format":1,"hosts":{}})"),
        std::string(R"({"format":"mixprec.bf16_kernels/1","hosts":{"a":)") +
            std::string(5000, '[') + std::string(5000, ']') + "}}",
        std::string(R"({"format":"mixprec.bf16_kernels/1","hosts":{"x":1}})")}) {
    write_cache(text);
    warnings_.clear();
    const Bf16KernelChoice c = choose_bf16_kernel("auto", "", warn_);
    EXPECT_EQ(c.reason, "measured") << text;
    EXPECT_EQ(cache()["hosts"][bf16_kernel_host()]["kernel"], c.kernel) << text;
  }
  // The unreadable ones were said; an entry naming an unknown kernel is just measured over.
  write_cache("{not json");
  warnings_.clear();
  choose_bf16_kernel("auto", "", warn_);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("bf16_kernels.json"));
  EXPECT_THAT(warnings_[0], HasSubstr("measuring again"));
}

TEST_F(Bf16KernelChoiceTest, AnUnwritableCacheIsSaidAndTheRunGoesOn) {
  if (!several_) GTEST_SKIP() << "one kernel here: the cache is never written";
  setenv("MIXPREC_CACHE_DIR", "/proc/mixprec-cannot-be-here", 1);
  const Bf16KernelChoice c = choose_bf16_kernel("auto", "", warn_);
  EXPECT_EQ(c.reason, "measured");
  ASSERT_FALSE(warnings_.empty());
  EXPECT_THAT(warnings_.back(), HasSubstr("not kept"));
}

TEST_F(Bf16KernelChoiceTest, TheRunRecordsItsKernelAndAResumedRunKeepsIt) {
  TempDir dir;
  const std::string other = backend::current().bf16_kernels().back();  // "widened"
  config::TrainConfig c = tiny_config(dir, {"training.steps=4", "training.bf16_kernel=" + other});
  const TrainSummary s = Trainer(c, testing::quiet()).run();
  EXPECT_THAT(s.bf16_kernel, HasSubstr(other));
  EXPECT_EQ(backend::current().current_bf16_kernel(), before_)
      << "the trainer puts the kernel back";
  std::ifstream log(dir / "run" / "metrics.jsonl");
  std::string first;
  std::getline(log, first);
  const nlohmann::json run = nlohmann::json::parse(first);
  EXPECT_EQ(run["bf16_kernel"]["kernel"], other);
  EXPECT_EQ(run["bf16_kernel"]["reason"], "training.bf16_kernel");
  const io::Checkpoint ck =
      io::load_checkpoint((dir / "run" / "checkpoint" / "step-00000004.safetensors").string());
  EXPECT_EQ(checkpoint_bf16_kernel(ck), other);

  // Resumed with the setting back at auto: the checkpoint's kernel, not the host's choice.
  config::TrainConfig more = tiny_config(dir, {"training.steps=6"});
  const TrainSummary r = Trainer(more, testing::quiet(true)).run();
  EXPECT_THAT(r.bf16_kernel, HasSubstr(other + " (the checkpoint's"));
}

TEST_F(Bf16KernelChoiceTest, TheKernelChangesTheBitsAndTheSameKernelRepeatsThem) {
  if (!several_) GTEST_SKIP() << "one kernel here";
  auto losses = [&](const std::string& kernel) {
    TempDir dir;
    const TrainSummary s = Trainer(tiny_config(dir, {"training.steps=3", "checkpoint.enable=false",
                                                     "training.bf16_kernel=" + kernel}),
                                   testing::quiet())
                               .run();
    std::vector<double> out;
    for (const StepMetrics& m : s.steps) out.push_back(m.loss);
    return out;
  };
  const std::string native = backend::current().bf16_kernels().front();
  EXPECT_EQ(losses(native), losses(native));
  EXPECT_NE(losses(native), losses("widened")) << "the recorded kernel is the one that ran";
}

// Each kernel's run gives the same bits at 1 and 2 threads (shapes large enough that the
// GEMMs split over the threads).
TEST_F(Bf16KernelChoiceTest, EachKernelGivesTheSameBitsAtOneAndTwoThreads) {
  for (const std::string& kernel : backend::current().bf16_kernels()) {
    auto losses = [&](int threads) {
      TempDir dir;
      const TrainSummary s =
          Trainer(
              tiny_config(dir, {"training.steps=2", "checkpoint.enable=false", "model.d_model=128",
                                "model.n_heads=4", "model.d_ff=512", "model.max_seq_len=64",
                                "training.seq_len=64", "training.batch_size=8",
                                "training.threads=" + std::to_string(threads),
                                "training.bf16_kernel=" + kernel}),
              testing::quiet())
              .run();
      std::vector<double> out;
      for (const StepMetrics& m : s.steps) out.push_back(m.grad_norm);
      for (const StepMetrics& m : s.steps) out.push_back(m.loss);
      return out;
    };
    EXPECT_EQ(losses(1), losses(2)) << kernel;
  }
}

// A kernel the host lacks is refused before anything is read or written.
TEST_F(Bf16KernelChoiceTest, AMissingKernelIsRefusedBeforeTheRunStarts) {
  const std::vector<std::string> here = backend::current().bf16_kernels();
  int missing = 0;
  for (const char* kernel : {"amx", "avx512-bf16"}) {
    if (std::find(here.begin(), here.end(), kernel) != here.end()) continue;
    ++missing;
    TempDir dir;
    try {
      Trainer(tiny_config(dir, {std::string("training.bf16_kernel=") + kernel}), testing::quiet());
      FAIL() << kernel;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("[training.bf16_kernel]"));
      EXPECT_THAT(e.what(), HasSubstr("not available on this host"));
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "nothing written";
  }
  if (missing == 0) GTEST_SKIP() << "this host has every bf16 kernel: none to refuse";
}

}  // namespace
}  // namespace mixprec::train
