// Reference scaled-dot-product attention: the whole T×T score matrix per head, in f64. With
// fewer key/value heads than query heads (grouped-query attention), each key/value head
// serves a group of consecutive query heads, and its gradients sum over them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// Element (b·H + h, r, c) of a [B, H, T, Dh] tensor read in row-major order.
struct Heads {
  std::vector<double> v;
  int64_t t, dh;
  const double* row(int64_t head, int64_t r) const { return v.data() + (head * t + r) * dh; }
};

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The key/value head query head h (of B·H) reads: grouped-query attention shares each of
// Hkv key/value heads among H / Hkv consecutive query heads.
struct KvHeads {
  int64_t h, hkv;
  int64_t of(int64_t head) const { return head / h * hkv + head % h / (h / hkv); }
};

// Keys query i sees: 0..i when causal, else all T.
int64_t visible(bool causal, int64_t i, int64_t t) {
  return causal ? i + 1 : t;
}

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   double scale, bool keep_acc_out) {
  const int64_t heads = q.size(0) * q.size(1), t = q.size(2), dh = q.size(3);
  const Shape lse_shape{q.size(0), q.size(1), t};
  AttentionForward r;
  if (q.numel() == 0) {  // nothing to attend to or with: lse 0, as the cpu kernel leaves it
    r.out = make({}, q.shape(), q.dtype());
    r.lse = make(std::vector<double>(static_cast<size_t>(heads * t), 0.0), lse_shape,
                 stats_dtype(q.dtype()));
    return r;
  }
  const int64_t tk = k.size(2);  // keys: more than queries only without a causal mask
  const Heads Q{values(q), t, dh}, K{values(k), tk, dh}, V{values(v), tk, dh};
  const KvHeads kv{q.size(1), k.size(1)};
  std::vector<double> out(static_cast<size_t>(heads * t * dh), 0.0);
  std::vector<double> lse(static_cast<size_t>(heads * t)), s(static_cast<size_t>(tk));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < t; ++i) {
      const int64_t n = visible(causal, i, tk), g = kv.of(h);
      double m = -std::numeric_limits<double>::infinity(), l = 0;
      for (int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = scale * dot(Q.row(h, i), K.row(g, j), dh);
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < n; ++j) l += std::exp(s[static_cast<size_t>(j)] - m);
      double* o = out.data() + (h * t + i) * dh;
      for (int64_t j = 0; j < n; ++j) {
        const double p = std::exp(s[static_cast<size_t>(j)] - m) / l;
        for (int64_t c = 0; c < dh; ++c) o[c] += p * V.row(g, j)[c];
      }
      lse[static_cast<size_t>(h * t + i)] = m + std::log(l);
    }
  r.out = make(out, q.shape(), q.dtype());
  r.lse = make(lse, lse_shape, stats_dtype(q.dtype()));
  if (keep_acc_out && is_narrow_compute(q.dtype())) r.out_acc = make(out, q.shape(), DType::f32);
  return r;
}

// P = exp(scale·q·kᵀ - lse) from the given lse; dv = Pᵀ·dO, dP = dO·vᵀ, D = rowsum(dO∘O) from
// the given out (forward's output or its out_acc), dS = scale·P∘(dP - D), dq = dS·k,
// dk = dSᵀ·q.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  bool causal, double scale) {
  const int64_t heads = q.size(0) * q.size(1), t = q.size(2), dh = q.size(3);
  const Heads Q{values(q), t, dh}, K{values(k), t, dh}, V{values(v), t, dh};
  const Heads O{values(out), t, dh}, dO{values(dout), t, dh};
  const std::vector<double> L = values(lse);
  const KvHeads kv{q.size(1), k.size(1)};
  std::vector<double> dq(static_cast<size_t>(heads * t * dh), 0.0),
      dk(static_cast<size_t>(k.numel()), 0.0), dv(dk.size(), 0.0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < t; ++i) {
      const int64_t g = kv.of(h);
      const double d = dot(dO.row(h, i), O.row(h, i), dh);
      double* dqi = dq.data() + (h * t + i) * dh;
      for (int64_t j = 0; j < visible(causal, i, t); ++j) {
        const double p =
            std::exp(scale * dot(Q.row(h, i), K.row(g, j), dh) - L[static_cast<size_t>(h * t + i)]);
        const double ds = scale * p * (dot(dO.row(h, i), V.row(g, j), dh) - d);
        double* dkj = dk.data() + (g * t + j) * dh;
        double* dvj = dv.data() + (g * t + j) * dh;
        for (int64_t c = 0; c < dh; ++c) {
          dvj[c] += p * dO.row(h, i)[c];
          dqi[c] += ds * K.row(g, j)[c];
          dkj[c] += ds * Q.row(h, i)[c];
        }
      }
    }
  return {make(dq, q.shape(), q.dtype()), make(dk, k.shape(), q.dtype()),
          make(dv, v.shape(), q.dtype())};
}

}  // namespace mixprec::backend::reference
