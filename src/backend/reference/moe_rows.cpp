// Reference mixture-of-experts row kernels: f64 sums in the order backend.h states.
#include "reference_kernels.h"

namespace mixprec::backend::reference {

std::vector<Tensor> moe_dispatch(const Tensor& x, const std::vector<std::vector<int64_t>>& tokens) {
  const int64_t d = x.size(1);
  const std::vector<double> xv = values(x);
  std::vector<Tensor> out;
  for (const auto& ids : tokens) {
    std::vector<double> rows;
    for (int64_t t : ids) rows.insert(rows.end(), xv.begin() + t * d, xv.begin() + (t + 1) * d);
    out.push_back(make(rows, {static_cast<int64_t>(ids.size()), d}, x.dtype()));
  }
  return out;
}

Tensor moe_dispatch_backward(const std::vector<Tensor>& grads, const TokenSlots& slots, int64_t n,
                             int64_t d, DType acc) {
  std::vector<std::vector<double>> g;
  for (const Tensor& t : grads) g.push_back(t.defined() ? values(t) : std::vector<double>());
  std::vector<double> dx(static_cast<size_t>(n * d), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
      const TokenSlots::Entry& en = slots.entries[size_t(q)];
      if (g[size_t(en.expert)].empty()) continue;
      for (int64_t c = 0; c < d; ++c)
        dx[size_t(t * d + c)] += g[size_t(en.expert)][size_t(en.row * d + c)];
    }
  return make(dx, {n, d}, acc);
}

Tensor moe_combine(const std::vector<Tensor>& ys, const Tensor& gates, const TokenSlots& slots,
                   int64_t n, int64_t d) {
  std::vector<std::vector<double>> y;
  for (const Tensor& t : ys) y.push_back(values(t));
  const std::vector<double> gate = values(gates);
  std::vector<double> out(static_cast<size_t>(n * d), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
      const TokenSlots::Entry& en = slots.entries[size_t(q)];
      for (int64_t c = 0; c < d; ++c)
        out[size_t(t * d + c)] +=
            gate[size_t(en.slot)] * y[size_t(en.expert)][size_t(en.row * d + c)];
    }
  return make(out, {n, d}, gates.dtype());
}

MoeCombineGrads moe_combine_backward(const Tensor& gout, const std::vector<Tensor>& ys,
                                     const Tensor& gates, const TokenSlots& slots) {
  const int64_t n = gout.size(0), d = gout.size(1);
  const std::vector<double> go = values(gout), gate = values(gates);
  std::vector<std::vector<double>> y, dy;
  for (const Tensor& t : ys) {
    y.push_back(values(t));
    dy.emplace_back(static_cast<size_t>(t.numel()), 0.0);
  }
  std::vector<double> dgate(static_cast<size_t>(gates.numel()), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
      const TokenSlots::Entry& en = slots.entries[size_t(q)];
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) {
        const double g = go[size_t(t * d + c)];
        dy[size_t(en.expert)][size_t(en.row * d + c)] = gate[size_t(en.slot)] * g;
        dot += g * y[size_t(en.expert)][size_t(en.row * d + c)];
      }
      dgate[size_t(en.slot)] = dot;
    }
  MoeCombineGrads r;
  for (size_t e = 0; e < ys.size(); ++e) r.dy.push_back(make(dy[e], ys[e].shape(), gout.dtype()));
  r.dgate = make(dgate, gates.shape(), gout.dtype());
  return r;
}

}  // namespace mixprec::backend::reference
