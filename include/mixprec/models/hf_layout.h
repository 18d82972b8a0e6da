// A family's Hugging Face adapter as data (torchtitan's state-dict adapter): which tensors a
// Hugging Face checkpoint of the model holds and which of our parameters form each, and which
// config.json keys describe it. io/hf_weights.h reads and writes folders by these tables, in
// both directions, so a layout is written once.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/tensor/shape.h"

namespace mixprec::models {

// Rows of one of our parameters inside a Hugging Face tensor; no name: zeros (a bias our
// model does not have; `absent` says why, for a file whose values are not zero).
struct HfPart {
  std::string ours;
  int64_t rows;
  // >= 0: slice `stacked` along dim 0 of ours (one expert of stacked experts, [E, out, in]),
  // which the file keeps as a tensor of its own.
  int64_t stacked = -1;
  bool buffer = false;  // ours names a model buffer (Model::buffers), not a parameter
  const char* absent = "this model has no biases (model.bias = false)";
};

// A Hugging Face tensor: our parts stacked along the output dim (GPT-2's c_attn stacks q, k,
// v), stored [in, out] when conv1d (GPT-2's Conv1D); cols 0 for a vector.
struct HfLink {
  std::string hf;
  std::vector<HfPart> parts;
  int64_t cols = 0;
  bool conv1d = false;
  // Empty: the parts' rows in order. Else the file's row i is our row row_order[i] (DeepSeek's
  // interleaved RoPE rows against our rotate-half ones).
  std::vector<int64_t> row_order{};
  int64_t rows() const {
    int64_t r = 0;
    for (const HfPart& p : parts) r += p.rows;
    return r;
  }
  Shape shape() const {
    if (cols == 0) return {rows()};
    return conv1d ? Shape{cols, rows()} : Shape{rows(), cols};
  }
};

// A config.json key: its value for our model and the model key it comes from; `absent` is
// Hugging Face's default when the file lacks the key (null: required); unchecked keys are
// written only (max_position_embeddings: RoPE models run at any length up to ours).
// `normalize` (when set) brings a file's value (and the whole file, for keys whose defaults
// depend on others) to the form `ours` is written in before they are compared.
struct HfKey {
  const char* hf;
  nlohmann::json ours;
  const char* model_key;
  nlohmann::json absent;
  bool checked = true;
  nlohmann::json (*normalize)(const nlohmann::json& value, const nlohmann::json& file) = nullptr;
};

struct HfLayout {
  std::string model_type;    // config.json's "model_type" ("llama")
  std::string architecture;  // its "architectures" entry ("LlamaForCausalLM")
  std::vector<HfLink> links;
  std::vector<HfKey> keys;
  std::string embedding;  // the input embedding's tensor (a tied lm_head must equal it)
  // Files may name tensors without this prefix (GPT-2's "transformer."); "" = none.
  std::string optional_prefix;
  // "model.layers.": a file's tensors of layers from model.n_layers on are skipped, as
  // Hugging Face's model skips them (DeepSeek-V3's multi-token prediction layers); "" = none.
  std::string extra_layers{};
};

}  // namespace mixprec::models
