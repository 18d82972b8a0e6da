// Training progress for people: a bar redrawn in place on a terminal, or plain lines (every
// log_every steps, plus the first and last) when the output is a file or a pipe.
//
//   step  120/600 [=====>              ]  20% | loss 2.3456 | 5.21k tok/s | lr 9.80e-04 |
//   scale 1 | skipped 0 | mem 45.2 MiB | ETA 1:32
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "mixprec/train/step_metrics.h"

namespace mixprec::train {

enum class ProgressStyle {
  automatic,  // bar when the stream is a terminal, else lines
  bar,
  lines,
  quiet  // nothing (warnings still go to stderr)
};

ProgressStyle parse_progress_style(const std::string& name);  // auto | bar | lines | quiet

class Progress {
 public:
  Progress(ProgressStyle style, int64_t total_steps, int64_t log_every, std::FILE* out = stderr);

  // One finished step; the ETA comes from the step times seen so far.
  void step(const StepMetrics& m);
  void eval(const EvalMetrics& m);
  // A line of its own (checkpoint saved, warnings): the bar is cleared first and redrawn by
  // the next step.
  void message(const std::string& line);
  // "warning: <line>", shown in every style, quiet too.
  void warning(const std::string& line);
  // Ends the bar's line.
  void finish();

  ProgressStyle style() const { return style_; }

 private:
  void write_line(const std::string& text, bool in_place, bool even_quiet = false);

  ProgressStyle style_;
  int64_t total_steps_, log_every_;
  std::FILE* out_;
  bool bar_drawn_ = false;
  double step_s_ema_ = 0;  // smoothed seconds per step, for the ETA
};

// "45.2 MiB", "1.31 GiB", "512 B".
std::string format_bytes(std::size_t bytes);
// "1:32", "1:02:03", "--" for a non-finite or negative time.
std::string format_duration(double seconds);

}  // namespace mixprec::train
