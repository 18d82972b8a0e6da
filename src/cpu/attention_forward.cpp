// Attention forward: per (head, chunk of query rows), keys/values widened once, then for each
// block of query rows the key blocks in order: S = Q·Kᵀ (GEMM), online softmax (running max m
// and sum l), O += P·V (GEMM). O / l is stored, and lse = m + log(l) kept for backward.
// bf16 inputs on a CPU with bf16 dot products (attention_detail::native_bf16) skip the
// widening: both products read bf16 (P rounded to bf16 for P·V, as flash-attention and
// PyTorch's autocast do), the softmax stays f32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/attention.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

using namespace attention_detail;    // block sizes, scratch buffers, widening
constexpr int64_t kQueryRows = 256;  // query rows per work item (K/V widened once per item)

// One block of query rows [r0, r0 + rows) of one head against keys [0, kend).
// q [rows, Dh], k/v [kend, Dh] as the products read them (E: the acc type, or bf16 when
// native); writes out [rows, Dh] (storage, rows out_ld apart) and lse [rows].
template <class T, class E>
void query_block(Rows<E> q, Rows<E> k, Rows<E> v, int64_t r0, int64_t rows, int64_t kend,
                 int64_t dh, bool causal, acc_t<T> scale, T* out, int64_t out_ld, acc_t<T>* lse,
                 acc_t<T>* out_acc) {
  using A = acc_t<T>;
  constexpr DType ad = acc_dtype<A>(), ed = dtype_of<E>();
  A* s = scratch<A>(2, kBr * kBc);  // scores, then probabilities [rows, kBc]
  A* o = scratch<A>(3, kBr * dh);   // unnormalised output [rows, Dh]
  A* m = scratch<A>(4, kBr);        // running max of scaled scores [rows]
  A* l = scratch<A>(5, kBr);        // running sum of exp(score - m) [rows]
  std::fill(o, o + rows * dh, A(0));
  std::fill(m, m + rows, -std::numeric_limits<A>::infinity());
  std::fill(l, l + rows, A(0));
  for (int64_t c0 = 0; c0 < kend; c0 += kBc) {
    const int64_t cols = std::min(kBc, kend - c0);
    gemm(rows, cols, dh, 1.0f, {ed, q.p, q.ld}, {ed, k.at(c0), k.ld, true}, 0.0f, {ad, s, kBc});
    for (int64_t r = 0; r < rows; ++r) {
      A* sr = s + r * kBc;
      // Causal: query r0 + r sees keys up to itself.
      const int64_t valid = causal ? std::clamp<int64_t>(r0 + r + 1 - c0, 0, cols) : cols;
      std::fill(sr + valid, sr + cols, A(0));
      if (valid == 0) continue;
      const A m_new = std::max(m[r], row_max(sr, valid) * scale);
      const A correction = std::exp(m[r] - m_new);  // 0 on the first block (m = -inf)
      l[r] = l[r] * correction + exp_scaled_sum(sr, scale, m_new, valid);
      m[r] = m_new;
      if (correction != A(1)) {
        A* orow = o + r * dh;
        for (int64_t d = 0; d < dh; ++d) orow[d] *= correction;
      }
    }
    if constexpr (std::is_same_v<E, A>) {
      gemm(rows, dh, cols, 1.0f, {ad, s, kBc}, {ad, v.at(c0), v.ld}, 1.0f, {ad, o, dh});
    } else {
      E* p = scratch<E>(7, kBr * kBc);  // P rounded for the product [rows, kBc]
      store_rows(s, kBc, p, kBc, rows, cols);
      gemm(rows, dh, cols, 1.0f, {ed, p, kBc}, {ed, v.at(c0), v.ld}, 1.0f, {ad, o, dh});
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    A* orow = o + r * dh;
    for (int64_t d = 0; d < dh; ++d) orow[d] /= l[r];
    lse[r] = m[r] + std::log(l[r]);
  }
  store_rows(o, dh, out, out_ld, rows, dh);
  if (out_acc) std::copy(o, o + rows * dh, out_acc);
}

struct ForwardLayouts {
  HeadRows q, k, v, out;
};

template <class T>
void forward(const T* q, const T* k, const T* v, T* out, acc_t<T>* lse, acc_t<T>* out_acc,
             const ForwardLayouts& lay, int64_t heads, int64_t t, int64_t tk, int64_t dh,
             bool causal, acc_t<T> scale) {
  using A = acc_t<T>;
  const int64_t chunks = (t + kQueryRows - 1) / kQueryRows;
  // Items are independent (each writes its own rows), so the grain only keeps tiny problems
  // out of a parallel region: about 2^20 multiply-adds per chunk at least.
  const int64_t item_work = std::min(t, kQueryRows) * tk * std::max<int64_t>(dh, 1) * 2;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(item_work, 1));
  parallel_for(heads * chunks, grain, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t h = w / chunks, q0 = (w % chunks) * kQueryRows,
                    q1 = std::min(t, q0 + kQueryRows);
      const int64_t kend = causal ? q1 : tk;  // keys any row of the chunk sees
      const int64_t kvh = kv_head(h, lay.q.heads, lay.k.heads);
      const T* kp = k + lay.k.start(kvh);
      const T* vp = v + lay.v.start(kvh);
      const bool native = native_bf16<T>();
      const auto kh =
          native ? Rows<acc_t<T>>{} : widened(kp, kend, dh, lay.k.row, 0);  // [kend, Dh]
      const auto vh =
          native ? Rows<acc_t<T>>{} : widened(vp, kend, dh, lay.v.row, 1);  // [kend, Dh]
      for (int64_t r0 = q0; r0 < q1; r0 += kBr) {
        const int64_t rows = std::min(kBr, q1 - r0);
        const T* qp = q + lay.q.start(h) + r0 * lay.q.row;
        T* o = out + lay.out.start(h) + r0 * lay.out.row;
        const int64_t cend = causal ? r0 + rows : tk;
        A* lse_b = lse + h * t + r0;
        A* acc_b = out_acc ? out_acc + (h * t + r0) * dh : nullptr;
        if (native)
          query_block<T, T>({qp, lay.q.row}, {kp, lay.k.row}, {vp, lay.v.row}, r0, rows, cend, dh,
                            causal, scale, o, lay.out.row, lse_b, acc_b);
        else
          query_block<T, A>(widened(qp, rows, dh, lay.q.row, 6), kh, vh, r0, rows, cend, dh, causal,
                            scale, o, lay.out.row, lse_b, acc_b);
      }
    }
  });
}

}  // namespace

HeadRows head_rows(const Tensor& t) {
  // A size-1 dim's stride is never stepped over: the row stride of one row is Dh.
  const int64_t row = t.size(2) <= 1 ? std::max<int64_t>(t.size(3), 1) : t.strides()[2];
  return {t.size(1), t.strides()[0], t.strides()[1], row};
}

Tensor empty_like_rows(const Tensor& like, DType dtype) {
  const int64_t b = like.size(0), h = like.size(1), t = like.size(2), dh = like.size(3);
  if (h > 1 && t > 1 && like.strides()[2] > like.strides()[1])
    return Tensor::empty({b, t, h, dh}, dtype).transpose(1, 2);
  return Tensor::empty(like.shape(), dtype);
}

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   double scale, bool keep_acc_out) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), tk = k.size(2), dh = q.size(3);
  AttentionForward r;
  r.out = empty_like_rows(q, q.dtype());
  r.lse = Tensor::empty({b, h, t}, accumulate_dtype(q.dtype()));
  if (r.out.numel() == 0) {  // nothing to attend to or with (T or Dh is 0)
    r.lse = Tensor::zeros({b, h, t}, r.lse.dtype());
    return r;
  }
  const bool narrow = is_narrow_compute(q.dtype());
  if (keep_acc_out && narrow) r.out_acc = Tensor::empty(q.shape(), DType::f32);
  const ForwardLayouts lay{head_rows(q), head_rows(k), head_rows(v), head_rows(r.out)};
  dispatch_compute(q.dtype(), "scaled_dot_product_attention", [&]<class T>() {
    acc_t<T>* acc = r.out_acc.defined() ? r.out_acc.data<acc_t<T>>() : nullptr;
    forward<T>(q.data<T>(), k.data<T>(), v.data<T>(), r.out.data<T>(), r.lse.data<acc_t<T>>(), acc,
               lay, b * h, t, tk, dh, causal, static_cast<acc_t<T>>(scale));
  });
  return r;
}

}  // namespace mixprec::cpu
