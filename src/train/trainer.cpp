// The training loop (see trainer.h).
#include "mixprec/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/numerics_monitor.h"
#include "mixprec/data/batches.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/sharded_model.h"
#include "mixprec/dist/sharded_state.h"
#include "mixprec/error.h"
#include "mixprec/io/checkpoint_export.h"
#include "mixprec/optim/adam_mini.h"
#include "mixprec/optim/clip.h"
#include "mixprec/parallel.h"
#include "mixprec/report/plot.h"
#include "mixprec/tensor/allocator.h"
#include "mixprec/train/compute_scope.h"
#include "mixprec/train/evaluate.h"
#include "mixprec/train/metrics_log.h"
#include "mixprec/train/model_report.h"
#include "mixprec/train/optimizer_factory.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"

namespace mixprec::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Every token id must index the embedding: the byte tokenizer's ids reach 255.
void check_vocabulary(const data::TokenDataset& ds, int64_t vocab_size) {
  const data::TokenSplit all = ds.all();
  const auto it = std::max_element(all.tokens.begin(), all.tokens.end());
  if (it == all.tokens.end() || *it < vocab_size) return;
  throw Error("training.data",
              "token id " + std::to_string(*it) + " at position " +
                  std::to_string(it - all.tokens.begin()) + " of " + ds.cache_path().string() +
                  " is outside the vocabulary: model.vocab_size = " + std::to_string(vocab_size) +
                  " (the byte tokenizer needs 256)");
}

std::string run_name(const config::TrainConfig& c) {
  const fs::path p = fs::path(c.run_dir).lexically_normal();
  const std::string name = (p.has_filename() ? p : p.parent_path()).filename().string();
  return name.empty() ? "run" : name;
}

// Entropy (nats per token) of the split's token frequencies: the loss of the best model that
// ignores context, the bar a language model must get well below.
double unigram_entropy(const data::TokenSplit& split) {
  std::vector<int64_t> counts(256, 0);
  for (const uint8_t t : split.tokens) ++counts[t];
  double h = 0;
  const double n = static_cast<double>(split.size());
  for (const int64_t c : counts)
    if (c > 0) h -= static_cast<double>(c) / n * std::log(static_cast<double>(c) / n);
  return h;
}

// This rank's rows of the global batch: rank r of W takes rows [r B/W, (r+1) B/W), so every
// world size trains on the same samples per step.
data::Batch local_rows(const data::Batch& global, int rank, int world) {
  if (world == 1) return global;
  const int64_t rows = global.inputs.size(0) / world;
  return {global.inputs.slice(0, rank * rows, (rank + 1) * rows).contiguous(),
          global.targets.slice(0, rank * rows, (rank + 1) * rows).contiguous()};
}

// The job's world size, checked against [parallelism] data_parallel_shard_degree and the batch.
int checked_world_size(const config::TrainConfig& c, const dist::Communicator& comm) {
  const int w = comm.size();
  const int64_t degree = c.parallelism.data_parallel_shard_degree;
  MIXPREC_CHECK(degree == -1 || degree == w, "parallelism.data_parallel_shard_degree",
                std::to_string(degree) + " does not match the job's " + std::to_string(w) +
                    " rank(s) (-1 shards over every rank; only pure sharding is implemented)");
  MIXPREC_CHECK(c.training.batch_size % w == 0, "training.batch_size",
                std::to_string(c.training.batch_size) + " does not split evenly over " +
                    std::to_string(w) + " ranks");
  return w;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

struct Trainer::State {
  config::TrainConfig config;
  TrainerOptions options;
  std::unique_ptr<dist::Communicator> own_comm;  // when the options give none
  dist::Communicator* comm;
  Progress progress;
  std::optional<data::TokenDataset> dataset;
  std::optional<data::TrainBatches> train_batches;
  std::optional<data::ValidationBatches> val_batches;
  models::Transformer model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<optim::LrSchedule> schedule;
  amp::GradScaler scaler;
  amp::NumericsMonitor monitor_totals{{.per_param = false}};
  amp::NumericsMonitor monitor_detail{{.per_param = true}};
  std::optional<io::CheckpointStore> store;
  int64_t start_step = 0;
  std::string resumed_from;
  double unigram_entropy = 0;

  std::unique_ptr<dist::ShardedModel> sharded;  // world size > 1

  State(config::TrainConfig c, TrainerOptions o)
      : config(std::move(c)),
        options(std::move(o)),
        own_comm(options.comm ? nullptr : dist::make_single_process_communicator()),
        comm(options.comm ? options.comm : own_comm.get()),
        progress(comm->rank() == 0 ? options.progress : ProgressStyle::quiet, config.training.steps,
                 config.metrics.log_every),
        model(config.model),
        scaler(amp::ScalerOptions::for_policy(config.training.policy)) {}

  bool leader() const { return comm->rank() == 0; }
  optim::ParamList params() const {
    return sharded ? sharded->parameters() : model.parameters().parameters();
  }
  io::TrainingState training_state() { return {params(), optimizer.get(), &scaler}; }
};

// The checkpoint a resumed run starts from. Sharded, rank 0 picks it (the newest valid one)
// and every other rank loads that same step, failing loudly rather than starting elsewhere.
std::optional<io::Checkpoint> Trainer::resumable_checkpoint(State& s, int world) {
  if (!s.store) return std::nullopt;
  if (world == 1) return s.store->load_latest();
  std::optional<io::Checkpoint> latest;
  if (s.leader()) latest = s.store->load_latest();
  const int64_t chosen = dist::from_rank0(*s.comm, latest ? checkpoint_step(*latest) : -1);
  if (s.leader() || chosen < 0) return latest;
  io::Checkpoint c = io::load_checkpoint(s.store->path_for(chosen));
  MIXPREC_CHECK(checkpoint_step(c) == chosen, "checkpoint",
                c.path + " holds step " + std::to_string(checkpoint_step(c)) + ", rank 0 resumes " +
                    std::to_string(chosen));
  return c;
}

Trainer::Trainer(config::TrainConfig config, TrainerOptions options)
    : state_(std::make_unique<State>(std::move(config), std::move(options))) {
  State& s = *state_;
  const config::TrainConfig& c = s.config;
  const int world = checked_world_size(c, *s.comm);
  if (c.training.threads > 0) {
    set_num_threads(static_cast<int>(c.training.threads));
  } else if (world > 1 && !std::getenv("OMP_NUM_THREADS")) {
    // "every core", shared by the ranks on this machine (not every core per rank).
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_here = local ? std::max(1, std::atoi(local)) : world;
    set_num_threads(
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here));
  }
  // Where checkpoints go, and whether this run may start there.
  if (c.checkpoint.enable) {
    s.store.emplace((fs::path(c.run_dir) / c.checkpoint.folder).string(),
                    static_cast<int>(c.checkpoint.keep_last),
                    [&s](const std::string& w) { s.progress.message("warning: " + w); });
    // Rank 0's view decides for every rank (ranks may not share a file system's timing).
    const bool holds = !s.store->steps().empty();
    MIXPREC_CHECK(s.options.resume || !dist::from_rank0(*s.comm, holds), "run_dir",
                  s.store->dir() + " already holds checkpoints (newest: step " +
                      std::to_string(s.store->steps().back()) +
                      "): pass --resume to continue that run, or choose another run_dir");
  }

  // Data first: a missing corpus should fail before anything is allocated.
  std::error_code ec;
  fs::create_directories(c.run_dir, ec);
  MIXPREC_CHECK(!ec, "run_dir", "cannot create '" + c.run_dir + "': " + ec.message());
  // Rank 0 tokenises the corpus into the cache first; the others then read that cache.
  auto warn = [&s](const std::string& w) { s.progress.message("warning: " + w); };
  if (s.leader()) s.dataset.emplace(open_run_data(c, c.run_dir, warn));
  if (world > 1) s.comm->barrier();
  if (!s.leader()) s.dataset.emplace(open_run_data(c, c.run_dir, warn));
  check_vocabulary(*s.dataset, c.model.vocab_size);
  s.train_batches.emplace(s.dataset->train(), c.training.batch_size, c.training.seq_len,
                          static_cast<uint64_t>(c.training.seed));
  if (c.training.eval_every > 0 && c.training.val_fraction > 0)
    s.val_batches.emplace(s.dataset->validation(), c.training.batch_size, c.training.seq_len);

  s.unigram_entropy = unigram_entropy(s.dataset->train());
  s.progress.message(describe_model(s.model, c.training.policy));
  s.progress.message("data: " + std::to_string(s.dataset->size()) + " tokens from " +
                     std::to_string(s.dataset->num_files()) + " files (" +
                     std::to_string(s.dataset->train().size()) + " train, " +
                     std::to_string(s.dataset->validation().size()) + " validation), cache " +
                     s.dataset->cache_path().string() +
                     fmt::format("; unigram entropy {:.4f} nats/token", s.unigram_entropy));

  if (world > 1) {
    s.sharded = std::make_unique<dist::ShardedModel>(
        s.model, *s.comm, c.training.policy,
        dist::ShardingOptions{.reshard_after_forward = c.parallelism.reshard_after_forward});
    s.sharded->materialize(static_cast<uint64_t>(c.training.seed));
    s.scaler.set_found_inf_reduction(
        [comm = s.comm](bool found) { return dist::any_rank(*comm, found); });
    s.progress.message(
        "fully sharded over " + std::to_string(world) + " ranks (" + s.comm->backend() +
        "): " + std::to_string(s.sharded->layout().shard_numel()) + " parameters per rank in " +
        std::to_string(s.sharded->layout().units().size()) + " units");
  } else {
    s.model.materialize(static_cast<uint64_t>(c.training.seed), c.training.policy);
  }
  s.optimizer = make_optimizer(c.optimizer, s.params(), static_cast<uint64_t>(c.training.seed));
  if (auto* adam_mini = dynamic_cast<optim::AdamMini*>(s.optimizer.get()); adam_mini && s.sharded)
    adam_mini->set_sum_cut_blocks([sharded = s.sharded.get()](std::vector<optim::CutBlock>& b) {
      sharded->sum_cut_blocks(b);
    });
  s.schedule.emplace(make_lr_schedule(c));

  if (s.options.resume) {
    std::optional<io::Checkpoint> latest = resumable_checkpoint(s, world);
    if (latest) {
      if (s.sharded) latest->tensors = dist::shard_training_state(latest->tensors, *s.sharded);
      restore_run_checkpoint(*latest, s.training_state(), c);
      s.start_step = checkpoint_step(*latest);
      s.resumed_from = latest->path;
      s.progress.message("resumed from " + latest->path + " (step " + std::to_string(s.start_step) +
                         ")");
    } else {
      s.progress.message(s.store ? "no checkpoint in " + s.store->dir() + ": starting at step 0"
                                 : "checkpoint.enable = false: nothing to resume, starting at "
                                   "step 0");
    }
  }
}

Trainer::~Trainer() = default;

const config::TrainConfig& Trainer::config() const {
  return state_->config;
}
models::Transformer& Trainer::model() {
  return state_->model;
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const config::TrainConfig& c = s.config;
  const amp::MixedPrecisionPolicy& policy = c.training.policy;
  const optim::ParamList params = s.params();
  Allocator& alloc = Allocator::instance();
  const int rank = s.comm->rank(), world = s.comm->size();

  std::optional<MetricsLog> log;
  if (c.metrics.jsonl && s.leader()) {
    log.emplace(fs::path(c.run_dir) / "metrics.jsonl", s.start_step > 0);
    log->write(run_json_line(run_name(c), amp::display_name(policy),
                             s.model.parameters().parameter_count(), s.start_step,
                             config::to_toml(c)));
  }

  TrainSummary summary;
  summary.start_step = s.start_step;
  summary.end_step = s.start_step;
  summary.unigram_entropy = s.unigram_entropy;
  const int64_t end = s.options.stop_at_step >= 0
                          ? std::min(s.options.stop_at_step, c.training.steps)
                          : c.training.steps;
  const int64_t tokens_per_step = c.training.batch_size * c.training.seq_len;
  const auto started = Clock::now();

  auto save = [&](int64_t step) {
    // Sharded: every rank gathers, rank 0 writes, and every rank learns whether it worked.
    io::TensorMap full;
    if (s.sharded) full = dist::gather_training_state(*s.sharded, s.optimizer.get(), &s.scaler);
    std::string failure;
    try {
      if (!s.sharded)
        summary.last_checkpoint = save_run_checkpoint(*s.store, step, s.training_state(), c);
      else if (s.leader())
        summary.last_checkpoint = save_run_checkpoint(*s.store, step, std::move(full), c);
    } catch (const std::exception& e) {  // file system errors too: every rank must hear of it
      failure = e.what();
    }
    if (!s.leader()) {
      if (dist::from_rank0(*s.comm, 0) != 0) failure = "rank 0 could not write it";
      if (failure.empty()) summary.last_checkpoint = s.store->path_for(step);
    } else if (world > 1) {
      dist::from_rank0(*s.comm, failure.empty() ? 0 : 1);
    }
    if (!failure.empty()) {
      const std::vector<int64_t> kept = s.store->steps();
      throw Error("checkpoint",
                  std::string("saving step ") + std::to_string(step) + " failed; " +
                      (kept.empty() ? std::string("no earlier checkpoint")
                                    : "the checkpoint of step " + std::to_string(kept.back()) +
                                          " is intact") +
                      ": " + failure);
    }
    s.progress.message("checkpoint: " + summary.last_checkpoint);
  };
  auto eval = [&](int64_t step) {
    EvalMetrics m =
        evaluate(s.model, *s.val_batches, c.training.eval_batches, policy, step, s.sharded.get());
    s.progress.eval(m);
    if (log) log->write(to_json_line(m));
    summary.evals.push_back(m);
  };

  for (int64_t step = s.start_step; step < end; ++step) {
    const auto t0 = Clock::now();
    alloc.reset_peak();
    const uint64_t comm_before = s.comm->stats().total();
    const data::Batch batch =
        local_rows(s.train_batches->batch(static_cast<uint64_t>(step)), rank, world);
    s.schedule->apply(*s.optimizer, step);

    models::LossParts loss;
    if (s.sharded) s.sharded->begin_step(true);
    {
      ComputeScope compute(policy);
      loss = s.model.loss(batch.inputs, batch.targets);
    }
    const float loss_scale = s.scaler.get_scale();
    s.scaler.scale(loss.total).backward();
    if (s.sharded) s.sharded->finish_backward();
    // The values, then the graph goes (it would otherwise live through the next forward).
    std::vector<double> losses{loss.total.item(), loss.ce.item(), loss.aux.item(), loss.z.item()};
    loss = {};
    s.scaler.unscale(*s.optimizer);

    StepMetrics m;
    m.step = step + 1;
    const bool detail = m.step % std::max<int64_t>(c.metrics.log_every, 1) == 0;
    amp::StepNumerics numerics = (detail ? s.monitor_detail : s.monitor_totals)
                                     .observe(m.step, *s.optimizer, loss_scale, true);
    // The monitor has just read every gradient for its norm: clip with it. Sharded, that is
    // this rank's part: the squares add up over ranks.
    m.grad_norm = numerics.grad_norm;
    if (world > 1) {
      std::vector<double> sq{m.grad_norm * m.grad_norm};
      dist::sum_over_ranks(*s.comm, sq);
      m.grad_norm = std::sqrt(sq[0]);
      numerics.grad_norm = m.grad_norm;
    }
    // Clipping is folded into the optimizer's read of each gradient, as 1/scale is: the
    // products of clipping the f32 gradients in place, without two passes over them.
    const float clip = c.training.grad_clip > 0 && std::isfinite(m.grad_norm)
                           ? optim::clip_coefficient(m.grad_norm, c.training.grad_clip)
                           : 1.0f;
    // The monitor's norm is finite only when every gradient is: the scaler needs no pass of
    // its own to know the step is safe.
    const amp::StepReport report = s.scaler.step(*s.optimizer, clip, m.grad_norm);
    amp::NumericsMonitor::add_step_report(numerics, report);
    s.scaler.update();
    s.optimizer->zero_grad();
    const auto t1 = Clock::now();

    // Each rank's loss is the mean over its rows: the job's is the mean over ranks.
    dist::sum_over_ranks(*s.comm, losses);
    m.loss = losses[0] / world;
    m.ce = losses[1] / world;
    m.aux = losses[2] / world;
    m.z = losses[3] / world;
    m.lr = s.schedule->lr(step);
    m.loss_scale = loss_scale;
    m.skipped = !report.stepped;
    m.skipped_total = s.scaler.state().steps_skipped;
    m.tokens = m.step * tokens_per_step;
    m.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    m.tokens_per_s = static_cast<double>(tokens_per_step) / (m.step_ms / 1e3);
    m.elapsed_s = std::chrono::duration<double>(t1 - started).count();
    m.memory_bytes = alloc.stats().current_bytes;
    m.peak_bytes = alloc.stats().peak_bytes;
    m.comm_bytes = s.comm->stats().total() - comm_before;
    m.underflow_fraction = numerics.underflow_fraction();
    m.overflow_fraction = numerics.overflow_fraction();
    m.numerics_json = numerics.to_json();

    s.progress.step(m);
    if (log) log->write(to_json_line(m));
    summary.steps.push_back(std::move(m));
    summary.end_step = step + 1;

    const bool final_step = step + 1 == c.training.steps;
    if (s.val_batches && ((step + 1) % c.training.eval_every == 0 || final_step)) eval(step + 1);
    if (s.store && ((step + 1) % c.checkpoint.interval == 0 || final_step)) save(step + 1);
  }
  s.progress.finish();

  if (summary.end_step == c.training.steps && !summary.steps.empty() && c.checkpoint.export_bf16) {
    const std::string path = (fs::path(c.run_dir) / "model-bf16.safetensors").string();
    if (!s.sharded) {
      io::export_bf16_weights(path, params);
    } else {
      // The full masters, gathered (a collective), as unsharded parameters for the export.
      const io::TensorMap full = dist::gather_training_state(*s.sharded, nullptr, nullptr);
      optim::ParamList whole;
      for (const models::ParamSpec& spec : s.model.parameters().specs())
        whole.push_back(std::make_shared<optim::Parameter>(
            spec.name, full.at(io::kModelPrefix + spec.name), amp::preset("fp32")));
      if (s.leader()) io::export_bf16_weights(path, whole);
    }
    s.progress.message("bf16 weights: " + path);
  }
  if (c.metrics.plot && log && !summary.steps.empty()) {
    const fs::path png = fs::path(c.run_dir) / "loss.png";
    try {  // a missing gnuplot costs the picture, not the run
      report::plot_runs({c.run_dir}, png);
      s.progress.message("plot: " + png.string());
    } catch (const Error& e) {
      s.progress.message(std::string("warning: no plot: ") + e.what());
    }
  }

  std::vector<double> rates;
  for (std::size_t i = summary.steps.size() > 5 ? 3 : 0; i < summary.steps.size(); ++i)
    rates.push_back(summary.steps[i].tokens_per_s);
  summary.tokens_per_s = median(rates);
  return summary;
}

}  // namespace mixprec::train
