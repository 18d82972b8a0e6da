// The portable build of the row kernels (SSE2 vectors on x86-64; f64 always comes from here)
// and the choice of ISA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "../numerics/vector_storage.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/storage_types.h"
#include "softmax_row_impl.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

struct F32x4 {
  using S = float;
  using V = float __attribute__((vector_size(16)));
  static constexpr bool kScalef = false;  // 2^n from integer bits
  static constexpr bool kFma = false;     // a * b + c rounds twice
  using U = uint32_t __attribute__((vector_size(16)));
  static V clamp(V x, float lo, float hi) {
    x = x < lo ? V{} + lo : x;  // NaN fails both tests and stays NaN
    return x > hi ? V{} + hi : x;
  }
};
struct F64x2 {
  using S = double;
  using V = double __attribute__((vector_size(16)));
};

constexpr RowKernels kPortable = make_row_kernels<F32x4>();
constexpr RowOps<double> kPortableF64 = make_row_ops<F64x2>();
constexpr StoredRowOps<double> kStoredF64 = make_stored_row_ops<F64x2, double>();

// The tables of `isa` (Error when this CPU cannot run it).
const RowKernels& kernels(RowIsa isa) {
  MIXPREC_CHECK(row_isa_supported(isa), "row kernels",
                std::string("this CPU cannot run the ") + row_isa_name(isa) + " row kernels");
  switch (isa) {
    case RowIsa::avx512_bf16: {
      static const RowKernels with_bf16 = [] {
        RowKernels k = avx512_row_kernels();
        k.stored_bf16 = avx512_bf16_stored_rows();
        return k;
      }();
      return with_bf16;
    }
    case RowIsa::avx512:
      return avx512_row_kernels();
    case RowIsa::avx2:
      return avx2_row_kernels();
    default:
      return kPortable;
  }
}

RowIsa best_row_isa() {
  return row_isa_supported(RowIsa::avx512_bf16) ? RowIsa::avx512_bf16
         : row_isa_supported(RowIsa::avx512)    ? RowIsa::avx512
         : row_isa_supported(RowIsa::avx2)      ? RowIsa::avx2
                                                : RowIsa::portable;
}

}  // namespace

bool row_isa_supported(RowIsa isa) {
  switch (isa) {
    case RowIsa::portable:
      return true;
    case RowIsa::avx2:
      return cpu_has_avx2_f16c();  // AVX2 + FMA (+ F16C), OS support checked
    case RowIsa::avx512:
      return cpu_has_avx512f();
    case RowIsa::avx512_bf16:
      return cpu_has_avx512f() && __builtin_cpu_supports("avx512bf16") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }
  return false;
}

const char* row_isa_name(RowIsa isa) {
  switch (isa) {
    case RowIsa::avx512_bf16:
      return "avx512_bf16";
    case RowIsa::avx512:
      return "avx512";
    case RowIsa::avx2:
      return "avx2";
    default:
      return "portable";
  }
}

const RowOps<float>& row_ops_f32(RowIsa isa) {
  return kernels(isa).f32;
}

template <>
const RowOps<float>& row_ops<float>() {
  static const RowOps<float>& best = row_ops_f32(best_row_isa());
  return best;
}

template <class T>
const StoredRowOps<T>& stored_row_ops(RowIsa isa) {
  return kernels(isa).template stored<T>();
}
template const StoredRowOps<float>& stored_row_ops<float>(RowIsa);
template const StoredRowOps<bf16>& stored_row_ops<bf16>(RowIsa);
template const StoredRowOps<f16>& stored_row_ops<f16>(RowIsa);

template <class T>
const StoredRowOps<T>& stored_row_ops() {
  if constexpr (std::is_same_v<T, double>) {
    return kStoredF64;
  } else {
    static const StoredRowOps<T>& best = stored_row_ops<T>(best_row_isa());
    return best;
  }
}
template const StoredRowOps<double>& stored_row_ops<double>();
template const StoredRowOps<float>& stored_row_ops<float>();
template const StoredRowOps<bf16>& stored_row_ops<bf16>();
template const StoredRowOps<f16>& stored_row_ops<f16>();

template <>
const RowOps<double>& row_ops<double>() {
  return kPortableF64;
}

}  // namespace mixprec::cpu
