// DeepSeek-V3 as Hugging Face's DeepseekV3ForCausalLM: export then import gives the masters and
// the expert biases back bit for bit, from stacked or per-expert weights; each routed expert is
// a tensor of its own on disk; the RoPE rows are DeepSeek's interleaved pairs; config.json has
// DeepseekV3Config's keys; imports skip multi-token prediction layers, and refuse what the
// model cannot be (softmax scores, dropped tokens, biases a model without them would lose).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/io/hf_folder.h"
#include "mixprec/io/hf_weights.h"
#include "mixprec/models/parameter_set.h"
#include "support/hf_testing.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

using namespace mixprec::testing;
namespace fs = std::filesystem;
using nlohmann::json;

// The model's masters and buffers as a checkpoint names them.
TensorMap state_of(models::Model& m) {
  TensorMap out;
  for (const auto& [name, p] : m.parameters().entries())
    out.emplace(kModelPrefix + name, p->master());
  for (const auto& [name, b] : m.buffers()) out.emplace(kBufferPrefix + name, b);
  return out;
}

void export_model(const fs::path& dir, const config::ModelConfig& c, models::Model& m) {
  export_hf(dir.string(), c, m.parameters().parameters(), {}, m.buffers());
}

TEST(HfDeepSeekV3, RoundTripIsBitExactForBothExpertLayouts) {
  config::ModelConfig skip = hf_deepseek_v3_config(24);
  skip.moe.idle_experts = "skip";
  for (const config::ModelConfig& c : {hf_deepseek_v3_config(), skip}) {
    SCOPED_TRACE(c.moe.idle_experts);
    const auto m = hf_test_model(c, 3);
    TempDir tmp;
    export_model(tmp / "hf", c, *m);
    const TensorMap back = import_hf((tmp / "hf").string(), c);
    const TensorMap ours = state_of(*m);
    ASSERT_EQ(back.size(), ours.size());
    for (const auto& [name, t] : ours) EXPECT_TRUE(same_bits(back.at(name), t)) << name;
  }
  // Stacked and per-expert models of the same weights write the same folder.
  const config::ModelConfig stacked = hf_deepseek_v3_config();
  config::ModelConfig per_expert = stacked;
  per_expert.moe.idle_experts = "skip";
  const auto a = hf_test_model(stacked, 4);
  TempDir tmp;
  export_model(tmp / "a", stacked, *a);
  const auto b = hf_test_model(per_expert, 5);
  restore_training_state(import_hf((tmp / "a").string(), per_expert),
                         {b->parameters().parameters(), nullptr, nullptr, b->buffers()});
  export_model(tmp / "b", per_expert, *b);
  const HfCheckpoint fa = read_hf_folder((tmp / "a").string());
  const HfCheckpoint fb = read_hf_folder((tmp / "b").string());
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) EXPECT_TRUE(same_bits(fb.tensors.at(name), t)) << name;
}

TEST(HfDeepSeekV3, NamesShapesRowsAndConfigAreHuggingFaces) {
  const config::ModelConfig c = hf_deepseek_v3_config(24);
  const auto m = hf_test_model(c, 6);
  TempDir tmp;
  export_model(tmp / "hf", c, *m);
  const HfCheckpoint f = read_hf_folder((tmp / "hf").string());
  auto shape = [&](const std::string& n) { return f.tensors.at(n).shape(); };
  const std::string l = "model.layers.1.";
  EXPECT_EQ(shape(l + "self_attn.q_a_proj.weight"), (Shape{24, 64}));
  EXPECT_EQ(shape(l + "self_attn.q_a_layernorm.weight"), (Shape{24}));
  EXPECT_EQ(shape(l + "self_attn.q_b_proj.weight"), (Shape{4 * 24, 24}));
  EXPECT_EQ(shape(l + "self_attn.kv_a_proj_with_mqa.weight"), (Shape{32 + 8, 64}));
  EXPECT_EQ(shape(l + "self_attn.kv_a_layernorm.weight"), (Shape{32}));
  EXPECT_EQ(shape(l + "self_attn.kv_b_proj.weight"), (Shape{4 * 28, 32}));
  EXPECT_EQ(shape(l + "self_attn.o_proj.weight"), (Shape{64, 4 * 12}));
  EXPECT_EQ(shape(l + "mlp.gate.weight"), (Shape{8, 64}));
  EXPECT_EQ(shape(l + "mlp.gate.e_score_correction_bias"), (Shape{8}));
  EXPECT_EQ(shape(l + "mlp.experts.7.down_proj.weight"), (Shape{64, 32}));
  EXPECT_EQ(shape(l + "mlp.shared_experts.up_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(shape("model.layers.0.mlp.up_proj.weight"), (Shape{128, 64}));  // dense
  EXPECT_FALSE(f.tensors.contains(l + "self_attn.q_proj.weight"));
  EXPECT_EQ(f.tensors.size(), 1 + 2 * (7 + 2 + 2 + 8 * 3 + 3) + (7 + 2 + 3) + 2);

  // Expert 5's gate is slice 5 of the stacked weight; the bias is the expert-bias buffer.
  const models::ParameterSet& p = m->parameters();
  EXPECT_TRUE(same_bits(f.tensors.at(l + "mlp.experts.5.gate_proj.weight"),
                        p.at("blocks.1.moe.experts.w_gate").master().select(0, 5).contiguous()));
  for (const auto& [name, b] : m->buffers()) {
    if (name == "blocks.1.moe.expert_bias") {
      EXPECT_TRUE(same_bits(f.tensors.at(l + "mlp.gate.e_score_correction_bias"), b));
    }
  }
  // RoPE rows: file row nope + j of head h is our row nope + (j % 2)·4 + j / 2 (rope 8).
  const std::vector<double> file = f.tensors.at(l + "self_attn.q_b_proj.weight").to_doubles();
  const std::vector<double> ours = p.at("blocks.1.attn.wq_b").master().to_doubles();
  const int64_t cols = 24, qk = 24, nope = 16;
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t j = 0; j < qk; ++j) {
      const int64_t row = h * qk + j;
      const int64_t our_row =
          j < nope ? row : h * qk + nope + ((j - nope) % 2) * 4 + (j - nope) / 2;
      EXPECT_EQ(file[static_cast<size_t>(row * cols)], ours[static_cast<size_t>(our_row * cols)])
          << "head " << h << " row " << j;
    }
  const std::vector<double> kv =
      f.tensors.at(l + "self_attn.kv_a_proj_with_mqa.weight").to_doubles();
  const std::vector<double> kv_ours = p.at("blocks.1.attn.wkv_a").master().to_doubles();
  EXPECT_EQ(kv[33 * 64], kv_ours[36 * 64]);  // rope row 1 is our rope row 4
  EXPECT_EQ(kv[31 * 64], kv_ours[31 * 64]);  // the latent's rows as they are

  const json j = json::parse(f.config_json);
  EXPECT_EQ(j["model_type"], "deepseek_v3");
  EXPECT_EQ(j["architectures"], json({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(j["q_lora_rank"], 24);
  EXPECT_EQ(j["kv_lora_rank"], 32);
  EXPECT_EQ(j["qk_nope_head_dim"], 16);
  EXPECT_EQ(j["qk_rope_head_dim"], 8);
  EXPECT_EQ(j["v_head_dim"], 12);
  EXPECT_EQ(j["n_routed_experts"], 8);
  EXPECT_EQ(j["n_shared_experts"], 1);
  EXPECT_EQ(j["num_experts_per_tok"], 3);
  EXPECT_EQ(j["first_k_dense_replace"], 1);
  EXPECT_EQ(j["n_group"], 4);
  EXPECT_EQ(j["topk_group"], 2);
  EXPECT_EQ(j["routed_scaling_factor"], 2.5);
  EXPECT_EQ(j["intermediate_size"], 128);
  EXPECT_EQ(j["moe_intermediate_size"], 32);
  EXPECT_EQ(j["rope_interleave"], true);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(j["rope_scaling"]["factor"], 4.0);
  // One wq: q_lora_rank null, as DeepseekV3Config reads a single q_proj.
  TempDir one;
  const config::ModelConfig single = hf_deepseek_v3_config();
  export_model(one / "hf", single, *hf_test_model(single, 7));
  EXPECT_TRUE(
      json::parse(read_hf_folder((one / "hf").string()).config_json)["q_lora_rank"].is_null());
}

std::string import_error(const fs::path& dir, const config::ModelConfig& c) {
  return error_of([&] { import_hf(dir.string(), c); });
}

// A copy of `from` with `extra` tensors added and config.json changed by `change`.
template <class F>
fs::path altered(const fs::path& from, const fs::path& to, const TensorList& extra, F change) {
  HfCheckpoint f = read_hf_folder(from.string());
  json j = json::parse(f.config_json);
  change(j);
  TensorList tensors(f.tensors.begin(), f.tensors.end());
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  write_hf_folder(to.string(), j.dump(), tensors, uint64_t{1} << 40);
  return to;
}

TEST(HfDeepSeekV3, ImportSkipsPredictionLayersAndRefusesWhatTheModelCannotBe) {
  const config::ModelConfig c = hf_deepseek_v3_config();
  const auto m = hf_test_model(c, 8);
  TempDir tmp;
  export_model(tmp / "hf", c, *m);
  auto same = [](json&) {};
  // DeepSeek-V3's file carries its multi-token prediction layer after the model's.
  const fs::path mtp =
      altered(tmp / "hf", tmp / "mtp",
              {{"model.layers.3.eh_proj.weight", Tensor::zeros({64, 128})},
               {"model.layers.3.self_attn.o_proj.weight", Tensor::zeros({64, 48})}},
              [](json& j) { j["num_nextn_predict_layers"] = 1; });
  EXPECT_EQ(import_hf(mtp.string(), c).size(), import_hf((tmp / "hf").string(), c).size());
  const fs::path stray =
      altered(tmp / "hf", tmp / "stray",
              {{"model.layers.1.mlp.experts.8.up_proj.weight", Tensor::zeros({32, 64})}}, same);
  EXPECT_NE(import_error(stray, c).find("'model.layers.1.mlp.experts.8.up_proj.weight'"),
            std::string::npos);
  // A model without expert biases cannot take a file's nonzero ones.
  config::ModelConfig unbiased = c;
  unbiased.moe.load_balance_coeff = 0;
  const std::string e = import_error(tmp / "hf", unbiased);
  EXPECT_NE(e.find("e_score_correction_bias' holds nonzero values, and this model has no expert "
                   "biases (model.moe.load_balance_coeff = 0)"),
            std::string::npos)
      << e;
  // q_lora_rank: null is one q_proj, absent is DeepseekV3Config's 1536.
  const fs::path absent =
      altered(tmp / "hf", tmp / "absent", {}, [](json& j) { j.erase("q_lora_rank"); });
  EXPECT_NE(import_error(absent, c).find("q_lora_rank = 1536, but model.mla.q_lora_rank = null"),
            std::string::npos)
      << import_error(absent, c);
  const fs::path groups =
      altered(tmp / "hf", tmp / "groups", {}, [](json& j) { j["topk_group"] = 3; });
  EXPECT_NE(import_error(groups, c).find("topk_group = 3, but model.moe.n_limited_groups = 2"),
            std::string::npos);
  // What DeepseekV3ForCausalLM cannot express.
  config::ModelConfig softmax = c;
  softmax.moe.score_func = "softmax";
  EXPECT_NE(error_of([&] { hf_layout_of(softmax); }).find("model.moe.score_func = \"softmax\""),
            std::string::npos);
  config::ModelConfig dropping = c;
  dropping.moe.capacity_factor = 1.25;
  EXPECT_NE(error_of([&] { hf_layout_of(dropping); }).find("model.moe.capacity_factor = 1.25"),
            std::string::npos);
  // No group limit is one group of all experts.
  config::ModelConfig ungrouped = c;
  ungrouped.moe.n_expert_groups = 0;
  ungrouped.moe.n_limited_groups = 0;
  const json j = json::parse(hf_config_json(ungrouped, DType::f32));
  EXPECT_EQ(j["n_group"], 1);
  EXPECT_EQ(j["topk_group"], 1);
}

}  // namespace
}  // namespace mixprec::io
