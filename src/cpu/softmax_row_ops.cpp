// The portable build of the row kernels (SSE2 vectors on x86-64; f64 always comes from here)
// and the choice of ISA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "mixprec/error.h"
#include "mixprec/numerics/convert.h"
#include "softmax_row_impl.h"
#include "softmax_row_ops.h"

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
  static const RowOps<float>& best =
      row_ops_f32(row_isa_supported(RowIsa::avx512) ? RowIsa::avx512
                  : row_isa_supported(RowIsa::avx2) ? RowIsa::avx2
                                                    : RowIsa::portable);
  return best;
}

template <>
const RowOps<double>& row_ops<double>() {
  return kPortableF64;
}

}  // namespace mixprec::cpu
