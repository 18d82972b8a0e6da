// What the trainer records per step and per evaluation, and their JSONL form (one object per
// line of <run_dir>/metrics.jsonl; the schema is documented in README.md, "Metrics").
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mixprec::train {

struct StepMetrics {
  int64_t step = 0;  // completed steps, 1-based
  double loss = 0;   // total loss (ce + the family's weighted auxiliary terms), unscaled
  double ce = 0;
  // The family's auxiliary losses by name (models::LossParts::terms; moe: "aux", "z").
  std::vector<std::pair<std::string, double>> terms;
  double lr = 0;
  double grad_norm = 0;  // global norm of the true gradients before clipping (inf: non-finite)
  float loss_scale = 1;  // the scale this step's gradients carried
  bool skipped = false;  // the optimizer step was skipped (non-finite gradient)
  int64_t skipped_total = 0;
  int64_t tokens = 0;  // training tokens seen after this step (all steps since step 0)
  double tokens_per_s = 0, step_ms = 0, elapsed_s = 0;
  std::size_t memory_bytes = 0;    // live tensor bytes after the step
  std::size_t peak_bytes = 0;      // tensor high-water mark during the step
  std::size_t reserved_bytes = 0;  // the allocator's blocks (live + cached) after the step
  std::size_t rss_bytes = 0;       // the process's resident set after the step (VmRSS)
  uint64_t comm_bytes = 0;  // bytes rank 0 handed to collectives in the step (dist::CommStats)
  double underflow_fraction = 0, overflow_fraction = 0;  // f16 range, at the step's scale
  std::string numerics_json;  // the monitor's StepNumerics::to_json (per parameter on log steps)
  // Of every FP8 operand cast in the step (amp/fp8_stats.h); NaN (and not written) when no
  // FP8 recipe ran.
  double fp8_saturated_fraction = NAN, fp8_flushed_fraction = NAN;
  // Per MoE block, each expert's tokens / the block's mean, over the whole batch (every rank's
  // rows and micro-batches): models::Model::count_loads; empty without experts.
  std::vector<std::vector<double>> expert_load;
  // The term of that name; NaN when the family has none of it.
  double term(std::string_view name) const;
};

struct EvalMetrics {
  int64_t step = 0;
  double val_loss = 0;  // mean token cross-entropy over the evaluated batches
  double val_ppl = 0;   // exp(val_loss)
  int64_t val_tokens = 0;
  // val_loss in nats per UTF-8 byte of the evaluated text (val_loss · tokens / bytes): runs
  // with different tokenizers compare on it. 0 when the text is not known (token files).
  double val_loss_per_byte = 0;
};

std::string to_json_line(const StepMetrics& m);
std::string to_json_line(const EvalMetrics& m);
// The header line a run (or a resumed run) starts with; bf16_kernel_json is
// Bf16KernelChoice::to_json() (left out when empty).
std::string run_json_line(const std::string& name, const std::string& precision, int64_t params,
                          int64_t start_step, const std::string& config_toml,
                          const std::string& bf16_kernel_json = "");

}  // namespace mixprec::train
