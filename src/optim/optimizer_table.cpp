// The optimizer table (optimizer_table.h).
#include "mixprec/optim/optimizer_table.h"

#include <array>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

// One group of every parameter, with the settings' decay rule.
std::vector<ParamGroup> one_group(const ParamList& params, const OptimizerSettings& s) {
  return {ParamGroup{params, s.lr, s.weight_decay, s.decay_every_parameter}};
}

std::unique_ptr<Optimizer> make_adamw(const ParamList& params, const OptimizerSettings& s) {
  return std::make_unique<AdamW>(one_group(params, s),
                                 AdamWOptions{s.beta1, s.beta2, s.eps, s.seed});
}
std::unique_ptr<Optimizer> make_sgd(const ParamList& params, const OptimizerSettings& s) {
  return std::make_unique<SGD>(one_group(params, s),
                               SgdOptions{s.momentum, 0.0, s.nesterov, s.seed});
}
std::unique_ptr<Optimizer> make_adam_mini(const ParamList& params, const OptimizerSettings& s) {
  return std::make_unique<AdamMini>(one_group(params, s),
                                    AdamMiniOptions{s.beta1, s.beta2, s.eps, s.seed});
}

// clang-format off
constexpr std::array kKinds{
//  name         make            buffers per element (m, v; momentum; m)                 per block
    OptimizerKind{"adamw",     make_adamw,     [](const OptimizerSettings&) { return 2; }, nullptr, nullptr},
    OptimizerKind{"sgd",       make_sgd,       [](const OptimizerSettings& s) { return s.momentum != 0 ? 1 : 0; },
                  nullptr, nullptr},
    OptimizerKind{"adam-mini", make_adam_mini, [](const OptimizerSettings&) { return 1; }, "vmean",
                  adam_mini_partition},
};
// clang-format on

}  // namespace

std::span<const OptimizerKind> optimizer_kinds() {
  return kKinds;
}

const OptimizerKind& optimizer_kind(std::string_view name) {
  std::string names;
  for (const OptimizerKind& k : kKinds) {
    if (name == k.name) return k;
    names += std::string(names.empty() ? "" : ", ") + k.name;
  }
  throw Error("optimizer.name", "'" + std::string(name) + "' is not one of " + names);
}

const OptimizerKind* per_block_owner(std::string_view buffer) {
  for (const OptimizerKind& k : kKinds)
    if (k.per_block_buffer && buffer == k.per_block_buffer) return &k;
  return nullptr;
}

}  // namespace mixprec::optim
