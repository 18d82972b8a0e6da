// One line per run for comparing precisions: final and best losses, throughput, memory and
// loss-scaling health; as an aligned text table (terminal) or a Markdown table (README).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/report/run_metrics.h"

namespace mixprec::report {

// NaN (and step -1) where the metrics hold nothing to compute a value from.
struct RunSummary {
  std::string name;  // the run's name, or its folder's name when the run line has none
  std::string precision;
  int64_t params = 0;
  int64_t steps = 0;    // the last logged train step
  int64_t resumes = 0;  // "run" lines after the first
  double final_val_loss = NAN;
  double best_val_loss = NAN;
  int64_t best_val_step = -1;
  double final_train_loss = NAN;         // mean of the last 10 logged steps' finite losses
  double median_tokens_per_s = NAN;      // over logged steps after step 3 (all, if none is)
  int64_t peak_bytes = 0;                // the largest peak_bytes logged
  int64_t skipped_steps = 0;             // the last skipped_total (covers unlogged steps)
  double mean_underflow_fraction = NAN;  // over the logged steps that report it
  double final_loss_scale = NAN;
};

RunSummary summarize(const RunMetrics& metrics);

// Columns: run, precision, steps, train loss, val loss, best val (step), tokens/s, peak MiB,
// skipped, underflow, loss scale. Text: space-aligned with a dashed rule under the header;
// Markdown: a pipe table with numbers right-aligned. "-" marks a missing value.
std::string format_summary_table(const std::vector<RunSummary>& runs);
std::string format_summary_markdown(const std::vector<RunSummary>& runs);

}  // namespace mixprec::report
