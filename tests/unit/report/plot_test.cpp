// Plot inputs hold the right numbers (read back and compared with hand-computed values), the
// script quotes what it must, and plot_runs makes a PNG with gnuplot (skipped without it) or
// fails naming the run dir, the missing package or gnuplot's complaint.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <sstream>

#include "mixprec/core/error.h"
#include "mixprec/report/plot.h"
#include "report_testing.h"
#include "support/op_testing.h"

namespace mixprec::report {
namespace {

using mixprec::testing::error_of;
using testing::read_text;
using testing::train_line;

// Rows of numbers of a data file ('?' -> NaN), comment lines left out.
std::vector<std::vector<double>> read_rows(const std::filesystem::path& path) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(read_text(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> row;
    std::string field;
    while (fields >> field) row.push_back(field == "?" ? NAN : std::stod(field));
    rows.push_back(row);
  }
  return rows;
}

bool gnuplot_on_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  return false;
}

bool is_png(const std::filesystem::path& path) {
  const std::string bytes = read_text(path);
  return bytes.size() > 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0;
}

class Plot : public testing::ScratchDir {
 protected:
  // Losses 5, 4, 6, 3, 2 at steps 10..50; grad norm null at step 30; loss scale halves at 30;
  // evals at 20 and 40.
  std::filesystem::path first_run() const {
    return run_dir("fp16",
                   R"({"type":"run","name":"fp16 it's","precision":"fp16-mixed"})"
                   "\n" +
                       train_line(10, 5.0, "2.0", 65536) + train_line(20, 4.0, "1.0", 65536) +
                       train_line(30, 6.0, "null", 32768) + train_line(40, 3.0, "0.5", 32768) +
                       train_line(50, 2.0, "0.25", 32768) +
                       R"({"type":"eval","step":20,"val_loss":4.5})"
                       "\n"
                       R"({"type":"eval","step":40,"val_loss":3.25})"
                       "\n");
  }
  // One step, no evals, no gradient norm, no loss scale.
  std::filesystem::path single_step_run() const {
    return run_dir("one", R"({"type":"train","step":1,"loss":7.0})"
                          "\n");
  }
};

TEST_F(Plot, DataFilesHoldTheNumbers) {
  const std::vector<RunMetrics> runs = {read_run_metrics(first_run()),
                                        read_run_metrics(single_step_run())};
  const auto out = root_ / "work";
  std::filesystem::create_directories(out);
  const PlotFiles files = write_plot_files(runs, out, root_ / "loss.png", {.smoothing_window = 3});
  ASSERT_EQ(files.train_data.size(), 2u);
  ASSERT_EQ(files.eval_data.size(), 2u);
  // smoothed = mean of the last 3: 5, 4.5, 5, 13/3, 11/3.
  const auto train = read_rows(files.train_data[0]);
  // The last column marks skipped or non-finite steps: none here.
  const std::vector<std::vector<double>> expected = {{10, 5, 5, 65536, 2, NAN},
                                                     {20, 4, 4.5, 65536, 1, NAN},
                                                     {30, 6, 5, 32768, NAN, NAN},
                                                     {40, 3, 13.0 / 3, 32768, 0.5, NAN},
                                                     {50, 2, 11.0 / 3, 32768, 0.25, NAN}};
  ASSERT_EQ(train.size(), expected.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    // + the expert load band and the FP8 fractions (none here)
    ASSERT_EQ(train[i].size(), 10u) << "row " << i;
    for (std::size_t c = 0; c < 6; ++c) {
      if (std::isnan(expected[i][c]))
        EXPECT_TRUE(std::isnan(train[i][c])) << i << "," << c;
      else
        EXPECT_EQ(train[i][c], expected[i][c]) << "row " << i << " column " << c;
    }
  }
  // The third column: against the first run's validation loss (itself: 0 %).
  EXPECT_EQ(read_rows(files.eval_data[0]),
            (std::vector<std::vector<double>>{{20, 4.5, 0}, {40, 3.25, 0}}));
  EXPECT_TRUE(files.eval_data[1].empty());
  const auto single = read_rows(files.train_data[1]);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0][1], 7.0);
  EXPECT_TRUE(std::isnan(single[0][3]) && std::isnan(single[0][4]));

  const std::string script = read_text(files.script);
  EXPECT_NE(script.find("title 'fp16 it''s'"), std::string::npos) << script;  // quote doubled
  EXPECT_NE(script.find("title 'one'"), std::string::npos);                   // the folder's name
  EXPECT_NE(script.find("set output '" + (root_ / "loss.png").string() + "'"), std::string::npos);
  EXPECT_NE(script.find("set xrange [1:50]"), std::string::npos);
  EXPECT_NE(script.find("size 1200,900"), std::string::npos);
}

// Several runs with evals: each one's validation loss against the first run's at the same
// step, in %, in the eval files' third column (missing where the first has no eval) and a panel.
TEST_F(Plot, ValidationAgainstTheFirstRunGetsItsOwnPanel) {
  const std::filesystem::path other =
      run_dir("other", train_line(10, 5.0) + train_line(50, 2.0) +
                           R"({"type":"eval","step":20,"val_loss":4.59})"
                           "\n"
                           R"({"type":"eval","step":30,"val_loss":3.5})"
                           "\n"
                           R"({"type":"eval","step":40,"val_loss":3.2175})"
                           "\n");
  const auto out = root_ / "work";
  std::filesystem::create_directories(out);
  const PlotFiles files = write_plot_files({read_run_metrics(first_run()), read_run_metrics(other)},
                                           out, root_ / "loss.png", {});
  const auto rows = read_rows(files.eval_data[1]);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NEAR(rows[0][2], 2.0, 1e-12);
  EXPECT_TRUE(std::isnan(rows[1][2]));
  EXPECT_NEAR(rows[2][2], -1.0, 1e-12);
  std::string script = read_text(files.script);
  EXPECT_NE(script.find("layout 4,1"), std::string::npos) << script;
  EXPECT_NE(script.find("validation loss against fp16 it''s''s at the same step"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("using 1:3 with linespoints"), std::string::npos) << script;
  EXPECT_NE(script.find("size 1200,1200"), std::string::npos) << script;  // four panels
  // One run, or runs without evals beside the first: no such panel.
  write_plot_files({read_run_metrics(first_run())}, out, root_ / "loss.png", {});
  EXPECT_EQ(read_text(files.script).find("validation loss against"), std::string::npos);
}

// An MoE run's expert loads: the largest and smallest entry of each step in columns 7 and 8,
// and a fourth panel; a run without them keeps three.
TEST_F(Plot, ExpertLoadBandGetsItsOwnPanel) {
  const std::filesystem::path dir =
      run_dir("moe", R"({"type":"train","step":1,"loss":4.0,"expert_load":[[1.5,0.5],[1.0,1.0]]})"
                     "\n"
                     R"({"type":"train","step":2,"loss":3.0,"expert_load":[[1.1,0.9],[0.8,1.2]]})"
                     "\n");
  const auto out = root_ / "work";
  std::filesystem::create_directories(out);
  const PlotFiles files = write_plot_files({read_run_metrics(dir)}, out, root_ / "loss.png", {});
  const auto rows = read_rows(files.train_data[0]);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][6], 1.5);
  EXPECT_EQ(rows[0][7], 0.5);
  EXPECT_EQ(rows[1][6], 1.2);
  EXPECT_EQ(rows[1][7], 0.8);
  const std::string script = read_text(files.script);
  EXPECT_NE(script.find("layout 4,1"), std::string::npos) << script;
  EXPECT_NE(script.find("expert load"), std::string::npos);
  // A malformed expert_load names the key.
  const std::filesystem::path bad =
      run_dir("bad", R"({"type":"train","step":1,"loss":4.0,"expert_load":[1.0]})"
                     "\n"
                     R"({"type":"train","step":2,"loss":3.0})"
                     "\n");
  EXPECT_THROW(
      {
        try {
          read_run_metrics(bad);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("expert_load"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

// An FP8 run's saturated and flushed fractions: columns 9 and 10 and a panel of their own
// (zeros left off its log scale); a run whose FP8 casts never saturated nor flushed gets the
// panel with a note; a run without FP8 gets none.
TEST_F(Plot, Fp8FractionsGetTheirOwnPanel) {
  const std::filesystem::path dir = run_dir(
      "fp8",
      R"({"type":"train","step":1,"loss":4.0,"fp8_saturated_fraction":0.0,"fp8_flushed_fraction":0.02})"
      "\n"
      R"({"type":"train","step":2,"loss":3.0,"fp8_saturated_fraction":0.001,"fp8_flushed_fraction":0.03})"
      "\n");
  const auto out = root_ / "work";
  std::filesystem::create_directories(out);
  const PlotFiles files = write_plot_files({read_run_metrics(dir)}, out, root_ / "loss.png", {});
  const auto rows = read_rows(files.train_data[0]);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][8], 0.0);
  EXPECT_EQ(rows[0][9], 0.02);
  EXPECT_EQ(rows[1][8], 0.001);
  EXPECT_EQ(rows[1][9], 0.03);
  std::string script = read_text(files.script);
  EXPECT_NE(script.find("layout 4,1"), std::string::npos) << script;
  EXPECT_NE(script.find("FP8 operands"), std::string::npos) << script;
  EXPECT_NE(script.find("1:($9 > 0 ? $9 : 1/0)"), std::string::npos) << script;
  EXPECT_NE(script.find("1:($10 > 0 ? $10 : 1/0)"), std::string::npos) << script;

  const std::filesystem::path calm = run_dir(
      "calm",
      R"({"type":"train","step":1,"loss":4.0,"fp8_saturated_fraction":0,"fp8_flushed_fraction":0})"
      "\n");
  write_plot_files({read_run_metrics(calm)}, out, root_ / "loss.png", {});
  script = read_text(files.script);
  EXPECT_NE(script.find("layout 4,1"), std::string::npos) << script;
  EXPECT_NE(script.find("no FP8 element saturated or flushed"), std::string::npos) << script;
  EXPECT_EQ(script.find("$9"), std::string::npos) << script;

  write_plot_files({read_run_metrics(single_step_run())}, out, root_ / "loss.png", {});
  script = read_text(files.script);
  EXPECT_NE(script.find("layout 3,1"), std::string::npos) << script;
  EXPECT_EQ(script.find("FP8"), std::string::npos) << script;
}

// A diverging fp16 run: skipped steps and non-finite losses are marked where the curve broke
// off, not dropped.
TEST_F(Plot, SkippedAndNonFiniteStepsAreMarked) {
  const std::filesystem::path dir =
      run_dir("diverged", train_line(1, 4.0) + train_line(2, 3.0) +
                              R"({"type":"train","step":3,"loss":2.5,"skipped":true})"
                              "\n"
                              R"({"type":"train","step":4,"loss":null,"skipped":true})"
                              "\n"
                              R"({"type":"train","step":5,"loss":null})"
                              "\n");
  const auto out = root_ / "work";
  std::filesystem::create_directories(out);
  const PlotFiles files =
      write_plot_files({read_run_metrics(dir)}, out, root_ / "loss.png", {.smoothing_window = 1});
  const auto rows = read_rows(files.train_data[0]);
  ASSERT_EQ(rows.size(), 5u);
  const std::vector<double> marks = {NAN, NAN, 2.5, 2.5, 2.5};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 10u);
    if (std::isnan(marks[i]))
      EXPECT_TRUE(std::isnan(rows[i][5])) << "step " << i + 1 << " is not marked";
    else
      EXPECT_EQ(rows[i][5], marks[i]) << "step " << i + 1;
  }
  const std::string script = read_text(files.script);
  EXPECT_NE(script.find("using 1:6 with points"), std::string::npos) << script;
  EXPECT_NE(script.find("skipped or non-finite steps"), std::string::npos) << script;
}

TEST_F(Plot, ProducesAPngFromFixtureRuns) {
  if (!gnuplot_on_path()) GTEST_SKIP() << "gnuplot not installed (Debian: gnuplot-nox)";
  const auto png = root_ / "out" / "loss.png";
  std::filesystem::create_directories(png.parent_path());
  std::ofstream(png) << "old contents";
  plot_runs({first_run(), single_step_run()}, png, {.title = "fixture runs"});
  EXPECT_TRUE(is_png(png));
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
  // Only the PNG is left next to it: no temporaries.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(png.parent_path()),
                          std::filesystem::directory_iterator()),
            1);
  // Every panel empty but the loss one, and one step only: still a plot.
  plot_runs({single_step_run()}, png);
  EXPECT_TRUE(is_png(png));
}

TEST_F(Plot, NamesAndPathsNeverReachAShell) {
  if (!gnuplot_on_path()) GTEST_SKIP() << "gnuplot not installed (Debian: gnuplot-nox)";
  const auto marker = root_ / "pwned";
  const std::string name = "x' ; system('touch " + marker.string() + "') ; `touch " +
                           marker.string() + "` $(touch " + marker.string() + ")";
  // The folder name is relative: a shell would touch ./pwned.
  const auto dir = run_dir(
      "odd $(touch pwned) `touch pwned` 'dir'",
      R"({"type":"run","name":")" + name + "\"}\n" + train_line(1, 2.0) + train_line(2, 1.0));
  const auto png = root_ / "a 'b' $(c).png";
  plot_runs({dir}, png);
  EXPECT_TRUE(is_png(png));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_FALSE(std::filesystem::exists("pwned"));
}

TEST_F(Plot, MissingGnuplotNamesThePackage) {
  const auto png = root_ / "loss.png";
  const std::string e =
      error_of([&] { plot_runs({first_run()}, png, {.gnuplot = "mixprec-no-such-gnuplot"}); });
  EXPECT_NE(e.find("gnuplot-nox"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(png));
}

TEST_F(Plot, GnuplotFailureIsAnError) {
  const auto png = root_ / "loss.png";
  const std::string e = error_of([&] { plot_runs({first_run()}, png, {.gnuplot = "false"}); });
  EXPECT_NE(e.find("exit status 1"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(png));
  // A program that exits 0 but draws nothing.
  EXPECT_NE(error_of([&] { plot_runs({first_run()}, png, {.gnuplot = "true"}); }).find("no PNG"),
            std::string::npos);
}

TEST_F(Plot, MissingOrEmptyMetricsNameTheRunDir) {
  const auto png = root_ / "loss.png";
  const auto never_ran = root_ / "never_ran";
  std::filesystem::create_directories(never_ran);
  EXPECT_NE(error_of([&] {
              plot_runs({first_run(), never_ran}, png);
            }).find("never_ran"),
            std::string::npos);
  const auto only_header = run_dir("only_header", R"({"type":"run","name":"x"})"
                                                  "\n");
  const std::string e = error_of([&] { plot_runs({only_header}, png); });
  EXPECT_NE(e.find("run dir " + only_header.string() + " has no training steps"), std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { plot_runs({}, png); }), "");
  EXPECT_NE(error_of([&] {
              plot_runs({first_run()}, png, {.smoothing_window = -1});
            }).find("smoothing_window = -1"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(png));
}

}  // namespace
}  // namespace mixprec::report
