// The model description printed before training.
#include "mixprec/train/model_report.h"

#include <fmt/format.h>

#include "mixprec/train/progress.h"

namespace mixprec::train {

int64_t active_parameter_count(const models::Transformer& model) {
  const config::ModelConfig& c = model.config();
  int64_t total = 0;
  for (const models::ParamSpec& s : model.parameters().specs()) {
    const bool expert = s.name.find(".moe.experts.") != std::string::npos;
    total += expert ? s.numel() * c.moe.top_k / c.moe.n_experts : s.numel();
  }
  return total;
}

std::string describe_model(const models::Transformer& model,
                           const amp::MixedPrecisionPolicy& policy) {
  const config::ModelConfig& c = model.config();
  const int64_t n = model.parameters().parameter_count();
  std::string text = fmt::format(
      "model: {} | d_model {} | {} layers | {} heads | d_ff {} | {} | {} | {} positions | "
      "vocab {}",
      c.kind, c.d_model, c.n_layers, c.n_heads, c.d_ff, c.norm, c.mlp, c.positions, c.vocab_size);
  if (c.kind == "moe") text += fmt::format(" | {} experts, top-{}", c.moe.n_experts, c.moe.top_k);
  text += fmt::format("\nparameters: {:.3f}M", static_cast<double>(n) / 1e6);
  if (c.kind == "moe")
    text += fmt::format(" ({:.3f}M active per token)",
                        static_cast<double>(active_parameter_count(model)) / 1e6);
  const models::ParameterBytes b = model.parameters().bytes(policy);
  text +=
      fmt::format(" | {}: masters {}, working copies {}, gradients {}", amp::display_name(policy),
                  format_bytes(b.master), format_bytes(b.working), format_bytes(b.grads));
  return text;
}

}  // namespace mixprec::train
