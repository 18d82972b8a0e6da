// Reference FP8 / NVFP4 kernels: block by block, element by element, the GEMM summed in f64.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/hadamard.h"
#include "mixprec/numerics/nvfp4.h"
#include "mixprec/numerics/philox.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {

namespace {

// TE's RHT as a 16x16 matrix product of each run of 16, summed in f64 and rounded once to
// `dtype` (the cpu kernel's butterflies in f32 agree on bf16 values).
std::vector<double> rht(const std::vector<double>& in, const Shape& shape, DType dtype) {
  std::vector<double> t(in.size());
  for (std::size_t r0 = 0; r0 < in.size(); r0 += kRhtSize)
    for (int j = 0; j < kRhtSize; ++j) {
      double s = 0;
      for (int i = 0; i < kRhtSize; ++i)
        s += in[r0 + static_cast<std::size_t>(i)] * rht16_entry(i, j);
      t[r0 + static_cast<std::size_t>(j)] = s;
    }
  return values(make(t, shape, dtype));
}

// The NaN-keeping amax of in's elements [r0, r1) x [c0, c1) of a row-major [rows, cols].
float region_amax(const std::vector<double>& in, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                  int64_t c1) {
  float amax = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) {
      const float a = std::fabs(static_cast<float>(in[static_cast<std::size_t>(r * cols + c)]));
      if (std::isnan(a) || a > amax) amax = std::isnan(amax) ? amax : a;
    }
  return amax;
}

}  // namespace

Quantized quantize(const Tensor& x, const QuantSpec& spec) {
  check_operand(x, spec, "quantize");
  const int64_t rows = x.size(0), cols = x.size(1);
  const BlockShape blk = resolved_block(spec, rows, cols);
  const Shape ss = scale_shape(spec, rows, cols);
  const FloatFormat& f = *info(spec.element).format;
  const bool nvfp4 = spec.rule == ScaleRule::te_nvfp4;
  const bool divide = !nvfp4 && scale_rule_info(spec.rule).form == ScaleForm::divide;
  // f32 values: every input dtype widens to f32 exactly, and the recipes compute in f32.
  std::vector<double> in = values(x);
  if (spec.rht) in = rht(in, x.shape(), x.dtype());
  // NVFP4's second level: the tensor's amax sets every block's scale.
  std::optional<float> tensor_amax;
  if (nvfp4) tensor_amax = region_amax(in, cols, 0, rows, 0, cols);
  const TeNvfp4TensorScale ts = te_nvfp4_tensor_scale(tensor_amax.value_or(0.0f));
  // Stochastic rounding's draw for element i, computed on its own (the cpu kernel's draws
  // four a Philox block).
  const ConvertOptions rounding = element_rounding(spec);
  const auto random = [&](std::size_t i) {
    return rounding.rounding == Rounding::stochastic ? philox_u32(rounding.seed, rounding.stream, i)
                                                     : 0u;
  };
  std::vector<uint8_t> q(in.size());
  std::vector<double> scales(static_cast<std::size_t>(ss[0] * ss[1]));
  for (int64_t br = 0; br < ss[0]; ++br)
    for (int64_t bc = 0; bc < ss[1]; ++bc) {
      const int64_t r0 = br * blk.rows, r1 = std::min(rows, r0 + blk.rows);
      const int64_t c0 = bc * blk.cols, c1 = std::min(cols, c0 + blk.cols);
      const float amax = region_amax(in, cols, r0, r1, c0, c1);
      // The stored scale, and what the elements are multiplied or divided by: the same but
      // for NVFP4, which stores its E4M3 decode scale and multiplies by its encode scale.
      float stored, factor;
      if (nvfp4) {
        const TeNvfp4BlockScale s = te_nvfp4_block_scale(amax, ts);
        stored = s.decode, factor = s.encode;
      } else {
        stored = factor = scale_from_amax(spec.rule, amax, f, spec.pow2);
      }
      scales[static_cast<std::size_t>(br * ss[1] + bc)] = stored;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const auto i = static_cast<std::size_t>(r * cols + c);
          const float y =
              divide ? static_cast<float>(in[i]) / factor : static_cast<float>(in[i]) * factor;
          q[i] = static_cast<uint8_t>(encode_f32(f, y, rounding.rounding, true, random(i)));
        }
    }
  Tensor data = Tensor::empty({rows, cols}, spec.element);
  std::copy(q.begin(), q.end(), static_cast<uint8_t*>(data.raw_data()));
  return {data, make(scales, ss, DType::f32), spec, tensor_amax};
}

Tensor scaled_gemm(const Quantized& a, const Quantized& b, DType out_dtype) {
  scaled_gemm_k_step(a, b, "scaled_gemm");  // the operand checks; exact sums need no steps
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  // Dequantized operands in f64 (exact q / v, to f64's precision): the sum of their products
  // is the exact result the cpu kernel must meet within f32 accumulation error.
  // NVFP4's tensor scales multiply the sum once, as TE's GEMM does (alpha).
  const std::vector<double> av = values(dequantize(a, DType::f64, false));
  const std::vector<double> bv = values(dequantize(b, DType::f64, false));
  const double alpha = tensor_scale_alpha(a, b);
  std::vector<double> c(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += av[static_cast<std::size_t>(i * k + p)] * bv[static_cast<std::size_t>(j * k + p)];
      c[static_cast<std::size_t>(i * n + j)] = s * alpha;
    }
  return make(c, {m, n}, out_dtype);
}

}  // namespace mixprec::backend::reference
