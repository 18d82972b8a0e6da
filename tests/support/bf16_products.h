// Test switch: bf16 x bf16 GEMMs widened to f32 (no AMX, no AVX512-BF16 dot products) for a
// scope, as a CPU without native bf16 products runs them.
#pragma once

#include "cpu/gemm_amx.h"
#include "cpu/gemm_avx512_bf16.h"

namespace mixprec::testing {

struct WidenedBf16Products {
  WidenedBf16Products() { set(false); }
  ~WidenedBf16Products() { set(true); }
  WidenedBf16Products(const WidenedBf16Products&) = delete;
  WidenedBf16Products& operator=(const WidenedBf16Products&) = delete;
  static void set(bool native) {
    cpu::amx::set_enabled(native);
    cpu::avx512_bf16_gemm::set_enabled(native);
  }
};

}  // namespace mixprec::testing
