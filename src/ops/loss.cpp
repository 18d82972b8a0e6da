// cross_entropy: input checks and autograd wiring around the fused kernels.
#include "mixprec/ops/loss.h"

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

class CrossEntropyBackward final : public Node {
 public:
  // logits: as the kernel saw them (kernel_dtype), or a narrower tensor holding exactly
  // their values (widened back in backward).
  CrossEntropyBackward(Tensor logits, DType kernel_dtype, Tensor targets,
                       backend::CrossEntropyForward saved, int64_t ignore_index)
      : logits_(std::move(logits)),
        kernel_dtype_(kernel_dtype),
        targets_(std::move(targets)),
        saved_(std::move(saved)),
        ignore_index_(ignore_index) {}
  const char* name() const override { return "CrossEntropyBackward"; }
  void release_saved() override {
    logits_ = targets_ = saved_.loss = saved_.row_max = saved_.log_sum = Tensor();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    MIXPREC_CHECK(grads[0].numel() == 1 && is_floating(grads[0].dtype()), "cross_entropy backward",
                  "expects a one-element floating gradient, got " +
                      shape_to_string(grads[0].shape()) + " " + dtype_name(grads[0].dtype()));
    // 0/0 never reaches the kernel's arithmetic: with no kept row every gradient row is zero.
    const double scale = saved_.n_valid == 0 ? 0.0 : grads[0].item() / saved_.n_valid;
    const Tensor logits = logits_.dtype() == kernel_dtype_ ? logits_ : logits_.to(kernel_dtype_);
    return {
        backend::current().cross_entropy_backward(logits, targets_, saved_, ignore_index_, scale),
        Tensor()};
  }

 private:
  Tensor logits_;  // [N, V] contiguous, or its narrower original when autocast widened it
  DType kernel_dtype_;
  Tensor targets_;  // [N] contiguous
  backend::CrossEntropyForward saved_;
  int64_t ignore_index_;
};

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, int64_t ignore_index) {
  const auto [logits] = amp::autocast_args("cross_entropy", logits_in);
  const char* op = "cross_entropy";
  MIXPREC_CHECK(logits.defined() && targets.defined(), op, "undefined input");
  MIXPREC_CHECK(!logits.is_meta() && !targets.is_meta(), op, "meta tensors have no data");
  const DType dt = logits.dtype();
  MIXPREC_CHECK(is_computable(dt), op,
                std::string("logits dtype ") + dtype_name(dt) +
                    " is unsupported (use f64, f32, bf16 or f16)");
  MIXPREC_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64, op,
                std::string("targets must be i32 or i64, got ") + dtype_name(targets.dtype()));
  MIXPREC_CHECK(logits.ndim() == 2, op,
                "logits must be [N, V], got " + shape_to_string(logits.shape()));
  MIXPREC_CHECK(targets.ndim() == 1 && targets.size(0) == logits.size(0), op,
                "targets must be [" + std::to_string(logits.size(0)) + "] for logits " +
                    shape_to_string(logits.shape()) + ", got " + shape_to_string(targets.shape()));
  MIXPREC_CHECK(logits.size(1) > 0 || logits.size(0) == 0, op,
                "logits " + shape_to_string(logits.shape()) + " have no classes");
  const Tensor lc = logits.detach().contiguous();
  const Tensor tc = targets.detach().contiguous();
  backend::CrossEntropyForward fwd = backend::current().cross_entropy_forward(lc, tc, ignore_index);
  Tensor loss = fwd.loss;
  if (any_requires_grad({&logits})) {
    fwd.loss = Tensor();
    // When autocast widened bf16/f16 logits to f32 (exact), keep the original: the same
    // values in half the bytes, widened again in backward.
    const bool widened = dt == DType::f32 && is_narrow_compute(logits_in.dtype());
    auto node = std::make_shared<CrossEntropyBackward>(
        widened ? logits_in.detach().contiguous() : lc, dt, tc, std::move(fwd), ignore_index);
    connect(*node, {logits, targets});
    set_history(loss, node);
  }
  return loss;
}

}  // namespace mixprec
