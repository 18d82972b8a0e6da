// Attention backward, one head per work item. D = rowsum(dO ∘ O); then for each key block j
// (dK_j, dV_j accumulated locally) and each query block i that sees it, in order:
//   P = exp(scale·Q_i·K_jᵀ - lse_i)     dV_j += Pᵀ·dO_i      dP = dO_i·V_jᵀ
//   dS = scale·P∘(dP - D_i)             dQ_i += dS·K_j       dK_j += dSᵀ·Q_i
// Every sum runs in a fixed order inside one thread, so bits never depend on the thread count.
#include <algorithm>

#include "mixprec/cpu/attention.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/parallel.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

using namespace attention_detail;  // block sizes, scratch buffers, widening

// Inputs of one head, all [T, Dh] in the acc type, plus d [T] and lse [T].
template <class A>
struct Head {
  const A *q, *k, *v, *dout, *lse, *d;
  int64_t t, dh;
  bool causal;
  A scale;
};

// Key block [c0, c0 + cols): adds into dq [T, Dh] and writes dk, dv [cols, Dh].
template <class A>
void key_block(const Head<A>& h, int64_t c0, int64_t cols, A* dq, A* dk, A* dv) {
  constexpr DType ad = acc_dtype<A>();
  const int64_t dh = h.dh;
  A* p = scratch<A>(4, kBr * kBc);   // probabilities [rows, kBc]
  A* ds = scratch<A>(5, kBr * kBc);  // dP, then dS [rows, kBc]
  const A* kj = h.k + c0 * dh;       // [cols, Dh]
  const A* vj = h.v + c0 * dh;       // [cols, Dh]
  std::fill(dk, dk + cols * dh, A(0));
  std::fill(dv, dv + cols * dh, A(0));
  // Causal: query blocks wholly above this key block see none of it.
  for (int64_t r0 = h.causal ? c0 / kBr * kBr : 0; r0 < h.t; r0 += kBr) {
    const int64_t rows = std::min(kBr, h.t - r0);
    const A* qi = h.q + r0 * dh;      // [rows, Dh]
    const A* doi = h.dout + r0 * dh;  // [rows, Dh]
    gemm(rows, cols, dh, 1.0f, {ad, qi, dh}, {ad, kj, dh, true}, 0.0f, {ad, p, kBc});
    for (int64_t r = 0; r < rows; ++r) {
      A* pr = p + r * kBc;
      const int64_t valid = h.causal ? std::clamp<int64_t>(r0 + r + 1 - c0, 0, cols) : cols;
      exp_scaled_sum(pr, h.scale, h.lse[r0 + r], valid);
      std::fill(pr + valid, pr + cols, A(0));
    }
    gemm(cols, dh, rows, 1.0f, {ad, p, kBc, true}, {ad, doi, dh}, 1.0f, {ad, dv, dh});
    gemm(rows, cols, dh, 1.0f, {ad, doi, dh}, {ad, vj, dh, true}, 0.0f, {ad, ds, kBc});
    for (int64_t r = 0; r < rows; ++r) {
      const A* pr = p + r * kBc;
      A* dsr = ds + r * kBc;
      const A d = h.d[r0 + r];
      for (int64_t c = 0; c < cols; ++c) dsr[c] = h.scale * (pr[c] * (dsr[c] - d));
    }
    gemm(rows, dh, cols, 1.0f, {ad, ds, kBc}, {ad, kj, dh}, 1.0f, {ad, dq + r0 * dh, dh});
    gemm(cols, dh, rows, 1.0f, {ad, ds, kBc, true}, {ad, qi, dh}, 1.0f, {ad, dk, dh});
  }
}

// T: q/k/v storage, G: dout storage (T, or f32 when the incoming gradient differs), O: out
// storage (T, or the f32 unrounded output).
template <class T, class G, class O>
void backward(const T* q, const T* k, const T* v, const O* out, const acc_t<T>* lse, const G* dout,
              T* dq, T* dk, T* dv, int64_t heads, int64_t t, int64_t dh, bool causal,
              acc_t<T> scale) {
  using A = acc_t<T>;
  static_assert(std::is_same_v<A, acc_t<G>>);
  // Heads are independent, so the grain only keeps tiny problems out of a parallel region:
  // about 2^20 multiply-adds per chunk at least.
  const int64_t head_work = t * t * std::max<int64_t>(dh, 1) * 5;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(head_work, 1));
  parallel_for(heads, grain, [&](int64_t h0, int64_t h1) {
    for (int64_t hi = h0; hi < h1; ++hi) {
      const int64_t base = hi * t * dh;
      Head<A> h{widened(q + base, t * dh, 0),
                widened(k + base, t * dh, 1),
                widened(v + base, t * dh, 2),
                widened(dout + base, t * dh, 3),
                lse + hi * t,
                nullptr,
                t,
                dh,
                causal,
                scale};
      // d [T] = rowsum(dO ∘ O), O unrounded when forward kept it.
      const A* o = widened(out + base, t * dh, 6);  // [T, Dh]
      A* d = scratch<A>(7, t);
      const RowOps<A>& ops = row_ops<A>();
      for (int64_t r = 0; r < t; ++r) d[r] = ops.dot(h.dout + r * dh, o + r * dh, dh);
      h.d = d;
      // Gradients accumulate in place when the output already has the math type.
      constexpr bool in_place = std::is_same_v<T, A>;
      A* dq_acc = in_place ? reinterpret_cast<A*>(dq + base) : scratch<A>(8, t * dh);  // [T, Dh]
      std::fill(dq_acc, dq_acc + t * dh, A(0));
      A* dkv = scratch<A>(9, 2 * kBc * dh);  // dK_j, dV_j [kBc, Dh] each when not in place
      for (int64_t c0 = 0; c0 < t; c0 += kBc) {
        const int64_t cols = std::min(kBc, t - c0);
        if constexpr (in_place) {
          key_block(h, c0, cols, dq_acc, reinterpret_cast<A*>(dk + base + c0 * dh),
                    reinterpret_cast<A*>(dv + base + c0 * dh));
        } else {
          key_block(h, c0, cols, dq_acc, dkv, dkv + kBc * dh);
          store_row(dkv, dk + base + c0 * dh, cols * dh);
          store_row(dkv + kBc * dh, dv + base + c0 * dh, cols * dh);
        }
      }
      if constexpr (!in_place) store_row(dq_acc, dq + base, t * dh);
    }
  });
}

}  // namespace

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  bool causal, double scale) {
  const int64_t heads = q.size(0) * q.size(1), t = q.size(2), dh = q.size(3);
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(q.shape(), q.dtype()),
                   Tensor::empty(q.shape(), q.dtype())};
  if (q.numel() == 0) return g;
  dispatch_compute(q.dtype(), "scaled_dot_product_attention backward", [&]<class T>() {
    auto run = [&]<class G>() {
      auto with_out = [&]<class O>() {
        backward<T, G, O>(q.data<T>(), k.data<T>(), v.data<T>(), out.data<O>(),
                          lse.data<acc_t<T>>(), dout.data<G>(), g.dq.data<T>(), g.dk.data<T>(),
                          g.dv.data<T>(), heads, t, dh, causal, static_cast<acc_t<T>>(scale));
      };
      if (out.dtype() == q.dtype()) return with_out.template operator()<T>();
      MIXPREC_CHECK(out.dtype() == DType::f32, "scaled_dot_product_attention backward",
                    std::string("output dtype ") + dtype_name(out.dtype()) + " does not fit");
      if constexpr (!std::is_same_v<T, double>) with_out.template operator()<float>();
    };
    if (dout.dtype() == q.dtype()) return run.template operator()<T>();
    MIXPREC_CHECK((!std::is_same_v<T, double> && dout.dtype() == DType::f32),
                  "scaled_dot_product_attention backward",
                  std::string("gradient dtype ") + dtype_name(dout.dtype()) +
                      " does not fit inputs of " + dtype_name(q.dtype()));
    if constexpr (!std::is_same_v<T, double>) run.template operator()<float>();
  });
  return g;
}

}  // namespace mixprec::cpu
