// A weights-only export for other frameworks: every parameter's master rounded once to bf16
// (nearest even), under the parameter's own name, in one safetensors file with safetensors'
// "BF16" dtype string and {"format": "pt"} metadata, as Hugging Face writes PyTorch weights.
#pragma once

#include <string>

#include "mixprec/optim/parameter.h"

namespace mixprec::io {

// Writes the file atomically (save_safetensors). Throws mixprec::Error on a duplicate name.
void export_bf16_weights(const std::string& path, const optim::ParamList& params);

}  // namespace mixprec::io
