// Row kernels shared by the softmax, cross-entropy, normalisation, attention and embedding
// kernels: f32/f64 row primitives (RowOps) and the row algorithms on rows of any storage
// dtype (StoredRowOps). Written once over a SIMD vector type (softmax_row_impl.h) and compiled
// per ISA; row_ops<S>() and stored_row_ops<T>() pick the best for this CPU.
// Every reduction sums in a fixed lane order that depends only on n, so results never depend
// on the thread count (they may differ in the last bits between ISAs).
#pragma once

#include <cstdint>
#include <type_traits>

#include "mixprec/numerics/storage_types.h"

namespace mixprec::cpu {

// Row primitives on f32 (or f64) buffers, for kernels that combine them themselves
// (attention, embedding); the row algorithms are StoredRowOps below.
template <class S>
struct RowOps {
  S (*max)(const S* x, int64_t n);  // NaN elements are skipped
  S (*sum)(const S* x, int64_t n);
  S (*dot)(const S* a, const S* b, int64_t n);
  // out[i] = exp(x[i] - shift) (out may be x); returns the sum of out.
  S (*exp_shifted_sum)(const S* x, S shift, S* out, int64_t n);
  // out[i] = exp(x[i]) (out may be x). f32: a polynomial, relative error < 2^-23 on
  // [-87, 88] (x clamped to 88 above); below -87.3 it returns 0 or a value under 2^-126 (the
  // AVX-512 builds underflow gradually: within 2^-148 of exp(x)), NaN stays NaN.
  void (*exp)(const S* x, S* out, int64_t n);
  void (*add)(S* out, const S* x, int64_t n);  // out += x
};

// The row algorithms, straight from rows stored as T (double, float, bf16, f16) into a row
// stored as T (the output may be the input): elements are widened as they are loaded and
// rounded once (nearest even) as they are stored, so a bf16 row gives the bits of the float
// kernels on a widened copy of it, without the copy.
template <class T>
struct StoredRowOps {
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  // y <- softmax(x) or log_softmax(x) for x, y [rows, n]; sets each row's max and
  // log(sum(exp(x - max))) in max, log_sum [rows] (what the backward pass needs besides the
  // input; either may be null). buf: [n] scratch for the exponentials (softmax) or x - max
  // (log_softmax); when T is S it may be null (each y row then). A row's bits do not depend
  // on `rows` (the rows are pipelined, not combined).
  void (*softmax)(const T* x, T* y, S* buf, int64_t rows, int64_t n, S* max, S* log_sum);
  void (*log_softmax)(const T* x, T* y, S* buf, int64_t rows, int64_t n, S* max, S* log_sum);
  // y <- (x - mean) * rstd * w + b, with mean = 0 unless `center`; w, b may be null.
  // rstd = 1 / sqrt(mean((x - mean)^2) + eps).
  void (*norm_forward)(const T* x, T* y, const S* w, const S* b, int64_t n, S eps, bool center,
                       S* mean, S* rstd);
  // Cross-entropy of one row of logits: sets the row max and log(sum(exp(x - max))) and
  // returns (max - x[target]) + log_sum.
  S (*ce_forward)(const T* x, int64_t n, int64_t target, S* max, S* log_sum);
  // dx <- (exp((x - max) - log_sum) - onehot(target)) * scale.
  void (*ce_backward)(const T* x, T* dx, int64_t n, int64_t target, S max, S log_sum, S scale);
  // dx from the input row x, its max and log_sum, and g = dy, with p = exp((x - max) -
  // log_sum) recomputed in full precision: softmax dx = p * (g - <g, p>), log-softmax
  // dx = g - p * sum(g). softmax_backward keeps p in buf [n] (may be dx when T is S).
  void (*softmax_backward)(const T* x, const T* g, T* dx, S* buf, int64_t n, S max, S log_sum);
  void (*log_softmax_backward)(const T* x, const T* g, T* dx, int64_t n, S max, S log_sum);
  // Adds dy * xhat to dw and dy to db (either may be null); with dx, dx = rstd * (g*w -
  // mean(g*w) - xhat * mean(g*w * xhat)) (no mean(g*w) term unless `center`).
  void (*norm_backward)(const T* x, const T* g, const S* w, S mean, S rstd, int64_t n, bool center,
                        S* dw, S* db, T* dx);
};

// The best row kernels for this CPU (f32: AVX-512 (with BF16), else AVX2+FMA, else portable).
template <class S>
const RowOps<S>& row_ops();
template <>
const RowOps<float>& row_ops<float>();
template <>
const RowOps<double>& row_ops<double>();

template <class T>
const StoredRowOps<T>& stored_row_ops();  // T = double, float, bf16, f16

// Each ISA's f32 kernels, for tests that compare them. `portable` is plain C++ vectors (SSE2
// on x86-64); the others are compiled with target attributes and need CPU support.
// avx512_bf16 is avx512 with bf16 rows stored by the AVX512_BF16 conversion (same bits).
enum class RowIsa { portable, avx2, avx512, avx512_bf16 };
bool row_isa_supported(RowIsa isa);
const char* row_isa_name(RowIsa isa);
const RowOps<float>& row_ops_f32(RowIsa isa);  // Error when unsupported
template <class T>
const StoredRowOps<T>& stored_row_ops(RowIsa isa);  // T = float, bf16, f16

// Every f32-math row kernel of one ISA build.
struct RowKernels {
  RowOps<float> f32;
  StoredRowOps<float> stored_f32;
  StoredRowOps<bf16> stored_bf16;
  StoredRowOps<f16> stored_f16;
  template <class T>
  constexpr const StoredRowOps<T>& stored() const {
    if constexpr (std::is_same_v<T, float>)
      return stored_f32;
    else if constexpr (std::is_same_v<T, bf16>)
      return stored_bf16;
    else
      return stored_f16;
  }
};
// The builds in softmax_row_ops_avx2.cpp, softmax_row_ops_avx512.cpp and
// softmax_row_ops_avx512_bf16.cpp (bf16 rows only: the rest is avx512's).
const RowKernels& avx2_row_kernels();
const RowKernels& avx512_row_kernels();
const StoredRowOps<bf16>& avx512_bf16_stored_rows();

}  // namespace mixprec::cpu
