// mixprec's te_nvfp4 cast and GEMM against Transformer Engine's own NVFP4 reference
// (fixtures/nvfp4/te.safetensors, made by make_nvfp4_fixtures.py from TE 2.20.2's
// custom_recipes/reference_nvfp4.py on torch 2.15.0): the E2M1 bytes, E4M3 block scales and
// tensor amaxes of TE's input (1x16), weight (16x16) and RHT'd columnwise quantizers bit for
// bit, and its GEMM (block products summed in f32, times alpha from the amaxes) within f32
// summation error of the same operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/fp4.h"

namespace mixprec {
namespace {

using backend::Quantized;
using backend::QuantSpec;

const io::SafetensorsFile& te() {
  static const io::SafetensorsFile f =
      io::load_safetensors(std::string(MIXPREC_FIXTURE_DIR) + "/nvfp4/te.safetensors");
  return f;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.nbytes()};
}

constexpr DType e2m1 = DType::f4_e2m1fn;
const QuantSpec kActivation{e2m1, {1, 16}, ScaleRule::te_nvfp4};
const QuantSpec kWeight{e2m1, {16, 16}, ScaleRule::te_nvfp4};
const QuantSpec kWgradOperand{e2m1, {1, 16}, ScaleRule::te_nvfp4, false, true};

// Our cast of x (bf16) by spec against TE's `key`: packed data, E4M3 scale bits (TE repeats a
// 16x16 block's over its rows), amax.
void expect_te_cast(const Quantized& q, const std::string& key) {
  const io::SafetensorsFile& f = te();
  const std::vector<uint8_t> nibbles = bytes_of(q.data);
  std::vector<uint8_t> packed((nibbles.size() + 1) / 2);
  pack_e2m1(nibbles, packed);
  EXPECT_EQ(packed, bytes_of(f.at(key + ".data"))) << key;
  const Tensor& te_scale = f.at(key + ".scale");
  const int64_t rows = te_scale.size(0), cols = te_scale.size(1);
  const int64_t block_rows = q.spec.block.rows;
  int mismatched = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t want = static_cast<const uint8_t*>(te_scale.raw_data())[r * cols + c];
      const float ours = q.scales.data<float>()[(r / block_rows) * cols + c];
      mismatched += encode_f32(kFormatE4M3FN, ours) != want;
    }
  EXPECT_EQ(mismatched, 0) << key << " block scales";
  EXPECT_EQ(*q.tensor_amax, f.at(key + ".amax").data<float>()[0]) << key;
}

Tensor input(const char* name) {
  return te().at(name).to(DType::bf16);  // bf16 values stored as f32
}

TEST(TeNvfp4Fixture, InputWeightAndRhtCastsAreTesBitForBit) {
  const Tensor x = input("x"), w = input("w"), dy = input("dy");
  for (const backend::Backend* b : {&backend::cpu_backend(), &backend::reference_backend()}) {
    expect_te_cast(b->quantize(x, kActivation), "x.1x16");
    expect_te_cast(b->quantize(w, kWeight), "w.16x16");
    expect_te_cast(b->quantize(x.transpose(0, 1).contiguous(), kWgradOperand), "x.t_rht");
    expect_te_cast(b->quantize(dy.transpose(0, 1).contiguous(), kWgradOperand), "dy.t_rht");
  }
}

// Worst |ours - TE| relative to k·2^-24·Σ|a·b|·alpha + 2^-24·|TE| (both sum the same exact
// products in f32, in different orders).
double worst_vs_te(const Tensor& ours, const Tensor& theirs, const Quantized& a,
                   const Quantized& b) {
  const Tensor av = backend::dequantize(a, DType::f64, false);
  const Tensor bv = backend::dequantize(b, DType::f64, false);
  const double alpha = backend::tensor_scale_alpha(a, b);
  const int64_t m = av.size(0), n = bv.size(0), k = av.size(1);
  const double u = std::ldexp(1.0, -24);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum_abs = 0;
      for (int64_t p = 0; p < k; ++p)
        sum_abs += std::fabs(av.data<double>()[i * k + p] * bv.data<double>()[j * k + p]);
      const double t = theirs.data<float>()[i * n + j], o = ours.data<float>()[i * n + j];
      const double bound = (k + 4) * u * sum_abs * alpha + 2 * u * std::fabs(t) + 1e-300;
      worst = std::max(worst, std::fabs(o - t) / bound);
    }
  return worst;
}

TEST(TeNvfp4Fixture, FpropAndWgradGemmsAreTesWithinF32Summation) {
  const backend::Backend& cpu = backend::cpu_backend();
  const Tensor x = input("x"), w = input("w"), dy = input("dy");
  const Quantized qx = cpu.quantize(x, kActivation), qw = cpu.quantize(w, kWeight);
  const Tensor fprop = cpu.scaled_gemm(qx, qw, DType::f32);
  const double fprop_worst = worst_vs_te(fprop, te().at("fprop"), qx, qw);
  EXPECT_LE(fprop_worst, 1.0);
  const Quantized qdy_t = cpu.quantize(dy.transpose(0, 1).contiguous(), kWgradOperand);
  const Quantized qx_t = cpu.quantize(x.transpose(0, 1).contiguous(), kWgradOperand);
  const Tensor wgrad = cpu.scaled_gemm(qdy_t, qx_t, DType::f32);
  const double wgrad_worst = worst_vs_te(wgrad, te().at("wgrad"), qdy_t, qx_t);
  EXPECT_LE(wgrad_worst, 1.0);
  std::printf("fprop worst / bound %.3g, wgrad %.3g\n", fprop_worst, wgrad_worst);
}

}  // namespace
}  // namespace mixprec
