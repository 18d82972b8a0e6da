// The model families (registry.h): one line each.
#include "mixprec/models/registry.h"

#include <array>

#include "mixprec/core/error.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models {
namespace {

template <class Family>
std::unique_ptr<Model> make(const config::ModelConfig& config) {
  return std::make_unique<Family>(config);
}

constexpr std::array kFamilies{
    ModelFamily{"moe", "decoder-only transformer with a mixture of experts in every block's MLP",
                make<Transformer>},
    ModelFamily{"gpt", "the same transformer with a dense MLP (GPT-2 / nanoGPT shape)",
                make<Transformer>},
    ModelFamily{"llama3",
                "torchtitan's Llama 3: RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases",
                make<Transformer>},
};

}  // namespace

std::span<const ModelFamily> model_families() {
  return kFamilies;
}

std::unique_ptr<Model> make_model(const config::ModelConfig& config) {
  std::string kinds;
  for (const ModelFamily& f : kFamilies) {
    if (config.kind == f.kind) return f.make(config);
    kinds += std::string(kinds.empty() ? "" : ", ") + f.kind;
  }
  throw Error("model.kind",
              "'" + config.kind + "' is not a model family (families: " + kinds + ")");
}

}  // namespace mixprec::models
