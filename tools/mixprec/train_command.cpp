// `mixprec train` and `mixprec eval`.
#include "train_command.h"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config_options.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/amp/policy.h"
#include "mixprec/config/train_config.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/io/config_file.h"
#include "mixprec/train/evaluate.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"
#include "mixprec/train/trainer.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::string precision;
  std::string data;
  std::string run_dir;
  std::optional<int64_t> steps;
  std::vector<std::string> set;
  bool resume = false;
  std::string init_from;
  std::string progress = "auto";
  int64_t stop_at_step = -1;
  bool detect_anomaly = false;
};

config::TrainConfig load(const TrainArgs& a) {
  return config::load_config(
      a.config, config::run_overrides({a.precision, a.data, a.run_dir, a.steps}, a.set));
}

void train_rank(const TrainArgs& a, dist::Communicator& comm) {
  train::TrainerOptions options;
  options.resume = a.resume;
  options.init_from = a.init_from;
  options.progress = train::parse_progress_style(a.progress);
  options.stop_at_step = a.stop_at_step;
  options.detect_anomaly = a.detect_anomaly;
  options.comm = &comm;
  train::Trainer trainer(load(a), options);
  const train::TrainSummary s = trainer.run();
  if (comm.rank() != 0) return;
  if (s.steps.empty()) {
    fmt::print("nothing to train: the run is at step {} of {}\n", s.end_step,
               trainer.config().training.steps);
    return;
  }
  std::string line = fmt::format("trained steps {}..{} at {:.0f} tokens/s (median)",
                                 s.start_step + 1, s.end_step, s.tokens_per_s);
  if (!s.evals.empty()) {
    const train::EvalMetrics& e = s.evals.back();
    line += fmt::format("; validation loss {:.4f} (", e.val_loss);
    if (e.val_loss_per_byte > 0) line += fmt::format("{:.4f} per byte; ", e.val_loss_per_byte);
    line += fmt::format("perplexity {:.2f}; unigram entropy {:.4f})", e.val_ppl, s.unigram_entropy);
  }
  fmt::print("{}\nbf16 products: {}\n", line, s.bf16_kernel);
}

// Under mpirun every rank runs this; an error on any rank ends the whole job with a message
// naming that rank (the others would otherwise wait in a collective for ever).
void run_train(const TrainArgs& a) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_world_communicator();
  if (comm->size() == 1) return train_rank(a, *comm);
  try {
    train_rank(a, *comm);
  } catch (const std::exception& e) {
    comm->abort_job(e.what(), 1);
    throw;
  }
}

struct EvalArgs {
  std::string checkpoint;
  std::string data;
  int64_t batches = 0;
};

// The run directory a loaded checkpoint lives in (<run_dir>/<checkpoint.folder>/step-N), so
// its token cache is found wherever eval runs from; the checkpoint's own folder otherwise.
std::filesystem::path run_dir_of(const train::LoadedModel& loaded) {
  std::filesystem::path dir = std::filesystem::path(loaded.path).parent_path();
  const std::filesystem::path folder = loaded.config.checkpoint.folder;
  if (folder.is_relative() && dir.filename() == folder.filename()) {
    for (auto it = folder.begin(); it != folder.end(); ++it) dir = dir.parent_path();
  }
  return dir.empty() ? std::filesystem::path(".") : dir;
}

void run_eval(const EvalArgs& a) {
  train::LoadedModel loaded = train::load_model(a.checkpoint);
  config::TrainConfig& c = loaded.config;
  if (!a.data.empty()) c.training.data = a.data;
  if (c.training.val_fraction <= 0) c.training.val_fraction = 0.1;  // a run without one
  const auto tokenizer = train::open_checkpoint_tokenizer(loaded);
  const data::TokenDataset ds = train::open_run_data(c, run_dir_of(loaded), *tokenizer);
  train::check_vocabulary(ds, c.model.vocab_size);
  const data::ValidationBatches batches(ds.validation(), c.training.batch_size, c.training.seq_len,
                                        c.model.vocab_size);
  train::EvalMetrics m = train::evaluate(*loaded.model, *loaded.parallelism, batches, a.batches,
                                         c.training.policy, loaded.step);
  if (!ds.cache_path().empty())  // text: the tokenizer decodes what was evaluated
    train::set_loss_per_byte(m, train::evaluated_text_bytes(batches, a.batches, *tokenizer));
  const std::string per_byte =
      m.val_loss_per_byte > 0 ? fmt::format(" | {:.4f} nats/byte", m.val_loss_per_byte) : "";
  fmt::print("checkpoint {} (step {})\nvalidation loss {:.4f} | perplexity {:.3f} | {} tokens{}\n",
             loaded.path, loaded.step, m.val_loss, m.val_ppl, m.val_tokens, per_byte);
  MIXPREC_CHECK(std::isfinite(m.val_loss), "eval",
                loaded.path + ": the validation loss is not finite (the weights or the " +
                    amp::display_name(c.training.policy) + " forward pass overflow)");
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd =
      app.add_subcommand("train", "Train a language model from a TOML config (configs/*.toml)");
  cmd->footer(
      "Examples:\n"
      "  mixprec train configs/moe_small.toml\n"
      "  mixprec train --config configs/gpt_small.toml --precision fp16-mixed --steps 200\n"
      "  mixprec train configs/tiny.toml --set model.d_model=96 --set optimizer.lr=1e-3\n"
      "  mixprec train configs/moe_small.toml --resume     # continue from the newest checkpoint\n"
      "  mixprec train configs/llama3_debug.toml --init-from exports/llama3  # fine-tune HF "
      "weights\n"
      "  mpirun -np 2 mixprec train configs/moe_small.toml  # fully sharded over 2 ranks (FSDP)\n"
      "Writes <run_dir>/metrics.jsonl (one JSON object per step) and, with [checkpoint] enable,\n"
      "<run_dir>/checkpoint/step-<N>.safetensors.");
  // The config is a positional; --config (torchtitan's spelling) is its hidden alias, so
  // --help shows it once.
  cmd->add_option("config", args->config, "TOML config file (required)");
  cmd->add_option("--config", args->config, "TOML config file")->group("");
  cmd->add_option("--precision", args->precision,
                  "precision policy: a preset (" + amp::preset_names() +
                      "), a linear recipe (bf16-mixed with FP8/MX linears: " +
                      amp::linear_recipe_names() + "), or key=value form (overrides the config)");
  cmd->add_option("--data", args->data, "a text file or folder to train on (training.data)");
  cmd->add_option("--run-dir", args->run_dir, "where metrics and checkpoints go (run_dir)");
  cmd->add_option("--steps", args->steps, "training steps, at least 1 (training.steps)")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--set", args->set, "override a config key: section.key=value (repeatable)");
  cmd->add_flag("--resume", args->resume, "continue from the newest valid checkpoint");
  cmd->add_option("--init-from", args->init_from,
                  "start from a Hugging Face folder's weights (the family's layout: Llama, Qwen "
                  "3, DeepSeek-V3 or GPT-2; its config.json must describe the config's model); "
                  "a checkpoint --resume finds wins");
  cmd->add_option("--progress", args->progress, "auto (bar on a terminal), bar, lines, quiet")
      ->check(CLI::IsMember({"auto", "bar", "lines", "quiet"}));
  cmd->add_flag("--detect-anomaly", args->detect_anomaly,
                "when a diverged run is stopped, re-run its last step with per-op checks and "
                "name the op and module that made the first inf/NaN");
  cmd->add_option("--stop-at-step", args->stop_at_step,
                  "stop once this many steps are done, as if interrupted (no final checkpoint)");
  cmd->callback([args, &exit_code] {
    if (args->config.empty())
      throw UsageError("train needs a config file: mixprec train CONFIG (e.g. configs/tiny.toml)");
    run_train(*args);
    exit_code = 0;
  });
}

void add_eval_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Validation loss and perplexity of a checkpoint (a file or a run directory)");
  cmd->add_option("checkpoint", args->checkpoint,
                  "a step-<N>.safetensors file, or a run directory (its newest checkpoint)")
      ->required();
  cmd->add_option("--data", args->data, "evaluate on this corpus instead of the run's");
  cmd->add_option("--batches", args->batches,
                  "validation batches to read; 0 (the default) reads the whole validation split, "
                  "where training's evals read training.eval_batches")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args, &exit_code] {
    run_eval(*args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
