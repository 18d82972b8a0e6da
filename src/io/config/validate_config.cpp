// Checks that need more than a key's type: ranges, choices, and relations between keys
// (n_heads divides d_model, top_k <= n_experts, seq_len <= max_seq_len, ...).
#include "validate_config.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "../text_bounds.h"
#include "config_fields.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/core/error.h"
#include "mixprec/models/activation_checkpoint.h"
#include "mixprec/models/registry.h"
#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/ffn_sizing.h"
#include "mixprec/numerics/accumulator_model.h"

namespace mixprec::config::detail {
namespace {

class Checker final : public ConfigRules {
 public:
  Checker(const TrainConfig& config, const Origins& origins, const std::string& where)
      : config_(config), origins_(origins), where_(where) {}

  // "line 7: model.n_heads = 3 must divide model.d_model = 64"
  void require(bool ok, const std::string& key, const std::string& problem) const override {
    if (ok) return;
    throw Error(where_, origin(key) + key + " = " + value(key) + " " + problem);
  }
  std::string value(const std::string& key) const {
    const Field* f = find_field(key);
    return quote_prefix(format_value(f->bind(config_)));
  }
  std::string origin(const std::string& key) const {
    auto it = origins_.find(key);
    return it == origins_.end() ? "(default) " : it->second + ": ";
  }
  // "model.d_model = 64", for the other key of a relation.
  std::string show(const std::string& key) const override { return key + " = " + value(key); }

 private:
  mutable TrainConfig config_;  // bind() hands out non-const pointers; a copy keeps it honest
  const Origins& origins_;
  const std::string& where_;
};

void check_choices(const TrainConfig& config, const Checker& c) {
  TrainConfig copy = config;
  for (const Field& f : fields()) {
    if (f.choices.empty()) continue;
    const ValueRef ref = f.bind(copy);
    std::vector<std::string> values;
    if (auto l = std::get_if<std::vector<std::string>*>(&ref))
      values = **l;
    else
      values.push_back(*std::get<std::string*>(ref));
    std::string list;
    for (const std::string& choice : f.choices) list += (list.empty() ? "" : ", ") + choice;
    for (const std::string& v : values)
      c.require(std::find(f.choices.begin(), f.choices.end(), v) != f.choices.end(), f.key(),
                (values.size() > 1 || std::holds_alternative<std::vector<std::string>*>(ref)
                     ? "holds '" + v + "', which "
                     : std::string()) +
                    "is not one of: " + list);
  }
}

// Widths the config may give (model.d_model, training.batch_size, ...): the model families'
// bound (models/transformer/decoder_rules.h).
constexpr int64_t kMaxWidth = models::kMaxModelWidth;
constexpr double kMaxMultiplier = models::kMaxFfnMultiplier;
using models::check_bound;

}  // namespace

void resolve_model_sizes(TrainConfig& config, const Origins& origins, const std::string& where) {
  ModelConfig& m = config.model;
  // Values out of range are validate()'s to report; derive only from sane ones.
  const bool sane = m.multiple_of > 0 && m.multiple_of <= kMaxWidth && m.d_model > 0 &&
                    m.d_model <= kMaxWidth && m.ffn_dim_multiplier >= 0 &&
                    m.ffn_dim_multiplier <= kMaxMultiplier;
  if (!sane) return;
  const int64_t derived =
      models::llama_ffn_hidden_dim(m.d_model, m.multiple_of, m.ffn_dim_multiplier);
  const Checker c(config, origins, where);
  c.require(!origins.contains("model.d_ff") || m.d_ff == derived, "model.d_ff",
            "disagrees with the " + std::to_string(derived) + " that " +
                c.show("model.multiple_of") + " and " + c.show("model.ffn_dim_multiplier") +
                " give (set one or the other)");
  m.d_ff = derived;
}

namespace {

void check_training(const TrainConfig& cfg, const Checker& c) {
  const TrainingConfig& t = cfg.training;
  c.require(t.steps > 0, "training.steps", "must be > 0");
  c.require(t.batch_size > 0, "training.batch_size", "must be > 0");
  check_bound(c, "training.batch_size", t.batch_size, kMaxWidth);
  // How the ranks split it is known at launch (dist::check_batch_splits); the rows a micro-batch
  // has are checked here.
  c.require(t.local_batch_size >= 0, "training.local_batch_size",
            "must be >= 0 (0 = training.batch_size / ranks: no accumulation)");
  c.require(t.local_batch_size == 0 || t.batch_size % t.local_batch_size == 0,
            "training.local_batch_size", "must divide " + c.show("training.batch_size"));
  const double seq = static_cast<double>(t.seq_len);
  c.require(static_cast<double>(cfg.model.n_heads) * seq * seq <= 0x1p44, "training.seq_len",
            "squared times model.n_heads must be <= 2^44 (one sequence's attention scores)");
  c.require(t.seq_len > 0, "training.seq_len", "must be > 0");
  c.require(t.seq_len <= cfg.model.max_seq_len, "training.seq_len",
            "must be <= " + c.show("model.max_seq_len"));
  c.require(t.seed >= 0, "training.seed", "must be >= 0");
  c.require(t.val_fraction >= 0 && t.val_fraction < 1, "training.val_fraction",
            "must be in [0, 1)");
  c.require(t.eval_every >= 0, "training.eval_every", "must be >= 0 (0 = never)");
  c.require(t.eval_batches > 0, "training.eval_batches", "must be > 0");
  c.require(t.grad_clip >= 0, "training.grad_clip", "must be >= 0 (0 = off)");
  c.require(t.grad_clip_value >= 0 && std::isfinite(t.grad_clip_value), "training.grad_clip_value",
            "must be finite and >= 0 (0 = off)");
  c.require(t.grad_clip == 0 || t.grad_clip_value == 0, "training.grad_clip_value",
            "clips by value, and training.grad_clip by norm: set one of them to 0");
  c.require(t.threads >= 0, "training.threads", "must be >= 0 (0 = all cores)");
  c.require(t.max_skipped_steps >= 0, "training.max_skipped_steps", "must be >= 0 (0 = off)");
  c.require(t.max_nonfinite_steps >= 0, "training.max_nonfinite_steps", "must be >= 0 (0 = off)");
  c.require(t.min_loss_scale >= 0 && std::isfinite(t.min_loss_scale), "training.min_loss_scale",
            "must be finite and >= 0 (0 = off)");
}

void check_optimizer(const TrainConfig& cfg, const Checker& c) {
  const OptimizerConfig& o = cfg.optimizer;
  c.require(o.lr > 0, "optimizer.lr", "must be > 0");
  c.require(o.weight_decay >= 0, "optimizer.weight_decay", "must be >= 0");
  c.require(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  c.require(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  c.require(o.eps > 0, "optimizer.eps", "must be > 0");
  c.require(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum", "must be in [0, 1)");
  if (o.name == "sgd" && o.nesterov) {
    c.require(o.momentum > 0, "optimizer.momentum", "must be > 0 with optimizer.nesterov = true");
  }
  const LrSchedulerConfig& s = cfg.lr_scheduler;
  c.require(s.warmup_steps >= 0, "lr_scheduler.warmup_steps", "must be >= 0");
  // A warm-up longer than the run is allowed (a short trial of a long config): the schedule
  // then ramps over the whole run (train/optimizer_factory.cpp caps it).
  c.require(s.min_lr_ratio >= 0 && s.min_lr_ratio <= 1, "lr_scheduler.min_lr_ratio",
            "must be in [0, 1]");
}

void check_outputs(const TrainConfig& cfg, const Checker& c) {
  c.require(!cfg.run_dir.empty(), "run_dir", "must not be empty");
  c.require(cfg.checkpoint.interval > 0, "checkpoint.interval", "must be > 0");
  c.require(cfg.checkpoint.keep_last >= 0, "checkpoint.keep_last", "must be >= 0 (0 = keep all)");
  c.require(!cfg.checkpoint.folder.empty(), "checkpoint.folder", "must not be empty");
  c.require(!cfg.metrics.save_tb_folder.empty(), "metrics.save_tb_folder", "must not be empty");
  c.require(cfg.metrics.log_every > 0, "metrics.log_every", "must be > 0");
  const std::int64_t shards = cfg.parallelism.data_parallel_shard_degree;
  c.require(shards == -1 || shards >= 1, "parallelism.data_parallel_shard_degree",
            "must be -1 (all ranks) or >= 1");
}

// mode is one of its choices (check_choices); the option is "op" or a positive integer, also
// when the mode does not read it (a typo should not wait for the day it is switched on).
void check_activation_checkpoint(const TrainConfig& cfg, const Checker& c) {
  config::ActivationCheckpointConfig ac = cfg.activation_checkpoint;
  ac.mode = "selective";
  bool ok = true;
  try {
    (void)models::ActivationCheckpoint::from_config(ac);
  } catch (const Error&) {
    ok = false;
  }
  c.require(ok, "activation_checkpoint.selective_ac_option",
            "must be \"op\" (per-op selective checkpointing) or a positive integer k as a "
            "string (every k-th block checkpointed)");
}

// Positive, and small enough that a deadline in nanoseconds stays inside int64.
void check_comm(const CommConfig& comm, const Checker& c) {
  constexpr int64_t kMaxSeconds = 1'000'000'000;  // 31 years
  for (const auto& [key, value] :
       {std::pair{"comm.init_timeout_seconds", comm.init_timeout_seconds},
        std::pair{"comm.train_timeout_seconds", comm.train_timeout_seconds}}) {
    c.require(value > 0, key, "must be > 0 (seconds a collective waits for the other ranks)");
    check_bound(c, key, value, kMaxSeconds);
  }
}

}  // namespace

namespace {

void resolve_precision(TrainConfig& config, const Origins& origins, const std::string& where) {
  TrainingConfig& t = config.training;
  const Checker c(config, origins, where);
  const bool titan = !t.mixed_precision_param.empty() || !t.mixed_precision_reduce.empty();
  if (!t.precision.empty()) {
    const std::string other = !t.mixed_precision_param.empty() ? "training.mixed_precision_param"
                                                               : "training.mixed_precision_reduce";
    c.require(!titan, "training.precision",
              "and " + c.show(other) + " are both given; use one or the other");
    try {
      t.policy = amp::parse_policy(t.precision);
    } catch (const Error& e) {
      c.require(false, "training.precision", "is not a precision policy: " + std::string(e.what()));
    }
    return;
  }
  if (!titan) {
    t.policy = amp::preset("bf16-mixed");
    return;
  }
  // torchtitan's defaults for the one not given; compute runs in the param dtype (FSDP2).
  const std::string param = t.mixed_precision_param.empty() ? "bf16" : t.mixed_precision_param;
  const std::string reduce = t.mixed_precision_reduce.empty() ? "f32" : t.mixed_precision_reduce;
  for (const auto& [key, name] : {std::pair{"training.mixed_precision_param", param},
                                  std::pair{"training.mixed_precision_reduce", reduce}}) {
    DType d = DType::f32;
    try {
      d = parse_dtype(name);
    } catch (const Error& e) {
      c.require(false, key, "is not a dtype: " + std::string(e.what()));
    }
    c.require(is_computable(d), key, "must be one of f64, f32, bf16, f16");
  }
  // Outputs in f32, as the presets (FSDP2 leaves them in the compute dtype; no op reads them).
  t.policy = amp::parse_policy("params=" + param + ",compute=" + param + ",reduce=" + reduce +
                               ",output=f32");
}

// torchtitan's switch: model.converters names the section.
bool converter_listed(const TrainConfig& config, const std::string& section) {
  return std::ranges::find(config.model.converters, section) != config.model.converters.end();
}

// An FP8 section needs a compute dtype whose GEMMs its products can replace.
void require_narrow_compute(const Checker& c, const amp::MixedPrecisionPolicy& policy,
                            const std::string& key) {
  c.require(is_narrow_compute(policy.compute_dtype), key,
            "needs a bf16 or f16 compute dtype (its FP8 products replace that dtype's GEMMs "
            "under autocast); the precision policy is " +
                display_name(policy));
}

// TE's DelayedScaling keys: in range, and set only for the recipe that reads them.
void check_delayed_scaling(const TrainConfig& config, const Checker& c) {
  const QuantizeLinearConfig& q = config.quantize.float8;
  const QuantizeLinearConfig defaults;
  const amp::LinearRecipe* r = config.training.policy.linear_recipe;
  const bool delayed = r && r->delayed;
  for (const auto& [key, set] :
       {std::pair{"amax_history_len", q.amax_history_len != defaults.amax_history_len},
        std::pair{"amax_compute_algo", q.amax_compute_algo != defaults.amax_compute_algo},
        std::pair{"margin", q.margin != defaults.margin}})
    c.require(!set || delayed, std::string("quantize.linear.float8.") + key,
              "is read by the delayed recipe te_delayed only; the linear recipe is " +
                  std::string(r ? r->name : "none"));
  c.require(q.amax_history_len >= 1 && q.amax_history_len <= (1 << 20),
            "quantize.linear.float8.amax_history_len", "must be in [1, 1048576]");
  c.require(q.margin >= 0 && q.margin <= 127, "quantize.linear.float8.margin",
            "must be in [0, 127] (the scale is divided by 2^margin)");
}

// [quantize.grouped_mm.float8] / [quantize.grouped_mm.mx] into the policy's grouped recipe.
void resolve_grouped(TrainConfig& config, const Checker& c) {
  amp::MixedPrecisionPolicy& policy = config.training.policy;
  std::string on_section;
  for (const auto& [name, q, fallback] :
       {std::tuple{"float8", &config.quantize.grouped_float8, "rowwise"},
        std::tuple{"mx", &config.quantize.grouped_mx, "mxfp8"}}) {
    const std::string section = std::string("quantize.grouped_mm.") + name;
    const bool listed = converter_listed(config, section);
    if (!listed && q->fqns.empty() && q->recipe_name.empty()) {
      c.require(!q->save_fp8_activations, section + ".save_fp8_activations",
                "is set while [" + section +
                    "] is off: give it fqns or list it in "
                    "model.converters");
      continue;
    }
    const std::string key = section + ".fqns";
    c.require(on_section.empty(), key,
              "turns on [" + section + "] while [" + on_section +
                  "] is on: a grouped GEMM runs by one recipe");
    on_section = section;
    c.require(!policy.grouped_recipe, key,
              "turns on [" + section + "] while " + c.show("training.precision") +
                  " already names the grouped recipe " + display_name(policy) + "; use one");
    c.require(!q->fqns.empty(), key,
              "is empty: no grouped GEMM would run by the recipe (torchtitan's MoE configs set "
              "fqns = [\"experts\"])");
    for (const std::string& entry : q->fqns)
      c.require(!entry.empty(), key, "holds an empty module name");
    const amp::LinearRecipe* recipe =
        amp::find_grouped_recipe(name, q->recipe_name.empty() ? fallback : q->recipe_name);
    c.require(recipe != nullptr, section + ".recipe_name",
              "is not a grouped " + std::string(name) +
                  " recipe; valid: " + amp::grouped_recipe_names(name));
    require_narrow_compute(c, policy, key);
    policy.grouped_recipe = recipe;
    policy.grouped_fqns = q->fqns;
    if (q->save_fp8_activations) {  // the grouped recipes (rowwise, mxfp8) all allow it
      c.require(amp::saves_fp8_input(*recipe), section + ".save_fp8_activations",
                std::string("needs a recipe whose grad_weight casts the input from its FP8 "
                            "copy; ") +
                    recipe->name + " does not");
      policy.save_fp8_grouped_activations = true;
    }
  }
}

// [quantize.linear.float8] / [quantize.linear.mx] into the policy's linear recipe.
// The recipes FSDP's FP8 all-gather runs: both products read the weight in FP8, with scales
// from its current amax.
std::string fp8_all_gather_recipes() {
  std::string out;
  for (const amp::LinearRecipe& r : amp::linear_recipes())
    if (amp::gathers_weight_in_fp8(r)) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

void resolve_quantize(TrainConfig& config, const Origins& origins, const std::string& where) {
  const Checker c(config, origins, where);
  amp::MixedPrecisionPolicy& policy = config.training.policy;
  std::string on_section;
  for (const auto& [name, q, fallback] :
       {std::tuple{"float8", &config.quantize.float8, "tensorwise"},
        std::tuple{"mx", &config.quantize.mx, "mxfp8_cublas"}}) {
    const std::string section = std::string("quantize.linear.") + name;
    const bool listed = converter_listed(config, section);
    if (!listed && q->recipe_name.empty()) {
      // The keys only an active section's recipe can apply: refused, not silently ignored.
      for (const auto& [key, set] :
           {std::pair{"enable_fsdp_float8_all_gather", q->enable_fsdp_float8_all_gather},
            std::pair{"precompute_float8_dynamic_scale_for_fsdp",
                      q->precompute_float8_dynamic_scale_for_fsdp},
            std::pair{"save_fp8_activations", q->save_fp8_activations},
            std::pair{"accumulator", q->accumulator != "f32"}})
        c.require(!set, section + "." + key,
                  "is set while [" + section +
                      "] is off: give it a recipe_name or list it in model.converters (a recipe "
                      "named by training.precision does not turn the section on)");
      continue;
    }
    const std::string key = section + ".recipe_name";
    c.require(on_section.empty(), key,
              "turns on [" + section + "] while [" + on_section +
                  "] is on: a linear runs by one recipe (as torchtitan allows one converter)");
    on_section = section;
    c.require(!policy.linear_recipe, key,
              "turns on [" + section + "] while " + c.show("training.precision") +
                  " already names the linear recipe " + display_name(policy) + "; use one");
    const amp::LinearRecipe* recipe =
        amp::find_any_linear_recipe(q->recipe_name.empty() ? fallback : q->recipe_name);
    c.require(
        recipe && recipe->section == std::string_view(name), key,
        "is not a " + std::string(name) + " recipe; valid: " + amp::linear_recipe_names(name));
    if (q->enable_fsdp_float8_all_gather)
      c.require(amp::gathers_weight_in_fp8(*recipe), section + ".enable_fsdp_float8_all_gather",
                "needs a recipe that casts the weight by its current amax for output and "
                "grad_input (" +
                    fp8_all_gather_recipes() + "); " + recipe->name + " " +
                    amp::fp8_gather_refusal(*recipe));
    c.require(!q->precompute_float8_dynamic_scale_for_fsdp || q->enable_fsdp_float8_all_gather,
              section + ".precompute_float8_dynamic_scale_for_fsdp",
              "is set without enable_fsdp_float8_all_gather = true (it precomputes that "
              "all-gather's scales)");
    c.require(!q->enable_fsdp_float8_all_gather || policy.param_dtype == policy.compute_dtype,
              section + ".enable_fsdp_float8_all_gather",
              "needs the param dtype to be the compute dtype (" + c.show("training.precision") +
                  "): the weights it gathers in FP8 arrive in no other dtype");
    for (const std::string& entry : q->filter_fqns)
      c.require(!entry.empty(), section + ".filter_fqns", "holds an empty module name");
    require_narrow_compute(c, policy, key);
    policy.linear_recipe = recipe;
    policy.linear_skip = q->filter_fqns;
    if (q->save_fp8_activations) {
      c.require(
          amp::saves_fp8_input(*recipe), section + ".save_fp8_activations",
          std::string("needs a recipe whose grad_weight casts the input from its FP8 copy; ") +
              recipe->name + " " + amp::fp8_save_refusal(*recipe));
      policy.save_fp8_activations = true;
    }
    if (q->accumulator != "f32") {
      // Only [quantize.linear.float8] has the key, and each of its recipes sums a product in
      // the modelled accumulator (LinearRecipe.EveryFloat8RecipeSumsInTheFastAccumulator);
      // the policy's spelling, which reaches MX and NVFP4 too, checks it (policy.cpp).
      const std::string acc_key = section + ".accumulator";
      const NamedAccumulator* named = named_accumulator(q->accumulator);
      c.require(named != nullptr, acc_key, "is not an accumulator; valid: " + accumulator_names());
      policy.accumulator = named->model;
    }
  }
  resolve_grouped(config, c);
  check_delayed_scaling(config, c);
}

}  // namespace

void resolve_policy(TrainConfig& config, const Origins& origins, const std::string& where) {
  resolve_precision(config, origins, where);
  resolve_quantize(config, origins, where);
}

void validate(const TrainConfig& config, const Origins& origins, const std::string& where) {
  const Checker c(config, origins, where);
  TrainConfig copy = config;
  for (const Field& f : fields()) {
    const ValueRef value = f.bind(copy);
    if (auto d = std::get_if<double*>(&value))
      c.require(std::isfinite(**d), f.key(), "must be finite");
  }
  check_choices(config, c);
  models::check_model_config(config.model, c);  // the family's rules
  check_training(config, c);
  check_optimizer(config, c);
  check_outputs(config, c);
  check_activation_checkpoint(config, c);
  check_comm(config.comm, c);
}

}  // namespace mixprec::config::detail
