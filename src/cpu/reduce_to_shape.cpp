#include "mixprec/cpu/reduce_to_shape.h"

#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

// grad [rows, cols] -> out [cols]: column sums, each column added top to bottom.
template <class T>
void sum_rows(const T* grad, int64_t rows, int64_t cols, acc_t<T>* out) {
  constexpr int64_t kCols = 256;
  parallel_for(cols, kCols, [&](int64_t c0, int64_t c1) {
    std::vector<acc_t<T>> row(static_cast<size_t>(c1 - c0));
    for (int64_t c = c0; c < c1; ++c) out[c] = 0;
    for (int64_t r = 0; r < rows; ++r) {
      load_row(grad + r * cols + c0, row.data(), c1 - c0);
      for (int64_t c = c0; c < c1; ++c) out[c] += row[static_cast<size_t>(c - c0)];
    }
  });
}

// Any broadcast pattern: one sequential pass in element order.
template <class T>
void sum_general(const T* grad, const Shape& gshape, const Shape& target, acc_t<T>* out) {
  const int nd = static_cast<int>(gshape.size());
  Shape out_strides(gshape.size(), 0);  // stride into out per grad dim (0 when reduced)
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; --i) {
    const auto ui = static_cast<size_t>(i);
    if (target[ui] != 1) out_strides[ui] = s;
    s *= target[ui];
  }
  const int64_t n_out = s;
  for (int64_t i = 0; i < n_out; ++i) out[i] = 0;
  Shape idx(gshape.size(), 0);
  const int64_t n = shape_numel(gshape);
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[o] += static_cast<acc_t<T>>(grad[i]);
    for (int d = nd - 1; d >= 0; --d) {
      const auto ud = static_cast<size_t>(d);
      ++idx[ud];
      o += out_strides[ud];
      if (idx[ud] < gshape[ud]) break;
      o -= out_strides[ud] * idx[ud];
      idx[ud] = 0;
    }
  }
}

}  // namespace

Tensor reduce_to_shape(const Tensor& grad, const Shape& shape, std::optional<DType> out_dtype) {
  const Shape& g = grad.shape();
  MIXPREC_CHECK(shape.size() <= g.size(), "reduce_to_shape",
                "cannot reduce " + shape_to_string(g) + " to " + shape_to_string(shape));
  Shape target(g.size() - shape.size(), 1);
  target.insert(target.end(), shape.begin(), shape.end());
  for (size_t i = 0; i < g.size(); ++i)
    MIXPREC_CHECK(target[i] == g[i] || target[i] == 1, "reduce_to_shape",
                  shape_to_string(shape) + " does not broadcast to " + shape_to_string(g));
  // Leading dims reduced, trailing dims kept whole: a plain column sum.
  size_t lead = 0;
  while (lead < g.size() && target[lead] == 1) ++lead;
  bool rows_cols = true;
  for (size_t i = lead; i < g.size(); ++i) rows_cols = rows_cols && target[i] == g[i];
  const Tensor gc = grad.contiguous();
  const DType od = out_dtype.value_or(grad.dtype());
  MIXPREC_CHECK(is_floating(od) && (od == DType::f64) == (grad.dtype() == DType::f64),
                "reduce_to_shape",
                std::string("cannot sum ") + dtype_name(grad.dtype()) + " into " + dtype_name(od));
  Tensor out = Tensor::empty(shape, od);
  dispatch_compute(grad.dtype(), "reduce_to_shape", [&]<class T>() {
    std::vector<acc_t<T>> acc(static_cast<size_t>(out.numel()));
    if (rows_cols) {
      const int64_t cols = out.numel();
      sum_rows<T>(gc.data<T>(), cols ? gc.numel() / cols : 0, cols, acc.data());
    } else {
      sum_general<T>(gc.data<T>(), g, target, acc.data());
    }
    if constexpr (std::is_same_v<acc_t<T>, double>)
      convert_from_f64(acc.data(), od, out.raw_data(), acc.size());
    else
      narrow_row_f32(acc.data(), od, out.raw_data(), acc.size());
  });
  return out;
}

}  // namespace mixprec::cpu
