// Copies: strided gathers/scatters and dtype conversion of whole tensors.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/dispatch.h"
#include "mixprec/tensor/history_hooks.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

struct StridedRef {
  char* data;
  const Shape* strides;  // in elements
};

// One strided row of n elements of E bytes (a fixed-size memcpy: one load and store each).
template <std::size_t E>
void copy_row(char* dp, int64_t ds, const char* sp, int64_t ss, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(dp + j * ds * int64_t{E}, sp + j * ss * int64_t{E}, E);
}

// Rows [r, r + t) of a transposed source (their dim has source stride 1, the last dim a long
// one), copied in column tiles so the source block they read stays in cache.
template <std::size_t E>
void copy_transposed_rows(char* dp, int64_t drow, int64_t ds, const char* sp, int64_t ss, int64_t t,
                          int64_t n) {
  constexpr int64_t kTile = 64;
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t j1 = std::min(n, j0 + kTile);
    for (int64_t i = 0; i < t; ++i)
      copy_row<E>(dp + (i * drow + j0 * ds) * int64_t{E}, ds, sp + (i + j0 * ss) * int64_t{E}, ss,
                  j1 - j0);
  }
}

template <std::size_t E>
void copy_rows(const Shape& shape, StridedRef dst, const char* src, const Shape& src_strides,
               int64_t r0, int64_t r1) {
  const int nd = static_cast<int>(shape.size());
  const int64_t row_len = shape[static_cast<size_t>(nd - 1)];
  const int64_t ds = (*dst.strides)[static_cast<size_t>(nd - 1)];
  const int64_t ss = src_strides[static_cast<size_t>(nd - 1)];
  // A transposed source: consecutive rows are consecutive source elements.
  const bool transposed = nd >= 2 && ss != 1 && src_strides[static_cast<size_t>(nd - 2)] == 1;
  const int64_t inner = nd >= 2 ? shape[static_cast<size_t>(nd - 2)] : 1;
  for (int64_t r = r0; r < r1;) {
    int64_t rem = r, doff = 0, soff = 0;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t i = rem % shape[static_cast<size_t>(d)];
      rem /= shape[static_cast<size_t>(d)];
      doff += i * (*dst.strides)[static_cast<size_t>(d)];
      soff += i * src_strides[static_cast<size_t>(d)];
    }
    char* dp = dst.data + doff * int64_t{E};
    const char* sp = src + soff * int64_t{E};
    if (ds == 1 && ss == 1) {
      std::memcpy(dp, sp, static_cast<std::size_t>(row_len) * E);
      ++r;
    } else if (transposed) {  // up to 16 rows of the same outer index at once
      const int64_t t = std::min({r1 - r, inner - r % inner, int64_t{16}});
      copy_transposed_rows<E>(dp, (*dst.strides)[static_cast<size_t>(nd - 2)], ds, sp, ss, t,
                              row_len);
      r += t;
    } else {
      copy_row<E>(dp, ds, sp, ss, row_len);
      ++r;
    }
  }
}

// Copies every element of `shape` from src to dst (both strided), elem_size bytes each.
// Rows along the last dim are the unit of work; they go to threads in fixed chunks.
void strided_copy(const Shape& shape, StridedRef dst, const char* src, const Shape& src_strides,
                  std::size_t elem_size) {
  const int nd = static_cast<int>(shape.size());
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  if (nd == 0) {
    std::memcpy(dst.data, src, elem_size);
    return;
  }
  const int64_t row_len = shape[static_cast<size_t>(nd - 1)];
  const int64_t rows = numel / row_len;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / row_len);
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    switch (elem_size) {
      case 1:
        return copy_rows<1>(shape, dst, src, src_strides, r0, r1);
      case 2:
        return copy_rows<2>(shape, dst, src, src_strides, r0, r1);
      case 4:
        return copy_rows<4>(shape, dst, src, src_strides, r0, r1);
      case 8:
        return copy_rows<8>(shape, dst, src, src_strides, r0, r1);
      default:
        MIXPREC_CHECK(false, "strided_copy", "element size " + std::to_string(elem_size));
    }
  });
}

// Float to integer: truncation toward zero, saturating at the type's range, NaN -> 0.
// To bool: x != 0, so NaN -> true (as C++, NumPy and PyTorch do).
template <class I>
I saturating_int(double x) {
  if constexpr (std::is_same_v<I, bool>) {
    return x != 0.0;
  } else {
    if (std::isnan(x)) return I{0};
    constexpr auto lo = static_cast<double>(std::numeric_limits<I>::min());
    constexpr auto hi = static_cast<double>(std::numeric_limits<I>::max());
    if (x <= lo) return std::numeric_limits<I>::min();
    if (x >= hi) return std::numeric_limits<I>::max();
    return static_cast<I>(x);
  }
}

// An i64 beyond 2^53 as f64 rounded to odd: the dropped bits become a sticky last bit, so a
// later rounding to any format of at most 51 significant bits is the correct single rounding
// of the integer (the classic round-to-odd argument: 53 >= 24 + 2).
double round_to_odd_f64(int64_t v) {
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int bits = std::bit_width(mag);
  if (bits <= 53) return static_cast<double>(v);
  const int drop = bits - 53;
  uint64_t kept = mag >> drop;
  if (mag & ((uint64_t{1} << drop) - 1)) kept |= 1;
  const double d = std::ldexp(static_cast<double>(kept), drop);  // exact: kept has 53 bits
  return v < 0 ? -d : d;
}

// Any dtype -> any dtype through f64, for the paths that involve integers (exact for
// integers below 2^53 and for every floating value; a narrow target still rounds once).
void convert_via_f64(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t n,
                     const ConvertOptions& opts) {
  constexpr int64_t kChunk = 4096;
  parallel_for(static_cast<int64_t>(n), kChunk, [&](int64_t begin, int64_t end) {
    std::vector<double> tmp(static_cast<std::size_t>(end - begin));
    dispatch(src_dtype, [&]<class S>() {
      const S* s = static_cast<const S*>(src) + begin;
      for (std::size_t i = 0; i < tmp.size(); ++i) {
        if constexpr (std::is_same_v<S, int64_t>)
          tmp[i] = dst_dtype == DType::f64 ? static_cast<double>(s[i]) : round_to_odd_f64(s[i]);
        else if constexpr (std::is_integral_v<S>)
          tmp[i] = static_cast<double>(s[i]);  // exact
        else
          tmp[i] = 0.0;  // floating sources are widened below
      }
    });
    if (is_floating(src_dtype))
      widen_to_f64(src_dtype, static_cast<const char*>(src) + begin * dtype_size(src_dtype),
                   tmp.data(), tmp.size());
    if (is_floating(dst_dtype)) {
      ConvertOptions o = opts;
      o.index_base = opts.index_base + static_cast<uint64_t>(begin);
      convert_from_f64(tmp.data(), dst_dtype,
                       static_cast<char*>(dst) + begin * dtype_size(dst_dtype), tmp.size(), o);
      return;
    }
    dispatch(dst_dtype, [&]<class D>() {
      if constexpr (std::is_integral_v<D>) {
        D* d = static_cast<D*>(dst) + begin;
        for (std::size_t i = 0; i < tmp.size(); ++i) d[i] = saturating_int<D>(tmp[i]);
      }
    });
  });
}

}  // namespace

void convert_buffer(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t n,
                    const ConvertOptions& opts) {
  if (n == 0) return;  // empty tensors may have null data
  if (src_dtype == dst_dtype) {
    if (src != dst) std::memcpy(dst, src, n * dtype_size(src_dtype));
    return;
  }
  if (!is_floating(src_dtype) || !is_floating(dst_dtype)) {
    convert_via_f64(src_dtype, src, dst_dtype, dst, n, opts);
  } else if (dst_dtype == DType::f64) {
    widen_to_f64(src_dtype, src, static_cast<double*>(dst), n);
  } else if (src_dtype == DType::f64) {
    convert_from_f64(static_cast<const double*>(src), dst_dtype, dst, n, opts);
  } else if (src_dtype == DType::f32) {
    convert_from_f32(static_cast<const float*>(src), dst_dtype, dst, n, opts);
  } else if (dst_dtype == DType::f32) {
    widen_to_f32(src_dtype, src, static_cast<float*>(dst), n);
  } else {  // narrow -> narrow: widen exactly to f32, then round once, chunk by chunk (fixed
            // chunks: stochastic rounding's indices do not depend on the thread count)
    constexpr int64_t kChunk = 1 << 14;
    parallel_for(static_cast<int64_t>(n), kChunk, [&](int64_t begin, int64_t end) {
      const auto len = static_cast<std::size_t>(end - begin);
      std::vector<float> tmp(len);
      widen_to_f32(src_dtype, static_cast<const char*>(src) + begin * dtype_size(src_dtype),
                   tmp.data(), len);
      ConvertOptions o = opts;
      o.index_base = opts.index_base + static_cast<uint64_t>(begin);
      convert_from_f32(tmp.data(), dst_dtype,
                       static_cast<char*>(dst) + begin * dtype_size(dst_dtype), len, o);
    });
  }
}

void gather_contiguous(const Tensor& src, void* dst) {
  const Shape strides = contiguous_strides(src.shape());
  strided_copy(src.shape(), {static_cast<char*>(dst), &strides},
               static_cast<const char*>(src.raw_data()), src.strides(), src.element_size());
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  if (!is_meta()) gather_contiguous(*this, out.raw_data());
  if (const auto record = detail::history_hooks().record_copy) record(*this, out);
  return out;
}

Tensor Tensor::to(DType target, const ConvertOptions& opts) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target, device());
  if (is_meta()) return out;
  const Tensor src = contiguous();
  convert_buffer(dtype(), src.raw_data(), target, out.raw_data(), static_cast<std::size_t>(numel()),
                 opts);
  if (const auto record = detail::history_hooks().record_cast) record(*this, out);
  return out;
}

void Tensor::copy_from(const Tensor& src, const ConvertOptions& opts) {
  MIXPREC_CHECK(src.shape() == shape(), "Tensor::copy_from",
                "shape " + shape_to_string(src.shape()) + " into " + shape_to_string(shape()));
  MIXPREC_CHECK(src.is_meta() == is_meta(), "Tensor::copy_from",
                std::string("cannot copy between devices ") + device_name(src.device()) + " and " +
                    device_name(device()));
  const auto grad_enabled = detail::history_hooks().grad_enabled;
  MIXPREC_CHECK(!grad_enabled || !grad_enabled() || (!requires_grad() && !src.requires_grad()),
                "Tensor::copy_from",
                "copy_from records no history: copy into or from a tensor that requires grad "
                "inside a NoGradGuard, or use detach()");
  if (is_meta()) return;
  // An overlapping source is read in full before any element is written.
  const Tensor safe_src = src.shares_storage_with(*this) ? src.clone() : src;
  const Tensor converted = safe_src.to(dtype(), opts).contiguous();
  const Shape contiguous = contiguous_strides(shape());
  strided_copy(shape(), {static_cast<char*>(raw_data()), &strides()},
               static_cast<const char*>(converted.raw_data()), contiguous, element_size());
}

std::vector<double> Tensor::to_doubles() const {
  MIXPREC_CHECK(!is_meta(), "Tensor::to_doubles", "a meta tensor has no data");
  std::vector<double> out(static_cast<std::size_t>(numel()));
  const Tensor src = contiguous();
  convert_buffer(dtype(), src.raw_data(), DType::f64, out.data(), out.size());
  return out;
}

}  // namespace mixprec
