// metrics.jsonl reading: every field, forward compatibility (unknown keys and types), null
// numbers, resumed runs, a truncated last line, and errors naming file and line.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/core/error.h"
#include "mixprec/report/run_metrics.h"
#include "report_testing.h"
#include "support/op_testing.h"

namespace mixprec::report {
namespace {

using mixprec::testing::error_of;
using testing::train_line;

std::vector<int64_t> train_steps(const RunMetrics& m) {
  std::vector<int64_t> steps;
  for (const TrainRecord& r : m.train) steps.push_back(r.step);
  return steps;
}

TEST(ParseRunMetrics, ReadsEveryFieldAndIgnoresWhatItDoesNotKnow) {
  const std::string text =
      R"({"type":"run","name":"moe_small","precision":"bf16-mixed","params":2700000,"config":"[model]\nkind = \"moe\"\n","host":"x"})"
      "\n"
      R"({"type":"train","step":1,"loss":5.61,"ce":5.6,"aux":1.01,"z":0.3,"lr":2e-05,"grad_norm":1.3,"loss_scale":1.0,"skipped":false,"skipped_total":0,"tokens":2048,"tokens_per_s":5000.0,"step_ms":400.0,"elapsed_s":0.4,"memory_bytes":123456,"peak_bytes":234567,"underflow_fraction":0.001,"overflow_fraction":0.0,"numerics":{"blocks.0":{"max":3.5}},"new_key":[1,2]})"
      "\n"
      R"({"type":"heartbeat","step":"whatever"})"
      "\n"
      R"({"type":"eval","step":100,"val_loss":2.3,"val_ppl":9.97,"val_tokens":65536,"extra":null})"
      "\n";
  const RunMetrics m = parse_run_metrics(text, "runs/a/metrics.jsonl");
  EXPECT_EQ(m.source, "runs/a/metrics.jsonl");
  EXPECT_EQ(m.run.name, "moe_small");
  EXPECT_EQ(m.run.precision, "bf16-mixed");
  EXPECT_EQ(m.run.params, 2700000);
  EXPECT_EQ(m.run.config, "[model]\nkind = \"moe\"\n");
  EXPECT_EQ(m.starts, 1);
  EXPECT_FALSE(m.skipped_truncated_line);
  ASSERT_EQ(m.train.size(), 1u);
  const TrainRecord& r = m.train[0];
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.loss, 5.61);
  EXPECT_EQ(r.ce, 5.6);
  EXPECT_EQ(r.aux, 1.01);
  EXPECT_EQ(r.z, 0.3);
  EXPECT_EQ(r.lr, 2e-5);
  EXPECT_EQ(r.grad_norm, 1.3);
  EXPECT_EQ(r.loss_scale, 1.0);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.skipped_total, 0);
  EXPECT_EQ(r.tokens, 2048);
  EXPECT_EQ(r.tokens_per_s, 5000.0);
  EXPECT_EQ(r.step_ms, 400.0);
  EXPECT_EQ(r.elapsed_s, 0.4);
  EXPECT_EQ(r.memory_bytes, 123456);
  EXPECT_EQ(r.peak_bytes, 234567);
  EXPECT_EQ(r.underflow_fraction, 0.001);
  EXPECT_EQ(r.overflow_fraction, 0.0);
  ASSERT_EQ(m.eval.size(), 1u);
  EXPECT_EQ(m.eval[0].step, 100);
  EXPECT_EQ(m.eval[0].val_loss, 2.3);
  EXPECT_EQ(m.eval[0].val_ppl, 9.97);
  EXPECT_EQ(m.eval[0].val_tokens, 65536);
}

TEST(ParseRunMetrics, NullOrMissingNumbersAreNaNAndIntegralDoublesAreIntegers) {
  const RunMetrics m = parse_run_metrics(
      "{\"type\":\"train\",\"step\":3.0,\"loss\":2.5,\"grad_norm\":null,\"skipped\":true,"
      "\"tokens\":2048.0}\n\n   \n",
      "m.jsonl");
  ASSERT_EQ(m.train.size(), 1u);
  EXPECT_EQ(m.train[0].step, 3);
  EXPECT_EQ(m.train[0].tokens, 2048);
  EXPECT_TRUE(std::isnan(m.train[0].grad_norm));
  EXPECT_TRUE(std::isnan(m.train[0].loss_scale));
  EXPECT_TRUE(m.train[0].skipped);
  EXPECT_EQ(m.run.name, "");
  EXPECT_EQ(m.starts, 0);
}

TEST(ParseRunMetrics, StepsComeOutSortedAndTheLastRecordOfAStepWins) {
  const RunMetrics m = parse_run_metrics(
      train_line(2, 4.0) + train_line(1, 5.0) + train_line(2, 3.5) + train_line(3, 3.0), "m.jsonl");
  EXPECT_EQ(train_steps(m), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(m.train[1].loss, 3.5);
}

TEST(ParseRunMetrics, AResumedRunReplacesWhatTheKilledRunLoggedAfterItsCheckpoint) {
  // The first run reaches step 8 (eval at 4 and 8) and dies; it resumes from a checkpoint
  // at step 4 and logs steps 5..6 before this file is read.
  std::string text = R"({"type":"run","name":"r","precision":"fp16-mixed"})"
                     "\n";
  for (int s = 1; s <= 8; ++s) text += train_line(s, 10.0 - s);
  text += R"({"type":"eval","step":4,"val_loss":6.5})"
          "\n";
  text += R"({"type":"eval","step":8,"val_loss":2.5})"
          "\n";
  text += R"({"type":"run","name":"r","precision":"fp16-mixed","params":7})"
          "\n";
  text += train_line(5, 100.0) + train_line(6, 200.0);
  const RunMetrics m = parse_run_metrics(text, "m.jsonl");
  EXPECT_EQ(m.starts, 2);
  EXPECT_EQ(m.run.params, 7);  // the last run line
  EXPECT_EQ(train_steps(m), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(m.train[3].loss, 6.0);  // before the checkpoint: the first run's
  EXPECT_EQ(m.train[4].loss, 100.0);
  EXPECT_EQ(m.train[5].loss, 200.0);
  ASSERT_EQ(m.eval.size(), 1u);  // the eval at 8 belonged to the abandoned steps
  EXPECT_EQ(m.eval[0].step, 4);
}

TEST(ParseRunMetrics, ARestartThatBeginsWithAnEvalKeepsTheTrainStepBeforeIt) {
  std::string text = train_line(1, 3.0) + train_line(2, 2.0) + train_line(3, 1.0);
  text += R"({"type":"eval","step":2,"val_loss":9.0})"
          "\n";
  text += R"({"type":"run","name":"r"})"
          "\n";
  text += R"({"type":"eval","step":2,"val_loss":8.0})"
          "\n";
  const RunMetrics m = parse_run_metrics(text, "m.jsonl");
  EXPECT_EQ(train_steps(m), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(m.eval.size(), 1u);
  EXPECT_EQ(m.eval[0].val_loss, 8.0);
}

TEST(ParseRunMetrics, ATruncatedLastLineIsSkipped) {
  const std::string good = train_line(1, 3.0) + train_line(2, 2.0);
  const RunMetrics cut = parse_run_metrics(good + R"({"type":"train","step":3,"lo)", "m.jsonl");
  EXPECT_TRUE(cut.skipped_truncated_line);
  EXPECT_EQ(train_steps(cut), (std::vector<int64_t>{1, 2}));
  const RunMetrics whole = parse_run_metrics(good, "m.jsonl");
  EXPECT_FALSE(whole.skipped_truncated_line);
}

TEST(ParseRunMetrics, BadLinesNameTheFileAndLine) {
  const std::string good = train_line(1, 3.0);
  auto error = [](const std::string& text) {
    return error_of([&] { parse_run_metrics(text, "runs/x/metrics.jsonl"); });
  };
  EXPECT_NE(error(good + "not json\n" + good).find("runs/x/metrics.jsonl:2: not a JSON object"),
            std::string::npos);
  EXPECT_NE(error("[1, 2]\n" + good).find("metrics.jsonl:1: not a JSON object"), std::string::npos);
  EXPECT_NE(error(good + R"({"step":2})"
                         "\n")
                .find("metrics.jsonl:2: no \"type\""),
            std::string::npos);
  const std::string wrong_type = error(R"({"type":"train","step":1,"loss":"low"})"
                                       "\n" +
                                       good);
  EXPECT_NE(wrong_type.find("metrics.jsonl:1: key \"loss\" is \"low\""), std::string::npos)
      << wrong_type;
  EXPECT_NE(error(R"({"type":"eval","val_loss":1.0})"
                  "\n" +
                  good)
                .find("metrics.jsonl:1: missing key \"step\""),
            std::string::npos);
  EXPECT_NE(error(R"({"type":"train","step":1.5})"
                  "\n" +
                  good)
                .find("key \"step\" is 1.5"),
            std::string::npos);
  EXPECT_NE(error(R"({"type":"train","step":1,"skipped":1})"
                  "\n" +
                  good)
                .find("\"skipped\""),
            std::string::npos);
  EXPECT_NE(error(R"({"type":"run","name":5})"
                  "\n" +
                  good)
                .find("\"name\""),
            std::string::npos);
}

class ReadRunMetrics : public testing::ScratchDir {};

TEST_F(ReadRunMetrics, TakesARunDirOrTheFileAndNamesWhatIsMissing) {
  const auto dir = run_dir("a", train_line(1, 2.0) + train_line(2, 1.0));
  EXPECT_EQ(read_run_metrics(dir).train.size(), 2u);
  EXPECT_EQ(read_run_metrics(dir).source, dir / "metrics.jsonl");
  EXPECT_EQ(read_run_metrics(dir / "metrics.jsonl").train.size(), 2u);
  const auto empty_dir = root_ / "never_ran";
  std::filesystem::create_directories(empty_dir);
  const std::string e = error_of([&] { read_run_metrics(empty_dir); });
  EXPECT_NE(e.find((empty_dir / "metrics.jsonl").string()), std::string::npos) << e;
  EXPECT_NE(error_of([&] { read_run_metrics(root_ / "nowhere"); }).find("nowhere"),
            std::string::npos);
  const auto bad = run_dir("bad", "oops\n" + train_line(1, 2.0));
  EXPECT_NE(error_of([&] { read_run_metrics(bad); }).find("bad/metrics.jsonl:1"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::report
