// The moe family's spec (moe_family.h): its config rules and sizing.
#include "mixprec/models/moe/moe_family.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/models/transformer/decoder_rules.h"
#include "mixprec/models/transformer/transformer.h"

namespace mixprec::models::moe {

void check_moe_config(const config::ModelConfig& m, const config::ConfigRules& c) {
  check_bound(c, "model.moe.n_experts", m.moe.n_experts, kMaxModelCount);
  check_bound(c, "model.moe.n_shared_experts", m.moe.n_shared_experts, kMaxModelCount);
  check_decoder_config(m, c, static_cast<double>(m.moe.n_experts + m.moe.n_shared_experts),
                       " and model.moe.n_experts");
  c.require(m.moe.n_experts > 0, "model.moe.n_experts", "must be > 0");
  c.require(m.moe.top_k > 0, "model.moe.top_k", "must be > 0");
  c.require(m.moe.top_k <= m.moe.n_experts, "model.moe.top_k",
            "must be <= " + c.show("model.moe.n_experts"));
  c.require(m.moe.capacity_factor >= 0, "model.moe.capacity_factor",
            "must be >= 0 (0 = no dropping)");
  c.require(m.moe.aux_loss_weight >= 0, "model.moe.aux_loss_weight", "must be >= 0");
  c.require(m.moe.z_loss_weight >= 0, "model.moe.z_loss_weight", "must be >= 0");
  c.require(m.moe.route_scale > 0 && std::isfinite(m.moe.route_scale), "model.moe.route_scale",
            "must be finite and > 0");
  c.require(m.moe.n_expert_groups >= 0, "model.moe.n_expert_groups",
            "must be >= 0 (0 = no group-limited routing)");
  if (m.moe.n_expert_groups > 0) {
    const int64_t groups = m.moe.n_expert_groups;
    c.require(m.moe.n_experts % groups == 0, "model.moe.n_expert_groups",
              "must divide " + c.show("model.moe.n_experts"));
    c.require(m.moe.n_limited_groups >= 1 && m.moe.n_limited_groups <= groups,
              "model.moe.n_limited_groups",
              "must be in [1, " + c.show("model.moe.n_expert_groups") + "]");
    c.require(m.moe.n_experts % groups != 0 ||
                  m.moe.top_k <= m.moe.n_limited_groups * (m.moe.n_experts / groups),
              "model.moe.top_k",
              "must be <= the experts of model.moe.n_limited_groups groups (" +
                  std::to_string(m.moe.n_limited_groups * (m.moe.n_experts / groups)) + ")");
  } else {
    c.require(m.moe.n_limited_groups == 0, "model.moe.n_limited_groups",
              "needs model.moe.n_expert_groups > 0");
  }
  c.require(m.moe.n_shared_experts >= 0, "model.moe.n_shared_experts", "must be >= 0");
  c.require(m.moe.n_dense_layers >= 0 && m.moe.n_dense_layers <= m.n_layers,
            "model.moe.n_dense_layers", "must be in [0, " + c.show("model.n_layers") + "]");
  c.require(m.moe.dense_d_ff >= 0, "model.moe.dense_d_ff", "must be >= 0");
  check_bound(c, "model.moe.dense_d_ff", m.moe.dense_d_ff, kMaxModelWidth);
  c.require(
      static_cast<double>(m.moe.dense_d_ff) * static_cast<double>(m.d_model) <= kMaxLayerWeights,
      "model.moe.dense_d_ff", "times model.d_model must be <= 2^40 (the weights of one layer)");
  c.require(m.moe.n_dense_layers == 0 || m.moe.dense_d_ff > 0, "model.moe.dense_d_ff",
            "must be > 0 when model.moe.n_dense_layers > 0 (the dense MLPs' width)");
  c.require(m.moe.load_balance_coeff >= 0 && std::isfinite(m.moe.load_balance_coeff),
            "model.moe.load_balance_coeff", "must be finite and >= 0 (0 = off)");
}

std::string size_keys(const config::ModelConfig& m) {
  return fmt::format(", model.moe.n_experts = {}", m.moe.n_experts);
}

// Kind 0: experts in every block; kind 1 (with dense first blocks): a dense MLP in every block.
int64_t block_kinds(const config::ModelConfig& m) {
  return m.moe.n_dense_layers > 0 ? 2 : 1;
}

config::ModelConfig with_blocks(const config::ModelConfig& m, int64_t layers, int64_t kind) {
  config::ModelConfig out = m;
  out.n_layers = layers;
  out.moe.n_dense_layers = kind == 1 ? layers : 0;
  return out;
}

// Stacked experts ("step") name each weight once per block, per-expert ones ("skip") once per
// expert: a checkpoint loads under the layout it was written with.
std::vector<ParamLayout> other_layouts(const config::ModelConfig& m) {
  config::ModelConfig other = m;
  other.moe.idle_experts = m.moe.idle_experts == "step" ? "skip" : "step";
  return {{"model.moe.idle_experts", "\"" + other.moe.idle_experts + "\"", other}};
}

namespace {

std::unique_ptr<Model> make(const config::ModelConfig& m) {
  return std::make_unique<Transformer>(m, DecoderArch{.experts = true});
}

HfLayout no_hf_layout(const config::ModelConfig&) {
  throw Error("hf",
              "model.kind = \"moe\" has no Hugging Face layout (model.kind = \"deepseek_v3\" "
              "exports as DeepseekV3ForCausalLM)");
}

}  // namespace

const ModelSpec kSpec{"moe",
                      "decoder-only transformer with a mixture of experts in every block's MLP",
                      check_moe_config,
                      make,
                      no_hf_layout,
                      size_keys,
                      block_kinds,
                      with_blocks,
                      other_layouts};

}  // namespace mixprec::models::moe
