// embedding: input checks and autograd wiring. The weight gradient is handed on in f32
// (f64 for f64 weights) without rounding, as the header promises.
#include "mixprec/ops/embedding.h"

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

class EmbeddingBackward final : public Node {
 public:
  EmbeddingBackward(Tensor ids, int64_t vocab, DType weight_dtype)
      : ids_(std::move(ids)), vocab_(vocab), weight_dtype_(weight_dtype) {}
  const char* name() const override { return "EmbeddingBackward"; }
  void release_saved() override { ids_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const DType acc = accumulate_dtype(weight_dtype_);
    return {Tensor(), backend::current().embedding_backward(ids_, grads[0], vocab_, acc)};
  }

 private:
  Tensor ids_;  // contiguous
  int64_t vocab_;
  DType weight_dtype_;
};

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& weight_in) {
  const auto [weight] = amp::autocast_args("embedding", weight_in);
  const char* op = "embedding";
  MIXPREC_CHECK(ids.defined() && weight.defined(), op, "undefined input");
  MIXPREC_CHECK(!ids.is_meta() && !weight.is_meta(), op, "meta tensors have no data");
  MIXPREC_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, op,
                std::string("ids must be i32 or i64, got ") + dtype_name(ids.dtype()));
  const DType dt = weight.dtype();
  MIXPREC_CHECK(is_computable(dt), op,
                std::string("weight dtype ") + dtype_name(dt) +
                    " is unsupported (use f64, f32, bf16 or f16)");
  MIXPREC_CHECK(weight.ndim() == 2, op,
                "weight must be [V, D], got " + shape_to_string(weight.shape()));
  const Tensor ic = ids.detach().contiguous();
  const Tensor wc = weight.detach().contiguous();
  Tensor out = backend::current().embedding_forward(ic, wc);
  if (any_requires_grad({&weight})) {
    auto node = std::make_shared<EmbeddingBackward>(ic, weight.size(0), dt);
    connect(*node, {ids, weight});
    set_history(out, node);
  }
  return out;
}

}  // namespace mixprec
