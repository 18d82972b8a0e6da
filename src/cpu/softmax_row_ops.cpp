// The portable build of the row kernels (SSE2 vectors on x86-64; f64 always comes from here)
// and the choice of ISA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "mixprec/error.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/storage_types.h"
#include "softmax_row_impl.h"
#include "softmax_row_ops.h"
#include "vector_storage.h"

namespace mixprec::cpu {
namespace {

struct F32x4 {
  using S = float;
  using V = float __attribute__((vector_size(16)));
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

constexpr RowOps<float> kPortableF32 = make_row_ops<F32x4>();
constexpr RowOps<double> kPortableF64 = make_row_ops<F64x2>();
constexpr StoredRowOps<double> kStoredF64 = make_stored_row_ops<F64x2, double>();
constexpr StoredRowOps<float> kStoredF32 = make_stored_row_ops<F32x4, float>();
constexpr StoredRowOps<bf16> kStoredBF16 = make_stored_row_ops<F32x4, bf16>();
constexpr StoredRowOps<f16> kStoredF16 = make_stored_row_ops<F32x4, f16>();

const StoredRowOps<float>& portable_stored(const float*) {
  return kStoredF32;
}
const StoredRowOps<bf16>& portable_stored(const bf16*) {
  return kStoredBF16;
}
const StoredRowOps<f16>& portable_stored(const f16*) {
  return kStoredF16;
}

RowIsa best_row_isa() {
  return row_isa_supported(RowIsa::avx512) ? RowIsa::avx512
         : row_isa_supported(RowIsa::avx2) ? RowIsa::avx2
                                           : RowIsa::portable;
}

}  // namespace

bool row_isa_supported(RowIsa isa) {
  switch (isa) {
    case RowIsa::portable:
      return true;
    case RowIsa::avx2:
      return cpu_has_avx2_f16c();  // AVX2 + FMA (+ F16C), OS support checked
    case RowIsa::avx512: {
      static const bool has = [] {
        __builtin_cpu_init();
        return cpu_has_avx2_f16c() && __builtin_cpu_supports("avx512f");
      }();
      return has;
    }
  }
  return false;
}

const char* row_isa_name(RowIsa isa) {
  return isa == RowIsa::avx512 ? "avx512" : isa == RowIsa::avx2 ? "avx2" : "portable";
}

const RowOps<float>& row_ops_f32(RowIsa isa) {
  MIXPREC_CHECK(row_isa_supported(isa), "row_ops_f32",
                std::string("this CPU cannot run the ") + row_isa_name(isa) + " row kernels");
  switch (isa) {
    case RowIsa::avx512:
      return avx512_row_ops_f32();
    case RowIsa::avx2:
      return avx2_row_ops_f32();
    default:
      return kPortableF32;
  }
}

template <>
const RowOps<float>& row_ops<float>() {
  static const RowOps<float>& best = row_ops_f32(best_row_isa());
  return best;
}

template <class T>
const StoredRowOps<T>& stored_row_ops(RowIsa isa) {
  MIXPREC_CHECK(row_isa_supported(isa), "stored_row_ops",
                std::string("this CPU cannot run the ") + row_isa_name(isa) + " row kernels");
  switch (isa) {
    case RowIsa::avx512:
      return avx512_stored_row_ops<T>();
    case RowIsa::avx2:
      return avx2_stored_row_ops<T>();
    default:
      return portable_stored(static_cast<const T*>(nullptr));
  }
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
