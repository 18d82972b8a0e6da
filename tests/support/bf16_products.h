// Test switch: bf16 x bf16 GEMMs widened to f32 (no AMX, no AVX512-BF16 dot products) for a
// scope, as a CPU without native bf16 products runs them.
#pragma once

#include "cpu/gemm_amx.h"
#include "cpu/gemm_avx512_bf16.h"

namespace mixprec::testing {

// Restores the switches as they were (an environment's MIXPREC_AMX=0 stays in force).
class WidenedBf16Products {
 public:
  WidenedBf16Products() {
    cpu::amx::set_enabled(false);
    cpu::avx512_bf16_gemm::set_enabled(false);
  }
  ~WidenedBf16Products() {
    cpu::amx::set_enabled(amx_);
    cpu::avx512_bf16_gemm::set_enabled(dot_);
  }
  WidenedBf16Products(const WidenedBf16Products&) = delete;
  WidenedBf16Products& operator=(const WidenedBf16Products&) = delete;

 private:
  bool amx_ = cpu::amx::enabled(), dot_ = cpu::avx512_bf16_gemm::enabled();
};

}  // namespace mixprec::testing
