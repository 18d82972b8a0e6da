// Loss curves of one or more runs in one PNG, drawn by gnuplot (Debian: gnuplot-nox), three
// panels sharing the step axis, one colour per run (legend = run name):
//   1. training loss: raw (faint) and a trailing mean (solid), validation loss as points;
//   2. loss scale (log y);  3. gradient norm (log y; non-finite / non-positive left out);
//   4. for a run with experts: the largest and smallest expert load per step;
//   5. for a run with an FP8 recipe: the fractions of its FP8 operands' elements saturated
//      and flushed to zero per step (log y; zeros left out).
// The data and the script go to a private temporary folder; gnuplot runs without a shell
// (paths never reach one) and the PNG replaces `png` atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/report/run_metrics.h"

namespace mixprec::report {

struct PlotOptions {
  int width = 1200, height = 900;  // pixels, for three panels (each one more adds a third)
  // The solid loss line: mean of the last `smoothing_window` logged steps (fewer at the
  // start); 0 = about 1/25 of the longest run's logged steps, at least 1.
  int64_t smoothing_window = 0;
  std::string title{};              // over the panels; "" = none
  std::string gnuplot = "gnuplot";  // the program, looked up on PATH when it has no '/'
};

struct PlotFiles {
  std::filesystem::path script;  // plot.gp
  // Per run, in order: columns "step loss smoothed_loss loss_scale grad_norm mark
  // expert_load_max expert_load_min fp8_saturated_fraction fp8_flushed_fraction", and
  // "step val_loss"; '?' marks a missing (NaN) value. No eval file for a run without evals.
  std::vector<std::filesystem::path> train_data, eval_data;
};

// Writes the data files and a gnuplot script drawing into `png` under `dir` (which must
// exist). Each run needs at least one train record (Error naming its source otherwise).
PlotFiles write_plot_files(const std::vector<RunMetrics>& runs, const std::filesystem::path& dir,
                           const std::filesystem::path& png, const PlotOptions& options);

// Reads each run dir's metrics, plots them into `png`. Errors: a run dir without metrics or
// without train steps (naming it), gnuplot missing (naming the package to install), gnuplot
// failing (with its output).
void plot_runs(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& png,
               const PlotOptions& options = {});

}  // namespace mixprec::report
