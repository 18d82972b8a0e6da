// plot_runs: metrics -> temporary folder (data + script) -> gnuplot -> PNG, published
// atomically.
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/report/plot.h"
#include "run_program.h"

namespace mixprec::report {
namespace {

constexpr const char* kPlotRuns = "report::plot_runs";
constexpr char kPngSignature[] = "\x89PNG\r\n\x1a\n";

// A private folder (mkdtemp: mode 0700, a fresh name) removed with everything in it.
class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mixprec-plot-XXXXXX");
    MIXPREC_CHECK(mkdtemp(pattern.data()) != nullptr, kPlotRuns,
                  "cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The end of gnuplot's output, enough to show the error it reported.
std::string tail_of(const std::string& text) {
  return text.size() <= 2000 ? text : "..." + text.substr(text.size() - 2000);
}

}  // namespace

void plot_runs(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& png,
               const PlotOptions& options) {
  MIXPREC_CHECK(!run_dirs.empty(), kPlotRuns, "no run dirs to plot");
  std::vector<RunMetrics> runs;
  for (const std::filesystem::path& dir : run_dirs) {
    runs.push_back(read_run_metrics(dir));
    MIXPREC_CHECK(
        !runs.back().train.empty(), kPlotRuns,
        "run dir " + dir.string() + " has no training steps in " + runs.back().source.string());
  }

  const TemporaryFolder work;
  const std::filesystem::path drawn = work.path() / "plot.png";
  const PlotFiles files = write_plot_files(runs, work.path(), drawn, options);
  const std::filesystem::path log = work.path() / "gnuplot.log";
  const ProgramResult result = run_program(options.gnuplot, {files.script.string()}, log);
  MIXPREC_CHECK(result.spawn_error != ENOENT, kPlotRuns,
                "cannot run '" + options.gnuplot +
                    "': not found. Install the Debian package gnuplot-nox "
                    "(apt-get install gnuplot-nox; scripts/setup.sh does)");
  MIXPREC_CHECK(result.spawn_error == 0, kPlotRuns,
                "cannot run '" + options.gnuplot + "': " + std::strerror(result.spawn_error));
  MIXPREC_CHECK(result.exit_status == 0, kPlotRuns,
                "'" + options.gnuplot + "' failed (" +
                    (result.signal ? "signal " + std::to_string(result.signal)
                                   : "exit status " + std::to_string(result.exit_status)) +
                    "):\n" + tail_of(read_all(log)));

  const std::string image = read_all(drawn);
  MIXPREC_CHECK(image.size() > 8 && image.compare(0, 8, kPngSignature, 8) == 0, kPlotRuns,
                "'" + options.gnuplot + "' wrote no PNG (" + std::to_string(image.size()) +
                    " bytes); its output:\n" + tail_of(read_all(log)));
  io::write_file_atomically(
      png.string(), [&](int fd) { io::write_all(fd, image.data(), image.size(), kPlotRuns); },
      kPlotRuns);
}

}  // namespace mixprec::report
