// The training loop (see trainer.h).
#include "mixprec/train/trainer.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/io/config_file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/amp/fp8_monitor.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/numerics_monitor.h"
#include "mixprec/autograd/anomaly.h"
#include "mixprec/autograd/record_tensor_ops.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/checksum.h"
#include "mixprec/core/error.h"
#include "mixprec/core/hash.h"
#include "mixprec/core/parallel.h"
#include "mixprec/core/process_memory.h"
#include "mixprec/data/batches.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/machine_fit.h"
#include "mixprec/dist/memory_plan.h"
#include "mixprec/dist/parallelism.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/checkpoint_export.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/io/hf_weights.h"
#include "mixprec/numerics/accumulator_model.h"
#include "mixprec/optim/clip.h"
#include "mixprec/report/plot.h"
#include "mixprec/tensor/allocator.h"
#include "mixprec/train/bf16_kernel_choice.h"
#include "mixprec/train/checkpoint_plausibility.h"
#include "mixprec/train/evaluate.h"
#include "mixprec/train/expert_load.h"
#include "mixprec/train/metrics_log.h"
#include "mixprec/train/model_report.h"
#include "mixprec/train/optimizer_factory.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"
#include "mixprec/train/run_dir_lock.h"
#include "mixprec/train/tensorboard_log.h"
#include "upper_median.h"

namespace mixprec::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string run_name(const config::TrainConfig& c) {
  const fs::path p = fs::path(c.run_dir).lexically_normal();
  const std::string name = (p.has_filename() ? p : p.parent_path()).filename().string();
  return name.empty() ? "run" : name;
}

// The job's world size, checked against [parallelism] data_parallel_shard_degree and the batch.
void check_world_size(const config::TrainConfig& c, const dist::Communicator& comm) {
  const int w = comm.size();
  const int64_t degree = c.parallelism.data_parallel_shard_degree;
  MIXPREC_CHECK(degree == -1 || degree == w, "parallelism.data_parallel_shard_degree",
                std::to_string(degree) + " does not match the job's " + std::to_string(w) +
                    " rank(s) (-1 shards over every rank; only pure sharding is implemented)");
  dist::check_batch_splits(c, w);
}

// training.threads, or "every core" shared by the job's ranks on this machine (not every
// core per rank) unless OMP_NUM_THREADS says otherwise.
void set_threads(const config::TrainConfig& c, const dist::Communicator& comm) {
  // More threads than cores only slows the run, and OpenMP crashes creating 100000 of them.
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  MIXPREC_CHECK(c.training.threads <= cores, "training.threads",
                std::to_string(c.training.threads) + " exceeds this machine's " +
                    std::to_string(cores) + " cores (0 uses all of them)");
  if (c.training.threads > 0) {
    set_num_threads(static_cast<int>(c.training.threads));
  } else if (comm.size() > 1 && !std::getenv("OMP_NUM_THREADS")) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    set_num_threads(std::max(1, cores / dist::ranks_on_this_machine(comm)));
  }
}

// The amax histories of a delayed recipe (te_delayed), with TE's keys from the config.
std::unique_ptr<amp::DelayedScaling> make_delayed_scaling(const config::TrainConfig& c) {
  const amp::LinearRecipe* r = c.training.policy.linear_recipe;
  if (!r || !r->delayed) return nullptr;
  const config::QuantizeLinearConfig& q = c.quantize.float8;
  return std::make_unique<amp::DelayedScaling>(
      amp::DelayedScalingOptions{.amax_history_len = q.amax_history_len,
                                 .amax_compute_algo = amp::parse_amax_algo(q.amax_compute_algo),
                                 .margin = q.margin});
}

}  // namespace

// Gives back the blocks cached during its scope: the one-off work between steps (checkpoints,
// evaluation), whose blocks no step reuses.
class CacheTrim {
 public:
  CacheTrim() : mark_(Allocator::instance().cache_mark()) {}
  ~CacheTrim() { Allocator::instance().trim_cached_since(mark_); }
  CacheTrim(const CacheTrim&) = delete;
  CacheTrim& operator=(const CacheTrim&) = delete;

 private:
  uint64_t mark_;
};

struct Trainer::State {
  config::TrainConfig config;
  TrainerOptions options;
  std::unique_ptr<dist::Communicator> own_comm;  // when the options give none
  dist::Communicator* comm;
  Progress progress;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::optional<data::TokenDataset> dataset;
  std::optional<data::TrainBatches> train_batches;
  std::optional<data::ValidationBatches> val_batches;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<dist::Parallelism> parallelism;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<optim::LrSchedule> schedule;
  amp::GradScaler scaler;
  std::unique_ptr<amp::DelayedScaling> delayed;  // a delayed recipe's amax histories
  amp::NumericsMonitor monitor_totals{{.per_param = false}};
  amp::NumericsMonitor monitor_detail{{.per_param = true}};
  std::optional<io::CheckpointStore> store;
  int64_t next_step = 0;  // completed steps
  double unigram_entropy = 0;
  int64_t val_text_bytes = 0;  // of the evaluated validation text; 0: unknown (token files)
  Clock::time_point started = Clock::now();
  std::optional<MetricsLog> log;              // rank 0, while run() runs
  std::optional<TensorboardLog> tensorboard;  // rank 0, with [metrics] enable_tensorboard
  std::optional<RunDirLock> run_lock;         // rank 0, for the trainer's lifetime
  Bf16KernelChoice bf16_kernel;               // rank 0's choice; every rank runs it
  // The kernel before this trainer chose one: restored when it ends (the choice is global).
  std::string previous_bf16_kernel = backend::current().current_bf16_kernel();
  std::string checkpoint_bf16_kernel;  // the resumed checkpoint's, "" if none
  TrainSummary summary;                // of the current run()
  int64_t skipped_in_a_row = 0;        // the stop rule's counts
  int64_t nonfinite_in_a_row = 0;
  bool checkpoint_owed = false;  // due at a skipped step
  std::string first_nonfinite;   // of the newest skipped step: the first such parameter
  // Of the newest step: whether FP8 casts ran, and the first whose source held an inf or NaN
  // and the first that saturated (the monitor's collection).
  bool fp8_ran = false;
  std::optional<amp::Fp8TensorRecord> fp8_first_nonfinite, fp8_first_saturated;

  State(config::TrainConfig c, TrainerOptions o)
      : config(std::move(c)),
        options(std::move(o)),
        own_comm(options.comm ? nullptr : dist::make_single_process_communicator()),
        comm(options.comm ? options.comm : own_comm.get()),
        progress(comm->rank() == 0 ? options.progress : ProgressStyle::quiet, config.training.steps,
                 config.metrics.log_every),
        model(models::make_model(config.model)),
        scaler(amp::ScalerOptions::for_policy(config.training.policy)),
        delayed(make_delayed_scaling(config)) {}

  ~State() {
    try {
      backend::current().use_bf16_kernel(previous_bf16_kernel, "training.bf16_kernel");
    } catch (...) {  // it was available when read: nothing to restore otherwise
    }
  }

  bool leader() const { return comm->rank() == 0; }
  // Steps whose metrics are logged in detail (per parameter, per FP8 tensor): every log_every-th.
  bool log_step(int64_t step) const {
    return step % std::max<int64_t>(config.metrics.log_every, 1) == 0;
  }
  io::TrainingState training_state() {
    return {parallelism->parameters(), optimizer.get(), &scaler, model->buffers(), delayed.get()};
  }
  // Rank 0's: the other ranks see the same files and would repeat it once each.
  void warn(const std::string& w) {
    if (leader()) progress.warning(w);
  }

  void open_store();
  void open_data();
  void build_model();
  void choose_bf16_kernel();
  void resume();
  void init_from_hf();
  std::optional<io::Checkpoint> resumable_checkpoint();
  StepMetrics step();
  struct Pass {
    // total, ce, then the family's auxiliary terms: means over this rank's rows
    std::vector<double> losses;
    std::vector<std::string> term_names;  // of losses[2..]
    std::vector<int64_t> counts;          // the model's step counts over them
  };
  Pass forward_backward(int64_t step, float loss_scale);
  models::LossParts micro_batch(const data::Batch& batch, double loss_scale, int64_t micro_batches,
                                uint64_t rounding_seed);
  data::Batch local_batch(int64_t step);
  void stop_if_diverged(const StepMetrics& m);
  std::string kept_text() const;
  std::string nonfinite_origin(const StepMetrics& m);
  std::string fp8_origin(const StepMetrics& m);
  amp::StepReport apply_gradients(StepMetrics& m, amp::StepNumerics& numerics, float loss_scale,
                                  const amp::Fp8StepStats& fp8);
  void update_buffers(std::vector<int64_t> counts, bool stepped, StepMetrics& m);
  void update_delayed_scaling();
  std::string save(int64_t step);
  std::string export_weights();
  void begin_run();
  void record(StepMetrics m);
  void evaluate_at(int64_t step);
  bool due(int64_t step, int64_t every) const;
  void plot();
};

// Where checkpoints go, and whether this run may start there. Rank 0's view decides for every
// rank (ranks may not share a file system's timing).
void Trainer::State::open_store() {
  const config::TrainConfig& c = config;
  // Rank 0 takes the run directory's lock for the whole run; every rank fails if it cannot.
  dist::all_or_none(*comm, [&] {
    if (!leader()) return;
    std::error_code ec;
    fs::create_directories(c.run_dir, ec);
    MIXPREC_CHECK(!ec, "run_dir", "cannot create '" + c.run_dir + "': " + ec.message());
    std::string why;
    run_lock = RunDirLock::try_lock(c.run_dir, &why);
    MIXPREC_CHECK(run_lock.has_value(), "run_dir", why);
    // Holding the lock, no other process writes here: a temporary is an interrupted save's.
    for (const fs::path& dir : {fs::path(c.run_dir), fs::path(c.run_dir) / c.checkpoint.folder})
      for (const std::string& t : io::remove_interrupted_temporaries(dir.string()))
        warn("removed " + t + ", left by an interrupted save");
  });
  if (c.checkpoint.enable) {
    store.emplace((fs::path(c.run_dir) / c.checkpoint.folder).string(),
                  static_cast<int>(c.checkpoint.keep_last),
                  [this](const std::string& w) { warn(w); });
    const bool holds = !store->steps().empty();
    MIXPREC_CHECK(options.resume || !dist::from_rank0(*comm, holds), "run_dir",
                  store->dir() + " already holds checkpoints (newest: step " +
                      std::to_string(store->steps().back()) +
                      "): pass --resume to continue that run, or choose another run_dir");
  }
  // An earlier run's log is continued (--resume) or kept, never truncated.
  std::error_code ec;
  const fs::path log_path = fs::path(c.run_dir) / "metrics.jsonl";
  const bool logged = c.metrics.jsonl && fs::file_size(log_path, ec) > 0 && !ec;
  MIXPREC_CHECK(options.resume || !dist::from_rank0(*comm, logged), "run_dir",
                log_path.string() +
                    " holds an earlier run's metrics: pass --resume to continue that run, or "
                    "choose another run_dir");
}

// Rank 0 tokenises the corpus into the cache first; the others then read that cache.
void Trainer::State::open_data() {
  const config::TrainConfig& c = config;
  std::error_code ec;
  fs::create_directories(c.run_dir, ec);
  MIXPREC_CHECK(!ec, "run_dir", "cannot create '" + c.run_dir + "': " + ec.message());
  auto on_warning = [this](const std::string& w) { warn(w); };
  tokenizer = open_run_tokenizer(c);
  if (leader()) dataset.emplace(open_run_data(c, c.run_dir, *tokenizer, on_warning));
  comm->barrier();
  if (!leader()) dataset.emplace(open_run_data(c, c.run_dir, *tokenizer, on_warning));
  // The same tokens: a rank on another machine may hold other files under the same path.
  const uint64_t fingerprint = dataset->fingerprint() ^ static_cast<uint64_t>(dataset->size());
  MIXPREC_CHECK(dist::same_on_every_rank(*comm, fingerprint), "training.data",
                "the ranks read different corpora under '" + c.training.data +
                    "' (fingerprints differ): every rank must train on rank 0's data");
  check_vocabulary(*dataset, c.model.vocab_size);  // every rank, so all fail together
  const int64_t V = c.model.vocab_size;
  train_batches.emplace(dataset->train(), c.training.batch_size, c.training.seq_len,
                        static_cast<uint64_t>(c.training.seed), V);
  if (c.training.eval_every > 0 && dataset->validation().size() > 0) {
    val_batches.emplace(dataset->validation(), c.training.batch_size, c.training.seq_len, V);
    if (!dataset->cache_path().empty())  // text: the tokenizer decodes what is evaluated
      val_text_bytes = evaluated_text_bytes(*val_batches, c.training.eval_batches, *tokenizer);
  }
  unigram_entropy = train::unigram_entropy(dataset->train(), V);
  progress.message(describe_model(*model, c.training.policy));
  progress.message("tokenizer: " + tokenizer->describe());
  progress.message(
      "data: " + std::to_string(dataset->size()) + " tokens from " +
      std::to_string(dataset->num_files()) + " files (" + std::to_string(dataset->train().size()) +
      " train, " + std::to_string(dataset->validation().size()) + " validation), " +
      dataset->source() + fmt::format("; unigram entropy {:.4f} nats/token", unigram_entropy));
}

// The parameters as this job holds them, the optimizer over them, the schedule.
namespace {

// Every filter_fqns entry of the linear recipe must name some module of the model: torchtitan's
// "output" (mixprec's lm_head) would otherwise quietly quantize the head it meant to keep.
void check_linear_filters(const config::TrainConfig& c, const std::vector<models::ParamSpec>& ps) {
  const amp::MixedPrecisionPolicy& p = c.training.policy;
  if (!p.linear_recipe) return;
  const std::string key = std::string(p.linear_recipe->section) == "mx"
                              ? "quantize.linear.mx.filter_fqns"
                              : "quantize.linear.float8.filter_fqns";
  for (const std::string& entry : p.linear_skip) {
    if (entry == amp::kAutoFilterSmallKn) continue;
    // The output head runs under the module scope lm_head also when it reads the tied
    // embedding (transformer_forward.cpp); every other linear's scope is its weight's name.
    const bool found = std::string("lm_head").find(entry) != std::string::npos ||
                       std::any_of(ps.begin(), ps.end(), [&](const models::ParamSpec& s) {
                         return s.name.find(entry) != std::string::npos;
                       });
    MIXPREC_CHECK(found, "config",
                  key + " holds '" + entry + "', which names no module of this " + c.model.kind +
                      " model (its linears are named like lm_head, blocks.0.attn.wq, "
                      "blocks.0.mlp.w_up; torchtitan's 'output' is mixprec's 'lm_head')");
  }
}

// Every fqns entry of the grouped recipe must name some group of a stacked experts weight, as
// its product runs: "blocks.0.moe.experts.3.w_up" (the weight's module, the expert, the weight).
void check_grouped_fqns(const config::TrainConfig& c, const std::vector<models::ParamSpec>& ps) {
  const amp::MixedPrecisionPolicy& p = c.training.policy;
  if (!p.grouped_recipe) return;
  const std::string key = std::string("quantize.grouped_mm.") + p.grouped_recipe->section + ".fqns";
  std::vector<std::string> paths;
  for (const models::ParamSpec& s : ps) {
    if (s.shape.size() != 3) continue;
    const std::string module = s.name.substr(0, s.name.rfind('.'));
    const std::string weight = s.name.substr(s.name.rfind('.') + 1);  // w_up, w_gate, w_down
    for (int64_t e = 0; e < s.shape[0]; ++e)
      paths.push_back(module + "." + std::to_string(e) + "." + weight);
  }
  MIXPREC_CHECK(!paths.empty(), "config",
                key + " turns on a grouped recipe, but this " + c.model.kind +
                    " model has no stacked experts weight (grouped GEMMs run MoE experts stacked "
                    "as [E, Out, In], [model.moe] idle_experts = \"step\"; per-expert linears "
                    "run by [quantize.linear.*])");
  for (const std::string& entry : p.grouped_fqns) {
    const bool found = std::any_of(paths.begin(), paths.end(), [&](const std::string& path) {
      return path.find(entry) != std::string::npos;
    });
    MIXPREC_CHECK(found, "config",
                  key + " holds '" + entry + "', which names no experts group of this " +
                      c.model.kind + " model (they are named like " + paths.front() + ")");
  }
}

}  // namespace

void Trainer::State::build_model() {
  const config::TrainConfig& c = config;
  check_linear_filters(c, model->parameters().specs());
  check_grouped_fqns(c, model->parameters().specs());
  if (const amp::LinearRecipe* r = c.training.policy.grouped_recipe) {
    std::string fqns;
    for (const std::string& s : c.training.policy.grouped_fqns)
      fqns += (fqns.empty() ? "" : ", ") + s;
    progress.message(std::string("grouped experts recipe: ") + r->name + " (" + r->source +
                     ") on " + fqns);
  }
  if (const amp::LinearRecipe* r = c.training.policy.linear_recipe) {
    std::string skip;
    for (const std::string& s : c.training.policy.linear_skip)
      skip += (skip.empty() ? "" : ", ") + s;
    progress.message(std::string("linear recipe: ") + r->name + " (" + r->source + "); kept in " +
                     dtype_name(c.training.policy.compute_dtype) + ": " +
                     (skip.empty() ? "none" : skip));
  }
  if (const AccumulatorModel* acc = c.training.policy.accumulator) {
    const NamedAccumulator& a = named_accumulator_of(acc);
    progress.message(std::string("accumulator: ") + a.name +
                     " on the recipes' fast-accumulation products (" + a.source +
                     "); a scalar model, far slower than f32");
  }
  model->set_activation_checkpoint(
      models::ActivationCheckpoint::from_config(c.activation_checkpoint));
  if (c.activation_checkpoint.mode != "none")
    progress.message("activation checkpointing: " + model->activation_checkpoint().describe());
  const bool fp8_gather = c.quantize.float8.enable_fsdp_float8_all_gather ||
                          c.quantize.mx.enable_fsdp_float8_all_gather;
  parallelism = dist::make_parallelism(
      *model, *comm, c.training.policy,
      dist::ShardingOptions{
          .reshard_after_forward = c.parallelism.reshard_after_forward,
          .fp8_all_gather = fp8_gather ? c.training.policy.linear_recipe : nullptr,
          .fp8_skip = c.training.policy.linear_skip,
          .precompute_fp8_scales = c.quantize.float8.precompute_float8_dynamic_scale_for_fsdp ||
                                   c.quantize.mx.precompute_float8_dynamic_scale_for_fsdp});
  if (fp8_gather && comm->size() == 1)
    progress.message(
        "enable_fsdp_float8_all_gather: nothing to gather at world size 1 (the "
        "linears cast their weights as without it)");
  parallelism->materialize(static_cast<uint64_t>(c.training.seed));
  if (const std::string line = parallelism->describe(); !line.empty()) progress.message(line);
  optimizer = make_optimizer(c.optimizer, parallelism->parameters(),
                             static_cast<uint64_t>(c.training.seed));
  parallelism->join(*optimizer);
  parallelism->join(scaler);
  schedule.emplace(make_lr_schedule(c));
}

// Rank 0 chooses where bf16 products run (by its measurement, its cache, the setting or the
// checkpoint); every rank takes that kernel, so a dense model's bits do not depend on the
// ranks' own timings.
void Trainer::State::choose_bf16_kernel() {
  dist::all_or_none(*comm, [&] {
    if (leader())
      bf16_kernel = train::choose_bf16_kernel(config.training.bf16_kernel, checkpoint_bf16_kernel,
                                              [this](const std::string& w) { warn(w); });
  });
  const std::string kernel = dist::text_from(*comm, bf16_kernel.kernel, 0);
  dist::all_or_none(*comm, [&] {
    if (leader()) return;
    backend::current().use_bf16_kernel(kernel, "training.bf16_kernel (rank 0's choice)");
    bf16_kernel = {kernel, "rank 0's choice", {}, ""};
  });
  progress.message("bf16 products: " + bf16_kernel.describe());
}

// The checkpoint a resumed run starts from: rank 0 picks it (the newest valid one) and every
// other rank loads that same step, failing loudly rather than starting elsewhere.
std::optional<io::Checkpoint> Trainer::State::resumable_checkpoint() {
  if (!store) return std::nullopt;
  std::optional<io::Checkpoint> latest;
  if (leader()) latest = store->load_latest();
  const int64_t chosen = dist::from_rank0(*comm, latest ? checkpoint_step(*latest) : -1);
  if (leader() || chosen < 0) return latest;
  io::Checkpoint c = io::load_checkpoint(store->path_for(chosen));
  MIXPREC_CHECK(checkpoint_step(c) == chosen, "checkpoint",
                c.path + " holds step " + std::to_string(checkpoint_step(c)) + ", rank 0 resumes " +
                    std::to_string(chosen));
  return c;
}

void Trainer::State::resume() {
  std::optional<io::Checkpoint> latest = resumable_checkpoint();
  if (!latest) {
    progress.message(store ? "no checkpoint in " + store->dir() + ": starting at step 0"
                           : "checkpoint.enable = false: nothing to resume, starting at step 0");
    return;
  }
  latest->tensors = parallelism->local_training_state(latest->tensors);
  // Each rank checks its own shard (a NaN may sit in one): all fail, or none.
  dist::all_or_none(*comm, [&] {
    check_tokenizer(*latest, *tokenizer, config.model.tokenizer);
    restore_run_checkpoint(*latest, training_state(), config);
  });
  next_step = checkpoint_step(*latest);
  checkpoint_bf16_kernel = train::checkpoint_bf16_kernel(*latest);
  progress.message("resumed from " + latest->path + " (step " + std::to_string(next_step) + ")");
}

// The weights of a Hugging Face folder in place of the initial ones: every rank reads the
// folder (all fail together), keeps its part, and restores it into its masters.
void Trainer::State::init_from_hf() {
  const std::string& dir = options.init_from;
  dist::all_or_none(*comm, [&] {
    TensorMap local = parallelism->local_training_state(io::import_hf(dir, config.model));
    for (const auto& p : parallelism->parameters()) {  // narrow masters in the pure modes
      const auto it = local.find(io::kModelPrefix + p->name());
      if (it != local.end()) it->second = it->second.to(p->master().dtype());
    }
    // A DeepSeek-V3 folder's expert biases too (its router's e_score_correction_bias).
    io::TrainingState state{parallelism->parameters()};
    for (const auto& [name, b] : model->buffers())
      if (local.contains(io::kBufferPrefix + name)) state.buffers.emplace_back(name, b);
    io::restore_training_state(local, state);
  });
  progress.message("initial weights: " + dir + " (Hugging Face " +
                   io::hf_layout_of(config.model).model_type + ")");
}

namespace {

// Every rank must run rank 0's config: an MPMD launch (or a --set or file that differs per
// rank) would otherwise train silently on mixed settings. Every rank learns the first
// differing key of the lowest rank that differs, so all fail with the same message.
void agree_with_rank0(const config::TrainConfig& c, const TrainerOptions& o) {
  dist::Communicator& comm = *o.comm;
  if (comm.size() == 1) return;
  // The flags that are not config keys, too: a rank that re-ran a step for --detect-anomaly
  // alone would wait in its collectives for ever.
  const uint64_t flags = (o.resume ? 1u : 0u) | (o.detect_anomaly ? 2u : 0u) |
                         (static_cast<uint64_t>(o.stop_at_step + 1) << 2);
  MIXPREC_CHECK(dist::same_on_every_rank(comm, flags << 1), "dist",
                "the ranks were started with different --resume, --detect-anomaly or "
                "--stop-at-step flags; every rank must run rank 0's command");
  const std::string mine = config::to_toml(c);
  const std::string rank0 = dist::text_from(comm, mine, 0);
  const int first = dist::first_rank_with(comm, mine != rank0);
  if (first < 0) return;
  const std::string theirs = dist::text_from(comm, mine, first);
  const auto d = config::first_difference(config::load_config_text(rank0, "rank 0's config"),
                                          config::load_config_text(theirs, "a rank's config"));
  throw Error("dist", fmt::format("rank {} runs another config than rank 0: {} (an MPMD launch, "
                                  "or a config file or --set that differs per rank); every rank "
                                  "must run rank 0's config",
                                  first,
                                  d ? fmt::format("{} = {} on rank 0, {} on rank {}", d->key, d->a,
                                                  d->b, first)
                                    : std::string("their TOML differs")));
}

// Refused before the model is described: 1e6 layers take a minute to describe, a batch of 1e9
// sequences ends in std::bad_alloc.
config::TrainConfig fitting_this_machine(config::TrainConfig c, const TrainerOptions& o) {
  if (!o.comm) {
    dist::check_fits_machine(c, 1, 1, "memory");
    return c;
  }
  agree_with_rank0(c, o);
  // Machines differ in memory and in ranks: each checks its own, all fail together.
  dist::all_or_none(*o.comm, [&] {
    dist::check_fits_machine(c, o.comm->size(), dist::ranks_on_this_machine(*o.comm), "memory");
  });
  return c;
}

}  // namespace

Trainer::Trainer(config::TrainConfig config, TrainerOptions options)
    : state_(std::make_unique<State>(fitting_this_machine(std::move(config), options),
                                     std::move(options))) {
  State& s = *state_;
  s.comm->set_timeouts({std::chrono::seconds(s.config.comm.init_timeout_seconds),
                        std::chrono::seconds(s.config.comm.train_timeout_seconds)});
  dist::all_or_none(*s.comm, [&] {
    check_world_size(s.config, *s.comm);
    set_threads(s.config, *s.comm);  // this machine's cores
    // A kernel this host lacks is refused before the corpus is read (the setting is taken
    // now; ~State puts the previous kernel back).
    if (const std::string& k = s.config.training.bf16_kernel; k != "auto")
      backend::current().use_bf16_kernel(k, "training.bf16_kernel");
  });
  s.open_store();
  s.open_data();  // a missing corpus fails before anything is allocated
  s.build_model();
  if (s.options.resume) s.resume();
  if (!s.options.init_from.empty() && s.next_step == 0) s.init_from_hf();
  s.choose_bf16_kernel();
}

Trainer::~Trainer() = default;

const config::TrainConfig& Trainer::config() const {
  return state_->config;
}
models::Model& Trainer::model() {
  return *state_->model;
}
int64_t Trainer::next_step() const {
  return state_->next_step;
}
StepMetrics Trainer::step() {
  return state_->step();
}

// Unscale, norm, clip, step or skip, update the scale: the one place gradients become an
// update. The norm is the whole model's (every rank gets the same), read by the numerics
// monitor's pass over the gradients; clipping is folded into the optimizer's read of each
// gradient, as 1/scale is (the bits of clipping f32 gradients in place, one pass fewer), and a
// finite norm spares the scaler its own non-finite pass.
amp::StepReport Trainer::State::apply_gradients(StepMetrics& m, amp::StepNumerics& numerics,
                                                float loss_scale, const amp::Fp8StepStats& fp8) {
  // unscale() writes 1/scale into the gradients; a disabled scaler has nothing to write, and
  // its non-finite test is step()'s (spared by a finite norm).
  if (scaler.enabled()) scaler.unscale(*optimizer);
  const bool detail = log_step(m.step);
  const amp::NumericsMonitor& monitor = detail ? monitor_detail : monitor_totals;
  numerics = monitor.observe(m.step, *optimizer, loss_scale, true);
  monitor.add_fp8(numerics, fp8);
  m.grad_norm = numerics.grad_norm = parallelism->global_norm(numerics.grad_norm);
  const float clip = config.training.grad_clip > 0 && std::isfinite(m.grad_norm)
                         ? optim::clip_coefficient(m.grad_norm, config.training.grad_clip)
                         : 1.0f;
  // By value: only when every gradient is finite (a clamped inf would be a finite step).
  if (config.training.grad_clip_value > 0 && std::isfinite(m.grad_norm))
    optim::clip_grad_value(parallelism->parameters(), config.training.grad_clip_value);
  const amp::StepReport report = scaler.step(*optimizer, clip, m.grad_norm);
  amp::NumericsMonitor::add_step_report(numerics, report);
  scaler.update();
  update_delayed_scaling();
  optimizer->zero_grad();
  return report;
}

// A delayed recipe's scales for the next step, from amaxes maximized over the ranks (TE's
// reduce_amax): every rank then casts with the same scales. Non-finite amaxes go over as inf
// (MPI's max of a NaN is unspecified); either keeps the scale.
void Trainer::State::update_delayed_scaling() {
  if (!delayed) return;
  if (comm->size() == 1) return delayed->update();
  ByteChecksum keys;  // the keys in order, each ended by a newline
  for (const std::string& k : delayed->keys()) {
    const std::string line = k + '\n';
    keys.update({reinterpret_cast<const uint8_t*>(line.data()), line.size()});
  }
  MIXPREC_CHECK(dist::same_on_every_rank(*comm, keys.finish()), "delayed scaling",
                "the ranks cast different FP8 tensors this step (an expert ran on some ranks "
                "only?): their amax histories cannot be reduced");
  delayed->update([&](std::vector<float>& amaxes) {
    Tensor t = Tensor::empty({static_cast<int64_t>(amaxes.size())}, DType::f32);
    for (std::size_t i = 0; i < amaxes.size(); ++i)
      t.data<float>()[i] = std::isfinite(amaxes[i]) ? amaxes[i] : INFINITY;
    if (!amaxes.empty()) comm->all_reduce(t, dist::ReduceOp::max);
    std::copy(t.data<float>(), t.data<float>() + amaxes.size(), amaxes.begin());
  });
}

// The step's counts over every rank's rows (one small all-reduce; moe: tokens per expert)
// give the loads the metrics show and, after a step that was taken, the model's buffer update
// (moe: the expert biases): a skipped step leaves the model as it was, buffers included.
void Trainer::State::update_buffers(std::vector<int64_t> counts, bool stepped, StepMetrics& m) {
  if (counts.empty()) return;
  std::vector<double> summed(counts.begin(), counts.end());  // exact below 2^53
  dist::sum_over_ranks(*comm, summed);
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>(summed[i]);
  m.expert_load = model->count_loads(counts);
  if (stepped) model->update_buffers(counts);
}

// The loss of one micro-batch, and its gradients, added to the step's so far, at
// `loss_scale` / micro_batches: each micro-batch's mean loss weighs 1/micro_batches, so the
// step's gradient is that of the mean over all its rows (torchtitan divides the summed loss by
// the global token count: the same thing for equal micro-batches).
models::LossParts Trainer::State::micro_batch(const data::Batch& batch, double loss_scale,
                                              int64_t micro_batches, uint64_t rounding_seed) {
  models::LossParts loss;
  parallelism->begin_step(true);
  {
    amp::ComputeScope compute(config.training.policy, delayed.get(), rounding_seed);
    loss = model->loss(batch.inputs, batch.targets);
  }
  const double weight = (scaler.enabled() ? loss_scale : 1.0) / static_cast<double>(micro_batches);
  (weight != 1.0 ? scaled(loss.total, weight) : loss.total).backward();
  parallelism->finish_backward();
  return loss;
}

// Forward and backward of this rank's rows of step index `step`, training.local_batch_size
// rows at a time (gradient accumulation); one loss scale for all of them.
Trainer::State::Pass Trainer::State::forward_backward(int64_t step, float loss_scale) {
  const data::Batch rows = local_batch(step);
  const int64_t n = rows.inputs.size(0), per = dist::micro_batch_rows(config, comm->size());
  const int64_t micro_batches = n / per;
  Pass pass;
  for (int64_t i = 0; i < micro_batches; ++i) {
    const data::Batch mb =
        micro_batches == 1
            ? rows
            : data::Batch{rows.inputs.slice(0, i * per, (i + 1) * per).contiguous(),
                          rows.targets.slice(0, i * per, (i + 1) * per).contiguous()};
    // The recipe's stochastic casts draw one key per step and micro-batch of the global batch
    // (every rank's its own), so a resumed run draws what an uninterrupted one drew.
    const auto global_micro_batch = static_cast<uint64_t>(comm->rank() * micro_batches + i);
    const uint64_t rounding_seed =
        splitmix64(static_cast<uint64_t>(config.training.seed) ^
                   splitmix64(splitmix64(static_cast<uint64_t>(step)) + global_micro_batch));
    models::LossParts loss = micro_batch(mb, loss_scale, micro_batches, rounding_seed);
    // The values, then the graph goes (it would otherwise live through the next forward).
    std::vector<double> parts{loss.total.item(), loss.ce.item()};
    if (i == 0) pass.losses.assign(2 + loss.terms.size(), 0.0);
    for (const auto& [name, value] : loss.terms) {
      parts.push_back(value.item());
      if (i == 0) pass.term_names.push_back(name);
    }
    loss = {};
    for (std::size_t k = 0; k < parts.size(); ++k)
      pass.losses.at(k) += parts[k] / static_cast<double>(micro_batches);
    const std::vector<int64_t> counts = model->step_counts();
    if (pass.counts.empty()) pass.counts.assign(counts.size(), 0);
    for (std::size_t e = 0; e < counts.size(); ++e) pass.counts[e] += counts[e];
  }
  return pass;
}

// This rank's rows of the global batch of step index `step` (0-based), so every world size
// trains on the same samples.
data::Batch Trainer::State::local_batch(int64_t step) {
  const data::Batch global = train_batches->batch(static_cast<uint64_t>(step));
  const auto [lo, hi] = parallelism->local_rows(global.inputs.size(0));
  return {global.inputs.slice(0, lo, hi).contiguous(),
          global.targets.slice(0, lo, hi).contiguous()};
}

StepMetrics Trainer::State::step() {
  const config::TrainConfig& c = config;
  Allocator& alloc = Allocator::instance();
  const auto t0 = Clock::now();
  alloc.reset_peak();
  const uint64_t comm_before = comm->stats().total();
  schedule->apply(*optimizer, next_step);

  const float loss_scale = scaler.get_scale();
  // The FP8 casts' figures (amp/fp8_monitor.h): nothing to collect without a recipe.
  std::optional<amp::Fp8Collection> fp8_collection;
  const std::string& when = c.metrics.fp8_stats;
  if ((c.training.policy.linear_recipe || c.training.policy.grouped_recipe) &&
      (when == "every_step" || (when == "log_steps" && log_step(next_step + 1))))
    fp8_collection.emplace();
  Pass pass = forward_backward(next_step, loss_scale);
  std::vector<double>& losses = pass.losses;
  const amp::Fp8StepStats fp8 = fp8_collection ? fp8_collection->stats() : amp::Fp8StepStats{};
  fp8_collection.reset();

  StepMetrics m;
  m.step = next_step + 1;
  amp::StepNumerics numerics;
  const amp::StepReport report = apply_gradients(m, numerics, loss_scale, fp8);
  update_buffers(std::move(pass.counts), report.stepped, m);
  const auto t1 = Clock::now();

  // Each rank's loss is the mean over its rows: the job's is the mean over ranks.
  dist::sum_over_ranks(*comm, losses);
  const double world = comm->size();
  m.loss = losses[0] / world;
  m.ce = losses[1] / world;
  for (std::size_t k = 2; k < losses.size(); ++k)
    m.terms.emplace_back(pass.term_names[k - 2], losses[k] / world);
  m.lr = schedule->lr(next_step);
  m.loss_scale = loss_scale;
  m.skipped = !report.stepped;
  if (m.skipped) first_nonfinite = report.first_nonfinite;
  m.skipped_total = scaler.state().steps_skipped;
  const int64_t tokens_per_step = c.training.batch_size * c.training.seq_len;
  m.tokens = m.step * tokens_per_step;
  m.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  m.tokens_per_s = static_cast<double>(tokens_per_step) / (m.step_ms / 1e3);
  m.elapsed_s = std::chrono::duration<double>(t1 - started).count();
  m.memory_bytes = alloc.stats().current_bytes;
  m.peak_bytes = alloc.stats().peak_bytes;
  // MoE buffers change size with the routing and their blocks pile up in the cache: past twice
  // the step's peak it gives back the least recently used. Not tighter: a block given back is
  // page-faulted in again when a step wants one (trimming to 1.25 x the step's transient
  // bytes every step cost the main job 37% of its speed).
  if (alloc.stats().cached_bytes > 2 * m.peak_bytes) alloc.trim_cache(m.peak_bytes);
  m.reserved_bytes = alloc.stats().reserved_bytes;
  m.rss_bytes = resident_bytes();
  m.comm_bytes = comm->stats().total() - comm_before;
  m.underflow_fraction = numerics.underflow_fraction();
  m.overflow_fraction = numerics.overflow_fraction();
  m.numerics_json = numerics.to_json();
  fp8_ran = numerics.fp8_tensors > 0;
  fp8_first_nonfinite = numerics.fp8_first_nonfinite;
  fp8_first_saturated = numerics.fp8_first_saturated;
  if (fp8_ran) {
    m.fp8_saturated_fraction = numerics.fp8_total.saturated_fraction();
    m.fp8_flushed_fraction = numerics.fp8_total.flushed_fraction();
  }
  next_step = m.step;
  comm->step_done(m.step);  // collectives now wait comm.train_timeout_seconds
  return m;
}

// Every rank takes part (the state is gathered), rank 0 writes, and every rank learns whether
// it worked. Returns the path written.
std::string Trainer::State::save(int64_t step) {
  // The blocks the state is copied through are not a step's: the cache gives them back after.
  const CacheTrim trim;
  std::string failure;
  try {
    io::TensorMap full = parallelism->full_training_state(optimizer.get(), &scaler);
    if (delayed)  // the same on every rank (amaxes reduced every step)
      for (auto& [key, t] : delayed->checkpoint_dict()) full[io::kFp8ScalingPrefix + key] = t;
    if (leader())
      save_run_checkpoint(*store, step, std::move(full), config, tokenizer->id(),
                          bf16_kernel.kernel);
  } catch (const std::exception& e) {  // file system errors too: every rank must hear of it
    failure = e.what();
  }
  if (dist::from_rank0(*comm, failure.empty() ? 0 : 1) != 0 && failure.empty())
    failure = "rank 0 could not write it";
  if (!failure.empty()) {
    const std::vector<int64_t> kept = store->steps();
    throw Error("checkpoint", std::string("saving step ") + std::to_string(step) + " failed; " +
                                  (kept.empty() ? std::string("no earlier checkpoint")
                                                : "the checkpoint of step " +
                                                      std::to_string(kept.back()) + " is intact") +
                                  ": " + failure);
  }
  const std::string path = store->path_for(step);
  progress.message("checkpoint: " + path);
  return path;
}

// The masters rounded to bf16, for inference elsewhere (a collective; rank 0 writes).
std::string Trainer::State::export_weights() {
  const std::string path = (fs::path(config.run_dir) / "model-bf16.safetensors").string();
  const optim::ParamList whole = parallelism->full_parameters();
  if (leader()) io::export_bf16_weights(path, whole);
  progress.message("bf16 weights: " + path);
  return path;
}

// run()'s hooks, each called by the loop below.

// The metrics log (rank 0) with its run line, and the summary's start.
void Trainer::State::begin_run() {
  const config::TrainConfig& c = config;
  if (c.metrics.jsonl && leader()) {
    log.emplace(fs::path(c.run_dir) / "metrics.jsonl", options.resume || next_step > 0);
    log->write(run_json_line(run_name(c), amp::display_name(c.training.policy),
                             model->parameters().parameter_count(), next_step, config::to_toml(c),
                             bf16_kernel.to_json()));
  }
  if (c.metrics.enable_tensorboard && leader())
    tensorboard.emplace(fs::path(c.run_dir) / c.metrics.save_tb_folder);
  summary = {};
  summary.start_step = summary.end_step = next_step;
  summary.unigram_entropy = unigram_entropy;
  summary.bf16_kernel = bf16_kernel.describe();
  started = Clock::now();
}

// The stop rule: a run whose steps keep being skipped, or whose loss scale has fallen below
// the floor, has diverged. It ends with an error naming the step, the loss-scale history and
// where the first inf/NaN came from, before anything is saved over the last good checkpoint.
void Trainer::State::stop_if_diverged(const StepMetrics& m) {
  const config::TrainingConfig& t = config.training;
  skipped_in_a_row = m.skipped ? skipped_in_a_row + 1 : 0;
  // A non-finite loss, or a skip that no loss scale can mend (none backs off without dynamic
  // loss scaling), is a diverged step however short the run.
  const bool loss_nonfinite = !std::isfinite(m.loss);
  const bool unmendable = loss_nonfinite || (m.skipped && !scaler.enabled());
  nonfinite_in_a_row = unmendable ? nonfinite_in_a_row + 1 : 0;
  std::string why;
  if (t.max_nonfinite_steps > 0 && nonfinite_in_a_row >= t.max_nonfinite_steps)
    why = fmt::format("{} on {} step{} in a row (training.max_nonfinite_steps = {}; {})",
                      loss_nonfinite ? fmt::format("the loss was {}", m.loss)
                                     : "the gradients were not finite at loss scale 1",
                      nonfinite_in_a_row, nonfinite_in_a_row == 1 ? "" : "s", t.max_nonfinite_steps,
                      loss_nonfinite
                          ? "a loss scale cannot mend the forward pass"
                          : "without dynamic loss scaling nothing changes before the next try");
  else if (t.max_skipped_steps > 0 && skipped_in_a_row >= t.max_skipped_steps)
    why = fmt::format(
        "{} steps in a row were skipped for non-finite gradients "
        "(training.max_skipped_steps = {})",
        skipped_in_a_row, t.max_skipped_steps);
  else if (scaler.enabled() && t.min_loss_scale > 0 && scaler.get_scale() < t.min_loss_scale)
    why = fmt::format("the loss scale fell to {:g}, below training.min_loss_scale = {:g}",
                      scaler.get_scale(), t.min_loss_scale);
  if (why.empty()) return;
  std::string history;
  const std::size_t n = summary.steps.size(), from = n > 24 ? n - 24 : 0;
  for (std::size_t i = from; i < n; ++i)
    history += fmt::format("{}{}:{:g}{}", i == from ? "" : " ", summary.steps[i].step,
                           summary.steps[i].loss_scale, summary.steps[i].skipped ? "*" : "");
  progress.finish();
  const std::string origin = nonfinite_origin(m), fp8 = fp8_origin(m);  // collectives
  throw Error("training", fmt::format("diverged at step {}: {}. Loss scale by step (* = "
                                      "skipped): {}. {}. {}The run stops; {}.",
                                      m.step, why, history, origin, fp8, kept_text()));
}

// What a diverged run leaves behind, for its error.
std::string Trainer::State::kept_text() const {
  return !store                            ? "checkpoints are off (checkpoint.enable = false)"
         : summary.last_checkpoint.empty() ? "this run wrote no checkpoint"
                                           : "nothing was saved after " + summary.last_checkpoint;
}

// Where step m's first inf/NaN came from: with detect_anomaly, its step re-run with per-op
// checks (at the scale it was skipped at); otherwise the first parameter whose gradient held
// one, which is only where it ended up.
std::string Trainer::State::nonfinite_origin(const StepMetrics& m) {
  if (!m.skipped) return "The last step was not skipped";
  if (!options.detect_anomaly)
    return "First non-finite gradient in parameter '" + first_nonfinite +
           "'; run again with --detect-anomaly to find the op and module that produced it";
  AnomalyRecord record;
  {
    AnomalyModeGuard guard(/*throw_on_first=*/false, &amp::module_path);
    forward_backward(m.step - 1, m.loss_scale);
    record = first_anomaly();
  }
  optimizer->zero_grad();
  // Each rank re-ran its own rows: the lowest rank that found one speaks for all.
  const std::string mine =
      record.found ? fmt::format(
                         "Anomaly mode re-ran step {}: the first inf/NaN came from the {} pass of "
                         "op {} in module {} ({}{})",
                         m.step, record.backward ? "backward" : "forward", record.op,
                         record.module.empty() ? "(top level)" : record.module, record.detail,
                         comm->size() > 1 ? fmt::format(", rank {}'s rows", comm->rank()) : "")
                   : "";
  const int first = dist::first_rank_with(*comm, record.found);
  if (first < 0)
    return fmt::format(
        "Anomaly mode re-ran step {} and found no inf/NaN in any op's output "
        "(it arose in the unscale or the gradient reduction)",
        m.step);
  return dist::text_from(*comm, mine, first);
}

// Where step m's inf/NaN met the FP8 casts: the first FP8 operand (in execution order) whose
// high-precision source held one, from that step's collection; "" when no recipe ran. It
// "overflowed" before its cast (the casts saturate, so a cast never makes an inf): its block
// scales turn to 0, 1 or inf by the rule, and the product's output with them. Saturation
// alone is a recipe's normal work and stops nothing; it is named when nothing overflowed.
// Each rank collected its own rows: the lowest rank with an overflow speaks for all.
std::string Trainer::State::fp8_origin(const StepMetrics& m) {
  if (!fp8_ran) return "";
  const std::string mine =
      fp8_first_nonfinite
          ? fmt::format(
                "At step {} FP8 tensor {} overflowed (the first FP8 operand whose source "
                "held inf or NaN{}): {}. ",
                m.step, fp8_first_nonfinite->name,
                comm->size() > 1 ? fmt::format(", rank {}'s rows", comm->rank()) : "",
                amp::describe_fp8_tensor(*fp8_first_nonfinite))
          : "";
  const int first = dist::first_rank_with(*comm, fp8_first_nonfinite.has_value());
  if (first >= 0) return dist::text_from(*comm, mine, first);
  std::string none = fmt::format("No FP8 operand's source held an inf or NaN at step {}", m.step);
  if (fp8_first_saturated)
    none += fmt::format("; the first saturated cast was FP8 tensor {}: {}",
                        fp8_first_saturated->name, amp::describe_fp8_tensor(*fp8_first_saturated));
  return none + ". ";
}

void Trainer::State::record(StepMetrics m) {
  progress.step(m);
  if (log || tensorboard) {
    const std::string line = to_json_line(m);
    if (log) log->write(line);
    if (tensorboard) tensorboard->write(m.step, tensorboard_scalars(line));
  }
  if (options.on_step && leader()) options.on_step(m);
  summary.end_step = m.step;
  summary.steps.push_back(std::move(m));
}

void Trainer::State::evaluate_at(int64_t step) {
  const CacheTrim trim;  // evaluation's batches are not a training step's
  EvalMetrics m = evaluate(*model, *parallelism, *val_batches, config.training.eval_batches,
                           config.training.policy, step, delayed.get());
  set_loss_per_byte(m, val_text_bytes);
  progress.eval(m);
  if (log || tensorboard) {
    const std::string line = to_json_line(m);
    if (log) log->write(line);
    if (tensorboard) tensorboard->write(m.step, tensorboard_scalars(line));
  }
  if (options.on_eval && leader()) options.on_eval(m);
  summary.evals.push_back(m);
  // Weights that give a non-finite validation loss are no model to save or go on from.
  if (config.training.max_nonfinite_steps > 0 && !std::isfinite(m.val_loss)) {
    progress.finish();
    throw Error("training",
                fmt::format("diverged at step {}: the validation loss is {} "
                            "(training.max_nonfinite_steps = {}). The run stops; {}.",
                            step, m.val_loss, config.training.max_nonfinite_steps, kept_text()));
  }
}

// Every `every` steps, and after the last one.
bool Trainer::State::due(int64_t step, int64_t every) const {
  return step % every == 0 || step == config.training.steps;
}

// The loss curves (gnuplot); a missing gnuplot costs the picture, not the run.
void Trainer::State::plot() {
  const fs::path png = fs::path(config.run_dir) / "loss.png";
  try {
    report::plot_runs({config.run_dir}, png);
    progress.message("plot: " + png.string());
  } catch (const Error& e) {
    progress.warning(std::string("no plot: ") + e.what());
  }
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const config::TrainConfig& c = s.config;
  const int64_t end = s.options.stop_at_step >= 0
                          ? std::min(s.options.stop_at_step, c.training.steps)
                          : c.training.steps;
  s.begin_run();
  while (s.next_step < end) {
    s.record(s.step());
    s.stop_if_diverged(s.summary.steps.back());  // the step just recorded
    const int64_t done = s.next_step;
    if (s.val_batches && s.due(done, c.training.eval_every)) s.evaluate_at(done);
    // A skipped step owes its checkpoint to the next step that is not skipped (or the last):
    // saved in a streak of skips it would rotate out a good one while the run may be diverging.
    s.checkpoint_owed = s.store && (s.checkpoint_owed || s.due(done, c.checkpoint.interval));
    if (s.checkpoint_owed && (s.skipped_in_a_row == 0 || done == end)) {
      s.summary.last_checkpoint = s.save(done);
      s.checkpoint_owed = false;
    }
  }
  s.progress.finish();
  if (const std::string band = describe_expert_load_band(s.summary.steps); !band.empty())
    s.progress.message(band);

  const bool ran = !s.summary.steps.empty();
  if (ran && s.summary.end_step == c.training.steps && c.checkpoint.export_bf16) s.export_weights();
  if (ran && c.metrics.plot && s.log) s.plot();

  std::vector<double> rates;
  for (std::size_t i = s.summary.steps.size() > 5 ? 3 : 0; i < s.summary.steps.size(); ++i)
    rates.push_back(s.summary.steps[i].tokens_per_s);
  s.summary.tokens_per_s = upper_median(rates);
  s.log.reset();
  return std::move(s.summary);
}

}  // namespace mixprec::train
