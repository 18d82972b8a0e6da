// How kernels move rows between storage and arithmetic: load T -> acc_t<T>, compute, store
// acc_t<T> -> T with one round-to-nearest-even. acc_t is f32 for f32/bf16/f16 (f64 for f64),
// so every kernel "loads T, accumulates f32, stores T". Conversions use the SIMD kernels.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/storage_types.h"

namespace mixprec::cpu {

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
inline void load_row(const T* src, acc_t<T>* dst, int64_t n) {
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    if (static_cast<const void*>(src) != dst) std::memcpy(dst, src, sizeof(T) * n);
  } else {
    widen_row_f32(dtype_of<T>(), src, dst, static_cast<std::size_t>(n));
  }
}

template <class T>
inline void store_row(const acc_t<T>* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    if (static_cast<const void*>(src) != dst) std::memcpy(dst, src, sizeof(T) * n);
  } else {
    narrow_row_f32(src, dtype_of<T>(), dst, static_cast<std::size_t>(n));
  }
}

// n elements of src as acc_t<T>: src itself when T already is the math type, else widened
// into buf (which must hold n).
template <class T>
inline const acc_t<T>* as_acc(const T* src, acc_t<T>* buf, int64_t n) {
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    return src;
  } else {
    load_row(src, buf, n);
    return buf;
  }
}

// Rows per parallel chunk so one chunk holds about `target` elements (at least one row).
inline int64_t rows_per_chunk(int64_t row_len, int64_t target = 1 << 14) {
  return row_len >= target ? 1 : target / (row_len > 0 ? row_len : 1);
}

}  // namespace mixprec::cpu
