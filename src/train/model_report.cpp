// The model description printed before training.
#include "mixprec/train/model_report.h"

#include <fmt/format.h>

#include "mixprec/train/progress.h"

namespace mixprec::train {

std::string describe_model(const models::Model& model, const amp::MixedPrecisionPolicy& policy) {
  const int64_t n = model.parameters().parameter_count();
  std::string text = model.describe();
  text += fmt::format("\nparameters: {:.3f}M", static_cast<double>(n) / 1e6);
  if (const std::optional<int64_t> active = model.active_parameter_count())
    text += fmt::format(" ({:.3f}M active per token)", static_cast<double>(*active) / 1e6);
  const models::ParameterBytes b = model.parameters().bytes(policy);
  text +=
      fmt::format(" | {}: masters {}, working copies {}, gradients {}", amp::display_name(policy),
                  format_bytes(b.master), format_bytes(b.working), format_bytes(b.grads));
  return text;
}

}  // namespace mixprec::train
