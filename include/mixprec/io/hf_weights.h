// Hugging Face weights in and out for the transformer family: Llama (LlamaForCausalLM) for
// RMSNorm + SwiGLU + RoPE models without biases (kind llama3, or gpt configured so), GPT-2
// (GPT2LMHeadModel) for LayerNorm + GELU + learned-position models. One table per layout maps
// our parameter names to Hugging Face's (GPT-2: Conv1D weights stored [in, out], q/k/v fused
// into c_attn) and our config keys to config.json's.
//
// RoPE: our rope() rotates the halves (i, i + Dh/2) of each head, which is Hugging Face's
// layout, so q and k rows go across as they are. (Meta's and torchtitan's checkpoints rotate
// interleaved pairs (2i, 2i + 1); HF's conversion script permutes their q/k rows into this
// layout, and a model trained here needs no such permutation.)
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/config/train_config.h"
#include "mixprec/optim/parameter.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::io {

enum class HfLayout { llama, gpt2 };
const char* hf_layout_name(HfLayout layout);  // "llama" | "gpt2" (config.json's model_type)

// The layout a model exports to; an Error naming the model key that fits neither.
HfLayout hf_layout_of(const config::ModelConfig& model);

struct HfExportOptions {
  DType dtype = DType::f32;                  // f32, or bf16 (masters rounded to nearest even)
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default max_shard_size, "5GB"
};

// config.json for the model, with weights stored in `dtype`.
std::string hf_config_json(const config::ModelConfig& model, DType dtype);

// Writes the masters of `params` (the model's, by our names) as a Hugging Face folder
// (write_hf_folder: `dir` must be new or empty). GPT-2 without model.bias gets zero biases.
void export_hf(const std::string& dir, const config::ModelConfig& model,
               const optim::ParamList& params, const HfExportOptions& options = {});

// Reads a Hugging Face folder for a model configured as `model`: config.json must describe
// the same architecture (an Error names the first config.json key that differs, beside the
// model key), and every weight must be there, with its shape, finite, and nothing else but
// the buffers older exports carry (GPT-2's attn.bias / attn.masked_bias, Llama's
// rotary_emb.inv_freq). Returns the model's parameters as a checkpoint's "model.<name>"
// entries in f32 (exact from F32, BF16 and F16), for restore_training_state.
TensorMap import_hf(const std::string& dir, const config::ModelConfig& model);

}  // namespace mixprec::io
