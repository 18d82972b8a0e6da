// The qwen3 family's spec (qwen3.h): its rules, its initialisation and its Hugging Face layout.
#include "mixprec/models/qwen3/qwen3.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/hf_layouts.h"
#include "mixprec/models/transformer/rope_config.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models::qwen3 {
namespace {

using nlohmann::json;

void check(const config::ModelConfig& m, const config::ConfigRules& c) {
  check_decoder_config(m, c);
  // Qwen 3's architecture is fixed; the keys that would change it must say so.
  c.require(m.norm == "rmsnorm", "model.norm", "must be \"rmsnorm\" for model.kind = \"qwen3\"");
  c.require(m.mlp == "swiglu", "model.mlp", "must be \"swiglu\" for model.kind = \"qwen3\"");
  c.require(m.positions == "rope", "model.positions",
            "must be \"rope\" for model.kind = \"qwen3\"");
  c.require(!m.bias, "model.bias", "must be false for model.kind = \"qwen3\" (no biases)");
  c.require(m.qk_norm, "model.qk_norm",
            "must be true for model.kind = \"qwen3\" (its q_norm / k_norm)");
}

// torchtitan's Qwen 3 at b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (torchtitan/models/qwen3/
// __init__.py, _LINEAR_INIT): every linear, wo and w2 included, N(0, 0.02) untruncated (no
// depth scaling in the dense model); the embedding N(0, 0.02) (tied: it is the output's
// weight); every RMSNorm gain 1. (torchtitan v0.2.2 depth-scaled wo, w2, w3 and drew the
// embedding from N(0, 1).)
std::unique_ptr<Model> make(const config::ModelConfig& m) {
  return std::make_unique<Transformer>(m, DecoderArch{.init = DecoderInit::plain});
}

// Qwen3Config reads an absent num_key_value_heads as 32 (the key's `absent`), a null one as
// num_attention_heads.
json kv_heads_of_file(const json& value, const json& file) {
  const auto it = file.find("num_key_value_heads");
  if (it != file.end() && it->is_null()) return file.value("num_attention_heads", json());
  return value;
}

// Every layer's attention as Qwen3Config derives it when the file has no layer_types (our
// `absent`: an empty list): sliding from max_window_layers (28) on when use_sliding_window is
// true and sliding_window is not null (4096 when absent), full before. Values of the wrong
// type leave the list as it is, to be reported as differing.
json layer_types_of_file(const json& value, const json& file) {
  if (!value.is_array() || !value.empty()) return value;
  const auto layers = file.find("num_hidden_layers");
  const auto first = file.find("max_window_layers");
  const auto use = file.find("use_sliding_window");
  const auto window = file.find("sliding_window");
  const bool sliding =
      use != file.end() && *use == true && (window == file.end() || !window->is_null());
  const int64_t first_sliding = first == file.end()          ? 28
                                : first->is_number_integer() ? first->get<int64_t>()
                                                             : -1;
  // num_hidden_layers is compared first (the table's order); the bound keeps a hostile file
  // from building a huge list all the same.
  if (layers == file.end() || !layers->is_number_integer() || first_sliding < 0 ||
      layers->get<int64_t>() > kMaxModelCount)
    return value;
  json types = json::array();
  for (int64_t i = 0; i < layers->get<int64_t>(); ++i)
    types.push_back(sliding && i >= first_sliding ? "sliding_attention" : "full_attention");
  return types;
}

// Qwen3ForCausalLM's config.json keys, `absent` being Qwen3Config's defaults (transformers
// configuration_qwen3.py), which differ from Llama's (head_dim 128, 32 kv heads).
HfLayout hf_layout(const config::ModelConfig& m) {
  const int64_t heads = m.n_heads;
  const json full =
      json(std::vector<std::string>(static_cast<std::size_t>(m.n_layers), "full_attention"));
  std::vector<HfKey> keys{
      {"vocab_size", m.vocab_size, "model.vocab_size", nullptr},
      {"hidden_size", m.d_model, "model.d_model", nullptr},
      {"intermediate_size", m.d_ff, "model.d_ff", nullptr},
      {"num_hidden_layers", m.n_layers, "model.n_layers", nullptr},
      {"num_attention_heads", heads, "model.n_heads", nullptr},
      {"num_key_value_heads", m.kv_heads(), "model.n_kv_heads", 32, true, kv_heads_of_file},
      {"head_dim", m.head_size(),
       m.head_dim > 0 ? "model.head_dim" : "model.d_model / model.n_heads", 128},
      {"rms_norm_eps", m.norm_eps, "model.norm_eps", 1e-6},
      {"rope_theta", m.rope_theta, "model.rope_theta", 10000.0},
      {"rope_scaling", hf_rope_scaling(m), "model.rope_scaling", nullptr, true,
       normalize_hf_rope_scaling},
      {"tie_word_embeddings", m.tie_embeddings, "model.tie_embeddings", false},
      {"hidden_act", "silu", "model.mlp = \"swiglu\"", "silu"},
      {"attention_bias", false, "model.bias", false},
      // Full attention in every layer: no sliding window (HF's default), and the window
      // layers' bound written as the depth, as Qwen's own files do.
      {"use_sliding_window", false, "(no sliding-window attention here)", false},
      {"sliding_window", nullptr, "(no sliding-window attention here)", nullptr, false},
      {"max_window_layers", m.n_layers, "model.n_layers", 28, false},
      {"layer_types", full, "(full attention in every layer here)", json::array(), true,
       layer_types_of_file},
      {"max_position_embeddings", m.max_seq_len, "model.max_seq_len", nullptr, false},
  };
  return {"qwen3",         "Qwen3ForCausalLM",          llama_hf_links(m),
          std::move(keys), "model.embed_tokens.weight", ""};
}

}  // namespace

const ModelSpec kSpec{"qwen3",
                      "torchtitan's Qwen 3: Llama's decoder with per-head q/k RMSNorm before "
                      "RoPE, its own head width, N(0, 0.02) init",
                      check,
                      make,
                      hf_layout,
                      no_size_keys,
                      one_block_kind,
                      with_layers};

}  // namespace mixprec::models::qwen3
