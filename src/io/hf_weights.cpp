// Hugging Face layouts (hf_weights.h): for each layout, one table of tensors (our parameters
// -> the Hugging Face tensor they form) and one of config.json keys, read by both directions.
#include "mixprec/io/hf_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/io/hf_folder.h"
#include "mixprec/ops/indexing.h"

namespace mixprec::io {
namespace {

using nlohmann::json;

// Rows of one of our parameters inside a Hugging Face tensor; no name: zeros (a bias our
// model does not have).
struct Part {
  std::string ours;
  int64_t rows;
};

// A Hugging Face tensor: our parts stacked along the output dim (GPT-2's c_attn stacks q, k,
// v), stored [in, out] when conv1d (GPT-2's Conv1D); cols 0 for a vector.
struct Link {
  std::string hf;
  std::vector<Part> parts;
  int64_t cols = 0;
  bool conv1d = false;
  int64_t rows() const {
    int64_t r = 0;
    for (const Part& p : parts) r += p.rows;
    return r;
  }
  Shape shape() const {
    if (cols == 0) return {rows()};
    return conv1d ? Shape{cols, rows()} : Shape{rows(), cols};
  }
};

int64_t kv_width(const config::ModelConfig& m) {
  return m.kv_heads() * (m.d_model / m.n_heads);
}

std::vector<Link> llama_links(const config::ModelConfig& m) {
  const int64_t d = m.d_model, kv = kv_width(m), ff = m.d_ff, V = m.vocab_size;
  std::vector<Link> links{{"model.embed_tokens.weight", {{"tok_emb.weight", V}}, d}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), b = fmt::format("blocks.{}.", l);
    links.push_back({hf + "input_layernorm.weight", {{b + "attn_norm.weight", d}}});
    links.push_back({hf + "self_attn.q_proj.weight", {{b + "attn.wq", d}}, d});
    links.push_back({hf + "self_attn.k_proj.weight", {{b + "attn.wk", kv}}, d});
    links.push_back({hf + "self_attn.v_proj.weight", {{b + "attn.wv", kv}}, d});
    links.push_back({hf + "self_attn.o_proj.weight", {{b + "attn.wo", d}}, d});
    links.push_back({hf + "post_attention_layernorm.weight", {{b + "mlp_norm.weight", d}}});
    links.push_back({hf + "mlp.gate_proj.weight", {{b + "mlp.w_gate", ff}}, d});
    links.push_back({hf + "mlp.up_proj.weight", {{b + "mlp.w_up", ff}}, d});
    links.push_back({hf + "mlp.down_proj.weight", {{b + "mlp.w_down", d}}, ff});
  }
  links.push_back({"model.norm.weight", {{"final_norm.weight", d}}});
  if (!m.tie_embeddings) links.push_back({"lm_head.weight", {{"lm_head.weight", V}}, d});
  return links;
}

std::vector<Link> gpt2_links(const config::ModelConfig& m) {
  const int64_t d = m.d_model, ff = m.d_ff, V = m.vocab_size;
  auto bias = [&](const std::string& weight, int64_t rows) {
    return Part{m.bias ? weight + "_bias" : "", rows};
  };
  std::vector<Link> links{{"transformer.wte.weight", {{"tok_emb.weight", V}}, d},
                          {"transformer.wpe.weight", {{"pos_emb.weight", m.max_seq_len}}, d}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string hf = fmt::format("transformer.h.{}.", l), b = fmt::format("blocks.{}.", l);
    const std::string q = b + "attn.wq", k = b + "attn.wk", v = b + "attn.wv";
    links.push_back({hf + "ln_1.weight", {{b + "attn_norm.weight", d}}});
    links.push_back({hf + "ln_1.bias", {{b + "attn_norm.bias", d}}});
    links.push_back({hf + "attn.c_attn.weight", {{q, d}, {k, d}, {v, d}}, d, true});
    links.push_back({hf + "attn.c_attn.bias", {bias(q, d), bias(k, d), bias(v, d)}});
    links.push_back({hf + "attn.c_proj.weight", {{b + "attn.wo", d}}, d, true});
    links.push_back({hf + "attn.c_proj.bias", {bias(b + "attn.wo", d)}});
    links.push_back({hf + "ln_2.weight", {{b + "mlp_norm.weight", d}}});
    links.push_back({hf + "ln_2.bias", {{b + "mlp_norm.bias", d}}});
    links.push_back({hf + "mlp.c_fc.weight", {{b + "mlp.w_up", ff}}, d, true});
    links.push_back({hf + "mlp.c_fc.bias", {bias(b + "mlp.w_up", ff)}});
    links.push_back({hf + "mlp.c_proj.weight", {{b + "mlp.w_down", d}}, ff, true});
    links.push_back({hf + "mlp.c_proj.bias", {bias(b + "mlp.w_down", d)}});
  }
  links.push_back({"transformer.ln_f.weight", {{"final_norm.weight", d}}});
  links.push_back({"transformer.ln_f.bias", {{"final_norm.bias", d}}});
  if (!m.tie_embeddings) links.push_back({"lm_head.weight", {{"lm_head.weight", V}}, d});
  return links;
}

std::vector<Link> links_of(const config::ModelConfig& m, HfLayout layout) {
  return layout == HfLayout::llama ? llama_links(m) : gpt2_links(m);
}

// A config.json key: its value for our model and the model key it comes from; `absent` is
// Hugging Face's default when the file lacks the key (null: required); unchecked keys are
// written only (max_position_embeddings: RoPE models run at any length up to ours).
struct Key {
  const char* hf;
  json ours;
  const char* model_key;
  json absent;
  bool checked = true;
};

std::vector<Key> config_keys(const config::ModelConfig& m, HfLayout layout) {
  const int64_t heads = m.n_heads, kv = m.kv_heads();
  if (layout == HfLayout::llama)
    return {
        {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
        {"hidden_size", m.d_model, "model.d_model", nullptr},
        {"intermediate_size", m.d_ff, "model.d_ff", nullptr},
        {"num_hidden_layers", m.n_layers, "model.n_layers", nullptr},
        {"num_attention_heads", heads, "model.n_heads", nullptr},
        {"num_key_value_heads", kv, "model.n_kv_heads", heads},
        {"head_dim", m.d_model / heads, "model.d_model / model.n_heads", m.d_model / heads},
        {"rms_norm_eps", m.norm_eps, "model.norm_eps", 1e-6},
        {"rope_theta", m.rope_theta, "model.rope_theta", 10000.0},
        {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", false},
        {"hidden_act", "silu", "model.mlp = \"swiglu\"", "silu"},
        {"attention_bias", false, "model.bias", false},
        {"mlp_bias", false, "model.bias", false},
        {"rope_scaling", nullptr, "(no RoPE scaling here)", nullptr},
        {"max_position_embeddings", m.max_seq_len, "model.max_seq_len", nullptr, false},
    };
  return {
      {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
      {"n_embd", m.d_model, "model.d_model", nullptr},
      {"n_inner", m.d_ff, "model.d_ff", 4 * m.d_model},
      {"n_layer", m.n_layers, "model.n_layers", nullptr},
      {"n_head", heads, "model.n_heads", nullptr},
      {"n_positions", m.max_seq_len, "model.max_seq_len", nullptr},
      {"layer_norm_epsilon", m.norm_eps, "model.norm_eps", 1e-5},
      // Our GELU is the exact erf form; GPT-2's own "gelu_new" is the tanh approximation.
      {"activation_function", "gelu", "model.mlp = \"gelu\" (exact erf)", "gelu_new"},
      {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", true},
      {"scale_attn_weights", true, "(attention scaled by 1/sqrt(head dim))", true},
      {"scale_attn_by_inverse_layer_idx", false, "(no per-layer attention scaling)", false},
      {"n_ctx", m.max_seq_len, "model.max_seq_len", nullptr, false},
  };
}

bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

void check_config(const json& file, const config::ModelConfig& m, HfLayout layout,
                  const std::string& path) {
  MIXPREC_CHECK(file.contains("model_type") && file["model_type"].is_string(), "hf " + path,
                "has no string \"model_type\" (\"llama\" or \"gpt2\")");
  const std::string type = file["model_type"].get<std::string>();
  MIXPREC_CHECK(type == hf_layout_name(layout), "hf " + path,
                "model_type = \"" + type + "\", but this model exports as \"" +
                    hf_layout_name(layout) + "\"");
  for (const Key& k : config_keys(m, layout)) {
    if (!k.checked) continue;
    const bool given = file.contains(k.hf) && !file[k.hf].is_null();
    MIXPREC_CHECK(
        given || !k.absent.is_null() || k.ours.is_null(), "hf " + path,
        std::string("lacks \"") + k.hf + "\" (" + k.model_key + " = " + k.ours.dump() + " here)");
    const json value = given ? file[k.hf] : k.absent;
    MIXPREC_CHECK(same_value(value, k.ours), "hf " + path,
                  std::string(k.hf) + " = " + value.dump() + ", but " + k.model_key + " = " +
                      k.ours.dump() + " in the config: they describe different models");
  }
}

// Buffers older exports carry beside the weights: not parameters, skipped.
bool is_known_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         name.ends_with("rotary_emb.inv_freq");
}

// GPT-2 files name tensors with or without "transformer."; ours always have it.
std::string canonical_name(const std::string& name, HfLayout layout) {
  if (layout == HfLayout::gpt2 && !name.starts_with("transformer.") && name != "lm_head.weight")
    return "transformer." + name;
  return name;
}

// `what` names the tensor ("tensor 'x'"), `where` the folder.
Tensor as_f32(const Tensor& t, const std::string& where, const std::string& what) {
  MIXPREC_CHECK(
      t.dtype() == DType::f32 || t.dtype() == DType::bf16 || t.dtype() == DType::f16 ||
          t.dtype() == DType::f64,
      where,
      what + " has dtype " + dtype_name(t.dtype()) + "; weights must be F32, BF16, F16 or F64");
  const Tensor f = t.to(DType::f32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i)
    MIXPREC_CHECK(std::isfinite(p[i]), where,
                  what + " holds a non-finite value (" + std::to_string(p[i]) + ") at element " +
                      std::to_string(i) + " (after rounding to f32)");
  return f;
}

}  // namespace

const char* hf_layout_name(HfLayout layout) {
  return layout == HfLayout::llama ? "llama" : "gpt2";
}

HfLayout hf_layout_of(const config::ModelConfig& m) {
  MIXPREC_CHECK(m.kind != "moe", "hf",
                "model.kind = \"moe\" has no Hugging Face layout here (Llama and GPT-2 only)");
  if (m.norm == "rmsnorm" && m.mlp == "swiglu" && m.positions == "rope" && !m.bias)
    return HfLayout::llama;
  if (m.norm == "layernorm" && m.mlp == "gelu" && m.positions == "learned" &&
      m.kv_heads() == m.n_heads)
    return HfLayout::gpt2;
  throw Error("hf", fmt::format("model.norm = \"{}\", mlp = \"{}\", positions = \"{}\", bias = {}, "
                                "n_kv_heads = {} fit no Hugging Face layout: Llama needs rmsnorm, "
                                "swiglu, rope and no biases; GPT-2 layernorm, gelu, learned "
                                "positions and no grouped-query attention",
                                m.norm, m.mlp, m.positions, m.bias, m.n_kv_heads));
}

std::string hf_config_json(const config::ModelConfig& m, DType dtype) {
  const HfLayout layout = hf_layout_of(m);
  json j;
  j["architectures"] = {layout == HfLayout::llama ? "LlamaForCausalLM" : "GPT2LMHeadModel"};
  j["model_type"] = hf_layout_name(layout);
  j["torch_dtype"] = dtype == DType::bf16 ? "bfloat16" : "float32";
  for (const Key& k : config_keys(m, layout)) j[k.hf] = k.ours;
  return j.dump(2) + "\n";
}

void export_hf(const std::string& dir, const config::ModelConfig& m, const optim::ParamList& params,
               const HfExportOptions& options) {
  MIXPREC_CHECK(options.dtype == DType::f32 || options.dtype == DType::bf16, "hf export",
                std::string("dtype ") + dtype_name(options.dtype) + " is not f32 or bf16");
  const HfLayout layout = hf_layout_of(m);
  NoGradGuard no_grad;
  std::map<std::string, Tensor> masters;
  for (const auto& p : params) masters.emplace(p->name(), p->master());
  TensorList tensors;
  std::set<std::string> used;
  for (const Link& link : links_of(m, layout)) {
    std::vector<Tensor> parts;
    for (const Part& part : link.parts) {
      if (part.ours.empty()) {
        parts.push_back(Tensor::zeros({part.rows}));
        continue;
      }
      const auto it = masters.find(part.ours);
      MIXPREC_CHECK(it != masters.end(), "hf export",
                    "the model has no parameter '" + part.ours + "' for " + link.hf);
      parts.push_back(it->second.to(DType::f32));
      used.insert(part.ours);
    }
    Tensor t = parts.size() == 1 ? parts[0] : concat(parts, 0);
    if (link.conv1d) t = t.transpose(0, 1);
    tensors.emplace_back(link.hf, t.to(options.dtype).contiguous());
  }
  for (const auto& [name, master] : masters)
    MIXPREC_CHECK(
        used.contains(name), "hf export",
        "parameter '" + name + "' has no place in the " + hf_layout_name(layout) + " layout");
  write_hf_folder(dir, hf_config_json(m, options.dtype), tensors, options.max_shard_bytes);
}

TensorMap import_hf(const std::string& dir, const config::ModelConfig& m) {
  const HfLayout layout = hf_layout_of(m);
  const HfCheckpoint hf = read_hf_folder(dir);
  const std::string config_path = dir + "/" + kHfConfigFile;
  check_config(json::parse(hf.config_json), m, layout, config_path);
  TensorMap files;  // by canonical name
  for (const auto& [name, t] : hf.tensors) files.emplace(canonical_name(name, layout), t);
  NoGradGuard no_grad;
  TensorMap out;
  std::set<std::string> used;
  for (const Link& link : links_of(m, layout)) {
    const std::string where = "hf " + dir, what = "tensor '" + link.hf + "'";
    const auto it = files.find(link.hf);
    MIXPREC_CHECK(it != files.end(), "hf " + dir, "lacks the tensor '" + link.hf + "'");
    used.insert(link.hf);
    MIXPREC_CHECK(it->second.shape() == link.shape(), where,
                  what + " has shape " + shape_to_string(it->second.shape()) +
                      ", the config needs " + shape_to_string(link.shape()));
    Tensor t = as_f32(it->second, where, what);
    if (link.conv1d) t = t.transpose(0, 1).contiguous();
    int64_t row = 0;
    for (const Part& part : link.parts) {
      const Tensor rows = t.slice(0, row, row + part.rows).contiguous().clone();
      row += part.rows;
      if (!part.ours.empty()) {
        out.emplace(kModelPrefix + part.ours, rows);
        continue;
      }
      for (const double v : rows.to_doubles())
        MIXPREC_CHECK(v == 0.0, where,
                      what + " holds nonzero biases, and this model has none (model.bias = false)");
    }
  }
  // A tied output may be written anyway; it must then be the embedding itself.
  const std::string embedding =
      layout == HfLayout::llama ? "model.embed_tokens.weight" : "transformer.wte.weight";
  if (m.tie_embeddings && files.contains("lm_head.weight")) {
    MIXPREC_CHECK(files.at("lm_head.weight").to(DType::f32).to_doubles() ==
                      files.at(embedding).to(DType::f32).to_doubles(),
                  "hf " + dir,
                  "lm_head.weight differs from " + embedding +
                      ", but tie_word_embeddings is true: the weights are not tied");
    used.insert("lm_head.weight");
  }
  for (const auto& [name, t] : files)
    MIXPREC_CHECK(used.contains(name) || is_known_buffer(name), "hf " + dir,
                  "holds the tensor '" + name + "', which the " + hf_layout_name(layout) +
                      " layout of this config has no place for");
  return out;
}

}  // namespace mixprec::io
