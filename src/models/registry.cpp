// The model families (registry.h): one line each.
#include "mixprec/models/registry.h"

#include <array>

#include "mixprec/core/error.h"
#include "mixprec/models/deepseek_v3/deepseek_v3.h"
#include "mixprec/models/gpt/gpt.h"
#include "mixprec/models/llama3/llama3.h"
#include "mixprec/models/moe/moe_family.h"
#include "mixprec/models/qwen3/qwen3.h"

namespace mixprec::models {
namespace {

constexpr std::array kSpecs{&moe::kSpec, &gpt::kSpec, &llama3::kSpec, &qwen3::kSpec,
                            &deepseek_v3::kSpec};

// Rules for a config built in code (no file, no line): the key and the problem.
class PlainRules final : public config::ConfigRules {
 public:
  void require(bool ok, const std::string& key, const std::string& problem) const override {
    if (!ok) throw Error("model", key + " " + problem);
  }
  std::string show(const std::string& key) const override { return key; }
};

}  // namespace

std::span<const ModelSpec* const> model_specs() {
  return kSpecs;
}

const ModelSpec& model_spec(const std::string& kind) {
  std::string kinds;
  for (const ModelSpec* s : kSpecs) {
    if (kind == s->kind) return *s;
    kinds += std::string(kinds.empty() ? "" : ", ") + s->kind;
  }
  throw Error("model.kind", "'" + kind + "' is not a model family (families: " + kinds + ")");
}

void check_model_config(const config::ModelConfig& config, const config::ConfigRules& rules) {
  model_spec(config.kind).check_config(config, rules);
}

std::unique_ptr<Model> make_model(const config::ModelConfig& config) {
  const ModelSpec& spec = model_spec(config.kind);
  spec.check_config(config, PlainRules{});
  return spec.make(config);
}

}  // namespace mixprec::models
