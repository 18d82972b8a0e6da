// stack: each tensor cast to the widest dtype and given the new dim, then one concat.
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops/indexing.h"

namespace mixprec {

Tensor stack(const std::vector<Tensor>& tensors_in, int64_t dim) {
  MIXPREC_CHECK(!tensors_in.empty(), "stack", "expects a non-empty list of tensors");
  const amp::AutocastList cast("stack", tensors_in);
  const std::vector<Tensor>& tensors = cast.get();
  DType widest = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    MIXPREC_CHECK(tensors[i].defined(), "stack", "tensor " + std::to_string(i) + " is undefined");
    MIXPREC_CHECK(tensors[i].shape() == tensors[0].shape(), "stack",
                  "tensor " + std::to_string(i) + " has shape " +
                      shape_to_string(tensors[i].shape()) + ", tensor 0 " +
                      shape_to_string(tensors[0].shape()) + ": stacked tensors share one shape");
    widest = promote(widest, tensors[i].dtype());
  }
  const int d = normalize_dim(dim, tensors[0].ndim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.to(widest).unsqueeze(d));
  const amp::AutocastGuard inner(DType::bf16, /*enabled=*/false);  // already one dtype
  return concat(parts, d);
}

}  // namespace mixprec
