#include "mixprec/io/checkpoint_export.h"

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::io {

void export_bf16_weights(const std::string& path, const optim::ParamList& params) {
  NoGradGuard no_grad;
  TensorList list;
  for (const auto& p : params) {
    MIXPREC_CHECK(p != nullptr, "export_bf16_weights " + path, "a parameter is null");
    list.emplace_back(p->name(), p->master().to(DType::bf16));
  }
  save_safetensors(path, list, {{"format", "pt"}});  // rejects duplicate names
}

}  // namespace mixprec::io
