// Attention backward, one key/value head per work item (with its query heads in order). D =
// rowsum(dO ∘ O); then for each key block j (dK_j, dV_j accumulated locally) and each query block i
// that sees it, in order:
//   P = exp(scale·Q_i·K_jᵀ - lse_i)     dV_j += Pᵀ·dO_i      dP = dO_i·V_jᵀ
//   dS = scale·P∘(dP - D_i)             dQ_i += dS·K_j       dK_j += dSᵀ·Q_i
// Every sum runs in a fixed order inside one thread, so bits never depend on the thread count.
// With native bf16 products (attention_detail::native_bf16, and a bf16 dO) the products read
// q, k, v and dO as stored, P and dS rounded to bf16; the softmax math and all sums stay f32.
#include <algorithm>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/attention.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

using namespace attention_detail;  // block sizes, scratch buffers, widening

// Inputs of one head: [T, Dh] rows as the products read them (E: the acc type A, or bf16),
// plus d [T] and lse [T].
template <class A, class E>
struct Head {
  Rows<E> q, k, v, dout;
  const A *lse, *d;
  int64_t t, dh;
  bool causal;
  A scale;
};

// A gradient's rows in the math type: element (r, c) at p[r·ld + c].
template <class A>
struct GradRows {
  A* p;
  int64_t ld;
};

// Key block [c0, c0 + cols): adds into dq [T, Dh] and into dk, dv [cols, Dh].
template <class A, class E>
void key_block(const Head<A, E>& h, int64_t c0, int64_t cols, GradRows<A> dq, GradRows<A> dk,
               GradRows<A> dv) {
  constexpr DType ad = acc_dtype<A>(), ed = dtype_of<E>();
  constexpr bool native = !std::is_same_v<A, E>;
  const int64_t dh = h.dh;
  A* p = scratch<A>(4, kBr * kBc);   // probabilities [rows, kBc]
  A* ds = scratch<A>(5, kBr * kBc);  // dP, then dS [rows, kBc]
  // The product operands: P and dS themselves, or rounded to E (native).
  E* pe = native ? scratch<E>(4, kBr * kBc) : reinterpret_cast<E*>(p);
  E* dse = native ? scratch<E>(5, kBr * kBc) : reinterpret_cast<E*>(ds);
  auto operand = [&](const A* src, E* dst, int64_t rows) {
    if constexpr (native) store_rows(src, kBc, dst, kBc, rows, cols);
  };
  const E* kj = h.k.at(c0);  // [cols, Dh]
  const E* vj = h.v.at(c0);  // [cols, Dh]
  // Causal: query blocks wholly above this key block see none of it.
  for (int64_t r0 = h.causal ? c0 / kBr * kBr : 0; r0 < h.t; r0 += kBr) {
    const int64_t rows = std::min(kBr, h.t - r0);
    const E* qi = h.q.at(r0);      // [rows, Dh]
    const E* doi = h.dout.at(r0);  // [rows, Dh]
    gemm(rows, cols, dh, 1.0f, {ed, qi, h.q.ld}, {ed, kj, h.k.ld, true}, 0.0f, {ad, p, kBc});
    for (int64_t r = 0; r < rows; ++r) {
      A* pr = p + r * kBc;
      const int64_t valid = h.causal ? std::clamp<int64_t>(r0 + r + 1 - c0, 0, cols) : cols;
      exp_scaled_sum(pr, h.scale, h.lse[r0 + r], valid);
      std::fill(pr + valid, pr + cols, A(0));
    }
    operand(p, pe, rows);
    gemm(cols, dh, rows, 1.0f, {ed, pe, kBc, true}, {ed, doi, h.dout.ld}, 1.0f, {ad, dv.p, dv.ld});
    gemm(rows, cols, dh, 1.0f, {ed, doi, h.dout.ld}, {ed, vj, h.v.ld, true}, 0.0f, {ad, ds, kBc});
    for (int64_t r = 0; r < rows; ++r) {
      const A* pr = p + r * kBc;
      A* dsr = ds + r * kBc;
      const A d = h.d[r0 + r];
      for (int64_t c = 0; c < cols; ++c) dsr[c] = h.scale * (pr[c] * (dsr[c] - d));
    }
    operand(ds, dse, rows);
    gemm(rows, dh, cols, 1.0f, {ed, dse, kBc}, {ed, kj, h.k.ld}, 1.0f,
         {ad, dq.p + r0 * dq.ld, dq.ld});
    gemm(cols, dh, rows, 1.0f, {ed, dse, kBc, true}, {ed, qi, h.q.ld}, 1.0f, {ad, dk.p, dk.ld});
  }
}

struct BackwardLayouts {
  HeadRows q, k, v, out, dout, dq, dk, dv;
};

// T: q/k/v storage, G: dout storage (T, or f32 when the incoming gradient differs), O: out
// storage (T, or the f32 unrounded output). One work item per key/value head: its dK, dV sum
// over the query heads it serves (grouped-query attention), in head order.
template <class T, class G, class O>
void backward(const T* q, const T* k, const T* v, const O* out, const acc_t<T>* lse, const G* dout,
              T* dq, T* dk, T* dv, const BackwardLayouts& lay, int64_t kv_heads, int64_t t,
              int64_t dh, bool causal, acc_t<T> scale) {
  using A = acc_t<T>;
  static_assert(std::is_same_v<A, acc_t<G>>);
  const int64_t group = lay.q.heads / lay.k.heads;
  // Items are independent, so the grain only keeps tiny problems out of a parallel region:
  // about 2^20 multiply-adds per chunk at least.
  const int64_t item_work = group * t * t * std::max<int64_t>(dh, 1) * 5;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(item_work, 1));
  // Gradients accumulate in place when the output already has the math type.
  constexpr bool in_place = std::is_same_v<T, A>;
  parallel_for(kv_heads, grain, [&](int64_t k0, int64_t k1) {
    for (int64_t ki = k0; ki < k1; ++ki) {
      T* dk_h = dk + lay.dk.start(ki);
      T* dv_h = dv + lay.dv.start(ki);
      A* dkv = in_place ? nullptr : scratch<A>(9, 2 * t * dh);  // dK, dV [T, Dh] each
      const GradRows<A> dk_acc =
          in_place ? GradRows<A>{reinterpret_cast<A*>(dk_h), lay.dk.row} : GradRows<A>{dkv, dh};
      const GradRows<A> dv_acc = in_place ? GradRows<A>{reinterpret_cast<A*>(dv_h), lay.dv.row}
                                          : GradRows<A>{dkv + t * dh, dh};
      for (int64_t r = 0; r < t; ++r) {
        std::fill(dk_acc.p + r * dk_acc.ld, dk_acc.p + r * dk_acc.ld + dh, A(0));
        std::fill(dv_acc.p + r * dv_acc.ld, dv_acc.p + r * dv_acc.ld + dh, A(0));
      }
      bool native = false;
      if constexpr (std::is_same_v<G, T>) native = native_bf16<T>();
      // Widened once per key/value head, shared by its query heads.
      const Rows<A> kw = native ? Rows<A>{} : widened(k + lay.k.start(ki), t, dh, lay.k.row, 1);
      const Rows<A> vw = native ? Rows<A>{} : widened(v + lay.v.start(ki), t, dh, lay.v.row, 2);
      const int64_t first = ki / lay.k.heads * lay.q.heads + ki % lay.k.heads * group;
      for (int64_t hi = first; hi < first + group; ++hi) {
        // d [T] = rowsum(dO ∘ O), O unrounded when forward kept it.
        const auto o = widened(out + lay.out.start(hi), t, dh, lay.out.row, 6);  // [T, Dh]
        const auto dout_acc = widened(dout + lay.dout.start(hi), t, dh, lay.dout.row, 3);
        A* d = scratch<A>(7, t);
        const RowOps<A>& ops = row_ops<A>();
        for (int64_t r = 0; r < t; ++r) d[r] = ops.dot(dout_acc.at(r), o.at(r), dh);
        T* dq_h = dq + lay.dq.start(hi);
        const GradRows<A> dq_acc = in_place ? GradRows<A>{reinterpret_cast<A*>(dq_h), lay.dq.row}
                                            : GradRows<A>{scratch<A>(8, t * dh), dh};  // [T, Dh]
        for (int64_t r = 0; r < t; ++r)
          std::fill(dq_acc.p + r * dq_acc.ld, dq_acc.p + r * dq_acc.ld + dh, A(0));
        auto key_blocks = [&]<class E>(const Head<A, E>& h) {
          for (int64_t c0 = 0; c0 < t; c0 += kBc)
            key_block(h, c0, std::min(kBc, t - c0), dq_acc, {dk_acc.p + c0 * dk_acc.ld, dk_acc.ld},
                      {dv_acc.p + c0 * dv_acc.ld, dv_acc.ld});
        };
        if constexpr (std::is_same_v<G, T>) {
          if (native) {  // the products read the stored rows
            key_blocks(Head<A, T>{{q + lay.q.start(hi), lay.q.row},
                                  {k + lay.k.start(ki), lay.k.row},
                                  {v + lay.v.start(ki), lay.v.row},
                                  {dout + lay.dout.start(hi), lay.dout.row},
                                  lse + hi * t,
                                  d,
                                  t,
                                  dh,
                                  causal,
                                  scale});
          }
        }
        if (!native)
          key_blocks(Head<A, A>{widened(q + lay.q.start(hi), t, dh, lay.q.row, 0), kw, vw, dout_acc,
                                lse + hi * t, d, t, dh, causal, scale});
        if constexpr (!in_place) store_rows(dq_acc.p, dh, dq_h, lay.dq.row, t, dh);
      }
      if constexpr (!in_place) {
        store_rows(dk_acc.p, dh, dk_h, lay.dk.row, t, dh);
        store_rows(dv_acc.p, dh, dv_h, lay.dv.row, t, dh);
      }
    }
  });
}

}  // namespace

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  bool causal, double scale) {
  const int64_t kv_heads = k.size(0) * k.size(1), t = q.size(2), dh = q.size(3);
  AttentionGrads g{empty_like_rows(q, q.dtype()), empty_like_rows(k, q.dtype()),
                   empty_like_rows(v, q.dtype())};
  if (q.numel() == 0) return g;
  const BackwardLayouts lay{head_rows(q),    head_rows(k),    head_rows(v),    head_rows(out),
                            head_rows(dout), head_rows(g.dq), head_rows(g.dk), head_rows(g.dv)};
  dispatch_compute(q.dtype(), "scaled_dot_product_attention backward", [&]<class T>() {
    auto run = [&]<class G>() {
      auto with_out = [&]<class O>() {
        backward<T, G, O>(q.data<T>(), k.data<T>(), v.data<T>(), out.data<O>(),
                          lse.data<acc_t<T>>(), dout.data<G>(), g.dq.data<T>(), g.dk.data<T>(),
                          g.dv.data<T>(), lay, kv_heads, t, dh, causal,
                          static_cast<acc_t<T>>(scale));
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
