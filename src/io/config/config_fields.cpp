// The key table (see config_fields.h) and TOML formatting of single values.
#include "config_fields.h"

#include "mixprec/core/spelling.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <span>

#include "mixprec/models/registry.h"
#include "mixprec/optim/optimizer_table.h"

namespace mixprec::config::detail {
namespace {

// FIELD("model.moe", model.moe, top_k) binds "model.moe.top_k" to config.model.moe.top_k.
#define FIELD(section, path, name, ...)                                        \
  Field {                                                                      \
    section, #name, [](TrainConfig& c) -> ValueRef { return &c.path.name; }, { \
      __VA_ARGS__                                                              \
    }                                                                          \
  }

// The names a table holds (the optimizer table's names), in order.
template <class Row>
std::vector<std::string> names_of(std::span<const Row> rows, const char* Row::*name) {
  std::vector<std::string> out;
  for (const Row& row : rows) out.emplace_back(row.*name);
  return out;
}

std::vector<std::string> model_kinds() {
  std::vector<std::string> out;
  for (const models::ModelSpec* spec : models::model_specs()) out.emplace_back(spec->kind);
  return out;
}

std::vector<Field> make_fields() {
  return {
      Field{"", "run_dir", [](TrainConfig& c) -> ValueRef { return &c.run_dir; }, {}},
      Field{"model", "kind", [](TrainConfig& c) -> ValueRef { return &c.model.kind; },
            model_kinds()},
      FIELD("model", model, converters, "quantize.linear.float8", "quantize.linear.mx",
            "quantize.grouped_mm.float8", "quantize.grouped_mm.mx"),
      FIELD("model", model, vocab_size),
      FIELD("model", model, d_model),
      FIELD("model", model, n_layers),
      FIELD("model", model, n_heads),
      FIELD("model", model, n_kv_heads),
      FIELD("model", model, head_dim),  // 0 = d_model / n_heads (Qwen 3 sets its own)
      FIELD("model", model, d_ff),
      FIELD("model", model, multiple_of),
      FIELD("model", model, ffn_dim_multiplier),
      FIELD("model", model, max_seq_len),
      FIELD("model", model, norm, "rmsnorm", "layernorm"),
      FIELD("model", model, norm_eps),
      FIELD("model", model, mlp, "swiglu", "gelu", "gelu_tanh"),
      FIELD("model", model, positions, "rope", "learned"),
      FIELD("model", model, rope_theta),
      FIELD("model", model, tie_embeddings),
      FIELD("model", model, bias),
      FIELD("model", model, qk_norm),  // Qwen 3's per-head q/k RMSNorm; off for the others
      FIELD("model", model, tokenizer),
      FIELD("model.moe", model.moe, n_experts),
      FIELD("model.moe", model.moe, top_k),
      FIELD("model.moe", model.moe, capacity_factor),
      FIELD("model.moe", model.moe, aux_loss_weight),
      FIELD("model.moe", model.moe, z_loss_weight),
      FIELD("model.moe", model.moe, score_func, "softmax", "sigmoid"),
      FIELD("model.moe", model.moe, route_norm),
      FIELD("model.moe", model.moe, route_scale),
      FIELD("model.moe", model.moe, n_expert_groups),
      FIELD("model.moe", model.moe, n_limited_groups),
      FIELD("model.moe", model.moe, n_shared_experts),
      FIELD("model.moe", model.moe, n_dense_layers),
      FIELD("model.moe", model.moe, dense_d_ff),
      FIELD("model.moe", model.moe, load_balance_coeff),
      FIELD("model.moe", model.moe, balance_scope, "global", "rank"),
      FIELD("model.moe", model.moe, idle_experts, "step", "skip"),
      FIELD("model.mla", model.mla, q_lora_rank),
      FIELD("model.mla", model.mla, kv_lora_rank),
      FIELD("model.mla", model.mla, qk_nope_head_dim),
      FIELD("model.mla", model.mla, qk_rope_head_dim),
      FIELD("model.mla", model.mla, v_head_dim),
      FIELD("model.rope_scaling", model.rope_scaling, type, "none", "llama3", "yarn"),
      FIELD("model.rope_scaling", model.rope_scaling, factor),
      FIELD("model.rope_scaling", model.rope_scaling, low_freq_factor),
      FIELD("model.rope_scaling", model.rope_scaling, high_freq_factor),
      FIELD("model.rope_scaling", model.rope_scaling, original_max_position_embeddings),
      FIELD("model.rope_scaling", model.rope_scaling, beta_fast),
      FIELD("model.rope_scaling", model.rope_scaling, beta_slow),
      FIELD("model.rope_scaling", model.rope_scaling, mscale),
      FIELD("model.rope_scaling", model.rope_scaling, mscale_all_dim),
      FIELD("model.rope_scaling", model.rope_scaling, attention_factor),
      FIELD("model.rope_scaling", model.rope_scaling, truncate),
      FIELD("training", training, steps),
      FIELD("training", training, batch_size),
      FIELD("training", training, seq_len),
      FIELD("training", training, local_batch_size),
      FIELD("training", training, seed),
      FIELD("training", training, data),
      FIELD("training", training, val_fraction),
      FIELD("training", training, eval_every),
      FIELD("training", training, eval_batches),
      FIELD("training", training, grad_clip),
      FIELD("training", training, grad_clip_value),
      FIELD("training", training, threads),
      FIELD("training", training, bf16_kernel, "auto", "amx", "avx512-bf16", "widened"),
      FIELD("training", training, max_skipped_steps),
      FIELD("training", training, min_loss_scale),
      FIELD("training", training, max_nonfinite_steps),
      FIELD("training", training, precision),
      FIELD("training", training, mixed_precision_param),
      FIELD("training", training, mixed_precision_reduce),
      Field{"optimizer", "name", [](TrainConfig& c) -> ValueRef { return &c.optimizer.name; },
            names_of(optim::optimizer_kinds(), &optim::OptimizerKind::name)},
      FIELD("optimizer", optimizer, lr),
      FIELD("optimizer", optimizer, weight_decay),
      FIELD("optimizer", optimizer, weight_decay_params, "matrices", "all"),
      FIELD("optimizer", optimizer, beta1),
      FIELD("optimizer", optimizer, beta2),
      FIELD("optimizer", optimizer, eps),
      FIELD("optimizer", optimizer, momentum),
      FIELD("optimizer", optimizer, nesterov),
      FIELD("lr_scheduler", lr_scheduler, warmup_steps),
      FIELD("lr_scheduler", lr_scheduler, decay, "cosine", "constant"),
      FIELD("lr_scheduler", lr_scheduler, min_lr_ratio),
      FIELD("checkpoint", checkpoint, enable),
      FIELD("checkpoint", checkpoint, interval),
      FIELD("checkpoint", checkpoint, keep_last),
      FIELD("checkpoint", checkpoint, folder),
      FIELD("checkpoint", checkpoint, export_bf16),
      FIELD("metrics", metrics, log_every),
      FIELD("metrics", metrics, jsonl),
      FIELD("metrics", metrics, plot),
      FIELD("metrics", metrics, fp8_stats, "every_step", "log_steps", "off"),
      FIELD("metrics", metrics, enable_tensorboard),
      FIELD("metrics", metrics, save_tb_folder),
      FIELD("parallelism", parallelism, data_parallel_shard_degree),
      FIELD("parallelism", parallelism, reshard_after_forward),
      FIELD("activation_checkpoint", activation_checkpoint, mode, "none", "selective", "full"),
      FIELD("activation_checkpoint", activation_checkpoint, selective_ac_option),
      FIELD("comm", comm, init_timeout_seconds),
      FIELD("comm", comm, train_timeout_seconds),
      FIELD("quantize.linear.float8", quantize.float8, recipe_name),
      FIELD("quantize.linear.float8", quantize.float8, filter_fqns),
      FIELD("quantize.linear.float8", quantize.float8, emulate),
      FIELD("quantize.linear.float8", quantize.float8, enable_fsdp_float8_all_gather),
      FIELD("quantize.linear.float8", quantize.float8, precompute_float8_dynamic_scale_for_fsdp),
      FIELD("quantize.linear.float8", quantize.float8, amax_history_len),
      FIELD("quantize.linear.float8", quantize.float8, amax_compute_algo, "max", "most_recent"),
      FIELD("quantize.linear.float8", quantize.float8, margin),
      FIELD("quantize.linear.float8", quantize.float8, accumulator),
      FIELD("quantize.linear.float8", quantize.float8, save_fp8_activations),
      FIELD("quantize.linear.mx", quantize.mx, recipe_name),
      FIELD("quantize.linear.mx", quantize.mx, filter_fqns),
      FIELD("quantize.linear.mx", quantize.mx, save_fp8_activations),
      // mixprec's: torchao gathers tensorwise FP8 only; here MX weights gather as two casts.
      FIELD("quantize.linear.mx", quantize.mx, enable_fsdp_float8_all_gather),
      FIELD("quantize.linear.mx", quantize.mx, precompute_float8_dynamic_scale_for_fsdp),
      FIELD("quantize.linear.mx", quantize.mx, mxfp8_dim1_cast_kernel_choice, "triton", "cuda",
            "torch"),
      FIELD("quantize.grouped_mm.float8", quantize.grouped_float8, recipe_name),
      FIELD("quantize.grouped_mm.float8", quantize.grouped_float8, fqns),
      FIELD("quantize.grouped_mm.float8", quantize.grouped_float8, save_fp8_activations),
      FIELD("quantize.grouped_mm.mx", quantize.grouped_mx, recipe_name),
      FIELD("quantize.grouped_mm.mx", quantize.grouped_mx, fqns),
      FIELD("quantize.grouped_mm.mx", quantize.grouped_mx, save_fp8_activations),
  };
}

#undef FIELD

}  // namespace

const std::vector<Field>& fields() {
  static const std::vector<Field> table = make_fields();
  return table;
}

const std::vector<std::string>& sections() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    auto add = [&](const std::string& s) {
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    };
    for (const Field& f : fields()) {
      if (f.section.empty()) continue;
      // A section's parents are sections too ([quantize.linear.float8] is in quantize.linear).
      for (std::size_t dot = f.section.find('.'); dot != std::string::npos;
           dot = f.section.find('.', dot + 1))
        add(f.section.substr(0, dot));
      add(f.section);
    }
    return out;
  }();
  return names;
}

const std::vector<KeyAlias>& key_aliases() {
  static const std::vector<KeyAlias> aliases = {
      {"", "dump_folder", "run_dir"},
      {"training", "global_batch_size", "batch_size"},
      {"model.rope_scaling", "rope_type", "type"},  // config.json's spelling
  };
  return aliases;
}

std::string resolve_alias(const std::string& section, const std::string& name) {
  for (const KeyAlias& a : key_aliases())
    if (section == a.section && name == a.alias) return a.target;
  return name;
}

const Field* find_field(const std::string& section, const std::string& name) {
  for (const Field& f : fields()) {
    if (f.section == section && f.name == name) return &f;
  }
  return nullptr;
}

const Field* find_field(const std::string& key) {
  for (const Field& f : fields()) {
    if (f.key() == key) return &f;
  }
  return nullptr;
}

bool is_section(const std::string& section) {
  for (const std::string& s : sections()) {
    if (s == section) return true;
  }
  return false;
}

std::string valid_keys(const std::string& section) {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ", ") + item; };
  for (const Field& f : fields()) {
    if (f.section == section) add(f.name);
  }
  for (const KeyAlias& a : key_aliases())
    if (section == a.section) add(a.alias);
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const std::string& s : sections()) {
    // Direct subsections only: "model" lists "moe", the top level lists "model".
    if (s.rfind(prefix, 0) == 0 && s.find('.', prefix.size()) == std::string::npos) {
      add("[" + s + "]");
    }
  }
  return out;
}

std::string closest_key(const std::string& path) {
  const std::string name =
      path.substr(path.rfind('.') == std::string::npos ? 0 : path.rfind('.') + 1);
  if (name.size() > 64) return "";  // no key is that long, and the distance is quadratic
  std::string best;
  std::size_t best_distance = std::string::npos;
  auto consider = [&](const std::string& key, std::size_t distance) {
    if (distance < best_distance) {
      best = key;
      best_distance = distance;
    }
  };
  for (const Field& f : fields()) {
    const std::string key = f.key();
    consider(key, edit_distance(path, key));
    if (f.name == name) consider(key, 1);  // the right key in the wrong section
  }
  for (const KeyAlias& a : key_aliases()) {
    const std::string key = *a.section ? std::string(a.section) + "." + a.alias : a.alias;
    consider(key, edit_distance(path, key));
  }
  // A typo changes a few characters: more than a third of the key is another key.
  return best_distance <= std::max<std::size_t>(2, path.size() / 3) ? best : "";
}

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string format_value(const ValueRef& value) {
  if (auto b = std::get_if<bool*>(&value)) return **b ? "true" : "false";
  if (auto i = std::get_if<std::int64_t*>(&value)) return std::to_string(**i);
  if (auto s = std::get_if<std::string*>(&value)) return quote_string(**s);
  if (auto l = std::get_if<std::vector<std::string>*>(&value)) {
    std::string out = "[";
    for (const std::string& item : **l) out += (out.size() > 1 ? ", " : "") + quote_string(item);
    return out + "]";
  }
  // Shortest text that reads back to the same double; ".0" keeps it a TOML float.
  char buf[64];
  const double d = *std::get<double*>(value);
  const auto end = std::to_chars(buf, buf + sizeof buf, d).ptr;
  std::string text(buf, end);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // n: inf / nan
  return text;
}

}  // namespace mixprec::config::detail
