// The training loop: a TrainConfig in, a trained model, metrics and checkpoints out.
//
//   Trainer trainer(config::load_config("configs/moe_small.toml"), {.resume = true});
//   TrainSummary s = trainer.run();
//
// Set-up, in order (each failure is a mixprec::Error naming the key, file or value):
//   data     the corpus tokenised once into <run_dir>/tokens-<hash>.bin (data/token_dataset.h),
//            split into train/validation; every token id checked against model.vocab_size
//   model    described on the meta device (its size is reported before allocation), then
//            materialised under the precision policy (FP32 masters + working copies)
//   state    optimizer (adamw | sgd | adam-mini), LR schedule, GradScaler for the policy,
//            numerics monitor; with `resume`, the newest valid checkpoint is restored
//
// Step s (0-based) uses batch s of TrainBatches (a pure function of seed and s) and lr(s):
// autocast forward, loss * scale, backward, unscale, clip to training.grad_clip, scaler step
// (skipped on inf/NaN), scaler update. Metrics of the step go to <run_dir>/metrics.jsonl and
// the progress display; "step" in metrics and checkpoints counts completed steps (1-based).
// A checkpoint (checkpoint/step-<n>.safetensors) holds everything the next step depends on:
// masters, optimizer and scaler state, the step (= the data position; batches and stochastic
// rounding are keyed by it) and the config, so a resumed run repeats an uninterrupted one bit
// for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/models/registry.h"
#include "mixprec/train/progress.h"
#include "mixprec/train/step_metrics.h"

namespace mixprec::train {

struct TrainerOptions {
  bool resume = false;  // continue from the newest valid checkpoint (none: start at step 0)
  ProgressStyle progress = ProgressStyle::automatic;
  // Stop (without a final checkpoint or evaluation) once this many steps are done; -1 = run
  // to training.steps. For tests and time-boxed runs.
  int64_t stop_at_step = -1;
  // The data-parallel job this process is a rank of (dist/communicator.h); null: a single
  // process. The job's parallelism (dist/parallelism.h) holds the model: whole on one rank,
  // fully sharded over more; each rank trains on its rows of the global batch, and only
  // rank 0 prints, logs and writes.
  dist::Communicator* comm = nullptr;
  // When the stop rule ends a diverged run, re-run its last step with per-op checks (autograd
  // anomaly mode) and name the op, the module and the pass that made the first inf/NaN.
  bool detect_anomaly = false;
  // A Hugging Face folder (io::import_hf) whose weights replace the initial ones of a run
  // that starts at step 0 (a checkpoint `resume` finds wins); "" = the config's init.
  std::string init_from = {};
  // Called on rank 0 with each step's metrics and each evaluation's, once they are logged
  // (the Python module's progress callback). An exception thrown from one ends the run as any
  // error does: no final checkpoint or export.
  std::function<void(const StepMetrics&)> on_step = {};
  std::function<void(const EvalMetrics&)> on_eval = {};
};

struct TrainSummary {
  int64_t start_step = 0;  // completed steps when this run began (checkpoint step on resume)
  int64_t end_step = 0;    // completed steps when it ended
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::string last_checkpoint;  // path, "" when none was written
  double tokens_per_s = 0;      // median over this run's steps (first 3 excluded when possible)
  double unigram_entropy = 0;   // of the train split, nats/token (a context-free model's loss)
  std::string bf16_kernel;      // where bf16 products ran and why (Bf16KernelChoice::describe)
};

class Trainer {
 public:
  explicit Trainer(config::TrainConfig config, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Steps from the next one to training.steps (or options.stop_at_step), with evaluation,
  // checkpoints and metrics as the config asks; then the bf16 export and the plot.
  TrainSummary run();
  // One training step (batch next_step(), then next_step() advances) and its metrics; no
  // logging, evaluation or checkpoint: those are run()'s.
  StepMetrics step();
  // Completed steps: the checkpoint's step after a resume, else 0, plus the steps taken.
  int64_t next_step() const;

  const config::TrainConfig& config() const;
  models::Model& model();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mixprec::train
