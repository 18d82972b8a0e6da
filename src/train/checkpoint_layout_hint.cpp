#include "mixprec/train/checkpoint_layout_hint.h"

#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "mixprec/io/checkpoint_state.h"

namespace mixprec::train {
namespace {

// The model's parameter names (described only: nothing allocated).
std::set<std::string> parameter_names(const config::ModelConfig& config) {
  const std::unique_ptr<models::Model> model = models::make_model(config);
  std::set<std::string> names;
  for (const models::ParamSpec& s : model->parameters().specs()) names.insert(s.name);
  return names;
}

// Whether the checkpoint holds a name of `a` that `b` does not have (as model.<name>).
bool holds_any_only_in(const io::TensorMap& tensors, const std::set<std::string>& a,
                       const std::set<std::string>& b) {
  for (const auto& [key, t] : tensors) {
    if (!key.starts_with(io::kModelPrefix)) continue;
    const std::string name = key.substr(std::string_view(io::kModelPrefix).size());
    if (a.contains(name) && !b.contains(name)) return true;
  }
  return false;
}

}  // namespace

bool named_as(const io::TensorMap& tensors, const config::ModelConfig& here,
              const config::ModelConfig& there) {
  const std::set<std::string> a = parameter_names(here), b = parameter_names(there);
  return holds_any_only_in(tensors, b, a) && !holds_any_only_in(tensors, a, b);
}

std::optional<models::ParamLayout> checkpoint_layout(const io::TensorMap& tensors,
                                                     const config::ModelConfig& config) {
  try {
    const models::ModelSpec& spec = models::model_spec(config.kind);
    if (!spec.other_layouts) return std::nullopt;
    for (const models::ParamLayout& layout : spec.other_layouts(config))
      if (named_as(tensors, config, layout.config)) return layout;
  } catch (const Error&) {
    // A config no family accepts has no layouts to offer.
  }
  return std::nullopt;
}

std::string checkpoint_layout_hint(const io::TensorMap& tensors,
                                   const config::ModelConfig& config) {
  const std::optional<models::ParamLayout> layout = checkpoint_layout(tensors, config);
  return layout ? "; its parameters are named as under " + layout->key + " = " + layout->value +
                      ": set that to load it"
                : "";
}

}  // namespace mixprec::train
