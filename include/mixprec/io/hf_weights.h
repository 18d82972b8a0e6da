// Hugging Face weights in and out, by the model family's layout (models/hf_layout.h: its
// tensor names both ways and its config.json keys): the dense decoders export as Llama
// (LlamaForCausalLM) or GPT-2 (GPT2LMHeadModel), models/transformer/hf_layouts.h; qwen3 as
// Qwen3ForCausalLM, deepseek_v3 as DeepseekV3ForCausalLM (their folders under models/).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/config/train_config.h"
#include "mixprec/models/hf_layout.h"
#include "mixprec/optim/parameter.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::io {

// The layout a model exports to (its family's); an Error naming the model keys that have none.
models::HfLayout hf_layout_of(const config::ModelConfig& model);

struct HfExportOptions {
  DType dtype = DType::f32;                  // f32, or bf16 (masters rounded to nearest even)
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default max_shard_size, "5GB"
};

// config.json for the model, with weights stored in `dtype`.
std::string hf_config_json(const config::ModelConfig& model, DType dtype);

// Writes the masters of `params` (the model's, by our names) and the model's `buffers` (an
// MoE's expert biases, which DeepSeek-V3's router keeps as e_score_correction_bias) as a
// Hugging Face folder (write_hf_folder: `dir` must be new or empty). GPT-2 without model.bias
// gets zero biases.
using NamedBuffers = std::vector<std::pair<std::string, Tensor>>;
void export_hf(const std::string& dir, const config::ModelConfig& model,
               const optim::ParamList& params, const HfExportOptions& options = {},
               const NamedBuffers& buffers = {});

// Reads a Hugging Face folder for a model configured as `model`: config.json must describe
// the same architecture (an Error names the first config.json key that differs, beside the
// model key), and every weight must be there, with its shape, finite, and nothing else but
// the buffers older exports carry (GPT-2's attn.bias / attn.masked_bias, Llama's
// rotary_emb.inv_freq). Returns the model's parameters as a checkpoint's "model.<name>"
// entries (its buffers the layout holds as "buffer.<name>") in f32 (exact from F32, BF16 and
// F16), for restore_training_state.
TensorMap import_hf(const std::string& dir, const config::ModelConfig& model);

}  // namespace mixprec::io
