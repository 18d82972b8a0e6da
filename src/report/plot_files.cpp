// The gnuplot inputs: one data file per run (train, and eval when there is any) and a script
// with three stacked panels sharing the step axis, plus one for an MoE run (its expert load
// band), one for an FP8 run (its saturated and flushed fractions) and, for several runs, one
// with each run's validation loss against the first run's at the same steps (in %).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/report/plot.h"
#include "mixprec/report/run_summary.h"

namespace mixprec::report {
namespace {

constexpr const char* kPlotFiles = "report::write_plot_files";
// Distinguishable on white (matplotlib's tab10 and darker neighbours: a story of a dozen runs
// needs a dozen); runs past 14 reuse them.
constexpr const char* kColours[] = {"1f77b4", "d62728", "2ca02c", "ff7f0e", "9467bd",
                                    "8c564b", "e377c2", "17becf", "7f7f7f", "bcbd22",
                                    "000000", "393b79", "637939", "ad494a"};

// %.17g round-trips a double; '?' is the script's "missing" marker.
std::string value(double v) {
  if (std::isnan(v)) return "?";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A gnuplot single-quoted string: no escapes except '' for a quote. Control characters
// (a newline would end the command) become spaces.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    if (ch == '\'')
      out += "''";
    else if (static_cast<unsigned char>(ch) < 0x20)
      out += ' ';
    else
      out += ch;
  }
  return out + "'";
}

// Mean of the finite values among the last `window` (fewer at the start).
std::vector<double> trailing_mean(const std::vector<TrainRecord>& train, int64_t window) {
  std::vector<double> out;
  for (std::size_t i = 0; i < train.size(); ++i) {
    const std::size_t first = i + 1 > static_cast<std::size_t>(window) ? i + 1 - window : 0;
    double sum = 0;
    int n = 0;
    for (std::size_t j = first; j <= i; ++j)
      if (std::isfinite(train[j].loss)) sum += train[j].loss, ++n;
    out.push_back(n == 0 ? NAN : sum / n);
  }
  return out;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  MIXPREC_CHECK(out.good(), kPlotFiles, "cannot write " + path.string());
}

// A skipped step or a non-finite loss has no point on the curve; it gets a mark instead, at
// the height of the curve where it broke off (the last finite smoothed loss; 0 before any).
bool marked(const TrainRecord& r) {
  return r.skipped || !std::isfinite(r.loss);
}

std::vector<double> mark_heights(const std::vector<TrainRecord>& train,
                                 const std::vector<double>& smoothed) {
  std::vector<double> out;
  double height = 0;
  for (std::size_t i = 0; i < train.size(); ++i) {
    if (std::isfinite(smoothed[i]) && std::isfinite(train[i].loss)) height = smoothed[i];
    out.push_back(marked(train[i]) ? height : NAN);
  }
  return out;
}

template <class Pred>
bool any_train(const RunMetrics& run, Pred pred) {
  return std::any_of(run.train.begin(), run.train.end(), pred);
}

}  // namespace

PlotFiles write_plot_files(const std::vector<RunMetrics>& runs, const std::filesystem::path& dir,
                           const std::filesystem::path& png, const PlotOptions& options) {
  MIXPREC_CHECK(!runs.empty(), kPlotFiles, "no runs to plot");
  MIXPREC_CHECK(options.width > 0 && options.height > 0, kPlotFiles,
                "plot size " + std::to_string(options.width) + "x" +
                    std::to_string(options.height) + " must be positive");
  MIXPREC_CHECK(options.smoothing_window >= 0, kPlotFiles,
                "smoothing_window = " + std::to_string(options.smoothing_window) + " must be >= 0");
  std::size_t longest = 0;
  int64_t first_step = INT64_MAX, last_step = INT64_MIN;
  for (const RunMetrics& run : runs) {
    MIXPREC_CHECK(!run.train.empty(), kPlotFiles,
                  "no training steps in " + run.source.string() + " (run dir " +
                      run.source.parent_path().string() + ")");
    longest = std::max(longest, run.train.size());
    first_step = std::min(first_step, run.train.front().step);
    last_step = std::max(last_step, run.train.back().step);
  }
  const int64_t window = options.smoothing_window > 0
                             ? options.smoothing_window
                             : std::max<int64_t>(1, static_cast<int64_t>(longest) / 25);

  PlotFiles files;
  files.script = dir / "plot.gp";
  // The first run's validation losses, by step: the others' are drawn against them.
  std::map<int64_t, double> baseline;
  for (const EvalRecord& e : runs.front().eval) baseline[e.step] = e.val_loss;
  const auto relative = [&](const EvalRecord& e) {
    const auto it = baseline.find(e.step);
    return it != baseline.end() && std::isfinite(it->second) && it->second != 0
               ? (e.val_loss / it->second - 1) * 100
               : static_cast<double>(NAN);
  };
  bool any_relative = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& run = runs[i];
    const std::vector<double> smoothed = trailing_mean(run.train, window);
    const std::vector<double> marks = mark_heights(run.train, smoothed);
    std::string train =
        "# step loss smoothed_loss loss_scale grad_norm skipped_or_nonfinite_mark "
        "expert_load_max expert_load_min fp8_saturated_fraction fp8_flushed_fraction\n";
    for (std::size_t j = 0; j < run.train.size(); ++j) {
      const TrainRecord& r = run.train[j];
      train += std::to_string(r.step) + " " + value(r.loss) + " " + value(smoothed[j]) + " " +
               value(r.loss_scale) + " " + value(r.grad_norm) + " " + value(marks[j]) + " " +
               value(r.expert_load_max) + " " + value(r.expert_load_min) + " " +
               value(r.fp8_saturated_fraction) + " " + value(r.fp8_flushed_fraction) + "\n";
    }
    files.train_data.push_back(dir / ("run" + std::to_string(i) + "_train.dat"));
    write_text(files.train_data.back(), train);
    if (!run.eval.empty()) {
      std::string eval = "# step val_loss percent_vs_first_run\n";
      for (const EvalRecord& e : run.eval) {
        const double vs_first = relative(e);
        eval += std::to_string(e.step) + " " + value(e.val_loss) + " " + value(vs_first) + "\n";
        any_relative = any_relative || (i > 0 && std::isfinite(vs_first));
      }
      files.eval_data.push_back(dir / ("run" + std::to_string(i) + "_eval.dat"));
      write_text(files.eval_data.back(), eval);
    } else {
      files.eval_data.emplace_back();
    }
  }

  // A panel plots only the series that have a point to draw: gnuplot fails on a plot
  // whose every series is empty, so an empty panel gets a placeholder instead.
  auto panel = [&](const std::string& title, bool log_y, const std::vector<std::string>& series,
                   const std::string& empty_note) {
    std::string s = "set title " + quoted(title) + "\n";
    s += log_y && !series.empty() ? "set logscale y\n" : "unset logscale y\n";
    if (series.empty()) {
      s += "set label 1 " + quoted(empty_note) + " at graph 0.5, graph 0.5 center\n";
      s += "set yrange [0:1]\nplot 2 notitle\nunset label 1\nset autoscale y\n";
      return s;
    }
    s += "plot ";
    for (std::size_t i = 0; i < series.size(); ++i) s += (i ? ", \\\n     " : "") + series[i];
    return s + "\n";
  };
  std::vector<std::string> loss, scale, norm, load, fp8, versus;
  bool fp8_run = false;  // some run logged FP8 fractions (all of them may be 0)
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& run = runs[i];
    const std::string colour = kColours[i % std::size(kColours)];
    const std::string train = quoted(files.train_data[i].string());
    const std::string name = summarize(run).name;
    const std::string solid = " lc rgb '#" + colour + "'";
    if (any_train(run, [](const TrainRecord& r) { return std::isfinite(r.loss); })) {
      loss.push_back(train + " using 1:2 with lines lw 1 lc rgb '#B0" + colour + "' notitle");
      loss.push_back(train + " using 1:3 with lines lw 2" + solid + " title " + quoted(name));
    }
    if (any_train(run, marked))
      loss.push_back(train + " using 1:6 with points pt 2 ps 1.2" + solid + " title " +
                     quoted(name + ": skipped or non-finite steps"));
    if (!files.eval_data[i].empty()) {
      loss.push_back(quoted(files.eval_data[i].string()) + " using 1:2 with points pt 7 ps 1" +
                     solid + " notitle");
      if (any_relative)
        versus.push_back(quoted(files.eval_data[i].string()) + " using 1:3 with linespoints pt 7" +
                         solid + " title " + quoted(name));
    }
    if (any_train(run, [](const TrainRecord& r) { return r.loss_scale > 0; }))
      scale.push_back(train + " using 1:($4 > 0 ? $4 : 1/0) with steps lw 2" + solid + " title " +
                      quoted(name));
    if (any_train(run, [](const TrainRecord& r) { return r.grad_norm > 0; }))
      norm.push_back(train + " using 1:($5 > 0 ? $5 : 1/0) with lines lw 1" + solid + " title " +
                     quoted(name));
    if (any_train(run, [](const TrainRecord& r) { return std::isfinite(r.expert_load_max); })) {
      load.push_back(train + " using 1:7 with lines lw 1" + solid + " title " +
                     quoted(name + ": max"));
      load.push_back(train + " using 1:8 with lines lw 1 dt 2" + solid + " title " +
                     quoted(name + ": min"));
    }
    fp8_run = fp8_run || any_train(run, [](const TrainRecord& r) {
                return std::isfinite(r.fp8_saturated_fraction);
              });
    if (any_train(run, [](const TrainRecord& r) { return r.fp8_saturated_fraction > 0; }))
      fp8.push_back(train + " using 1:($9 > 0 ? $9 : 1/0) with lines lw 2" + solid + " title " +
                    quoted(name + ": saturated"));
    if (any_train(run, [](const TrainRecord& r) { return r.fp8_flushed_fraction > 0; }))
      fp8.push_back(train + " using 1:($10 > 0 ? $10 : 1/0) with lines lw 1 dt 2" + solid +
                    " title " + quoted(name + ": flushed to zero"));
  }

  // A single step still needs a non-empty x range.
  const int64_t x_hi = last_step > first_step ? last_step : first_step + 1;
  std::string script;
  // An MoE run adds a panel (the band its expert loads kept), an FP8 run another, several runs
  // with evals one more; past three, each adds a third of the height.
  const int panels = 3 + (load.empty() ? 0 : 1) + (fp8_run ? 1 : 0) + (versus.empty() ? 0 : 1);
  const int height = options.height * panels / 3;
  script += "set terminal pngcairo size " + std::to_string(options.width) + "," +
            std::to_string(height) + " noenhanced font ',10'\n";
  script += "set output " + quoted(png.string()) + "\n";
  script += "set datafile missing '?'\n";
  script += "set multiplot layout " + std::to_string(panels) + ",1";
  if (!options.title.empty()) script += " title " + quoted(options.title);
  // Many runs' keys go beside the panels, where they hide no curve; a fixed right margin keeps
  // the panels' step axes aligned whatever their keys' widths, and a smaller font keeps a
  // panel's key of two entries a run (the FP8 fractions) in one column beside it.
  script += runs.size() > 2 ? "\nset grid\nset key outside right top font ',8' spacing 0.9\n"
                              "set rmargin at screen 0.72\nset xlabel 'step'\n"
                            : "\nset grid\nset key top right opaque\nset xlabel 'step'\n";
  script += "set xrange [" + std::to_string(first_step) + ":" + std::to_string(x_hi) + "]\n";
  script += panel("training loss (faint: raw; line: mean of last " + std::to_string(window) +
                      " logged steps; points: validation)",
                  false, loss, "no finite losses");
  script += panel("loss scale", true, scale, "no loss scale logged");
  script += panel("gradient norm", true, norm, "no finite gradient norms");
  if (!load.empty())
    script += panel("expert load: tokens / mean, largest and smallest over experts and blocks",
                    false, load, "");
  if (fp8_run)  // y ticks as powers of ten, not 0.0000010
    script += "set format y '%.0e'\n" +
              panel(
                  "FP8 operands: fraction of elements saturated (solid) and flushed to zero "
                  "(dashed)",
                  true, fp8, "no FP8 element saturated or flushed to zero") +
              "set format y '% h'\n";
  if (!versus.empty())
    script +=
        panel("validation loss against " + summarize(runs.front()).name + "'s at the same step, %",
              false, versus, "");
  script += "unset multiplot\nset output\n";
  write_text(files.script, script);
  return files;
}

}  // namespace mixprec::report
