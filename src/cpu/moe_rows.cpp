#include "mixprec/cpu/moe_rows.h"

#include <algorithm>
#include <cstring>

#include "mixprec/core/parallel.h"

namespace mixprec::cpu {
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

}  // namespace

std::vector<Tensor> moe_dispatch(const Tensor& x, const std::vector<std::vector<int64_t>>& tokens) {
  const Tensor xc = x.detach().contiguous();
  const int64_t d = x.size(1);
  const auto row_bytes = static_cast<size_t>(d) * dtype_size(x.dtype());
  const char* base = static_cast<const char*>(xc.raw_data());
  std::vector<Tensor> out;
  for (const auto& ids : tokens) {
    Tensor xe = Tensor::empty({static_cast<int64_t>(ids.size()), d}, x.dtype());
    char* dst = static_cast<char*>(xe.raw_data());
    parallel_for(static_cast<int64_t>(ids.size()), row_grain(d), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(dst + static_cast<size_t>(i) * row_bytes,
                    base + static_cast<size_t>(ids[size_t(i)]) * row_bytes, row_bytes);
    });
    out.push_back(std::move(xe));
  }
  return out;
}

Tensor moe_dispatch_backward(const std::vector<Tensor>& g, const backend::TokenSlots& slots,
                             int64_t n, int64_t d, DType acc) {
  Tensor dx = Tensor::empty({n, d}, acc);
  dispatch_acc(acc, [&]<class A>() {
    A* out = dx.data<A>();
    parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        A* row = out + t * d;
        std::fill(row, row + d, A(0));
        for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
          const backend::TokenSlots::Entry& en = slots.entries[size_t(q)];
          if (!g[size_t(en.expert)].defined()) continue;
          const A* src = g[size_t(en.expert)].data<A>() + en.row * d;
          for (int64_t c = 0; c < d; ++c) row[c] += src[c];
        }
      }
    });
  });
  return dx;
}

Tensor moe_combine(const std::vector<Tensor>& y, const Tensor& gates,
                   const backend::TokenSlots& slots, int64_t n, int64_t d) {
  const DType acc = gates.dtype();
  Tensor out = Tensor::empty({n, d}, acc);
  dispatch_acc(acc, [&]<class A>() {
    A* o = out.data<A>();
    const A* gate = gates.data<A>();
    parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        A* row = o + t * d;
        std::fill(row, row + d, A(0));
        for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
          const backend::TokenSlots::Entry& en = slots.entries[size_t(q)];
          const A* yr = y[size_t(en.expert)].data<A>() + en.row * d;
          const A w = gate[en.slot];
          for (int64_t c = 0; c < d; ++c) row[c] += w * yr[c];
        }
      }
    });
  });
  return out;
}

backend::MoeCombineGrads moe_combine_backward(const Tensor& gout, const std::vector<Tensor>& y,
                                              const Tensor& gates,
                                              const backend::TokenSlots& slots) {
  const DType acc = gout.dtype();
  const int64_t n = gout.size(0), d = gout.size(1);
  backend::MoeCombineGrads r;
  for (const Tensor& ye : y) r.dy.push_back(Tensor::empty(ye.shape(), acc));
  r.dgate = Tensor::zeros(gates.shape(), acc);
  dispatch_acc(acc, [&]<class A>() {
    const A* go = gout.data<A>();
    const A* gate = gates.data<A>();
    A* dg = r.dgate.data<A>();
    // Each token owns its rows of dy and its slots of dgate: no two tasks write one place.
    parallel_for(n, row_grain(d), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t q = slots.start[size_t(t)]; q < slots.start[size_t(t + 1)]; ++q) {
          const backend::TokenSlots::Entry& en = slots.entries[size_t(q)];
          const A* yr = y[size_t(en.expert)].data<A>() + en.row * d;
          A* dyr = r.dy[size_t(en.expert)].data<A>() + en.row * d;
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
  return r;
}

}  // namespace mixprec::cpu
