// A training run's metrics as the trainer logs them: <run_dir>/metrics.jsonl, one JSON object
// per line, told apart by "type":
//   {"type":"run", "name", "precision", "params", "config"}            at every (re)start
//   {"type":"train", "step", "loss", "ce", "aux", "z", "lr", "grad_norm", "loss_scale",
//    "skipped", "skipped_total", "tokens", "tokens_per_s", "step_ms", "elapsed_s",
//    "memory_bytes", "peak_bytes", "underflow_fraction", "overflow_fraction",
//    "fp8_saturated_fraction", "fp8_flushed_fraction" (with an FP8 recipe),
//    "expert_load" (MoE: [[load per expert] per block]), ...}
//   {"type":"eval", "step", "val_loss", "val_ppl", "val_tokens"}
// Reading is forward compatible: unknown keys and unknown types are ignored, and a missing or
// null number reads as NaN (grad_norm is null when it was not finite). A line that is not a
// JSON object, or a known key of the wrong type, is an Error naming the file and line, except
// a bad LAST line: a run killed mid-write leaves it truncated, so it is skipped.
//
// A resumed run appends a second "run" line and continues from its checkpoint, repeating the
// steps logged after that checkpoint. The first record after a "run" line at step s starts
// the new timeline: earlier train records from step s on (and evals after them) are dropped,
// so steps the killed run reached but the resumed one has not yet are not mixed in. Within
// a timeline the last record of a step wins.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec::report {

struct RunInfo {
  std::string name;
  std::string precision;
  int64_t params = 0;
  std::string config;  // the TOML the run was started with
};

struct TrainRecord {
  int64_t step = 0;
  double loss = NAN, ce = NAN, aux = NAN, z = NAN, lr = NAN;
  double grad_norm = NAN;  // NaN: not logged, or not finite (a skipped step)
  double loss_scale = NAN;
  bool skipped = false;
  int64_t skipped_total = 0;
  int64_t tokens = 0;
  double tokens_per_s = NAN, step_ms = NAN, elapsed_s = NAN;
  int64_t memory_bytes = 0, peak_bytes = 0;
  double underflow_fraction = NAN, overflow_fraction = NAN;
  // Of the step's FP8 operands (amp/fp8_stats.h); NaN without an FP8 recipe.
  double fp8_saturated_fraction = NAN, fp8_flushed_fraction = NAN;
  // "expert_load" (per MoE block, each expert's tokens / the mean): its largest and smallest
  // entry; NaN for a model without experts.
  double expert_load_max = NAN, expert_load_min = NAN;
};

struct EvalRecord {
  int64_t step = 0;
  double val_loss = NAN, val_ppl = NAN;
  int64_t val_tokens = 0;
};

struct RunMetrics {
  std::filesystem::path source;    // the metrics.jsonl read
  RunInfo run;                     // from the last "run" line
  int64_t starts = 0;              // "run" lines: 1 + the number of resumes
  std::vector<TrainRecord> train;  // ascending step, one record per step
  std::vector<EvalRecord> eval;    // ascending step, one record per step
  bool skipped_truncated_line = false;
};

// Reads <run_dir>/metrics.jsonl, or the .jsonl file itself. A missing file is an Error
// naming it.
RunMetrics read_run_metrics(const std::filesystem::path& run_dir_or_jsonl);
// The same from the file's text; `source` names it in errors and becomes RunMetrics::source.
RunMetrics parse_run_metrics(std::string_view text, const std::filesystem::path& source);

}  // namespace mixprec::report
