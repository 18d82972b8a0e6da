// Checks that need more than a key's type: ranges, choices, and relations between keys
// (n_heads divides d_model, top_k <= n_experts, seq_len <= max_seq_len, ...).
#include "validate_config.h"

#include <cmath>
#include <utility>

#include "../text_bounds.h"
#include "config_fields.h"
#include "mixprec/core/error.h"
#include "mixprec/models/activation_checkpoint.h"
#include "mixprec/models/transformer/ffn_sizing.h"

namespace mixprec::config::detail {
namespace {

class Checker {
 public:
  Checker(const TrainConfig& config, const Origins& origins, const std::string& where)
      : config_(config), origins_(origins), where_(where) {}

  // "line 7: model.n_heads = 3 must divide model.d_model = 64"
  void require(bool ok, const std::string& key, const std::string& problem) const {
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
  std::string show(const std::string& key) const { return key + " = " + value(key); }

 private:
  mutable TrainConfig config_;  // bind() hands out non-const pointers; a copy keeps it honest
  const Origins& origins_;
  const std::string& where_;
};

void check_choices(const TrainConfig& config, const Checker& c) {
  TrainConfig copy = config;
  for (const Field& f : fields()) {
    if (f.choices.empty()) continue;
    const std::string& v = *std::get<std::string*>(f.bind(copy));
    bool found = false;
    std::string list;
    for (const std::string& choice : f.choices) {
      found = found || v == choice;
      list += (list.empty() ? "" : ", ") + choice;
    }
    c.require(found, f.key(), "is not one of: " + list);
  }
}

// Far above any model trained today (Llama 3 405B: d_ff 53248, vocab 128256, 126 layers), and
// low enough that a weight's element count (expert x d_model x d_ff) stays inside int64; whether
// a model fits this machine's memory is dist::check_fits_machine's question.
constexpr int64_t kMaxWidth = int64_t{1} << 24;
constexpr int64_t kMaxCount = int64_t{1} << 14;
constexpr double kMaxProduct = 0x1p40;
constexpr double kMaxMultiplier = 1000.0;  // Llama 3 405B uses 1.2

void check_bound(const Checker& c, const char* key, int64_t value, int64_t bound) {
  c.require(value <= bound, key, "must be <= " + std::to_string(bound));
}

void check_model(const ModelConfig& m, const Checker& c) {
  c.require(m.vocab_size > 0, "model.vocab_size", "must be > 0");
  c.require(m.d_model > 0, "model.d_model", "must be > 0");
  c.require(m.n_layers > 0, "model.n_layers", "must be > 0");
  check_bound(c, "model.vocab_size", m.vocab_size, kMaxWidth);
  check_bound(c, "model.d_model", m.d_model, kMaxWidth);
  check_bound(c, "model.d_ff", m.d_ff, kMaxWidth);
  check_bound(c, "model.max_seq_len", m.max_seq_len, kMaxWidth);
  check_bound(c, "model.moe.n_experts", m.moe.n_experts, kMaxCount);
  check_bound(c, "model.moe.n_shared_experts", m.moe.n_shared_experts, kMaxCount);
  // Products too: the memory planner counts a layer's weights and an attention's scores in
  // int64 bytes. 2^40 weights in one layer is a thousand times today's largest.
  const double experts =
      m.kind == "moe" ? static_cast<double>(m.moe.n_experts + m.moe.n_shared_experts) : 1.0;
  c.require(experts * static_cast<double>(m.d_model) * static_cast<double>(m.d_ff) <= kMaxProduct,
            "model.d_ff",
            "times model.d_model" + std::string(m.kind == "moe" ? " and model.moe.n_experts" : "") +
                " must be <= 2^40 (the weights of one layer)");
  c.require(static_cast<double>(m.vocab_size) * static_cast<double>(m.d_model) <= kMaxProduct,
            "model.vocab_size", "times model.d_model must be <= 2^40 (the embedding's weights)");
  c.require(m.n_heads > 0, "model.n_heads", "must be > 0");
  c.require(m.d_model % m.n_heads == 0, "model.n_heads", "must divide " + c.show("model.d_model"));
  if (m.positions == "rope") {
    // RoPE rotates pairs of dimensions within each head.
    c.require((m.d_model / m.n_heads) % 2 == 0, "model.n_heads",
              "gives an odd head size d_model / n_heads with positions = \"rope\" (" +
                  c.show("model.d_model") + ")");
  }
  c.require(m.n_kv_heads >= 0, "model.n_kv_heads", "must be >= 0 (0 = model.n_heads)");
  c.require(m.n_kv_heads == 0 || m.n_heads % m.n_kv_heads == 0, "model.n_kv_heads",
            "must divide " + c.show("model.n_heads") + " (grouped-query attention)");
  c.require(m.d_ff > 0, "model.d_ff", "must be > 0");
  c.require(m.multiple_of >= 0, "model.multiple_of", "must be >= 0 (0 = d_ff as given)");
  check_bound(c, "model.multiple_of", m.multiple_of, kMaxWidth);
  c.require(m.ffn_dim_multiplier >= 0 && m.ffn_dim_multiplier <= kMaxMultiplier,
            "model.ffn_dim_multiplier", "must be in [0, 1000] (0 = none)");
  c.require(m.norm_eps > 0 && std::isfinite(m.norm_eps), "model.norm_eps",
            "must be finite and > 0");
  c.require(m.rope_theta > 0 && std::isfinite(m.rope_theta), "model.rope_theta",
            "must be finite and > 0");
  if (m.kind == "llama3") {
    // Llama's architecture is fixed; the keys that would change it must say so.
    c.require(m.norm == "rmsnorm", "model.norm", "must be \"rmsnorm\" for model.kind = \"llama3\"");
    c.require(m.mlp == "swiglu", "model.mlp", "must be \"swiglu\" for model.kind = \"llama3\"");
    c.require(m.positions == "rope", "model.positions",
              "must be \"rope\" for model.kind = \"llama3\"");
    c.require(!m.bias, "model.bias", "must be false for model.kind = \"llama3\" (no biases)");
  }
  c.require(m.max_seq_len > 0, "model.max_seq_len", "must be > 0");
  c.require(m.moe.n_experts > 0, "model.moe.n_experts", "must be > 0");
  c.require(m.moe.top_k > 0, "model.moe.top_k", "must be > 0");
  c.require(m.moe.top_k <= m.moe.n_experts, "model.moe.top_k",
            "must be <= " + c.show("model.moe.n_experts"));
  c.require(m.moe.capacity_factor >= 0, "model.moe.capacity_factor",
            "must be >= 0 (0 = no dropping)");
  c.require(m.moe.aux_loss_weight >= 0, "model.moe.aux_loss_weight", "must be >= 0");
  c.require(m.moe.z_loss_weight >= 0, "model.moe.z_loss_weight", "must be >= 0");
  c.require(m.moe.route_scale > 0 && std::isfinite(m.moe.route_scale), "model.moe.route_scale",
            "must be finite and > 0");
  c.require(m.moe.n_expert_groups >= 0, "model.moe.n_expert_groups",
            "must be >= 0 (0 = no group-limited routing)");
  if (m.moe.n_expert_groups > 0) {
    const int64_t groups = m.moe.n_expert_groups;
    c.require(m.moe.n_experts % groups == 0, "model.moe.n_expert_groups",
              "must divide " + c.show("model.moe.n_experts"));
    c.require(m.moe.n_limited_groups >= 1 && m.moe.n_limited_groups <= groups,
              "model.moe.n_limited_groups",
              "must be in [1, " + c.show("model.moe.n_expert_groups") + "]");
    c.require(m.moe.n_experts % groups != 0 ||
                  m.moe.top_k <= m.moe.n_limited_groups * (m.moe.n_experts / groups),
              "model.moe.top_k",
              "must be <= the experts of model.moe.n_limited_groups groups (" +
                  std::to_string(m.moe.n_limited_groups * (m.moe.n_experts / groups)) + ")");
  } else {
    c.require(m.moe.n_limited_groups == 0, "model.moe.n_limited_groups",
              "needs model.moe.n_expert_groups > 0");
  }
  c.require(m.moe.n_shared_experts >= 0, "model.moe.n_shared_experts", "must be >= 0");
  c.require(m.moe.n_dense_layers >= 0 && m.moe.n_dense_layers <= m.n_layers,
            "model.moe.n_dense_layers", "must be in [0, " + c.show("model.n_layers") + "]");
  c.require(m.moe.dense_d_ff >= 0, "model.moe.dense_d_ff", "must be >= 0");
  check_bound(c, "model.moe.dense_d_ff", m.moe.dense_d_ff, kMaxWidth);
  c.require(static_cast<double>(m.moe.dense_d_ff) * static_cast<double>(m.d_model) <= kMaxProduct,
            "model.moe.dense_d_ff",
            "times model.d_model must be <= 2^40 (the weights of one layer)");
  c.require(m.moe.n_dense_layers == 0 || m.moe.dense_d_ff > 0, "model.moe.dense_d_ff",
            "must be > 0 when model.moe.n_dense_layers > 0 (the dense MLPs' width)");
  c.require(m.moe.load_balance_coeff >= 0 && std::isfinite(m.moe.load_balance_coeff),
            "model.moe.load_balance_coeff", "must be finite and >= 0 (0 = off)");
}

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

void resolve_policy(TrainConfig& config, const Origins& origins, const std::string& where) {
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

void validate(const TrainConfig& config, const Origins& origins, const std::string& where) {
  const Checker c(config, origins, where);
  TrainConfig copy = config;
  for (const Field& f : fields()) {
    const ValueRef value = f.bind(copy);
    if (auto d = std::get_if<double*>(&value))
      c.require(std::isfinite(**d), f.key(), "must be finite");
  }
  check_choices(config, c);
  check_model(config.model, c);
  check_training(config, c);
  check_optimizer(config, c);
  check_outputs(config, c);
  check_activation_checkpoint(config, c);
  check_comm(config.comm, c);
}

}  // namespace mixprec::config::detail
