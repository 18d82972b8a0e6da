// The llama3 family's spec (llama3.h).
#include "mixprec/models/llama3/llama3.h"

#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/hf_layouts.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models::llama3 {
namespace {

void check(const config::ModelConfig& m, const config::ConfigRules& c) {
  check_decoder_config(m, c);
  // Llama's architecture is fixed; the keys that would change it must say so.
  c.require(m.norm == "rmsnorm", "model.norm", "must be \"rmsnorm\" for model.kind = \"llama3\"");
  c.require(m.mlp == "swiglu", "model.mlp", "must be \"swiglu\" for model.kind = \"llama3\"");
  c.require(m.positions == "rope", "model.positions",
            "must be \"rope\" for model.kind = \"llama3\"");
  c.require(!m.bias, "model.bias", "must be false for model.kind = \"llama3\" (no biases)");
  c.require(!m.qk_norm, "model.qk_norm",
            "must be false for model.kind = \"llama3\" (Llama has no q/k norms; model.kind = "
            "\"qwen3\" has them)");
}

std::unique_ptr<Model> make(const config::ModelConfig& m) {
  return std::make_unique<Transformer>(m, DecoderArch{.init = DecoderInit::titan_llama});
}

}  // namespace

const ModelSpec kSpec{
    "llama3",
    "torchtitan's Llama 3: RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases",
    check,
    make,
    llama_hf_layout,
    no_size_keys,
    one_block_kind,
    with_layers};

}  // namespace mixprec::models::llama3
