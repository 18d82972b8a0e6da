// `mixprec plot` and `mixprec summary`: loss curves and a table of one or several runs.
#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/report/plot.h"
#include "mixprec/report/run_metrics.h"
#include "mixprec/report/run_summary.h"
#include "sample_command.h"

namespace mixprec::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> runs;
  std::string output;
  bool markdown = false;
};

std::vector<report::RunSummary> summaries(const std::vector<std::string>& runs) {
  std::vector<report::RunSummary> out;
  for (const std::string& r : runs) out.push_back(report::summarize(report::read_run_metrics(r)));
  return out;
}

void run_plot(const ReportArgs& a) {
  std::vector<std::filesystem::path> dirs(a.runs.begin(), a.runs.end());
  // One run: loss.png in its directory (the file's directory for a metrics.jsonl argument).
  const auto run_dir = [](const std::filesystem::path& p) {
    std::error_code ec;  // a path that cannot be examined (a symlink loop) is named when read
    return std::filesystem::is_directory(p, ec) ? p : p.parent_path();
  };
  const std::string png =
      !a.output.empty()
          ? a.output
          : (dirs.size() == 1 ? (run_dir(dirs[0]) / "loss.png").string() : "runs.png");
  report::plot_runs(dirs, png);
  fmt::print("{}\nplot: {}\n", report::format_summary_table(summaries(a.runs)), png);
}

void run_summary(const ReportArgs& a) {
  const auto s = summaries(a.runs);
  fmt::print("{}",
             a.markdown ? report::format_summary_markdown(s) : report::format_summary_table(s));
}

}  // namespace

void add_report_commands(CLI::App& app, int& exit_code) {
  auto plot = std::make_shared<ReportArgs>();
  CLI::App* p = app.add_subcommand(
      "plot", "Draw training/validation loss, loss scale and gradient norm of runs to a PNG");
  p->add_option("runs", plot->runs, "run directories (or metrics.jsonl files)")->required();
  p->add_option("-o,--output", plot->output,
                "PNG to write (default: RUN_DIR/loss.png for one run, runs.png for several)");
  p->callback([plot, &exit_code] {
    run_plot(*plot);
    exit_code = 0;
  });

  auto table = std::make_shared<ReportArgs>();
  CLI::App* t = app.add_subcommand(
      "summary", "A table of runs: final validation loss, tokens/s, peak memory, skipped steps");
  t->add_option("runs", table->runs, "run directories (or metrics.jsonl files)")->required();
  t->add_flag("--markdown", table->markdown, "a Markdown table (for a README)");
  t->callback([table, &exit_code] {
    run_summary(*table);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
