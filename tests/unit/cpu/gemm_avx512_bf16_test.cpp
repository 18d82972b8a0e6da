// The AVX512-BF16 block product (cpu/gemm_avx512_bf16.h): bit for bit against a scalar model
// of VDPBF16PS's documented arithmetic (subnormal inputs as zero; per K-pair the odd element's
// product fused into the sum, then the even one's, each result rounded to nearest even with
// subnormals flushed) on every layout, with sizes that cut every block short (the 12 x 32
// micro-tile, KC = 768, MC = 96, NC = 1024, odd K), subnormal and huge inputs; within f32
// rounding of an f64 triple loop; through cpu::gemm with the path on and off; and the same
// bits at 1 and 2 threads; the epilogue (bias and bf16 rounding in registers) with the bits of
// the passes it replaces. Skipped on CPUs without AVX512-BF16.
#include "cpu/gemm_avx512_bf16.h"

#include <gtest/gtest.h>

#include "cpu/gemm_amx.h"
#include "cpu/gemm_epilogue.h"
#include "cpu/gemm_own.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {
namespace {

namespace kernel = avx512_bf16_gemm;

// Sets the path's switch with AMX off (AMX would take bf16 first), restoring both on exit.
class Bf16GemmSwitch {
 public:
  explicit Bf16GemmSwitch(bool on) {
    amx::set_enabled(false);
    kernel::set_enabled(on);
  }
  ~Bf16GemmSwitch() {
    amx::set_enabled(amx_);
    kernel::set_enabled(dot_);
  }

 private:
  bool amx_ = amx::enabled(), dot_ = kernel::enabled();
};

float flush(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

float from_bf16(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// bf16 or f16 bits from a fixed-seed LCG: mostly moderate values (about 2^-7 .. 2^2 in bf16,
// 2^-5 .. 2^2 in f16), and (when `extremes`) one in 8 a subnormal, one in 16 a huge or tiny
// normal (bf16's huge ones keep sums of ~1500 products finite: 2^106 each).
std::vector<uint16_t> random_bits(int64_t n, uint64_t seed, bool extremes, DType t) {
  const bool f16 = t == DType::f16;
  const uint32_t mantissa_bits = f16 ? 10 : 7, base = f16 ? 10 : 120, spread = f16 ? 8 : 10;
  const uint32_t huge = f16 ? 30 : 180, tiny = f16 ? 1 : 3;
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const auto r = static_cast<uint32_t>(seed >> 33);
    const uint32_t sign = (r & 1u) << 15, mantissa = (r >> 1) & ((1u << mantissa_bits) - 1);
    uint32_t exponent = base + (r >> 11) % spread;
    if (extremes && (r >> 14) % 8 == 0) exponent = 0;  // subnormal (or 0)
    if (extremes && (r >> 14) % 16 == 1) exponent = (r >> 18) % 2 ? huge : tiny;
    x = static_cast<uint16_t>(sign | exponent << mantissa_bits | mantissa);
  }
  return v;
}

std::vector<uint16_t> random_bf16(int64_t n, uint64_t seed, bool extremes) {
  return random_bits(n, seed, extremes, DType::bf16);
}

struct Layout {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;
  bool extremes;
};

// The documented sums (gemm_avx512_bf16.h) for C[i][j].
float model(const Layout& c, const std::vector<uint16_t>& a, int64_t lda,
            const std::vector<uint16_t>& b, int64_t ldb, float old, int64_t i, int64_t j) {
  auto x = [&](int64_t p) { return flush(from_bf16(a[size_t(c.ta ? p * lda + i : i * lda + p)])); };
  auto y = [&](int64_t p) { return flush(from_bf16(b[size_t(c.tb ? j * ldb + p : p * ldb + j)])); };
  float out = old;
  for (int64_t k0 = 0; k0 < c.k; k0 += kernel::kBlockK) {
    const int64_t k1 = std::min(c.k, k0 + kernel::kBlockK);
    float s = 0.0f;
    for (int64_t p = k0; p < k1; p += 2) {
      if (p + 1 < k1) s = flush(std::fma(x(p + 1), y(p + 1), s));
      s = flush(std::fma(x(p), y(p), s));
    }
    out = std::fma(k0 == 0 ? c.beta : 1.0f, k0 == 0 && c.beta == 0.0f ? 0.0f : out, c.alpha * s);
  }
  return out;
}

TEST(GemmAvx512Bf16, MatchesTheInstructionModelBitForBitOnEveryLayout) {
  if (!kernel::available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const std::vector<Layout> layouts = {
      {1, 1, 1, false, false, 1.0f, 0.0f, 0, false},
      {13, 33, 17, false, false, 1.0f, 0.0f, 1, false},
      {13, 33, 17, true, true, 0.5f, 1.0f, 0, true},
      {97, 31, 769, false, true, 1.0f, -1.0f, 3, true},
      {200, 70, 1100, true, false, -2.0f, 0.5f, 2, false},
      {25, 1030, 40, false, true, 1.0f, 2.0f, 0, true},  // two NC blocks
      {12, 32, 768, false, false, 1.0f, 0.0f, 0, true},  // whole micro-tile, one KC
      {100, 65, 1537, true, true, 1.0f, 1.0f, 1, false},
      {40, 45, 31, true, false, 1.0f, 0.0f, 0, true},
  };
  for (const Layout& c : layouts) {
    const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
    const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
    const std::vector<uint16_t> a = random_bf16(ar * lda, 1, c.extremes);
    const std::vector<uint16_t> b = random_bf16(br * ldb, 2, c.extremes);
    Generator gen(3);
    Tensor C = Tensor::uniform({c.m, ldc}, -1, 1, gen, DType::f32);
    const std::vector<float> c0(C.data<float>(), C.data<float>() + c.m * ldc);
    kernel::gemm(c.m, c.n, c.k, c.alpha, a.data(), lda, c.ta, b.data(), ldb, c.tb, c.beta,
                 C.data<float>(), ldc);
    const float* got = C.data<float>();
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const float want = model(c, a, lda, b, ldb, c0[size_t(i * ldc + j)], i, j);
        const float have = got[i * ldc + j];
        if (std::isnan(want) && std::isnan(have)) continue;
        ASSERT_EQ(std::bit_cast<uint32_t>(have), std::bit_cast<uint32_t>(want))
            << have << " vs " << want << " at i=" << i << " j=" << j << " m=" << c.m << " n=" << c.n
            << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb;
      }
      for (int64_t j = c.n; j < ldc; ++j)  // padding is never written
        ASSERT_EQ(got[i * ldc + j], c0[size_t(i * ldc + j)]);
    }
  }
}

TEST(GemmAvx512Bf16, WithinF32RoundingOfAnF64TripleLoop) {
  if (!kernel::available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  // An independent check of the model itself: normal inputs, so only the rounding differs.
  const Layout c{77, 90, 1300, false, true, 1.0f, 0.0f, 0, false};
  const std::vector<uint16_t> a = random_bf16(c.m * c.k, 4, false);
  const std::vector<uint16_t> b = random_bf16(c.n * c.k, 5, false);
  std::vector<float> got(size_t(c.m * c.n));
  kernel::gemm(c.m, c.n, c.k, 1.0f, a.data(), c.k, false, b.data(), c.k, true, 0.0f, got.data(),
               c.n);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double t =
            double(from_bf16(a[size_t(i * c.k + p)])) * double(from_bf16(b[size_t(j * c.k + p)]));
        ref += t;
        mag += std::fabs(t);
      }
      // 2 * 1300 roundings of at most 2^-24 of the running size each; random-walk errors stay
      // far inside 2^-20 of the magnitude, while a lost or doubled product (|t| ~ 2^-14 of
      // mag here) would not.
      ASSERT_NEAR(got[size_t(i * c.n + j)], ref, 0x1p-20 * mag) << i << "," << j;
    }
}

TEST(GemmAvx512Bf16, CpuGemmAgreesWithThePathOffAndKeepsBitsAcrossThreads) {
  if (!kernel::available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  // A linear layer's three products (forward, dX, dW with its K split), f32 and bf16 C.
  const int64_t rows = 512, in = 256, out = 384;
  Generator gen(6);
  const Tensor X = Tensor::uniform({rows, in}, -1, 1, gen, DType::bf16);
  const Tensor W = Tensor::uniform({out, in}, -1, 1, gen, DType::bf16);
  const Tensor G = Tensor::uniform({rows, out}, -1, 1, gen, DType::bf16);
  struct Product {
    int64_t m, n, k;
    GemmOperand a, b;
  };
  const std::vector<Product> products = {
      {rows, out, in, {DType::bf16, X.raw_data(), in}, {DType::bf16, W.raw_data(), in, true}},
      {rows, in, out, {DType::bf16, G.raw_data(), out}, {DType::bf16, W.raw_data(), in}},
      {out, in, rows, {DType::bf16, G.raw_data(), out, true}, {DType::bf16, X.raw_data(), in}},
  };
  for (const Product& p : products)
    for (DType cd : {DType::f32, DType::bf16}) {
      auto run = [&](bool on, int threads) {
        Bf16GemmSwitch sw(on);
        const int saved = num_threads();
        set_num_threads(threads);
        Tensor C = Tensor::empty({p.m, p.n}, cd);
        gemm(p.m, p.n, p.k, 1.0f, p.a, p.b, 0.0f, {cd, C.raw_data(), p.n});
        set_num_threads(saved);
        return C;
      };
      const Tensor one = run(true, 1), two = run(true, 2), off = run(false, 2);
      EXPECT_EQ(std::memcmp(one.raw_data(), two.raw_data(), one.nbytes()), 0)
          << p.m << "x" << p.n << "x" << p.k << " " << dtype_name(cd);
      const std::vector<double> x = two.to_doubles(), y = off.to_doubles();
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
      // |sum| <= k; f32 order differences ~ k * 2^-24 * k, a bf16 rounding flip 2^-8 * |c|.
      const double bound = cd == DType::f32 ? 1e-4 * double(p.k) : 0x1p-7 * double(p.k);
      EXPECT_LT(worst, bound) << p.m << "x" << p.n << "x" << p.k << " " << dtype_name(cd);
      EXPECT_GT(worst, 0.0) << "the switch changed nothing: " << p.m << "x" << p.n;
    }
}

// Sets the epilogue's switch, restoring it on exit.
class EpilogueSwitch {
 public:
  explicit EpilogueSwitch(bool on) { set_gemm_epilogue_enabled(on); }
  ~EpilogueSwitch() { set_gemm_epilogue_enabled(saved_); }

 private:
  bool saved_ = gemm_epilogue_enabled();
};

TEST(GemmEpilogue, GivesTheBitsOfThePassesItReplacesOnEachKernel) {
  struct Kernel {
    bool native;  // AVX512-BF16, else the f32 kernel widening as it packs
    DType operands, out;
  };
  const std::vector<Kernel> kernels = {{true, DType::bf16, DType::bf16},
                                       {true, DType::bf16, DType::f16},
                                       {false, DType::bf16, DType::bf16},
                                       {false, DType::bf16, DType::f16},
                                       {false, DType::f16, DType::f16}};
  struct Case {
    int64_t m, n, k, batch;
    bool ta, tb, bias, extremes;
    float alpha;
    int64_t pad;
  };
  // One K-block and several (767, 768, 769, 1537, 2400: both kernels' block lengths cut), C
  // split into tiles and not, edges of the 12 x 32 micro-tile and of the NC block, batches,
  // padded rows, huge / subnormal inputs (infinite and NaN sums), alpha != 1.
  const std::vector<Case> cases = {
      {1, 1, 1, 1, false, false, false, false, 1.0f, 0},
      {13, 33, 17, 1, false, true, true, true, 1.0f, 3},
      {97, 31, 769, 1, true, false, true, true, 0.5f, 0},
      {512, 384, 256, 1, false, true, true, false, 1.0f, 0},
      {600, 1100, 768, 1, false, true, false, true, 1.0f, 5},
      {300, 200, 1537, 1, false, false, true, false, -2.0f, 0},
      {64, 2100, 2400, 1, true, true, true, true, 1.0f, 1},
      {40, 45, 767, 3, true, false, true, false, 1.0f, 0},
      {200, 70, 1100, 4, false, true, false, true, 1.0f, 2},
  };
  int ran = 0;
  for (const Kernel& kern : kernels) {
    if (kern.native ? !kernel::available() : own_gemm::best_build() == own_gemm::Build::none)
      continue;
    Bf16GemmSwitch path(kern.native);
    for (const Case& c : cases) {
      const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
      const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
      const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
      std::vector<uint16_t> a = random_bits(c.batch * ar * lda, 7, c.extremes, kern.operands);
      const std::vector<uint16_t> b = random_bits(c.batch * br * ldb, 8, c.extremes, kern.operands);
      if (c.extremes) a[3] = kern.operands == DType::f16 ? 0x7E01 : 0x7FC1;  // NaN, payload
      const std::vector<uint16_t> bias = random_bits(c.n, 9, c.extremes, kern.out);
      auto run = [&](bool fused) {
        EpilogueSwitch ep(fused);
        std::vector<uint16_t> out(size_t(c.batch * c.m * ldc), 0xABCD);  // padding must stay
        GemmOutput o{kern.out, out.data(), ldc, c.m * ldc};
        if (c.bias) o.row_bias = bias.data();
        gemm(c.m, c.n, c.k, c.alpha, {kern.operands, a.data(), lda, c.ta, ar * lda},
             {kern.operands, b.data(), ldb, c.tb, br * ldb}, 0.0f, o, c.batch);
        return out;
      };
      const std::vector<uint16_t> passes = run(false), fused = run(true);
      for (size_t i = 0; i < passes.size(); ++i)
        ASSERT_EQ(fused[i], passes[i])
            << "element " << i << " of m=" << c.m << " n=" << c.n << " k=" << c.k
            << " batch=" << c.batch << " native=" << kern.native << " " << dtype_name(kern.operands)
            << " -> " << dtype_name(kern.out);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU";
}

}  // namespace
}  // namespace mixprec::cpu
