// broadcast_to: a stride-0 view of x made contiguous; its gradient is summed back.
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec {
namespace {

class BroadcastBackward final : public Node {
 public:
  BroadcastBackward(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}
  const char* name() const override { return "BroadcastBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    // Summed with f32 accumulation (f64 for f64) and rounded once into x's dtype.
    return {backend::current().reduce_to_shape(grads[0], shape_, dtype_)};
  }

 private:
  Shape shape_;
  DType dtype_;
};

}  // namespace

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  MIXPREC_CHECK(x.defined(), "broadcast_to", "undefined input");
  MIXPREC_CHECK(shape.size() >= x.shape().size() && broadcast_shapes(x.shape(), shape) == shape,
                "broadcast_to",
                "cannot broadcast " + shape_to_string(x.shape()) + " to " + shape_to_string(shape));
  if (x.shape() == shape) return x;
  const Tensor xc = x.detach().contiguous();
  Shape strides(shape.size(), 0);
  const size_t lead = shape.size() - x.shape().size();
  for (size_t i = 0; i < x.shape().size(); ++i)
    if (x.shape()[i] != 1) strides[lead + i] = xc.strides()[i];
  Tensor out = xc.as_strided(shape, strides, 0).contiguous();
  if (out.raw_data() == xc.raw_data()) out = out.clone();  // never alias the input
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<BroadcastBackward>(x.shape(), x.dtype());
    connect(*node, {x});
    set_history(out, node);
  }
  return out;
}

}  // namespace mixprec
