// Dispatch and combine of the mixture-of-experts layer (moe_routing.h).
#include "mixprec/ops/moe_routing.h"

#include <memory>
#include <vector>

#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

// Backward: dx[t] = sum of the gradients of t's rows, in expert order, accumulated in `acc`
// (f32, f64 for f64) and rounded once into x's dtype.
class MoeDispatchBackward final : public Node {
 public:
  MoeDispatchBackward(std::shared_ptr<const TokenSlots> slots, int64_t experts, Shape x_shape,
                      DType x_dtype, DType acc)
      : slots_(std::move(slots)), x_shape_(std::move(x_shape)), x_dtype_(x_dtype), acc_(acc) {
    num_outputs_ = static_cast<int>(experts);
  }
  const char* name() const override { return "MoeDispatchBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    std::vector<Tensor> g(grads.size());  // [n_e, d] in acc, contiguous (undefined: zero)
    for (size_t e = 0; e < grads.size(); ++e)
      if (grads[e].defined()) g[e] = grads[e].to(acc_).contiguous();
    const Tensor dx =
        backend::current().moe_dispatch_backward(g, *slots_, x_shape_[0], x_shape_[1], acc_);
    return {dx.to(x_dtype_)};
  }

 private:
  std::shared_ptr<const TokenSlots> slots_;
  Shape x_shape_;
  DType x_dtype_, acc_;
};

// Combine: out[t] = sum over t's kept assignments (expert order) of gate[slot] · y_e[row],
// in `acc` (f32, f64 for f64). Inputs: the experts' outputs y_e [n_e, d], then gates [N·k]
// (acc). Backward: dy_e[row] = gate[slot] · dout[t] rounded once into y_e's dtype;
// dgate[slot] = <dout[t], y_e[row]> (0 for dropped assignments).
class MoeCombineBackward final : public Node {
 public:
  MoeCombineBackward(std::shared_ptr<const TokenSlots> slots, std::vector<Tensor> ys, Tensor gates,
                     DType acc)
      : slots_(std::move(slots)), ys_(std::move(ys)), gates_(std::move(gates)), acc_(acc) {}
  const char* name() const override { return "MoeCombineBackward"; }
  void release_saved() override {
    ys_.clear();
    gates_ = Tensor();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const size_t experts = ys_.size();
    std::vector<Tensor> out(experts + 1);
    if (!grads[0].defined()) return out;
    std::vector<Tensor> y(experts);  // in acc, contiguous
    for (size_t e = 0; e < experts; ++e) y[e] = ys_[e].to(acc_).contiguous();
    backend::MoeCombineGrads r =
        backend::current().moe_combine_backward(grads[0].to(acc_).contiguous(), y, gates_, *slots_);
    for (size_t e = 0; e < experts; ++e) out[e] = r.dy[e].to(ys_[e].dtype());
    out[experts] = r.dgate;
    return out;
  }

 private:
  std::shared_ptr<const TokenSlots> slots_;
  std::vector<Tensor> ys_;
  Tensor gates_;
  DType acc_;
};
}  // namespace

TokenSlots token_slots(const RoutingPlan& plan, int64_t n) {
  TokenSlots ts;
  ts.start.assign(static_cast<size_t>(n + 1), 0);
  for (const auto& tokens : plan.tokens)
    for (const int64_t t : tokens) ++ts.start[static_cast<size_t>(t + 1)];
  for (int64_t t = 0; t < n; ++t)
    ts.start[static_cast<size_t>(t + 1)] += ts.start[static_cast<size_t>(t)];
  ts.entries.resize(static_cast<size_t>(ts.start.back()));
  std::vector<int64_t> cursor(ts.start.begin(), ts.start.end() - 1);
  for (size_t e = 0; e < plan.tokens.size(); ++e)
    for (size_t i = 0; i < plan.tokens[e].size(); ++i) {
      const auto t = static_cast<size_t>(plan.tokens[e][i]);
      ts.entries[static_cast<size_t>(cursor[t]++)] = {static_cast<int64_t>(e),
                                                      static_cast<int64_t>(i), plan.slots[e][i]};
    }
  return ts;
}

std::vector<Tensor> moe_dispatch(const Tensor& x, const RoutingPlan& plan,
                                 const std::shared_ptr<const TokenSlots>& slots, DType acc) {
  std::vector<Tensor> out = backend::current().moe_dispatch(x, plan.tokens);
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<MoeDispatchBackward>(
        slots, static_cast<int64_t>(plan.tokens.size()), x.shape(), x.dtype(), acc);
    connect(*node, {x});
    for (size_t e = 0; e < out.size(); ++e) set_history(out[e], node, static_cast<int>(e));
  }
  return out;
}

Tensor moe_combine(const std::vector<Tensor>& ys, const Tensor& gates, int64_t n, int64_t d,
                   const std::shared_ptr<const TokenSlots>& slots, DType acc) {
  std::vector<Tensor> y(ys.size());  // in acc, contiguous
  for (size_t e = 0; e < ys.size(); ++e) y[e] = ys[e].detach().to(acc).contiguous();
  const Tensor gc = gates.detach().to(acc).contiguous();
  Tensor out = backend::current().moe_combine(y, gc, *slots, n, d);
  std::vector<Tensor> inputs(ys.begin(), ys.end());
  inputs.push_back(gates);
  if (any_requires_grad(inputs)) {
    std::vector<Tensor> saved;
    for (const Tensor& t : ys) saved.push_back(t.detach());
    auto node = std::make_shared<MoeCombineBackward>(slots, std::move(saved), gc, acc);
    connect(*node, inputs);
    set_history(out, node);
  }
  return out;
}
}  // namespace mixprec
