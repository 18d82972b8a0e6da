// The gpt family's spec (gpt.h).
#include "mixprec/models/gpt/gpt.h"

#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/hf_layouts.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models::gpt {
namespace {

void check(const config::ModelConfig& m, const config::ConfigRules& rules) {
  check_decoder_config(m, rules);
}

std::unique_ptr<Model> make(const config::ModelConfig& m) {
  return std::make_unique<Transformer>(m, DecoderArch{});
}

}  // namespace

const ModelSpec kSpec{"gpt",
                      "the transformer with a dense MLP (GPT-2 / nanoGPT shape)",
                      check,
                      make,
                      dense_decoder_hf_layout,
                      no_size_keys,
                      one_block_kind,
                      with_layers};

}  // namespace mixprec::models::gpt
