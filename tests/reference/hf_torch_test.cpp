// Hugging Face weights against an independent PyTorch model (tests/reference/hf_models.py: a
// plain-PyTorch Llama, GPT-2, Qwen 3 and DeepSeek-V3 written from Hugging Face's math, computing in
// f64; transformers is not in Debian). Our export loads there and gives our logits; weights that
// PyTorch wrote import here and give its logits. Skipped when python3 cannot import torch (CI
// installs Debian's python3-torch and runs it).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mixprec/io/hf_weights.h"
#include "mixprec/io/safetensors.h"
#include "support/hf_testing.h"
#include "support/op_testing.h"
#include "support/temp_files.h"
#include "support/torch_script.h"

namespace mixprec::io {
namespace {

using namespace mixprec::testing;
namespace fs = std::filesystem;

std::string script() {
  return reference_script("hf_models.py");
}

// Runs hf_models.py with `args`; fails the test with its output when it exits non-zero.
void run_script(const std::string& args, const fs::path& log) {
  run_python(script(), args, log);
}

// PyTorch's logits (f64) for `tokens` from the Hugging Face folder `dir`.
Tensor torch_logits(const fs::path& dir, const Tensor& tokens, const TempDir& tmp) {
  const fs::path in = tmp / "tokens.safetensors", out = tmp / "logits.safetensors";
  save_safetensors(in.string(), {{"tokens", tokens}});
  run_script("logits " + shell_quoted(dir.string()) + " " + shell_quoted(in.string()) + " " +
                 shell_quoted(out.string()),
             tmp / "logits.log");
  return load_safetensors(out.string()).at("logits_f64");
}

// max |a - b| / max |b|: the error relative to the logits' scale.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

struct Family {
  const char* name;  // hf_models.py's --family
  config::ModelConfig config;
};

std::vector<Family> families() {
  config::ModelConfig tied_llama = hf_llama_config();
  tied_llama.tie_embeddings = true;
  tied_llama.n_kv_heads = 1;  // multi-query attention
  tied_llama.rope_theta = 10000.0;
  // Llama 3.1's RoPE scaling with a short original context, so that frequencies of all three
  // bands turn within the 24 test positions (head size 16, theta 500000: wavelengths 6.3
  // (kept, < 64 / 4), 32 (blended), 167 and up (slowed 8x, > 64)); at 8192 they barely move.
  const config::ModelConfig scaled_llama = hf_llama31_config(64);
  // Qwen 3: GQA with heads of 24 beside d_model 64 (q 96 wide), untied; tied, multi-query,
  // with heads of 8 (q 32 wide, narrower than the model) and theta 10000.
  config::ModelConfig tied_qwen3 = hf_qwen3_config();
  tied_qwen3.tie_embeddings = true;
  tied_qwen3.n_kv_heads = 1;
  tied_qwen3.head_dim = 8;
  tied_qwen3.rope_theta = 10000.0;
  // DeepSeek-V3: one wq, and low-rank queries with stacked experts; per-expert weights.
  config::ModelConfig skip_deepseek = hf_deepseek_v3_config(24);
  skip_deepseek.moe.idle_experts = "skip";
  return {{"llama", hf_llama_config()},
          {"llama", tied_llama},
          {"llama", scaled_llama},
          {"gpt2", hf_gpt2_config()},
          {"qwen3", hf_qwen3_config()},
          {"qwen3", tied_qwen3},
          {"deepseek_v3", hf_deepseek_v3_config()},
          {"deepseek_v3", hf_deepseek_v3_config(24)},
          {"deepseek_v3", skip_deepseek}};
}

// f32 export: PyTorch in f64 on the same weights is within f32 rounding of our f32 forward.
// bf16 export: the weights are rounded once, so PyTorch's logits move by that rounding from
// ours, and our model imported from the same bf16 file gives PyTorch's logits again.
TEST(HfTorchAgreement, OurExportGivesOurLogitsInPyTorch) {
  if (!torch_available()) GTEST_SKIP() << python() << " cannot import torch (python3-torch)";
  for (const Family& f : families()) {
    SCOPED_TRACE(models::make_model(f.config)->describe());
    const auto model = hf_test_model(f.config, 21);
    const Tensor tokens = hf_test_tokens(2, 24, f.config.vocab_size);
    const Tensor ours = logits_of(*model, tokens);
    TempDir tmp;
    const auto& buffers = model->buffers();  // DeepSeek-V3's expert biases
    export_hf((tmp / "f32").string(), f.config, model->parameters().parameters(), {}, buffers);
    const double f32_error = relative_error(ours, torch_logits(tmp / "f32", tokens, tmp));
    EXPECT_LE(f32_error, 1e-5);

    export_hf((tmp / "bf16").string(), f.config, model->parameters().parameters(),
              {.dtype = DType::bf16, .max_shard_bytes = 30000}, buffers);  // sharded, too
    const Tensor torch_bf16 = torch_logits(tmp / "bf16", tokens, tmp);
    const double rounding = relative_error(ours, torch_bf16);
    EXPECT_GT(rounding, 1e-4);  // bf16 weights (8 bits) really moved the logits
    // By about their rounding, 2^-9 relative per weight; with experts, rounding may flip a
    // token's pick (near-tied scores) and move its logits by far more, so only the reimport
    // below bounds them.
    const bool routed = f.config.kind == "deepseek_v3";
    if (!routed) {
      EXPECT_LT(rounding, 3e-2);
    }
    const auto reimported = hf_test_model(f.config, 22);
    restore_training_state(
        import_hf((tmp / "bf16").string(), f.config),
        {reimported->parameters().parameters(), nullptr, nullptr, reimported->buffers()});
    EXPECT_LE(relative_error(logits_of(*reimported, tokens), torch_bf16), 1e-5);
    std::cout << f.name << ": f32 export " << f32_error << ", bf16 export " << rounding
              << " from ours\n";
  }
}

// PyTorch writes random weights in Hugging Face's layout (f32 in one file, bf16 in shards);
// we import them and give PyTorch's logits.
TEST(HfTorchAgreement, PyTorchWeightsImportAndGiveItsLogits) {
  if (!torch_available()) GTEST_SKIP() << python() << " cannot import torch (python3-torch)";
  for (const Family& f : families()) {
    SCOPED_TRACE(models::make_model(f.config)->describe());
    for (const char* dtype : {"f32", "bf16"}) {
      TempDir tmp;
      const fs::path dir = tmp / "torch";
      const std::string config = hf_config_json(f.config, DType::f32);
      run_script(std::string("init ") + shell_quoted(dir.string()) + " --family " + f.name +
                     " --config " + shell_quoted(config) + " --seed 7 --dtype " + dtype +
                     (std::string(dtype) == "bf16" ? " --shard-bytes 30000" : ""),
                 tmp / "init.log");
      const auto model = hf_test_model(f.config, 23);
      restore_training_state(
          import_hf(dir.string(), f.config),
          {model->parameters().parameters(), nullptr, nullptr, model->buffers()});
      const Tensor tokens = hf_test_tokens(2, 24, f.config.vocab_size);
      EXPECT_LE(relative_error(logits_of(*model, tokens), torch_logits(dir, tokens, tmp)), 1e-5)
          << dtype;
    }
  }
}

}  // namespace
}  // namespace mixprec::io
