// Hugging Face folders: export then import gives the masters back bit for bit (f32) or
// rounded once (bf16), in one file or in shards with an index; the names, layouts (GPT-2's
// Conv1D and fused c_attn) and config.json keys are Hugging Face's; mismatched configs and
// hostile folders are refused naming the file and the key or tensor.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/io/hf_folder.h"
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

// The model's masters as a checkpoint's "model." entries.
TensorMap masters_of(const models::Model& m) {
  TensorMap out;
  for (const auto& [name, p] : m.parameters().entries())
    out.emplace(kModelPrefix + name, p->master());
  return out;
}

void expect_same_entries(const TensorMap& got, const TensorMap& want, DType rounded_to) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    const Tensor expect = w.to(rounded_to).to(DType::f32);
    EXPECT_TRUE(same_bits(got.at(name), expect)) << name;
  }
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::string import_error(const fs::path& dir, const config::ModelConfig& c) {
  return error_of([&] { import_hf(dir.string(), c); });
}

TEST(HfWeights, RoundTripIsBitExactInF32AndRoundsOnceInBf16) {
  for (const config::ModelConfig& c : {hf_llama_config(), hf_gpt2_config()}) {
    const auto m = hf_test_model(c, 3);
    for (DType dt : {DType::f32, DType::bf16}) {
      TempDir tmp;
      const fs::path dir = tmp / "hf";
      export_hf(dir.string(), c, m->parameters().parameters(), {.dtype = dt});
      EXPECT_TRUE(fs::exists(dir / "config.json"));
      EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
      EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
      const SafetensorsFile file = load_safetensors((dir / "model.safetensors").string());
      for (const auto& [name, t] : file.tensors) EXPECT_EQ(t.dtype(), dt) << name;
      EXPECT_EQ(file.metadata.at("format"), "pt");
      expect_same_entries(import_hf(dir.string(), c), masters_of(*m), dt);
    }
  }
}

TEST(HfWeights, LlamaNamesShapesAndConfigAreHuggingFaces) {
  const config::ModelConfig c = hf_llama_config();
  const auto m = hf_test_model(c, 4);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  const SafetensorsFile f = load_safetensors((tmp / "hf" / "model.safetensors").string());
  EXPECT_EQ(f.tensors.size(), 2u + 2u * 9u + 1u);  // embedding, norm, lm_head; 9 per layer
  const auto& P = m->parameters();
  EXPECT_TRUE(same_bits(f.at("model.embed_tokens.weight"), P.at("tok_emb.weight").master()));
  EXPECT_TRUE(
      same_bits(f.at("model.layers.1.self_attn.k_proj.weight"), P.at("blocks.1.attn.wk").master()));
  EXPECT_EQ(f.at("model.layers.1.self_attn.k_proj.weight").shape(), (Shape{32, 64}));  // 2 kv heads
  EXPECT_TRUE(
      same_bits(f.at("model.layers.0.mlp.gate_proj.weight"), P.at("blocks.0.mlp.w_gate").master()));
  EXPECT_TRUE(
      same_bits(f.at("model.layers.0.mlp.down_proj.weight"), P.at("blocks.0.mlp.w_down").master()));
  EXPECT_TRUE(same_bits(f.at("model.layers.0.post_attention_layernorm.weight"),
                        P.at("blocks.0.mlp_norm.weight").master()));
  EXPECT_TRUE(same_bits(f.at("lm_head.weight"), P.at("lm_head.weight").master()));
  const json j = read_json(tmp / "hf" / "config.json");
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["intermediate_size"], 256);
  EXPECT_EQ(j["rope_theta"], 500000.0);
  EXPECT_EQ(j["rms_norm_eps"], 1e-5);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["torch_dtype"], "float32");
}

TEST(HfWeights, Gpt2StoresConv1dTransposedWithQkvFused) {
  const config::ModelConfig c = hf_gpt2_config();
  const auto m = hf_test_model(c, 5);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  const SafetensorsFile f = load_safetensors((tmp / "hf" / "model.safetensors").string());
  EXPECT_FALSE(f.tensors.contains("lm_head.weight"));  // tied, as GPT-2 is
  const Tensor c_attn = f.at("transformer.h.1.attn.c_attn.weight");
  ASSERT_EQ(c_attn.shape(), (Shape{48, 144}));  // [in, 3·out]
  const auto& P = m->parameters();
  // Column block 1 of c_attn is wkᵀ: element (i, 48 + o) = wk[o, i].
  const Tensor wk = P.at("blocks.1.attn.wk").master();
  EXPECT_EQ(c_attn.to_doubles()[5 * 144 + 48 + 7], wk.to_doubles()[7 * 48 + 5]);
  const Tensor bias = f.at("transformer.h.1.attn.c_attn.bias");
  EXPECT_EQ(bias.to_doubles()[96 + 3], P.at("blocks.1.attn.wv_bias").master().to_doubles()[3]);
  EXPECT_EQ(f.at("transformer.h.0.mlp.c_fc.weight").shape(), (Shape{48, 192}));
  EXPECT_EQ(f.at("transformer.h.0.mlp.c_proj.weight").shape(), (Shape{192, 48}));
  const json j = read_json(tmp / "hf" / "config.json");
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["activation_function"], "gelu");  // exact erf, not GPT-2's tanh "gelu_new"
  EXPECT_EQ(j["n_positions"], 32);
  EXPECT_EQ(j["n_inner"], 192);
}

TEST(HfWeights, Gpt2WithoutBiasesExportsZerosAndRefusesNonzeroOnes) {
  config::ModelConfig c = hf_gpt2_config();
  c.bias = false;
  const auto m = hf_test_model(c, 6);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  const SafetensorsFile f = load_safetensors((tmp / "hf" / "model.safetensors").string());
  for (double v : f.at("transformer.h.0.attn.c_attn.bias").to_doubles()) EXPECT_EQ(v, 0.0);
  expect_same_entries(import_hf((tmp / "hf").string(), c), masters_of(*m), DType::f32);
  // The model with biases reads the zeros; the one without refuses a nonzero bias.
  const auto with_bias = hf_test_model(hf_gpt2_config(), 7);
  export_hf((tmp / "biased").string(), hf_gpt2_config(), with_bias->parameters().parameters());
  const std::string e = import_error(tmp / "biased", c);
  EXPECT_NE(e.find("transformer.h.0.attn.c_attn.bias"), std::string::npos) << e;
  EXPECT_NE(e.find("holds nonzero values, and this model has no biases (model.bias = false)"),
            std::string::npos)
      << e;
}

TEST(HfWeights, ShardsPastTheLimitWithAnIndex) {
  const config::ModelConfig c = hf_llama_config();
  const auto m = hf_test_model(c, 8);
  TempDir tmp;
  const fs::path dir = tmp / "hf";
  export_hf(dir.string(), c, m->parameters().parameters(), {.max_shard_bytes = 40000});
  const json index = read_json(dir / "model.safetensors.index.json");
  const json& map = index["weight_map"];
  EXPECT_EQ(map.size(), 21u);
  std::set<std::string> files;
  uint64_t total = 0;
  for (const auto& [name, file] : map.items()) files.insert(file.get<std::string>());
  for (const std::string& file : files) {
    EXPECT_TRUE(file.starts_with("model-0")) << file;
    EXPECT_NE(file.find(fmt::format("-of-{:05d}.safetensors", files.size())), std::string::npos);
    const SafetensorsFile f = load_safetensors((dir / file).string());
    uint64_t bytes = 0;
    for (const auto& [name, t] : f.tensors) {
      EXPECT_EQ(map[name], file) << name;
      bytes += static_cast<uint64_t>(t.numel()) * 4;
    }
    // Under the limit, unless one tensor alone passes it (the 61 x 64 embedding does not).
    EXPECT_TRUE(bytes <= 40000 || f.tensors.size() == 1) << file << " " << bytes;
    total += bytes;
  }
  EXPECT_GT(files.size(), 3u);
  EXPECT_EQ(index["metadata"]["total_size"], total);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  expect_same_entries(import_hf(dir.string(), c), masters_of(*m), DType::f32);
}

TEST(HfWeights, ConfigJsonMustDescribeTheSameModel) {
  const config::ModelConfig c = hf_llama_config();
  const auto m = hf_test_model(c, 9);
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, m->parameters().parameters());
  struct Case {
    const char* field;
    config::ModelConfig model;
    const char* expect;
  };
  config::ModelConfig heads = c, theta = c, eps = c, tied = c, width = c;
  heads.n_kv_heads = 4;
  theta.rope_theta = 10000.0;
  eps.norm_eps = 1e-6;
  tied.tie_embeddings = true;
  width.vocab_size = 64;
  for (const Case& k :
       {Case{"kv", heads, "num_key_value_heads = 2, but model.n_kv_heads = 4"},
        Case{"theta", theta, "rope_theta = 500000.0, but model.rope_theta = 10000.0"},
        Case{"eps", eps, "rms_norm_eps = 1e-05, but model.norm_eps = 1e-06"},
        Case{"tied", tied, "tie_word_embeddings = false, but model.tie_embeddings"},
        Case{"vocab", width, "vocab_size = 61, but model.vocab_size = 64"}}) {
    const std::string e = import_error(tmp / "hf", k.model);
    EXPECT_NE(e.find(k.expect), std::string::npos) << k.field << ": " << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  }
  // config.json values of the wrong JSON type: refused naming the key, never a JSON library
  // exception.
  for (const std::string& bad :
       {std::string("\"model_type\": 5"), std::string("\"model_type\": null"),
        std::string("\"hidden_size\": \"64\"")}) {
    const fs::path d = tmp / ("bad" + std::to_string(bad.size()));
    fs::copy(tmp / "hf", d);
    json j = read_json(d / "config.json");
    const json patch = json::parse("{" + bad + "}");
    j.update(patch);
    write_file(d / "config.json", j.dump());
    const std::string e = import_error(d, c);
    EXPECT_NE(e.find("config.json"), std::string::npos) << bad << ": " << e;
    EXPECT_EQ(e.find("json.exception"), std::string::npos) << bad << ": " << e;
  }
  // max_position_embeddings is written only (RoPE models run at any length up to ours), but
  // the rope_scaling check reads it for yarn's default: a wrong type must not reach the JSON
  // library's exceptions either.
  {
    const fs::path d = tmp / "bad_max_positions";
    fs::copy(tmp / "hf", d);
    json j = read_json(d / "config.json");
    j["max_position_embeddings"] = "x";
    write_file(d / "config.json", j.dump());
    EXPECT_EQ(import_error(d, c), "");
  }
  // A GPT-2 folder is not a Llama.
  const auto g = hf_test_model(hf_gpt2_config(), 10);
  export_hf((tmp / "gpt2").string(), hf_gpt2_config(), g->parameters().parameters());
  const std::string e = import_error(tmp / "gpt2", c);
  EXPECT_NE(e.find("model_type = \"gpt2\", but this model exports as \"llama\""), std::string::npos)
      << e;
}

TEST(HfWeights, HostileFoldersAreRefusedNamingTheFault) {
  const config::ModelConfig c = hf_llama_config();
  const auto m = hf_test_model(c, 11);
  TempDir tmp;
  const fs::path good = tmp / "good";
  export_hf(good.string(), c, m->parameters().parameters(), {.max_shard_bytes = 40000});
  auto copy = [&](const char* name) {
    const fs::path dir = tmp / name;
    fs::copy(good, dir);
    return dir;
  };
  auto edit_index = [&](const fs::path& dir, auto&& change) {
    json index = read_json(dir / "model.safetensors.index.json");
    change(index);
    write_file(dir / "model.safetensors.index.json", index.dump());
  };
  // An index that climbs out of the folder.
  const fs::path climb = copy("climb");
  edit_index(climb,
             [](json& j) { j["weight_map"]["model.norm.weight"] = "../escape.safetensors"; });
  std::string e = import_error(climb, c);
  EXPECT_NE(e.find("'../escape.safetensors'"), std::string::npos) << e;
  // A tensor the index maps to another shard than the one holding it.
  const fs::path moved = copy("moved");
  edit_index(moved, [](json& j) {
    j["weight_map"]["model.norm.weight"] = j["weight_map"]["model.embed_tokens.weight"];
  });
  e = import_error(moved, c);
  EXPECT_NE(e.find("model.norm.weight"), std::string::npos) << e;
  // A missing tensor, a wrong shape, a NaN, an unknown tensor: single-file folders.
  auto single = [&](const char* name, auto&& change) {
    const fs::path dir = tmp / name;
    const HfCheckpoint hf = read_hf_folder(good.string());
    TensorList list(hf.tensors.begin(), hf.tensors.end());
    change(list);
    write_hf_folder(dir.string(), hf.config_json, list, 1ull << 40);
    return import_error(dir, c);
  };
  e = single("missing", [](TensorList& l) {
    std::erase_if(l, [](const auto& t) { return t.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_NE(e.find("lacks the tensor 'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << e;
  e = single("shape", [](TensorList& l) {
    for (auto& [name, t] : l)
      if (name == "model.layers.0.self_attn.k_proj.weight") t = Tensor::zeros({64, 64});
  });
  EXPECT_NE(e.find("'model.layers.0.self_attn.k_proj.weight' has shape [64, 64], the config needs "
                   "[32, 64]"),
            std::string::npos)
      << e;
  e = single("nan", [](TensorList& l) {
    for (auto& [name, t] : l)
      if (name == "model.norm.weight") {
        std::vector<double> v = t.to_doubles();
        v[3] = std::nan("");
        t = Tensor::from_doubles(v, t.shape(), DType::f32);
      }
  });
  EXPECT_NE(e.find("'model.norm.weight' holds a non-finite value"), std::string::npos) << e;
  e = single("extra",
             [](TensorList& l) { l.emplace_back("model.layers.9.x", Tensor::zeros({2})); });
  EXPECT_NE(e.find("holds the tensor 'model.layers.9.x'"), std::string::npos) << e;
  e = single("ints", [](TensorList& l) {
    for (auto& [name, t] : l)
      if (name == "model.norm.weight") t = Tensor::zeros({64}, DType::i32);
  });
  EXPECT_NE(e.find("has dtype i32"), std::string::npos) << e;
  // No config.json; a config.json that is not JSON; not a folder.
  const fs::path bare = copy("bare");
  fs::remove(bare / "config.json");
  EXPECT_NE(import_error(bare, c).find("config.json"), std::string::npos);
  write_file(bare / "config.json", "{\"model_type\": ");
  EXPECT_NE(import_error(bare, c).find("is not a JSON object"), std::string::npos);
  EXPECT_NE(import_error(good / "config.json", c).find("is not a folder"), std::string::npos);
}

TEST(HfWeights, ExportRefusesAnOccupiedFolderAndModelsWithoutALayout) {
  const config::ModelConfig c = hf_llama_config();
  const auto m = hf_test_model(c, 12);
  TempDir tmp;
  write_file(tmp / "taken" / "keep.txt", "someone's file");
  const std::string e =
      error_of([&] { export_hf((tmp / "taken").string(), c, m->parameters().parameters()); });
  EXPECT_NE(e.find("not an empty folder"), std::string::npos) << e;
  EXPECT_EQ(fs::directory_iterator(tmp / "taken")->path().filename(), "keep.txt");
  config::ModelConfig moe = c;
  moe.kind = "moe";
  EXPECT_NE(error_of([&] { hf_layout_of(moe); }).find("model.kind = \"moe\""), std::string::npos);
  config::ModelConfig mixed = c;
  mixed.kind = "gpt";
  mixed.norm = "layernorm";
  EXPECT_NE(error_of([&] { hf_layout_of(mixed); }).find("fit no Hugging Face layout"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::io
