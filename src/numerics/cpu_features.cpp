#include <cpuid.h>

#include "mixprec/numerics/convert.h"

namespace mixprec {

bool cpu_has_avx2_f16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    // __builtin_cpu_supports("avx2") also checks that the OS saves the YMM registers.
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

bool cpu_has_avx512f() {
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_f16c() && __builtin_cpu_supports("avx512f");  // OS state checked too
  }();
  return has;
}

const char* isa_name(Isa isa) {
  if (isa == Isa::scalar) return "scalar";
  return cpu_has_avx2_f16c() ? "avx2" : "scalar";
}

}  // namespace mixprec
