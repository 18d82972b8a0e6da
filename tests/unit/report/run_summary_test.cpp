// summarize() against values worked out by hand, and the two table layouts character by
// character.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/report/run_summary.h"

namespace mixprec::report {
namespace {

// 15 logged steps: loss = step; tokens/s 1 for the warm-up steps 1-3, else 100·step;
// peak bytes 1 MiB · (step mod 7); underflow 0.01 on odd steps, null on even ones;
// loss scale halves at step 15; 2 steps skipped in total.
RunMetrics fifteen_steps() {
  RunMetrics m;
  m.source = "runs/fp16_run/metrics.jsonl";
  m.run = {"fp16 run", "fp16-mixed", 1234, ""};
  m.starts = 2;
  for (int s = 1; s <= 15; ++s) {
    TrainRecord r;
    r.step = s;
    r.loss = s;
    r.tokens_per_s = s <= 3 ? 1 : 100.0 * s;
    r.peak_bytes = (int64_t{1} << 20) * (s % 7);
    r.underflow_fraction = s % 2 == 1 ? 0.01 : NAN;
    r.loss_scale = s == 15 ? 32768 : 65536;
    r.skipped = s == 15;
    r.skipped_total = s >= 15 ? 2 : 1;
    m.train.push_back(r);
  }
  m.eval = {{5, 3.0, 20.0, 100}, {10, 2.0, 7.4, 100}, {15, 2.5, 12.2, 100}};
  return m;
}

TEST(Summarize, ComputesEachFieldAsDocumented) {
  const RunSummary s = summarize(fifteen_steps());
  EXPECT_EQ(s.name, "fp16 run");
  EXPECT_EQ(s.precision, "fp16-mixed");
  EXPECT_EQ(s.params, 1234);
  EXPECT_EQ(s.steps, 15);
  EXPECT_EQ(s.resumes, 1);
  EXPECT_EQ(s.final_train_loss, 10.5);        // mean of 6..15
  EXPECT_EQ(s.median_tokens_per_s, 950.0);    // 400..1500: (900 + 1000) / 2
  EXPECT_EQ(s.peak_bytes, int64_t{6} << 20);  // steps 6 and 13
  EXPECT_EQ(s.skipped_steps, 2);
  EXPECT_DOUBLE_EQ(s.mean_underflow_fraction, 0.01);  // the nulls are not zeros
  EXPECT_EQ(s.final_loss_scale, 32768);
  EXPECT_EQ(s.final_val_loss, 2.5);
  EXPECT_EQ(s.best_val_loss, 2.0);
  EXPECT_EQ(s.best_val_step, 10);
}

TEST(Summarize, ShortAndEmptyRuns) {
  RunMetrics m;
  m.source = "runs/nameless/metrics.jsonl";
  RunSummary s = summarize(m);
  EXPECT_EQ(s.name, "nameless");  // the folder stands in for a missing name
  EXPECT_EQ(s.steps, 0);
  EXPECT_TRUE(std::isnan(s.final_train_loss));
  EXPECT_TRUE(std::isnan(s.final_val_loss));
  EXPECT_EQ(s.best_val_step, -1);
  // Two steps, both warm-up: the median uses them rather than nothing; a NaN loss is left
  // out of the mean; skipped flags count when skipped_total was not logged.
  TrainRecord a, b;
  a.step = 1, a.loss = 4.0, a.tokens_per_s = 10, a.skipped = true;
  b.step = 2, b.loss = NAN, b.tokens_per_s = 30;
  m.train = {a, b};
  s = summarize(m);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.final_train_loss, 4.0);
  EXPECT_EQ(s.median_tokens_per_s, 20.0);
  EXPECT_EQ(s.skipped_steps, 1);
}

std::vector<RunSummary> two_rows() {
  RunSummary a = summarize(fifteen_steps());
  RunSummary b;
  b.name = "bf16|long-name";
  b.precision = "bf16-mixed";
  b.steps = 600;
  b.final_train_loss = 1.23456;
  b.median_tokens_per_s = 51234.4;
  return {a, b};
}

TEST(FormatSummary, TextTableIsAligned) {
  const std::string expected =
      "run             precision   steps  train loss  val loss     best val  tokens/s  peak MiB  "
      "skipped  underflow  loss scale\n"
      "--------------  ----------  -----  ----------  --------  -----------  --------  --------  "
      "-------  ---------  ----------\n"
      "fp16 run        fp16-mixed     15     10.5000    2.5000  2.0000 (10)       950       6.0  "
      "      2   1.00e-02       32768\n"
      "bf16|long-name  bf16-mixed    600      1.2346         -            -     51234         -  "
      "      0          -           -\n";
  EXPECT_EQ(format_summary_table(two_rows()), expected);
}

TEST(FormatSummary, MarkdownTable) {
  const std::string expected =
      "| run | precision | steps | train loss | val loss | best val | tokens/s | peak MiB | "
      "skipped | underflow | loss scale |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
      "| fp16 run | fp16-mixed | 15 | 10.5000 | 2.5000 | 2.0000 (10) | 950 | 6.0 | 2 | 1.00e-02 "
      "| 32768 |\n"
      "| bf16\\|long-name | bf16-mixed | 600 | 1.2346 | - | - | 51234 | - | 0 | - | - |\n";
  EXPECT_EQ(format_summary_markdown(two_rows()), expected);
}

}  // namespace
}  // namespace mixprec::report
