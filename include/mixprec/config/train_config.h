// TrainConfig: everything a training run reads from its TOML file (torchtitan-style sections),
// with the defaults of configs/moe_small.toml. Plain values: reading and writing the file is
// io/config_file.h's (load_config is strict: unknown sections or keys, wrong types and
// out-of-range values throw mixprec::Error naming the file, the key (and its line) and the
// value; to_toml writes a config that load_config reads back equal, so a checkpoint can store
// the exact config it was trained with).
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/amp/policy.h"

namespace mixprec::config {

struct MoeConfig {
  std::int64_t n_experts = 8;
  std::int64_t top_k = 2;
  // Slots per expert = factor * tokens * top_k / n_experts; 0 = no dropping.
  double capacity_factor = 0.0;
  double aux_loss_weight = 0.01;  // load-balancing loss (Switch Transformer)
  double z_loss_weight = 0.001;   // router z-loss (ST-MoE)
  // DeepSeek-style routing (torchtitan's deepseek_v3 MoE). The router's scores are
  // softmax or sigmoid of its logits; each token's top_k experts are picked by score (+ the
  // expert bias), optionally only from its n_limited_groups best of n_expert_groups groups
  // (a group ranks by the sum of its two best scores); the gates are those experts' unbiased
  // scores, divided by their sum when route_norm, times route_scale.
  std::string score_func = "softmax";  // softmax | sigmoid
  bool route_norm = true;
  double route_scale = 1.0;
  std::int64_t n_expert_groups = 0;   // 0 = no group-limited routing
  std::int64_t n_limited_groups = 0;  // groups a token may use (with n_expert_groups)
  // Always-on shared experts: one SwiGLU/GELU MLP of width n_shared_experts · d_ff beside the
  // routed ones, its output added ungated.
  std::int64_t n_shared_experts = 0;
  // The first n_dense_layers blocks have a dense MLP of width dense_d_ff instead of experts.
  std::int64_t n_dense_layers = 0;
  std::int64_t dense_d_ff = 0;
  // DeepSeek-V3's auxiliary-loss-free balancing: after each optimizer step every expert's
  // bias (f32, checkpointed, used only to pick experts) moves by load_balance_coeff toward
  // balance, from the step's expert counts over the global batch. 0 = off (torchtitan: 1e-3).
  double load_balance_coeff = 0.0;
  // Over which rows the auxiliary loss counts expert loads: "global" (every rank's rows of
  // the step's batch, one all-reduce per MoE layer: the same loss at every world size) or
  // "rank" (each rank its own rows, as torchtitan and Megatron do).
  std::string balance_scope = "global";
  // How the routed experts' weights are stored, which decides what an expert that no token
  // chose in a step does: "step" (torchtitan's) stacks each weight of all experts into one
  // parameter (blocks.<l>.moe.experts.w_gate [E, d_ff, d], run by one grouped GEMM), so an
  // idle expert gets a zero gradient slice and still takes the optimizer step (weight decay,
  // momentum) with the tensor's one step count; "skip" (Hugging Face's MoE modules) keeps one
  // parameter per expert (blocks.<l>.moe.experts.<e>.w_gate), so an idle expert has no
  // gradient and the optimizer skips it, as torch.optim does (mixprec's bits before the key).
  // The layouts name the parameters differently: a checkpoint loads under its own only.
  std::string idle_experts = "step";
  bool operator==(const MoeConfig&) const = default;
};

// [model.mla]: DeepSeek-V2/V3's multi-head latent attention (model.kind = "deepseek_v3"),
// torchtitan's deepseek_v3 Attention. Queries: wq [H·(nope + rope), d], or with q_lora_rank >
// 0 the low-rank wq_a [q_lora_rank, d], an RMSNorm, wq_b [H·(nope + rope), q_lora_rank]. Keys
// and values from one latent: wkv_a [kv_lora_rank + rope, d] gives the latent (RMSNorm, then
// wkv_b [H·(nope + v), kv_lora_rank] gives each head's k_nope and v) and one RoPE key of
// qk_rope_head_dim shared by every head. Only the rope parts rotate; the scores are scaled by
// (nope + rope)^-1/2, times YaRN's mscale(factor, mscale_all_dim)² under yarn scaling.
// Defaults: torchtitan's Attention.Config (DeepSeek-V3's own widths).
struct MlaConfig {
  std::int64_t q_lora_rank = 0;  // 0 = one wq (DeepSeek-V2-Lite, torchtitan's 16B and debug)
  std::int64_t kv_lora_rank = 512;
  std::int64_t qk_nope_head_dim = 128;
  std::int64_t qk_rope_head_dim = 64;
  std::int64_t v_head_dim = 128;
  bool operator==(const MlaConfig&) const = default;
};

// [model.rope_scaling]: RoPE frequency scaling for long context, as a Hugging Face
// config.json's rope_scaling spells it (ops/rope_scaling.h has the formulas). type: "none",
// "llama3" (Llama 3.1+: factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings) or "yarn" (Qwen long context, DeepSeek-V3: factor,
// original_max_position_embeddings (0 = model.max_seq_len, HF's fallback), beta_fast,
// beta_slow, mscale, mscale_all_dim, attention_factor (0 = computed), truncate).
struct RopeScalingConfig {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  double attention_factor = 0.0;
  bool truncate = true;
  std::string type = "none";
  // User-provided: as an aggregate, TrainConfig{} temporaries trip GCC 12's
  // -Wmaybe-uninitialized on `type` at -O3 (a false positive).
  RopeScalingConfig() {}
  bool operator==(const RopeScalingConfig&) const = default;
};

struct ModelConfig {
  std::string kind = "moe";  // moe | gpt | llama3 | qwen3 | deepseek_v3 (models/registry.h)
  // torchtitan's model converters: "quantize.linear.float8" or "quantize.linear.mx" switch
  // that section on (QuantizeLinearConfig).
  std::vector<std::string> converters;
  std::int64_t vocab_size = 256;
  std::int64_t d_model = 128;
  std::int64_t n_layers = 4;
  std::int64_t n_heads = 4;
  // Key/value heads (grouped-query attention; n_heads / n_kv_heads query heads share each);
  // 0 = n_heads.
  std::int64_t n_kv_heads = 0;
  // Width of each attention head (q, k and v); 0 = d_model / n_heads. Qwen 3 sets it apart
  // from the model width (128 beside d_model 1024 and 16 heads: q is 2048 wide), so the heads
  // keep their size when d_model changes; wq is then [n_heads·head_dim, d_model].
  std::int64_t head_dim = 0;
  std::int64_t d_ff = 192;  // hidden width of the MLP (of each expert for moe)
  // torchtitan's Llama sizing: when multiple_of > 0, d_ff is derived from d_model as
  // round_up(int(multiplier · int(2 · 4 · d_model / 3)), multiple_of) (multiplier 1 when
  // ffn_dim_multiplier is 0), and a d_ff given beside it must equal that.
  std::int64_t multiple_of = 0;
  double ffn_dim_multiplier = 0.0;
  std::int64_t max_seq_len = 128;
  std::string norm = "rmsnorm";  // rmsnorm | layernorm
  double norm_eps = 1e-5;
  std::string mlp = "swiglu";      // swiglu | gelu
  std::string positions = "rope";  // rope | learned
  double rope_theta = 10000.0;     // RoPE base (Llama 3: 500000)
  RopeScalingConfig rope_scaling;
  bool tie_embeddings = true;
  bool bias = false;  // biases on the attention and MLP linears (GPT-2 style)
  // RMSNorm (eps norm_eps) over each head's head_dim features of q and of k, after the head
  // split and before RoPE, with one gain vector per layer for each (Qwen 3's q_norm/k_norm):
  // it bounds the attention logits however large the q/k weights grow.
  bool qk_norm = false;
  // A sentencepiece .model (data/tokenizer.h; `mixprec tokenizer train` writes one); "" = the
  // byte tokenizer. vocab_size must cover its ids.
  std::string tokenizer;
  MoeConfig moe;
  MlaConfig mla;  // model.kind = "deepseek_v3" only
  bool operator==(const ModelConfig&) const = default;
  // The key/value heads attention has: n_kv_heads, or n_heads when it is 0.
  std::int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  // The width of a head: head_dim, or d_model / n_heads when it is 0 (0 without heads).
  std::int64_t head_size() const {
    return head_dim > 0 ? head_dim : n_heads > 0 ? d_model / n_heads : 0;
  }
};

struct TrainingConfig {
  std::int64_t steps = 1500;
  // Rows per optimizer step over every rank (torchtitan's global_batch_size; that spelling is
  // read too).
  std::int64_t batch_size = 16;
  // Rows per forward/backward on each rank (torchtitan's local_batch_size): a step sums the
  // gradients of batch_size / (local_batch_size · ranks) micro-batches before its one
  // optimizer step (gradient accumulation). 0 = batch_size / ranks: one micro-batch.
  std::int64_t local_batch_size = 0;
  std::int64_t seq_len = 128;
  std::int64_t seed = 1234;
  std::string data;  // a file or folder of text; "" = the default corpus
  double val_fraction = 0.1;
  std::int64_t eval_every = 100;  // 0 = never
  std::int64_t eval_batches = 8;
  double grad_clip = 1.0;  // max global norm; 0 = off
  // Clamp each unscaled gradient element to [-v, v] (Keras clipvalue); 0 = off. At most one
  // of grad_clip and grad_clip_value is set, as Keras allows one of clipnorm and clipvalue.
  double grad_clip_value = 0.0;
  std::int64_t threads = 0;  // 0 = all cores
  // The kernel bf16 products run on: "auto" (the fastest this host measured; see
  // train/bf16_kernel_choice.h), or "amx", "avx512-bf16", "widened" (cpu/bf16_kernel.h).
  std::string bf16_kernel = "auto";
  // The stop rule for a diverged run: it ends with an error after this many consecutive
  // skipped (non-finite) steps, or once the loss scale falls below min_loss_scale; 0 = off.
  // A run that recovers skips a step or two while the scale backs off.
  std::int64_t max_skipped_steps = 50;
  double min_loss_scale = 1.0;  // DeepSpeed's default floor
  // ... or once this many steps in a row had a non-finite loss, or non-finite gradients where
  // no loss scale backs off (bf16, fp32: no dynamic loss scaling); 0 = off. Neither is mended
  // by skipping: 1 stops at the first, as Megatron-LM's check_for_nan_in_loss_and_grad does,
  // however short the run. A non-finite validation loss stops the run too.
  std::int64_t max_nonfinite_steps = 1;
  // Either `precision` (any amp::parse_policy spelling) or torchtitan's pair below; all empty
  // means bf16-mixed (torchtitan's default pair bfloat16/float32).
  std::string precision;
  std::string mixed_precision_param;                             // dtype name, e.g. "bfloat16"
  std::string mixed_precision_reduce;                            // dtype name, e.g. "float32"
  amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");  // resolved by load_config
  bool operator==(const TrainingConfig&) const = default;
};

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | sgd | adam-mini
  double lr = 1e-3;
  double weight_decay = 0.1;
  // Which parameters weight_decay applies to: "matrices" (nanoGPT's and Hugging Face
  // Trainer's rule: weights and embeddings, not norm gains or biases) or "all" (torchtitan's:
  // every parameter).
  std::string weight_decay_params = "matrices";
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double momentum = 0.9;  // sgd only
  bool nesterov = false;  // sgd only
  bool operator==(const OptimizerConfig&) const = default;
};

struct LrSchedulerConfig {
  std::int64_t warmup_steps = 100;
  std::string decay = "cosine";  // cosine | constant
  double min_lr_ratio = 0.1;     // final lr = lr * min_lr_ratio (cosine)
  bool operator==(const LrSchedulerConfig&) const = default;
};

struct CheckpointConfig {
  bool enable = false;
  std::int64_t interval = 200;        // steps between checkpoints
  std::int64_t keep_last = 2;         // 0 = keep all
  std::string folder = "checkpoint";  // relative to run_dir
  bool export_bf16 = false;           // also write bf16 weights at the end
  bool operator==(const CheckpointConfig&) const = default;
};

struct MetricsConfig {
  std::int64_t log_every = 10;
  bool jsonl = true;  // run_dir/metrics.jsonl
  bool plot = false;  // a loss-curve plot in run_dir at the end
  // The numerics monitor's per-tensor FP8 figures (amp/fp8_monitor.h) under an FP8 recipe: a
  // pass over every FP8 operand, measured on "every_step" (the stop rule can then name the
  // first tensor that overflowed), on "log_steps" (every log_every-th) or "off".
  std::string fp8_stats = "every_step";
  // TensorBoard event files with metrics.jsonl's scalars (torchtitan's keys), in
  // run_dir/save_tb_folder.
  bool enable_tensorboard = false;
  std::string save_tb_folder = "tb";
  bool operator==(const MetricsConfig&) const = default;
};

struct ParallelismConfig {
  std::int64_t data_parallel_shard_degree = -1;  // -1 = every rank (torchtitan)
  bool reshard_after_forward = true;
  bool operator==(const ParallelismConfig&) const = default;
};

// torchtitan's [activation_checkpoint]: recompute activations in backward instead of keeping
// them (models/activation_checkpoint.h). mode: none | selective | full (every block keeps only
// its input). selective_ac_option (read with mode = "selective"): "op" keeps the outputs of
// attention and of every other matmul in each block and recomputes the rest; a positive
// integer k as a string ("2") checkpoints every k-th block fully and no other.
struct ActivationCheckpointConfig {
  std::string mode = "none";
  std::string selective_ac_option = "2";
  bool operator==(const ActivationCheckpointConfig&) const = default;
};

// torchtitan's [comm]: how long a collective waits for the other ranks before the job fails
// naming the ones that never came (dist/communicator.h): init_timeout_seconds until the first
// training step is done (loading, resuming, building the model), train_timeout_seconds after.
struct CommConfig {
  std::int64_t init_timeout_seconds = 300;
  std::int64_t train_timeout_seconds = 100;
  bool operator==(const CommConfig&) const = default;
};

// torchtitan's [quantize.linear.float8] and [quantize.linear.mx] (TOML era): the model's linears
// run their products by a low-precision recipe (amp/linear_recipe.h). A section is on when
// model.converters lists it ("quantize.linear.float8", torchtitan's switch) or when it names a
// recipe_name; recipe_name "" then means torchtitan's default (tensorwise / mxfp8_cublas).
struct QuantizeLinearConfig {
  std::string recipe_name;
  // Substrings of module paths ("lm_head", "blocks.0.attn.wq") whose linears stay in the compute
  // dtype; "auto_filter_small_kn" adds torchao's small-linear rule. Every entry must name a
  // module of the model (torchtitan's "output" is mixprec's "lm_head").
  std::vector<std::string> filter_fqns = {"lm_head"};
  bool emulate = false;  // torchtitan's test switch: every recipe is emulated here (no effect)
  bool enable_fsdp_float8_all_gather = false;
  bool precompute_float8_dynamic_scale_for_fsdp = false;
  std::string mxfp8_dim1_cast_kernel_choice = "triton";  // a GPU kernel choice: no effect here
  // Transformer Engine DelayedScaling's keys, for recipe te_delayed (amp/delayed_scaling.h).
  std::int64_t amax_history_len = 1024;
  std::string amax_compute_algo = "max";  // max | most_recent
  std::int64_t margin = 0;
  // The GPU accumulator the recipes' fast-accumulation products are summed by
  // (numerics/accumulator_model.h's table: "f32" none, "h100"); mixprec's, float8 only.
  std::string accumulator = "f32";
  // Linears keep their input for backward as its FP8 cast (DeepSeek-V3's FP8 activation
  // cache); mixprec's key.
  bool save_fp8_activations = false;
  bool operator==(const QuantizeLinearConfig&) const = default;
};

// torchtitan's [quantize.grouped_mm.float8] and [quantize.grouped_mm.mx]: MoE experts' grouped
// GEMMs (stacked [E, Out, In] weights) in the modules `fqns` names run by a recipe (torchao's
// moe_training: float8 "rowwise", mx "mxfp8"). On when model.converters lists the section or
// fqns names a module; then fqns must name one (torchtitan's configs: ["experts"]).
struct QuantizeGroupedConfig {
  std::string recipe_name;  // "" = the section's one recipe (rowwise / mxfp8)
  std::vector<std::string> fqns;
  // mixprec's key, as [quantize.linear.*]'s: the experts keep their inputs for backward as FP8.
  bool save_fp8_activations = false;
  bool operator==(const QuantizeGroupedConfig&) const = default;
};

struct QuantizeConfig {
  QuantizeLinearConfig float8;
  QuantizeLinearConfig mx;
  QuantizeGroupedConfig grouped_float8;
  QuantizeGroupedConfig grouped_mx;
  bool operator==(const QuantizeConfig&) const = default;
};

struct TrainConfig {
  std::string run_dir = "outputs";  // torchtitan spells it dump_folder; both are read
  ModelConfig model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  LrSchedulerConfig lr_scheduler;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  ParallelismConfig parallelism;
  ActivationCheckpointConfig activation_checkpoint;
  CommConfig comm;
  QuantizeConfig quantize;
  bool operator==(const TrainConfig&) const = default;
};

}  // namespace mixprec::config
