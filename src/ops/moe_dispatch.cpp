// Dispatch and combine of the mixture-of-experts layer (moe_routing.h).
#include "mixprec/ops/moe_routing.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "mixprec/autograd/function.h"
#include "mixprec/core/parallel.h"

namespace mixprec {
namespace {

// The accumulation type: double for f64, else float.
template <class Fn>
void dispatch_acc(DType acc, Fn&& fn) {
  if (acc == DType::f64)
    fn.template operator()<double>();
  else
    fn.template operator()<float>();
}

// Rows per parallel chunk for row loops of width d (about 16K elements each).
int64_t row_grain(int64_t d) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(d, 1));
}

// Dispatch: x [N, d] -> one [n_e, d] batch per expert (x's dtype), the rows of its tokens.
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
    const int64_t n = x_shape_[0], d = x_shape_[1];
    std::vector<Tensor> g(grads.size());  // [n_e, d] in acc, contiguous (undefined: zero)
    for (size_t e = 0; e < grads.size(); ++e)
      if (grads[e].defined()) g[e] = grads[e].to(acc_).contiguous();
    Tensor dx = Tensor::empty({n, d}, acc_);
    dispatch_acc(acc_, [&]<class A>() {
      A* out = dx.data<A>();
      parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          A* row = out + t * d;
          std::fill(row, row + d, A(0));
          for (int64_t q = slots_->start[size_t(t)]; q < slots_->start[size_t(t + 1)]; ++q) {
            const TokenSlots::Entry& en = slots_->entries[size_t(q)];
            if (!g[size_t(en.expert)].defined()) continue;
            const A* src = g[size_t(en.expert)].data<A>() + en.row * d;
            for (int64_t c = 0; c < d; ++c) row[c] += src[c];
          }
        }
      });
    });
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
    const Tensor gout = grads[0].to(acc_).contiguous();  // [N, d]
    const int64_t n = gout.size(0), d = gout.size(1);
    std::vector<Tensor> y(experts), dy(experts);  // in acc, contiguous
    for (size_t e = 0; e < experts; ++e) {
      y[e] = ys_[e].to(acc_).contiguous();
      dy[e] = Tensor::empty(ys_[e].shape(), acc_);
    }
    Tensor dgate = Tensor::zeros(gates_.shape(), acc_);
    dispatch_acc(acc_, [&]<class A>() {
      const A* go = gout.data<A>();
      const A* gate = gates_.data<A>();
      A* dg = dgate.data<A>();
      // Each token owns its rows of dy and its slots of dgate: no two tasks write one place.
      parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t q = slots_->start[size_t(t)]; q < slots_->start[size_t(t + 1)]; ++q) {
            const TokenSlots::Entry& en = slots_->entries[size_t(q)];
            const A* yr = y[size_t(en.expert)].data<A>() + en.row * d;
            A* dyr = dy[size_t(en.expert)].data<A>() + en.row * d;
            const A* gr = go + t * d;
            const A w = gate[en.slot];
            A dot = 0;
            for (int64_t c = 0; c < d; ++c) {
              dyr[c] = w * gr[c];
              dot += gr[c] * yr[c];
            }
            dg[en.slot] = dot;
          }
      });
    });
    for (size_t e = 0; e < experts; ++e) out[e] = dy[e].to(ys_[e].dtype());
    out[experts] = dgate;
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
  const Tensor xc = x.detach().contiguous();
  const int64_t d = x.size(1);
  const auto row_bytes = static_cast<size_t>(d) * dtype_size(x.dtype());
  const char* base = static_cast<const char*>(xc.raw_data());
  std::vector<Tensor> out;
  for (const auto& tokens : plan.tokens) {
    Tensor xe = Tensor::empty({static_cast<int64_t>(tokens.size()), d}, x.dtype());
    char* dst = static_cast<char*>(xe.raw_data());
    parallel_for(static_cast<int64_t>(tokens.size()), row_grain(d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(dst + static_cast<size_t>(i) * row_bytes,
                    base + static_cast<size_t>(tokens[size_t(i)]) * row_bytes, row_bytes);
    });
    out.push_back(std::move(xe));
  }
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
  Tensor out = Tensor::empty({n, d}, acc);
  dispatch_acc(acc, [&]<class A>() {
    A* o = out.data<A>();
    const A* gate = gc.data<A>();
    parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        A* row = o + t * d;
        std::fill(row, row + d, A(0));
        for (int64_t q = slots->start[size_t(t)]; q < slots->start[size_t(t + 1)]; ++q) {
          const TokenSlots::Entry& en = slots->entries[size_t(q)];
          const A* yr = y[size_t(en.expert)].data<A>() + en.row * d;
          const A w = gate[en.slot];
          for (int64_t c = 0; c < d; ++c) row[c] += w * yr[c];
        }
      }
    });
  });
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
