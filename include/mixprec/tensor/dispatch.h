// The one bridge from a run-time dtype to template code:
//   dispatch(t.dtype(), [&]<class T>() { kernel<T>(...); });
#pragma once

#include <string>

#include "mixprec/core/error.h"
#include "mixprec/numerics/storage_types.h"

namespace mixprec {

template <class Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f64:
      return fn.template operator()<double>();
    case DType::f32:
      return fn.template operator()<float>();
    case DType::bf16:
      return fn.template operator()<bf16>();
    case DType::f16:
      return fn.template operator()<f16>();
    case DType::f8_e4m3fn:
      return fn.template operator()<f8_e4m3fn>();
    case DType::f8_e5m2:
      return fn.template operator()<f8_e5m2>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    case DType::u8:
      return fn.template operator()<uint8_t>();
    case DType::boolean:
      return fn.template operator()<bool>();
    case DType::f4_e2m1fn:
      return fn.template operator()<f4_e2m1fn>();
  }
  throw Error("dispatch", "invalid dtype value " + std::to_string(static_cast<int>(dtype)));
}

// Storage types kernels compute on: f64, f32, bf16, f16.
template <class Fn>
decltype(auto) dispatch_compute(DType dtype, const char* where, Fn&& fn) {
  switch (dtype) {
    case DType::f64:
      return fn.template operator()<double>();
    case DType::f32:
      return fn.template operator()<float>();
    case DType::bf16:
      return fn.template operator()<bf16>();
    case DType::f16:
      return fn.template operator()<f16>();
    default:
      throw Error(where, std::string("dtype ") + dtype_name(dtype) +
                             " is storage-only here; use f64, f32, bf16 or f16");
  }
}

}  // namespace mixprec
