// RMSNorm / LayerNorm over the last dim. One kernel for both: `center` subtracts the mean.
//   forward   xhat = (x - mean) * rstd,  y = xhat * w + b
//   backward  g = dy * w,  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))  (no mean(g)
//             term without centring), dw = sum_rows(dy * xhat), db = sum_rows(dy)
#include "mixprec/cpu/normalization.h"

#include <algorithm>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/cpu/softmax.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

// Most partial-sum chunks a weight gradient uses: bounds the [chunks, D] scratch.
constexpr int64_t kMaxGradChunks = 64;

// A [D] parameter widened once (empty when undefined).
template <class T>
std::vector<acc_t<T>> widened(const Tensor& p) {
  std::vector<acc_t<T>> v(p.defined() ? static_cast<size_t>(p.numel()) : 0);
  if (p.defined()) load_row(p.data<T>(), v.data(), p.numel());
  return v;
}

// x, y [rows, D]; w, b [D] or empty; mean, rstd [rows] (mean unused without centring).
template <class T>
void norm_forward_rows(const T* x, const std::vector<acc_t<T>>& w, const std::vector<acc_t<T>>& b,
                       T* y, acc_t<T>* mean, acc_t<T>* rstd, int64_t rows, int64_t D, double eps,
                       bool center) {
  using A = acc_t<T>;
  const StoredRowOps<T>& ops = stored_row_ops<T>();
  const A* wp = w.empty() ? nullptr : w.data();
  const A* bp = b.empty() ? nullptr : b.data();
  parallel_for(rows, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      ops.norm_forward(x + r * D, y + r * D, wp, bp, D, static_cast<A>(eps), center,
                       center ? mean + r : nullptr, rstd + r);
  });
}

struct BackwardArgs {
  int64_t rows, D;
  bool center, need_dx, need_dw, need_db;
};

// x, dx [rows, D]; dy [rows, D] in g_dtype; mean, rstd [rows]; w [D] or empty.
// pw, pb [chunks, D]: per-chunk sums of dy * xhat and dy, chunk c = rows [c*chunk, ...).
template <class T>
void norm_backward_rows(const T* x, const void* dy, DType g_dtype, const std::vector<acc_t<T>>& w,
                        const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, acc_t<T>* pw,
                        acc_t<T>* pb, int64_t chunk, const BackwardArgs& a) {
  using A = acc_t<T>;
  const StoredRowOps<T>& stored = stored_row_ops<T>();
  const StoredRowOps<A>& ops = stored_row_ops<A>();  // on f32 (f64) copies of the rows
  const bool direct = g_dtype == dtype_of<T>();      // dy stored like x: no f32 row copies
  const int64_t D = a.D;
  const size_t g_size = dtype_size(g_dtype);
  const A* wp = w.empty() ? nullptr : w.data();
  parallel_for(a.rows, chunk, [&](int64_t r0, int64_t r1) {
    A* sw = a.need_dw ? pw + (r0 / chunk) * D : nullptr;  // [D] this chunk's dw sums
    A* sb = a.need_db ? pb + (r0 / chunk) * D : nullptr;  // [D] this chunk's db sums
    for (int64_t i = 0; sw && i < D; ++i) sw[i] = 0;
    for (int64_t i = 0; sb && i < D; ++i) sb[i] = 0;
    if (direct) {
      const T* g = static_cast<const T*>(dy);
      for (int64_t r = r0; r < r1; ++r)
        stored.norm_backward(x + r * D, g + r * D, wp, a.center ? mean[r] : A(0), rstd[r], D,
                             a.center, sw, sb, a.need_dx ? dx + r * D : nullptr);
      return;
    }
    std::vector<A> xrow(static_cast<size_t>(D));  // [D] x, then dx
    std::vector<A> grow(static_cast<size_t>(D));  // [D] dy
    for (int64_t r = r0; r < r1; ++r) {
      load_row(x + r * D, xrow.data(), D);
      load_grad_row(g_dtype, static_cast<const char*>(dy) + r * D * g_size, grow.data(), D);
      ops.norm_backward(xrow.data(), grow.data(), wp, a.center ? mean[r] : A(0), rstd[r], D,
                        a.center, sw, sb, a.need_dx ? xrow.data() : nullptr);
      if (a.need_dx) store_row(xrow.data(), dx + r * D, D);
    }
  });
}

// partial [chunks, D] -> out [D] (dtype T): column sums, chunks added in order.
template <class T>
Tensor combine_chunks(const std::vector<acc_t<T>>& partial, int64_t chunks, int64_t D) {
  using A = acc_t<T>;
  if (chunks == 0) return Tensor::zeros({D}, dtype_of<T>());
  Tensor out = Tensor::empty({D}, dtype_of<T>());
  T* o = out.data<T>();
  parallel_for(D, 1024, [&](int64_t d0, int64_t d1) {
    std::vector<A> sum(partial.begin() + d0, partial.begin() + d1);  // [d1 - d0] chunk 0
    for (int64_t c = 1; c < chunks; ++c) {
      const A* p = partial.data() + c * D;
      for (int64_t d = d0; d < d1; ++d) sum[static_cast<size_t>(d - d0)] += p[d];
    }
    store_row(sum.data(), o + d0, d1 - d0);
  });
  return out;
}

}  // namespace

Tensor norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                    bool center, NormStats& stats) {
  const int64_t D = backend::last_dim(x);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const DType acc = accumulate_dtype(x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  stats.rstd = Tensor::empty({rows}, acc);
  stats.mean = center ? Tensor::empty({rows}, acc) : Tensor();
  dispatch_compute(x.dtype(), center ? "layernorm" : "rmsnorm", [&]<class T>() {
    using A = acc_t<T>;
    norm_forward_rows<T>(x.data<T>(), widened<T>(weight), widened<T>(bias), y.data<T>(),
                         center ? stats.mean.data<A>() : nullptr, stats.rstd.data<A>(), rows, D,
                         eps, center);
  });
  return y;
}

NormGrads norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                        const NormStats& stats, bool center, bool need_dx, bool need_dweight,
                        bool need_dbias) {
  const char* where = center ? "layernorm backward" : "rmsnorm backward";
  MIXPREC_CHECK(dy.shape() == x.shape(), where,
                "gradient shape " + shape_to_string(dy.shape()) + " differs from input shape " +
                    shape_to_string(x.shape()));
  const int64_t D = backend::last_dim(x);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const BackwardArgs args{rows, D, center, need_dx, need_dweight && weight.defined(), need_dbias};
  // Fixed by the shape alone: at most kMaxGradChunks chunks, each a run of whole rows.
  const int64_t chunk = std::max(rows_per_chunk(D), (rows + kMaxGradChunks - 1) / kMaxGradChunks);
  const int64_t chunks = rows == 0 ? 0 : (rows + chunk - 1) / chunk;
  NormGrads out;
  if (!args.need_dx && !args.need_dw && !args.need_db) return out;
  if (need_dx) out.dx = Tensor::empty(x.shape(), x.dtype());
  dispatch_compute(x.dtype(), where, [&]<class T>() {
    using A = acc_t<T>;
    const Tensor g = grad_rows(dy, dtype_of<A>(), where);
    std::vector<A> pw(args.need_dw ? static_cast<size_t>(chunks * D) : 0);  // [chunks, D]
    std::vector<A> pb(args.need_db ? static_cast<size_t>(chunks * D) : 0);  // [chunks, D]
    norm_backward_rows<T>(x.data<T>(), g.raw_data(), g.dtype(), widened<T>(weight),
                          center ? stats.mean.data<A>() : nullptr, stats.rstd.data<A>(),
                          need_dx ? out.dx.data<T>() : nullptr, pw.data(), pb.data(), chunk, args);
    if (args.need_dw) out.dweight = combine_chunks<T>(pw, chunks, D);
    if (args.need_db) out.dbias = combine_chunks<T>(pb, chunks, D);
  });
  return out;
}

}  // namespace mixprec::cpu
