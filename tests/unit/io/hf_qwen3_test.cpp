// Qwen 3 as Hugging Face's Qwen3ForCausalLM: export then import gives the masters back bit for
// bit (f32) or rounded once (bf16), tied or not; the names, shapes and config.json keys are
// Hugging Face's (q_norm/k_norm, head_dim, no sliding window); imports read Qwen3Config's
// defaults and refuse the sliding-window attention this decoder does not run. The decoder's
// head_dim and qk_norm in the other layouts: Llama writes head_dim and refuses q/k norms,
// GPT-2 refuses both.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/io/hf_weights.h"
#include "mixprec/io/safetensors.h"
#include "support/hf_testing.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

using namespace mixprec::testing;
namespace fs = std::filesystem;
using nlohmann::json;

json config_of(const fs::path& dir) {
  std::ifstream in(dir / "config.json");
  return json::parse(in);
}

// A copy of the folder `from` with config.json changed by `change`.
template <class F>
fs::path with_config(const fs::path& from, const fs::path& to, F change) {
  fs::copy(from, to);
  json j = config_of(to);
  change(j);
  std::ofstream(to / "config.json") << j.dump();
  return to;
}

std::string import_error(const fs::path& dir, const config::ModelConfig& c) {
  return error_of([&] { import_hf(dir.string(), c); });
}

TEST(HfQwen3, RoundTripIsBitExactInF32AndRoundsOnceInBf16) {
  config::ModelConfig tied = hf_qwen3_config();
  tied.tie_embeddings = true;
  tied.n_kv_heads = 1;
  tied.head_dim = 8;  // q 32 wide, narrower than d_model 64
  for (const config::ModelConfig& c : {hf_qwen3_config(), tied}) {
    const auto m = hf_test_model(c, 3);
    for (DType dt : {DType::f32, DType::bf16}) {
      TempDir tmp;
      export_hf((tmp / "hf").string(), c, m->parameters().parameters(), {.dtype = dt});
      const TensorMap back = import_hf((tmp / "hf").string(), c);
      ASSERT_EQ(back.size(), m->parameters().entries().size());
      for (const auto& [name, p] : m->parameters().entries())
        EXPECT_TRUE(same_bits(back.at(kModelPrefix + name), p->master().to(dt).to(DType::f32)))
            << name << " " << dtype_name(dt);
    }
  }
}

TEST(HfQwen3, NamesShapesAndConfigAreHuggingFaces) {
  const config::ModelConfig c = hf_qwen3_config();
  const auto m = hf_test_model(c, 4);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  const SafetensorsFile f = load_safetensors((tmp / "hf" / "model.safetensors").string());
  EXPECT_EQ(f.tensors.size(), 3u + 2u * 11u);  // embedding, norm, lm_head; 11 per layer
  const auto& P = m->parameters();
  auto expect_tensor = [&](const std::string& hf, const std::string& ours, const Shape& shape) {
    ASSERT_TRUE(f.tensors.contains(hf)) << hf;
    EXPECT_EQ(f.at(hf).shape(), shape) << hf;
    EXPECT_TRUE(same_bits(f.at(hf), P.at(ours).master())) << hf;
  };
  expect_tensor("model.layers.1.self_attn.q_proj.weight", "blocks.1.attn.wq", {96, 64});
  expect_tensor("model.layers.1.self_attn.k_proj.weight", "blocks.1.attn.wk", {48, 64});
  expect_tensor("model.layers.1.self_attn.v_proj.weight", "blocks.1.attn.wv", {48, 64});
  expect_tensor("model.layers.1.self_attn.o_proj.weight", "blocks.1.attn.wo", {64, 96});
  expect_tensor("model.layers.0.self_attn.q_norm.weight", "blocks.0.attn.q_norm.weight", {24});
  expect_tensor("model.layers.1.self_attn.k_norm.weight", "blocks.1.attn.k_norm.weight", {24});
  expect_tensor("model.layers.0.mlp.gate_proj.weight", "blocks.0.mlp.w_gate", {96, 64});
  expect_tensor("model.layers.0.input_layernorm.weight", "blocks.0.attn_norm.weight", {64});
  expect_tensor("lm_head.weight", "lm_head.weight", {61, 64});
  const json j = config_of(tmp / "hf");
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["architectures"], json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(j["head_dim"], 24);
  EXPECT_EQ(j["num_attention_heads"], 4);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["hidden_size"], 64);
  EXPECT_EQ(j["intermediate_size"], 96);
  EXPECT_EQ(j["rope_theta"], 1e6);
  EXPECT_EQ(j["rms_norm_eps"], 1e-6);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_TRUE(j["rope_scaling"].is_null());
  EXPECT_EQ(j["use_sliding_window"], false);
  EXPECT_TRUE(j["sliding_window"].is_null());
  EXPECT_EQ(j["max_window_layers"], 2);
  EXPECT_EQ(j["layer_types"], json::array({"full_attention", "full_attention"}));
  EXPECT_FALSE(j.contains("mlp_bias"));  // Qwen3MLP has no bias switch
}

TEST(HfQwen3, ATiedQwen3WritesNoOutputAndReadsItsEmbedding) {
  config::ModelConfig c = hf_qwen3_config();
  c.tie_embeddings = true;
  const auto m = hf_test_model(c, 5);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  EXPECT_FALSE(load_safetensors((tmp / "hf" / "model.safetensors").string())
                   .tensors.contains("lm_head.weight"));
  EXPECT_EQ(config_of(tmp / "hf")["tie_word_embeddings"], true);
  EXPECT_EQ(import_hf((tmp / "hf").string(), c).size(), m->parameters().entries().size());
}

// A file without a key reads as Qwen3Config's default (head_dim 128, 32 kv heads, no sliding
// window, layer_types from use_sliding_window); sliding-window layers are refused by key.
TEST(HfQwen3, ImportReadsQwen3ConfigsDefaultsAndRefusesSlidingWindows) {
  const config::ModelConfig c = hf_qwen3_config();
  TempDir tmp;
  const fs::path hf = tmp / "hf";
  export_hf(hf.string(), c, hf_test_model(c, 6)->parameters().parameters());
  // An older transformers' file: no layer_types, no sliding-window keys.
  EXPECT_NO_THROW(import_hf(with_config(hf, tmp / "old",
                                        [](json& j) {
                                          j.erase("layer_types");
                                          j.erase("use_sliding_window");
                                          j.erase("sliding_window");
                                          j.erase("max_window_layers");
                                        })
                                .string(),
                            c));
  // A window that no layer reaches (max_window_layers = the depth) is full attention too, as
  // Qwen3Config derives layer_types; use_sliding_window itself must stay false here.
  std::string e = import_error(
      with_config(hf, tmp / "sliding", [](json& j) { j["use_sliding_window"] = true; }), c);
  EXPECT_NE(e.find("use_sliding_window = true"), std::string::npos) << e;
  e = import_error(
      with_config(hf, tmp / "types", [](json& j) { j["layer_types"][1] = "sliding_attention"; }),
      c);
  EXPECT_NE(e.find("layer_types = [\"full_attention\",\"sliding_attention\"]"), std::string::npos)
      << e;
  e = import_error(with_config(hf, tmp / "derived",
                               [](json& j) {
                                 j.erase("layer_types");
                                 j["use_sliding_window"] = true;
                                 j["sliding_window"] = 16;
                                 j["max_window_layers"] = 1;
                               }),
                   c);
  EXPECT_NE(e.find("use_sliding_window"), std::string::npos) << e;
  // Absent head_dim is 128 (not hidden / heads = 16), absent kv heads 32, null kv heads the
  // query heads'.
  e = import_error(with_config(hf, tmp / "hd", [](json& j) { j.erase("head_dim"); }), c);
  EXPECT_NE(e.find("head_dim = 128, but model.head_dim = 24"), std::string::npos) << e;
  e = import_error(with_config(hf, tmp / "kv", [](json& j) { j.erase("num_key_value_heads"); }), c);
  EXPECT_NE(e.find("num_key_value_heads = 32, but model.n_kv_heads = 2"), std::string::npos) << e;
  const fs::path null_kv =
      with_config(hf, tmp / "null_kv", [](json& j) { j["num_key_value_heads"] = nullptr; });
  e = import_error(null_kv, c);
  EXPECT_NE(e.find("num_key_value_heads = 4, but model.n_kv_heads = 2"), std::string::npos) << e;
  // A Llama folder is not a Qwen 3.
  e = import_error(with_config(hf, tmp / "llama", [](json& j) { j["model_type"] = "llama"; }), c);
  EXPECT_NE(e.find("model_type = \"llama\", but this model exports as \"qwen3\""),
            std::string::npos)
      << e;
}

// head_dim is the decoder's: a Llama with heads wider than d_model / n_heads exports it as
// LlamaForCausalLM's head_dim; q/k norms have no Llama or GPT-2 tensors, nor has head_dim GPT-2.
TEST(HfQwen3, OtherLayoutsTakeHeadDimAndRefuseQkNorm) {
  config::ModelConfig llama = hf_llama_config();
  llama.head_dim = 32;  // 4 heads of 32 beside d_model 64
  const auto m = hf_test_model(llama, 7);
  TempDir tmp;
  export_hf((tmp / "llama").string(), llama, m->parameters().parameters());
  EXPECT_EQ(config_of(tmp / "llama")["head_dim"], 32);
  EXPECT_EQ(load_safetensors((tmp / "llama" / "model.safetensors").string())
                .at("model.layers.0.self_attn.q_proj.weight")
                .shape(),
            (Shape{128, 64}));
  EXPECT_EQ(import_hf((tmp / "llama").string(), llama).size(), m->parameters().entries().size());
  llama.qk_norm = true;
  std::string e = error_of([&] { hf_layout_of(llama); });
  EXPECT_NE(e.find("model.qk_norm = true has no Llama layout"), std::string::npos) << e;
  config::ModelConfig gpt2 = hf_gpt2_config();
  gpt2.head_dim = 24;  // 4 heads of 24 beside n_embd 48
  e = error_of([&] { hf_layout_of(gpt2); });
  EXPECT_NE(e.find("head_dim = 24"), std::string::npos) << e;
  EXPECT_NE(e.find("fit no Hugging Face layout"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::io

namespace mixprec::io {
namespace {

// Every layout's rope_scaling check reads max_position_embeddings through the one normaliser:
// a string there is left for nothing to choke on (Qwen 3's own copy once threw the JSON
// library's type_error from it).
TEST(HfQwen3, AStringMaxPositionEmbeddingsReachesNoJsonException) {
  for (const config::ModelConfig& c : {hf_qwen3_config(), hf_deepseek_v3_config()}) {
    SCOPED_TRACE(c.kind);
    const auto m = hf_test_model(c, 12);
    TempDir tmp;
    export_hf((tmp / "hf").string(), c, m->parameters().parameters(), {}, m->buffers());
    const fs::path d =
        with_config(tmp / "hf", tmp / "bad", [](json& j) { j["max_position_embeddings"] = "x"; });
    EXPECT_EQ(import_error(d, c), "");
  }
}

}  // namespace
}  // namespace mixprec::io
