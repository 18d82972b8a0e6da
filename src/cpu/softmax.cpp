// Softmax and log-softmax over the last dim: each row is loaded once into an f32 buffer,
// transformed there by the row kernels, and stored once.
#include "mixprec/cpu/softmax.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

// x, y [rows, D]; m, ls [rows] (null: not wanted). Each chunk of rows goes straight from x
// to y in one call; the row kernels keep the exponentials (softmax) or x - max (log_softmax)
// in an f32 row buffer (y's rows themselves when T is the math type).
template <class T>
void softmax_rows(const T* x, T* y, acc_t<T>* m, acc_t<T>* ls, int64_t rows, int64_t D, bool log) {
  using A = acc_t<T>;
  const StoredRowOps<T>& ops = stored_row_ops<T>();
  parallel_for(rows, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
    std::vector<A> buf(std::is_same_v<T, A> ? 0 : static_cast<size_t>(D));  // [D]
    A* b = buf.empty() ? nullptr : buf.data();
    (log ? ops.log_softmax : ops.softmax)(x + r0 * D, y + r0 * D, b, r1 - r0, D,
                                          m ? m + r0 : nullptr, ls ? ls + r0 : nullptr);
  });
}

// x, dx [rows, D]; m, ls [rows]; dy [rows, D] of dtype g_dtype. When dy is stored like x
// the rows go straight from x and dy to dx; otherwise both are widened into f32 rows first.
template <class T>
void softmax_backward_rows(const T* x, const acc_t<T>* m, const acc_t<T>* ls, const void* dy,
                           DType g_dtype, T* dx, int64_t rows, int64_t D, bool log) {
  using A = acc_t<T>;
  if (g_dtype == dtype_of<T>()) {
    const StoredRowOps<T>& ops = stored_row_ops<T>();
    const T* g = static_cast<const T*>(dy);
    parallel_for(rows, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
      std::vector<A> buf(std::is_same_v<T, A> || log ? 0 : static_cast<size_t>(D));  // [D] p
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r * D;
        if (log) {
          ops.log_softmax_backward(x + o, g + o, dx + o, D, m[r], ls[r]);
        } else {
          A* b = buf.empty() ? reinterpret_cast<A*>(dx + o) : buf.data();
          ops.softmax_backward(x + o, g + o, dx + o, b, D, m[r], ls[r]);
        }
      }
    });
    return;
  }
  const StoredRowOps<A>& ops = stored_row_ops<A>();  // on f32 (f64) copies of the rows
  const size_t g_size = dtype_size(g_dtype);
  parallel_for(rows, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
    std::vector<A> xrow(static_cast<size_t>(D));  // [D] x, then dx
    std::vector<A> grow(static_cast<size_t>(D));  // [D] dy
    for (int64_t r = r0; r < r1; ++r) {
      load_row(x + r * D, xrow.data(), D);
      load_grad_row(g_dtype, static_cast<const char*>(dy) + r * D * g_size, grow.data(), D);
      if (log)
        ops.log_softmax_backward(xrow.data(), grow.data(), xrow.data(), D, m[r], ls[r]);
      else
        ops.softmax_backward(xrow.data(), grow.data(), xrow.data(), xrow.data(), D, m[r], ls[r]);
      store_row(xrow.data(), dx + r * D, D);
    }
  });
}

}  // namespace

Tensor grad_rows(const Tensor& dy, DType acc, const char* where) {
  MIXPREC_CHECK(dy.defined() && is_floating(dy.dtype()), where,
                std::string("gradient must be a floating tensor, got ") +
                    (dy.defined() ? dtype_name(dy.dtype()) : "an undefined tensor"));
  if (acc == DType::f64) return dy.to(DType::f64).contiguous();
  return (dy.dtype() == DType::f64 ? dy.to(DType::f32) : dy).contiguous();
}

void load_grad_row(DType dtype, const void* src, float* dst, int64_t n) {
  widen_row_f32(dtype, src, dst, static_cast<size_t>(n));
}

void load_grad_row(DType dtype, const void* src, double* dst, int64_t n) {
  MIXPREC_CHECK(dtype == DType::f64, "load_grad_row", "f64 rows expected (use grad_rows)");
  std::memcpy(dst, src, sizeof(double) * static_cast<size_t>(n));
}

Tensor softmax_lastdim(const Tensor& x, bool log, SoftmaxStats* stats) {
  const int64_t D = backend::last_dim(x);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const DType acc = accumulate_dtype(x.dtype());
  if (stats) *stats = {Tensor::empty({rows}, acc), Tensor::empty({rows}, acc)};
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_compute(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    using A = acc_t<T>;
    softmax_rows<T>(x.data<T>(), y.data<T>(), stats ? stats->max.data<A>() : nullptr,
                    stats ? stats->log_sum.data<A>() : nullptr, rows, D, log);
  });
  return y;
}

Tensor softmax_lastdim_backward(const Tensor& x, const SoftmaxStats& stats, const Tensor& dy,
                                bool log) {
  const char* where = log ? "log_softmax backward" : "softmax backward";
  MIXPREC_CHECK(dy.shape() == x.shape(), where,
                "gradient shape " + shape_to_string(dy.shape()) + " differs from input shape " +
                    shape_to_string(x.shape()));
  const int64_t D = backend::last_dim(x);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  dispatch_compute(x.dtype(), where, [&]<class T>() {
    using A = acc_t<T>;
    const Tensor g = grad_rows(dy, dtype_of<A>(), where);
    softmax_backward_rows<T>(x.data<T>(), stats.max.data<A>(), stats.log_sum.data<A>(),
                             g.raw_data(), g.dtype(), dx.data<T>(), rows, D, log);
  });
  return dx;
}

}  // namespace mixprec::cpu
