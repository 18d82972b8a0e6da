#include "mixprec/backend/quantized.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/nvfp4.h"

namespace mixprec::backend {

namespace {

std::string extent(int64_t n) {
  return n == 0 ? std::string("all") : std::to_string(n);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

std::string describe(const QuantSpec& spec) {
  std::string s = std::string(dtype_name(spec.element)) + " " + extent(spec.block.rows) + "x" +
                  extent(spec.block.cols) + " " + scale_rule_info(spec.rule).name;
  if (spec.pow2 && !scale_rule_info(spec.rule).always_pow2) s += " pow2";
  if (spec.rht) s += " rht";
  if (spec.stochastic) s += " sr";
  return s;
}

ConvertOptions element_rounding(const QuantSpec& spec, int64_t index) {
  ConvertOptions o;
  o.saturate = true;
  if (!spec.stochastic) return o;
  o.rounding = Rounding::stochastic;
  o.seed = spec.seed;
  o.stream = spec.stream;
  o.index_base = static_cast<uint64_t>(index);
  return o;
}

void check_spec(const QuantSpec& spec, const char* where) {
  const bool nvfp4 = spec.rule == ScaleRule::te_nvfp4;
  MIXPREC_CHECK(nvfp4 ? spec.element == DType::f4_e2m1fn
                      : spec.element == DType::f8_e4m3fn || spec.element == DType::f8_e5m2,
                where,
                std::string("quantized elements must be ") +
                    (nvfp4 ? "f4_e2m1fn under te_nvfp4" : "f8_e4m3fn or f8_e5m2") + ", got " +
                    dtype_name(spec.element));
  MIXPREC_CHECK(!nvfp4 || ((spec.block.rows == 1 || spec.block.rows == 16) &&
                           spec.block.cols == 16 && !spec.pow2),
                where, "te_nvfp4 blocks are 1x16 or 16x16, without pow2; got " + describe(spec));
  MIXPREC_CHECK(!spec.rht || (nvfp4 && spec.block.rows == 1), where,
                "the RHT is for te_nvfp4 1x16 operands; got " + describe(spec));
  MIXPREC_CHECK(spec.block.rows >= 0 && spec.block.cols >= 0, where,
                "block sizes must be >= 0 (0 = the whole dim), got " + describe(spec));
}

void check_operand(const Tensor& x, const QuantSpec& spec, const char* where) {
  check_spec(spec, where);
  MIXPREC_CHECK(x.ndim() == 2, where, "expects a 2-d [rows, cols] tensor");
  const DType d = x.dtype();
  MIXPREC_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16, where,
                std::string("input must be f32, bf16 or f16, got ") + dtype_name(d));
  MIXPREC_CHECK(spec.rule != ScaleRule::te_nvfp4 || x.size(1) % 16 == 0, where,
                "te_nvfp4 casts rows of a multiple of 16 values, got [" +
                    std::to_string(x.size(0)) + ", " + std::to_string(x.size(1)) + "]");
}

BlockShape resolved_block(const QuantSpec& spec, int64_t rows, int64_t cols) {
  return {std::max<int64_t>(1, spec.block.rows == 0 ? rows : std::min(spec.block.rows, rows)),
          std::max<int64_t>(1, spec.block.cols == 0 ? cols : std::min(spec.block.cols, cols))};
}

Shape scale_shape(const QuantSpec& spec, int64_t rows, int64_t cols) {
  const BlockShape b = resolved_block(spec, rows, cols);
  return {ceil_div(rows, b.rows), ceil_div(cols, b.cols)};
}

int64_t scaled_gemm_k_step(const Quantized& a, const Quantized& b, const char* where) {
  MIXPREC_CHECK(a.data.ndim() == 2 && b.data.ndim() == 2, where,
                "scaled GEMM operands must be 2-d [rows, k]");
  const int64_t k = a.data.size(1);
  MIXPREC_CHECK(b.data.size(1) == k, where,
                "operands disagree on k: A is [" + std::to_string(a.data.size(0)) + ", " +
                    std::to_string(k) + "], B is [" + std::to_string(b.data.size(0)) + ", " +
                    std::to_string(b.data.size(1)) + "] (C = A·Bᵀ)");
  MIXPREC_CHECK((a.spec.element == DType::f4_e2m1fn) == (b.spec.element == DType::f4_e2m1fn), where,
                "an NVFP4 operand multiplies an NVFP4 one only: A is " + describe(a.spec) +
                    ", B is " + describe(b.spec));
  const int64_t ka = resolved_block(a.spec, a.data.size(0), k).cols;
  const int64_t kb = resolved_block(b.spec, b.data.size(0), k).cols;
  const int64_t step = std::min(ka, kb);
  MIXPREC_CHECK(
      (ka == k || ka == step) && (kb == k || kb == step), where,
      "the operands' blocks along k must be equal or span all of k = " + std::to_string(k) +
          ": A is " + describe(a.spec) + ", B is " + describe(b.spec));
  return step;
}

Descales descales(const Quantized& q) {
  const Tensor s = q.scales.contiguous();
  Descales d;
  d.values.resize(static_cast<std::size_t>(s.numel()));
  for (std::size_t i = 0; i < d.values.size(); ++i)
    d.values[i] = descale_of(q.spec.rule, s.data<float>()[i]);
  d.block_rows = resolved_block(q.spec, q.data.size(0), q.data.size(1)).rows;
  d.cols = s.size(1);
  return d;
}

float tensor_scale_alpha(const Quantized& a, const Quantized& b) {
  return a.tensor_amax && b.tensor_amax ? te_nvfp4_gemm_alpha(*a.tensor_amax, *b.tensor_amax)
                                        : 1.0f;
}

Tensor dequantize(const Quantized& q, DType dtype, bool with_tensor_scale) {
  const int64_t rows = q.data.size(0), cols = q.data.size(1);
  const BlockShape blk = resolved_block(q.spec, rows, cols);
  const FloatFormat& f = *info(q.spec.element).format;
  const bool divide = scale_rule_info(q.spec.rule).form == ScaleForm::divide;
  const Tensor scales = q.scales.contiguous();
  const float* v = scales.data<float>();
  const Tensor data = q.data.contiguous();
  const auto* bits = static_cast<const uint8_t*>(data.raw_data());
  const int64_t scale_cols = scales.size(1);
  const double tensor_decode =
      q.tensor_amax && with_tensor_scale ? te_nvfp4_tensor_scale(*q.tensor_amax).decode : 1.0;
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double x = decode_f64(f, bits[r * cols + c]);
      const double s = v[(r / blk.rows) * scale_cols + c / blk.cols];
      out[static_cast<std::size_t>(r * cols + c)] = (divide ? x * s : x / s) * tensor_decode;
    }
  return Tensor::from_doubles(out, {rows, cols}, dtype);
}

}  // namespace mixprec::backend
