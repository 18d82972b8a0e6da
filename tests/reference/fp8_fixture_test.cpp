// mixprec's FP8 / MX quantization and low-precision linear against the peers' own code
// (fixtures/fp8/*.safetensors, made by make_fp8_fixtures.py with torchao 0.18.0, torch 2.15.0,
// triton 3.9.0 and DeepSeek-V3's inference/kernel.py @9b4e978):
// - the FP8 bytes and scales of cpu_backend().quantize are torchao's / DeepSeek's / torchao
//   MX's bit for bit (torchao's log2-based power-of-two scales included), except where
//   DeepSeek's kernel rounds a UE8M0 scale through an f32 log2 and where torchao MX treats
//   blocks of subnormal amax apart (each named below: those cases are checked to be exactly
//   that);
// - linear under the torchao recipes vs Float8Linear(emulate=True): bf16 results at most one
//   bf16 ulp apart (our f32 weight gradient rounded to bf16 first), and the f32 products
//   within an f32 summation bound relative to Σ|a·b| of the dequantized operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using backend::BlockShape;
using backend::Quantized;
using backend::QuantSpec;
using mixprec::testing::same_bits;

const io::SafetensorsFile& fixture(const std::string& name) {
  static std::map<std::string, io::SafetensorsFile> files;
  auto it = files.find(name);
  if (it == files.end())
    it = files
             .emplace(name, io::load_safetensors(std::string(MIXPREC_FIXTURE_DIR) + "/fp8/" + name +
                                                 ".safetensors"))
             .first;
  return it->second;
}

Quantized quantize(const Tensor& x, const QuantSpec& spec) {
  return backend::cpu_backend().quantize(x, spec);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.nbytes()};
}

std::vector<uint32_t> f32_bits(const Tensor& t) {
  const Tensor c = t.contiguous().to(DType::f32);
  std::vector<uint32_t> out(static_cast<std::size_t>(c.numel()));
  std::memcpy(out.data(), c.raw_data(), out.size() * 4);
  return out;
}

// ---- the torchao recipes' operands -------------------------------------------------------------

// The linear's operands in mixprec's [rows, contraction] layout (linear_recipe.h), by the
// names make_fp8_fixtures.py gives them.
Tensor operand(const std::string& name, DType dtype) {
  const io::SafetensorsFile& f = fixture("torchao_linear");
  const Tensor x = f.at("x").view({64, 256}).to(dtype), w = f.at("w").to(dtype);
  const Tensor dy = f.at("dy").view({64, 128}).to(dtype);
  if (name == "x") return x;
  if (name == "w") return w;
  if (name == "dy") return dy;
  if (name == "xT") return x.transpose(0, 1);
  if (name == "wT") return w.transpose(0, 1);
  if (name == "dyT") return dy.transpose(0, 1);
  ADD_FAILURE() << "no operand " << name;
  return x;
}

// The fixture's name of a torchao spec: "e5m2_tensor", "e4m3_row_pow2", ...
std::string spec_name(const QuantSpec& s) {
  EXPECT_EQ(s.rule, ScaleRule::torchao);
  const bool row = s.block == BlockShape{1, 0};
  EXPECT_TRUE(row || (s.block == BlockShape{0, 0})) << backend::describe(s);
  return std::string(s.element == DType::f8_e4m3fn ? "e4m3" : "e5m2") + (row ? "_row" : "_tensor") +
         (s.pow2 ? "_pow2" : "");
}

// torchao's bytes (first rows) and scales (all rows) for `op` quantized by `spec`.
void expect_torchao_cast(const std::string& op, const QuantSpec& spec, const std::string& what) {
  const io::SafetensorsFile& f = fixture("torchao_quant");
  const std::string key = op + "." + spec_name(spec);
  ASSERT_TRUE(f.tensors.count(key + ".data"))
      << what << ": torchao quantizes no operand " << key << " (recipe table differs)";
  const Tensor& data = f.at(key + ".data");
  const Tensor& scale = f.at(key + ".scale");
  ASSERT_EQ(data.dtype(), spec.element) << what;
  const Quantized q = quantize(operand(op, DType::bf16), spec);
  EXPECT_EQ(f32_bits(q.scales), f32_bits(scale)) << what << " scales";
  EXPECT_EQ(bytes_of(q.data.slice(0, 0, data.size(0))), bytes_of(data)) << what << " bytes";
}

const amp::LinearRecipe& recipe(const char* name) {
  return amp::find_linear_recipe("float8", name, "fp8_fixture_test");
}

// Every FP8 product of the three torchao recipes in the table quantizes its operands as
// torchao's Float8Linear does: the recipe table's dtype / granularity / pow2 and the scale
// rule are checked together against torchao's own cast.
TEST(Fp8Fixture, TorchaoRecipeOperandsAreTorchaosBytesAndScales) {
  for (const char* name : {"tensorwise", "rowwise", "rowwise_with_gw_hp"}) {
    const amp::LinearRecipe& r = recipe(name);
    const std::pair<const amp::ProductRecipe*, std::pair<const char*, const char*>> products[] = {
        {&r.output, {"x", "w"}}, {&r.grad_input, {"dy", "wT"}}, {&r.grad_weight, {"dyT", "xT"}}};
    int fp8_products = 0;
    for (const auto& [p, ops] : products) {
      if (!p->fp8) continue;
      ++fp8_products;
      expect_torchao_cast(ops.first, p->a, std::string(name) + " " + ops.first);
      expect_torchao_cast(ops.second, p->b, std::string(name) + " " + ops.second);
    }
    EXPECT_EQ(fp8_products, std::string(name) == "rowwise_with_gw_hp" ? 2 : 3) << name;
  }
}

// f32 inputs that are not bf16 values, rows of chosen amax (zero, 1e-30 scaled, 5e4, and
// 448 / amax just below a power of two).
TEST(Fp8Fixture, TorchaoCastOfF32Inputs) {
  const io::SafetensorsFile& f = fixture("torchao_quant");
  const Tensor& probe = f.at("probe");
  for (const char* spec : {"e4m3_tensor", "e5m2_tensor", "e4m3_row"}) {
    const bool e5 = std::string(spec).starts_with("e5");
    const QuantSpec s{e5 ? DType::f8_e5m2 : DType::f8_e4m3fn,
                      std::string(spec).ends_with("row") ? BlockShape{1, 0} : BlockShape{0, 0},
                      ScaleRule::torchao, false};
    const Quantized q = quantize(probe, s);
    EXPECT_EQ(f32_bits(q.scales), f32_bits(f.at(std::string("probe.") + spec + ".scale"))) << spec;
    EXPECT_EQ(bytes_of(q.data), bytes_of(f.at(std::string("probe.") + spec + ".data"))) << spec;
  }
  // pow2: rows 6..15 put 448 / amax one f32 ulp below 2^k, k = -3..9, where torchao's f32
  // log2 gives k for k = -3, -2, 3, 4, 6, 9 (so the scale 2^k, above the exact floor 2^(k-1)):
  // mixprec's torchao rule rounds as torchao does, bit for bit.
  const Quantized q = quantize(probe, {DType::f8_e4m3fn, {1, 0}, ScaleRule::torchao, true});
  EXPECT_EQ(f32_bits(q.scales), f32_bits(f.at("probe.e4m3_row_pow2.scale")));
  EXPECT_EQ(bytes_of(q.data), bytes_of(f.at("probe.e4m3_row_pow2.data")));
}

// ---- torchao MX to_mx ----------------------------------------------------------------------

// Scales bit for bit everywhere; data bit for bit except in blocks whose amax is below 2^-126
// (an f32 subnormal, scale byte 0 = 2^-127), where torchao 0.18's data is not x / 2^-127:
// FLOOR divides by max(scale, 2^-126) (its F32_MIN_NORMAL clamp), RCEIL multiplies by 1.0
// (its `exponent == 0 -> 1.0` reciprocal). Those blocks are checked to be exactly that and
// counted: two per input (row 2 columns 32..63 all zero, row 3 columns 0..31 subnormal).
TEST(Fp8Fixture, MxToMxFloorAndRceil) {
  const io::SafetensorsFile& f = fixture("mx");
  const FloatFormat& e4m3 = *info(DType::f8_e4m3fn).format;
  for (const char* in : {"mx.in", "mx.in_f32"})
    for (const auto& [mode, rule] :
         {std::pair{"FLOOR", ScaleRule::mx_floor}, std::pair{"RCEIL", ScaleRule::mx_rceil}}) {
      const std::string key = std::string(in) + "." + mode;
      const Tensor x = f.at(in).to(DType::f32);
      const Quantized q = quantize(f.at(in), {DType::f8_e4m3fn, {1, 32}, rule, true});
      const Tensor& e8m0 = f.at(key + ".e8m0");
      ASSERT_EQ(e8m0.shape(), q.scales.shape()) << key;
      const auto* e = static_cast<const uint8_t*>(e8m0.raw_data());
      const float* v = q.scales.data<float>();
      const float* xv = x.data<float>();
      const std::vector<uint8_t> ours = bytes_of(q.data), theirs = bytes_of(f.at(key + ".data"));
      int subnormal_blocks = 0;
      for (int64_t i = 0; i < e8m0.numel(); ++i) {
        const float want = e[i] == 255 ? NAN : std::ldexp(1.0f, e[i] - 127);
        EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(v[i]))
            << key << " block " << i << ": ours " << v[i] << ", torchao 2^" << (e[i] - 127);
        bool tiny = e[i] == 0;
        for (int64_t j = i * 32; j < i * 32 + 32 && tiny; ++j) tiny = std::fabs(xv[j]) < 0x1p-126f;
        subnormal_blocks += tiny;
        for (int64_t j = i * 32; j < i * 32 + 32; ++j) {
          const auto k = static_cast<std::size_t>(j);
          const float factor = !tiny ? 1.0f / v[i] : rule == ScaleRule::mx_floor ? 0x1p126f : 1.0f;
          const auto want_byte = !tiny ? ours[k]
                                       : static_cast<uint8_t>(encode_f32(
                                             e4m3, xv[j] * factor, Rounding::nearest_even, true));
          EXPECT_EQ(want_byte, theirs[k]) << key << " element " << j;
        }
      }
      EXPECT_EQ(subnormal_blocks, 2) << key;  // mx.in* row 2 (all zero) and row 3 (subnormal)
    }
}

// ---- DeepSeek-V3 kernel.py -------------------------------------------------------------------

// act_quant, 1x128 blocks. With scale_fmt "ue8m0" the kernel takes 2^ceil(log2(s)) in f32:
// for s one ulp above 2^k, log2 may return k and the "ceil" stays at 2^k (below s, so the
// block's largest element saturates at 448); mixprec rounds up exactly. Such rows are checked
// to be that case; the kernel as run (numpy's log2 under the Triton interpreter) does it for
// rows 8 (k = -8) and 12 (k = 5) of ds.in_f32.
TEST(Fp8Fixture, DeepSeekActQuant) {
  const io::SafetensorsFile& f = fixture("deepseek");
  for (const char* in : {"ds.in", "ds.in_f32"})
    for (const bool ue8m0 : {false, true}) {
      const std::string key = std::string(in) + (ue8m0 ? ".ue8m0" : ".f32");
      const Tensor& x = f.at(in);
      const Quantized q = quantize(x, {DType::f8_e4m3fn, {1, 128}, ScaleRule::deepseek, ue8m0});
      const std::vector<uint32_t> ours = f32_bits(q.scales), theirs = f32_bits(f.at(key + ".s"));
      const Tensor& y = f.at(key + ".y");
      std::vector<int> log2_rows;
      for (int64_t r = 0; r < x.size(0); ++r) {
        bool row_same = true;
        for (int64_t b = 0; b < 2; ++b) {
          const auto i = static_cast<std::size_t>(r * 2 + b);
          if (ours[i] == theirs[i]) continue;
          row_same = false;
          const float o = std::bit_cast<float>(ours[i]), t = std::bit_cast<float>(theirs[i]);
          EXPECT_TRUE(ue8m0) << key << " row " << r << ": ours " << o << ", DeepSeek " << t;
          EXPECT_EQ(o, 2 * t) << key << " row " << r;  // the exact ceil vs log2's k
        }
        if (row_same)
          EXPECT_EQ(bytes_of(q.data.slice(0, r, r + 1)), bytes_of(y.slice(0, r, r + 1)))
              << key << " row " << r;
        else
          log2_rows.push_back(static_cast<int>(r));
      }
      const std::vector<int> expected =
          ue8m0 && std::string(in) == "ds.in_f32" ? std::vector<int>{8, 12} : std::vector<int>{};
      EXPECT_EQ(log2_rows, expected) << key;
    }
}

// weight_dequant: fp8 weight · its 128x128 block's f32 scale_inv, stored in bf16.
TEST(Fp8Fixture, DeepSeekWeightDequant) {
  const io::SafetensorsFile& f = fixture("deepseek");
  const Quantized q{
      f.at("ds.w"), f.at("ds.w_scale"), {DType::f8_e4m3fn, {128, 128}, ScaleRule::deepseek, false}};
  EXPECT_TRUE(same_bits(backend::dequantize(q, DType::bf16), f.at("ds.w_dequant")));
}

// ---- the linear vs Float8Linear(emulate=True) -------------------------------------------------

// bf16 ulps between a and b (both rounded to bf16), per element.
struct UlpStats {
  int64_t worst = 0, same = 0, n = 0;
};
UlpStats bf16_ulps(const Tensor& ours, const Tensor& theirs) {
  const Tensor a = ours.contiguous().to(DType::bf16), b = theirs.contiguous().to(DType::bf16);
  EXPECT_EQ(a.numel(), b.numel());
  const auto* pa = static_cast<const uint16_t*>(a.raw_data());
  const auto* pb = static_cast<const uint16_t*>(b.raw_data());
  auto ordered = [](uint16_t v) {
    return (v & 0x8000) ? -static_cast<int64_t>(v & 0x7FFF) : static_cast<int64_t>(v);
  };
  UlpStats s;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t d = std::llabs(ordered(pa[i]) - ordered(pb[i]));
    s.worst = std::max(s.worst, d);
    s.same += pa[i] == pb[i];
    ++s.n;
  }
  return s;
}

void expect_within_one_ulp(const Tensor& ours, const Tensor& theirs, const std::string& what) {
  const UlpStats s = bf16_ulps(ours, theirs);
  EXPECT_LE(s.worst, 1) << what;
  std::printf("  %-34s worst %lld bf16 ulp, bit-identical %lld / %lld (%.1f%%)\n", what.c_str(),
              static_cast<long long>(s.worst), static_cast<long long>(s.same),
              static_cast<long long>(s.n),
              100.0 * static_cast<double>(s.same) / static_cast<double>(s.n));
}

TEST(Fp8Fixture, LinearBf16MatchesFloat8LinearWithinOneUlp) {
  const io::SafetensorsFile& f = fixture("torchao_linear");
  for (const char* name : {"tensorwise", "rowwise", "rowwise_with_gw_hp"}) {
    // Fresh leaves each time: the file's tensors would gather every recipe's gradients.
    Tensor x = f.at("x").detach().set_requires_grad();
    Tensor w = f.at("w").detach().set_requires_grad();
    Tensor y;
    {
      amp::AutocastGuard guard(DType::bf16, {.linear_recipe = &recipe(name)});
      y = linear(x, w);
    }
    y.backward(f.at("dy"));
    const std::string p = std::string(name) + ".bf16.";
    expect_within_one_ulp(y.view({64, 128}), f.at(p + "y"), p + "y");
    expect_within_one_ulp(x.grad().view({64, 256}), f.at(p + "dx"), p + "dx");
    expect_within_one_ulp(w.grad(), f.at(p + "dw"), p + "dw (ours f32 -> bf16)");
  }
}

// Σ|a·b| over the contraction for each output of C = A·Bᵀ (A [m, k], B [n, k]), f64.
std::vector<double> abs_products(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  const std::vector<double> av = a.contiguous().to_doubles(), bv = b.contiguous().to_doubles();
  std::vector<double> s(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += std::fabs(av[static_cast<std::size_t>(i * k + t)] *
                         bv[static_cast<std::size_t>(j * k + t)]);
      s[static_cast<std::size_t>(i * n + j)] = acc;
    }
  return s;
}

// The f32 runs: mixprec's linear has no FP8 path for f32 operands (an f32 autocast turns the
// recipes off, a bf16 one rounds x to bf16 first), so each product is composed as linear runs
// it (quantize both f32 operands, scaled GEMM, f32 out) on the first rows torchao's file keeps.
// Bound: both sides add k exact-or-dequantized products in f32 in some order, so each is within
// (k + 2)·u·Σ|a·b| of the exact sum of the dequantized products (u = 2^-24; torchao's
// per-element dequantization q / s adds one more u), and they are within 2(k + 3)·u·Σ|a·b| of
// each other. Σ|a·b| is taken over our dequantized operands.
TEST(Fp8Fixture, LinearF32ProductsWithinSummationBound) {
  const io::SafetensorsFile& f = fixture("torchao_linear");
  const int64_t rows = std::stoll(f.metadata.at("f32_rows"));
  const Tensor x = f.at("x").view({64, 256}).to(DType::f32), w = f.at("w").to(DType::f32);
  const Tensor dy = f.at("dy").view({64, 128}).to(DType::f32);
  const backend::Backend& be = backend::cpu_backend();
  for (const char* name : {"tensorwise", "rowwise", "rowwise_with_gw_hp"}) {
    const amp::LinearRecipe& r = recipe(name);
    struct Product {
      const amp::ProductRecipe* p;
      Tensor a, b;
      const char* key;
    } products[] = {{&r.output, x, w, "y"},
                    {&r.grad_input, dy, w.transpose(0, 1), "dx"},
                    {&r.grad_weight, dy.transpose(0, 1), x.transpose(0, 1), "dw"}};
    for (const Product& pr : products) {
      const std::string what = std::string(name) + ".f32." + pr.key;
      Tensor ours, ad, bd;
      if (pr.p->fp8) {
        const Quantized qa = be.quantize(pr.a, pr.p->a), qb = be.quantize(pr.b, pr.p->b);
        ours = be.scaled_gemm(qa, qb, DType::f32);
        ad = backend::dequantize(qa, DType::f64), bd = backend::dequantize(qb, DType::f64);
      } else {
        ours = matmul(pr.a, pr.b.transpose(0, 1));
        ad = pr.a.to(DType::f64), bd = pr.b.to(DType::f64);
      }
      ad = ad.slice(0, 0, rows).contiguous();
      const std::vector<double> o = ours.slice(0, 0, rows).contiguous().to_doubles();
      const std::vector<double> t = f.at(what).to_doubles();
      const std::vector<double> s = abs_products(ad, bd);
      const double k = static_cast<double>(pr.a.size(1)), u = std::ldexp(1.0, -24);
      ASSERT_EQ(o.size(), t.size()) << what;
      double worst = 0;  // |ours - theirs| / (u·Σ|a·b|)
      for (std::size_t i = 0; i < o.size(); ++i) {
        const double d = std::fabs(o[i] - t[i]);
        EXPECT_LE(d, 2 * (k + 3) * u * s[i]) << what << " element " << i;
        if (s[i] > 0) worst = std::max(worst, d / (u * s[i]));
      }
      std::printf("  %-24s worst |ours - torchao| = %.3f u·Σ|a·b| (bound %.0f)\n", what.c_str(),
                  worst, 2 * (k + 3));
    }
  }
}

}  // namespace
}  // namespace mixprec
