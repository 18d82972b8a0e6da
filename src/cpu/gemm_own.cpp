// mixprec's own GEMM block product (gemm_own.h): which build runs, and its switch.
#include "gemm_own.h"

#include <atomic>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"
#include "path_switch.h"

namespace mixprec::cpu::own_gemm {
namespace {

// MIXPREC_OWN_GEMM=0 in the environment turns the path off; set_enabled() overrides it.
PathSwitch& path_switch() {
  static PathSwitch s("MIXPREC_OWN_GEMM");
  return s;
}

std::atomic<Build>& chosen_build() {
  static std::atomic<Build> b{best_build()};
  return b;
}

}  // namespace

Build best_build() {
  static const Build best = [] {
    __builtin_cpu_init();
    if (cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
      return Build::avx512;
    return cpu_has_avx2_f16c() ? Build::avx2 : Build::none;  // AVX2 + FMA + F16C
  }();
  return best;
}

Build build() {
  return chosen_build().load(std::memory_order_relaxed);
}

void set_build(Build b) {
  MIXPREC_CHECK(b <= best_build(), "own_gemm::set_build",
                std::string("this CPU has no ") + build_name(b) +
                    " build (widest: " + build_name(best_build()) + ")");
  chosen_build().store(b, std::memory_order_relaxed);
}

const char* build_name(Build b) {
  switch (b) {
    case Build::avx512:
      return "avx512";
    case Build::avx2:
      return "avx2";
    default:
      return "none";
  }
}

void set_enabled(bool enabled) {
  path_switch().set(enabled);
}

bool switched_on() {
  return path_switch().on();
}

bool enabled() {
  return switched_on() && build() != Build::none;
}

void gemm(int64_t m, int64_t n, int64_t k, float alpha, const Block& a, const Block& b, float beta,
          float* acc, int64_t ldacc, const GemmEpilogue* epilogue) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  const GemmEpilogue ep = epilogue != nullptr ? *epilogue : GemmEpilogue{};
  switch (build()) {
    case Build::avx512:
      return gemm_avx512(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    case Build::avx2:
      return gemm_avx2(m, n, k, alpha, a, b, beta, acc, ldacc, ep);
    default:
      MIXPREC_CHECK(false, "own_gemm::gemm", "this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
  }
}

}  // namespace mixprec::cpu::own_gemm
