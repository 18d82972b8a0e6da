// The model families (torchtitan's ModelSpec / train spec): model.kind names one. A family is
// a folder under models/ that owns its config rules, its model (parameters described on the
// meta device, forward, loss, decode, shard units, activation estimate), its sizing for the
// memory planner and its Hugging Face adapter; adding one is its folder plus one line in
// registry.cpp's table. Nothing outside a family's folder asks which family a config names.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixprec/config/config_rules.h"
#include "mixprec/config/train_config.h"
#include "mixprec/models/hf_layout.h"
#include "mixprec/models/model.h"

namespace mixprec::models {

// Another way the same model names its parameters, chosen by one config key (the moe
// family's model.moe.idle_experts: stacked or per-expert experts): what a checkpoint written
// under it would need to load.
struct ParamLayout {
  std::string key;    // "model.moe.idle_experts"
  std::string value;  // "skip" (as TOML writes it: quoted for a string)
  config::ModelConfig config;
};

struct ModelSpec {
  const char* kind;     // model.kind
  const char* summary;  // one line for --help and errors
  // The family's config rules (the shared decoder's and its own), reported through `rules`.
  void (*check_config)(const config::ModelConfig& config, const config::ConfigRules& rules);
  // The model, described (nothing allocated), from a config check_config accepts.
  std::unique_ptr<Model> (*make)(const config::ModelConfig& config);
  // The Hugging Face layout of this config; an Error naming the model keys that have none.
  HfLayout (*hf_layout)(const config::ModelConfig& config);
  // The family's own keys that set its parameter count, for messages about size
  // (", model.moe.n_experts = 8"; "" when the shared sizes say it all).
  std::string (*size_keys)(const config::ModelConfig& config);
  // The kinds of block the config's model has (an MoE with dense first blocks: 2), and the
  // config with `layers` blocks, all of kind `block_kind` in [0, block_kinds): the memory
  // planner bounds a model's size from one- and two-block copies before describing it.
  int64_t (*block_kinds)(const config::ModelConfig& config);
  config::ModelConfig (*with_blocks)(const config::ModelConfig& config, int64_t layers,
                                     int64_t block_kind);
  // The config's model under the family's other parameter layouts (for checkpoint messages:
  // train/checkpoint_layout_hint.h); null: it has one layout.
  std::vector<ParamLayout> (*other_layouts)(const config::ModelConfig& config) = nullptr;
};

// Every family, in the registry's order.
std::span<const ModelSpec* const> model_specs();
// The family model.kind names; an Error naming model.kind and listing the families otherwise.
const ModelSpec& model_spec(const std::string& kind);
// model_spec(config.kind).check_config(config, rules), after the kind itself.
void check_model_config(const config::ModelConfig& config, const config::ConfigRules& rules);
// The family model.kind names, its config checked (errors name the key and the problem; the
// config loader's add the file's line and value), described: nothing allocated.
std::unique_ptr<Model> make_model(const config::ModelConfig& config);

}  // namespace mixprec::models
