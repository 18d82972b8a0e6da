// The model families: model.kind names one of them. Adding a family is a folder under
// models/ implementing models::Model and one line in registry.cpp's table.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "mixprec/config/train_config.h"
#include "mixprec/models/model.h"

namespace mixprec::models {

struct ModelFamily {
  const char* kind;     // model.kind
  const char* summary;  // one line for --help and errors
  std::unique_ptr<Model> (*make)(const config::ModelConfig& config);
};

// Every family, in the registry's order.
std::span<const ModelFamily> model_families();
// The family model.kind names, described (nothing allocated); an Error naming model.kind and
// listing the families when there is none of that name, or the family's own config errors.
std::unique_ptr<Model> make_model(const config::ModelConfig& config);

}  // namespace mixprec::models
