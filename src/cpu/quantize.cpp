#include "mixprec/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/float_format.h"
#include "mixprec/numerics/hadamard.h"
#include "mixprec/numerics/nvfp4.h"
#include "mixprec/numerics/scaled_cast.h"

namespace mixprec::cpu {

using backend::BlockShape;
using backend::Quantized;
using backend::QuantSpec;

namespace {

// FP8 operands widened for the GEMM kernels: to bf16 where this CPU multiplies bf16 natively
// (AMX, AVX512-BF16), else straight to f32, which the widening paths would make of bf16
// anyway. Exact either way: every E4M3 / E5M2 value is a bf16 value.
Tensor widen_for_gemm(const Tensor& fp8) {
  return fp8.to(bf16_gemm_is_native() ? DType::bf16 : DType::f32);
}

}  // namespace

Quantized quantize(const Tensor& x_in, const QuantSpec& spec) {
  backend::check_operand(x_in, spec, "quantize");
  const Tensor x = x_in.contiguous();
  const DType in_dtype = x.dtype();
  const int64_t rows = x.size(0), cols = x.size(1);
  const BlockShape blk = backend::resolved_block(spec, rows, cols);
  const Shape ss = backend::scale_shape(spec, rows, cols);
  const int64_t col_blocks = ss[1];
  const FloatFormat& f = *info(spec.element).format;
  const bool nvfp4 = spec.rule == ScaleRule::te_nvfp4;
  const auto* src = static_cast<const char*>(x.raw_data());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(in_dtype);
  // A row in f32; with the RHT, transformed in the input's dtype, as TE transforms.
  auto each_row = [&](auto&& fn) {
    parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      std::vector<float> buf(static_cast<std::size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        widen_row_f32(in_dtype, src + static_cast<std::size_t>(r) * row_bytes, buf.data(),
                      buf.size());
        if (spec.rht) rht16_in(buf.data(), cols, in_dtype);
        fn(r, buf);
      }
    });
  };

  Tensor scales = Tensor::empty(ss, DType::f32);
  float* v = scales.data<float>();
  Tensor data = Tensor::empty({rows, cols}, spec.element);
  auto* q = static_cast<uint8_t*>(data.raw_data());
  // NVFP4 stores its E4M3 block decode scale and multiplies by its block encode scale.
  const ScaleForm form = nvfp4 ? ScaleForm::multiply : scale_rule_info(spec.rule).form;
  // A row (widened to f32 in buf) scaled block by block by vr, then cast (scaled_cast.h).
  auto scale_and_cast = [&](int64_t r, std::vector<float>& buf, const float* vr) {
    scale_and_cast_row(buf.data(), 0, cols, blk.cols, vr, form, spec.element, q + r * cols,
                       backend::element_rounding(spec, r * cols));
  };
  auto row_block_amax = [&](const std::vector<float>& buf, int64_t b) {
    const int64_t c0 = b * blk.cols;
    return block_amax(buf.data() + c0, std::min(cols, c0 + blk.cols) - c0);
  };

  if (blk.rows == 1 && !nvfp4) {  // blocks within a row (rowwise, 1x128, MX): one pass a row
    each_row([&](int64_t r, std::vector<float>& buf) {
      float* vr = v + r * col_blocks;
      for (int64_t b = 0; b < col_blocks; ++b)
        vr[b] = scale_from_amax(spec.rule, row_block_amax(buf, b), f, spec.pow2);
      scale_and_cast(r, buf, vr);
    });
    return {data, scales, spec};
  }

  // Blocks across rows, or NVFP4's tensor scale: each row's amax per column block, then the
  // row blocks' maxima and the tensor's (the same values whatever the thread count: a max does
  // not depend on the order), then the cast.
  std::vector<float> row_amax(static_cast<std::size_t>(rows * col_blocks));
  each_row([&](int64_t r, const std::vector<float>& buf) {
    for (int64_t b = 0; b < col_blocks; ++b)
      row_amax[static_cast<std::size_t>(r * col_blocks + b)] = row_block_amax(buf, b);
  });
  std::optional<float> tensor_amax;
  std::vector<float> encode;  // NVFP4's factors; the FP8 rules cast by the stored scales
  if (nvfp4) {
    tensor_amax = 0.0f;
    for (const float a : row_amax) *tensor_amax = max_amax(*tensor_amax, a);
    encode.resize(static_cast<std::size_t>(ss[0] * col_blocks));
  }
  const TeNvfp4TensorScale ts = te_nvfp4_tensor_scale(tensor_amax.value_or(0.0f));
  for (int64_t br = 0; br < ss[0]; ++br)
    for (int64_t b = 0; b < col_blocks; ++b) {
      float amax = 0;
      for (int64_t r = br * blk.rows; r < std::min(rows, (br + 1) * blk.rows); ++r)
        amax = max_amax(amax, row_amax[static_cast<std::size_t>(r * col_blocks + b)]);
      const int64_t i = br * col_blocks + b;
      if (nvfp4) {
        const TeNvfp4BlockScale s = te_nvfp4_block_scale(amax, ts);
        v[i] = s.decode;
        encode[static_cast<std::size_t>(i)] = s.encode;
      } else {
        v[i] = scale_from_amax(spec.rule, amax, f, spec.pow2);
      }
    }
  const float* factors = nvfp4 ? encode.data() : v;
  each_row([&](int64_t r, std::vector<float>& buf) {
    scale_and_cast(r, buf, factors + (r / blk.rows) * col_blocks);
  });
  return {data, scales, spec, tensor_amax};
}

namespace {

bool all_powers_of_two(const std::vector<float>& d) {
  return std::all_of(d.begin(), d.end(),
                     [](float v) { return std::isfinite(v) && v > 0 && pow2_floor(v) == v; });
}

// The binary exponents of an operand's smallest nonzero and largest finite dequantized
// magnitudes: the FP8 format's extremes times the smallest and largest (power-of-two) descale.
struct ExponentRange {
  int lo, hi;
};
ExponentRange dequantized_range(const Quantized& q, const backend::Descales& d) {
  const FloatFormat& f = *info(q.spec.element).format;
  const auto [dmin, dmax] = std::minmax_element(d.values.begin(), d.values.end());
  return {std::ilogb(min_subnormal(f)) + std::ilogb(*dmin),
          std::ilogb(max_finite(f)) + std::ilogb(*dmax)};
}

// Whether the power-of-two-scaled operands may be dequantized to bf16 for this CPU's native
// bf16 GEMM: every dequantized value is then exact and normal in bf16 (<= 4 significant bits),
// and every product of two normal f32 too, so the kernels' flushing of subnormals (vdpbf16ps,
// AMX) changes nothing: the same exact products in f32 as the f32 GEMM, at twice its speed.
bool bf16_dequant_is_exact(const Quantized& a, const backend::Descales& da, const Quantized& b,
                           const backend::Descales& db) {
  if (!bf16_gemm_is_native()) return false;
  const ExponentRange ra = dequantized_range(a, da), rb = dequantized_range(b, db);
  constexpr int kMinNormal = -126, kMaxFinite = 127;
  return ra.lo >= kMinNormal && rb.lo >= kMinNormal && ra.hi < kMaxFinite && rb.hi < kMaxFinite &&
         ra.lo + rb.lo >= kMinNormal && ra.hi + rb.hi + 2 < kMaxFinite;
}

// q·descale for every element, in `dtype` (f32 or bf16): exact when the descales are powers of
// two (an FP8 value has at most 4 significant bits and E8M0 keeps every such product inside
// f32's range; bf16 only where bf16_dequant_is_exact says so), and for NVFP4 (an E2M1 value's
// <= 2 significant bits times an E4M3 scale's <= 4, within 2^-10 .. 2688: normal in bf16).
Tensor dequantize_exactly(const Quantized& q, const backend::Descales& d, DType dtype) {
  const int64_t rows = q.data.size(0), cols = q.data.size(1);
  const backend::BlockShape blk = backend::resolved_block(q.spec, rows, cols);
  const Tensor src = q.data.contiguous();
  const auto* in = static_cast<const uint8_t*>(src.raw_data());
  Tensor out = Tensor::empty({rows, cols}, dtype);
  auto* o = static_cast<char*>(out.raw_data());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(dtype);
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      widen_row_f32(q.spec.element, in + r * cols, row.data(), row.size());
      // Each block times its descale, then the (exact) cast: the quantize kernels' step.
      scale_and_cast_row(row.data(), 0, cols, blk.cols, &d.values[d.row_offset(r)],
                         ScaleForm::multiply, dtype, o + static_cast<std::size_t>(r) * row_bytes);
    }
  });
  return out;
}

}  // namespace

Tensor scaled_gemm(const Quantized& a, const Quantized& b, DType out_dtype) {
  const int64_t step = backend::scaled_gemm_k_step(a, b, "scaled_gemm");
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  const backend::Descales da = backend::descales(a), db = backend::descales(b);
  // Exact descales scale a K-step's sum exactly, so the operands may be dequantized exactly
  // and summed over all of k in one GEMM: the same exact products in f32, instead of one GEMM
  // and one pass over C per K-step. Power-of-two descales (MX's E8M0, pow2 block scales) are
  // exact; so are NVFP4's E4M3 ones on E2M1 values, whose tensor scales (TE's alpha) then
  // multiply once.
  const bool nvfp4 = a.spec.element == DType::f4_e2m1fn;
  if (nvfp4 || (step < k && all_powers_of_two(da.values) && all_powers_of_two(db.values))) {
    const DType wd = (nvfp4 ? bf16_gemm_is_native() : bf16_dequant_is_exact(a, da, b, db))
                         ? DType::bf16
                         : DType::f32;
    const Tensor ad = dequantize_exactly(a, da, wd), bd = dequantize_exactly(b, db, wd);
    Tensor c = Tensor::empty({m, n}, DType::f32);
    gemm(m, n, k, backend::tensor_scale_alpha(a, b), {wd, ad.raw_data(), k},
         {wd, bd.raw_data(), k, true}, 0.0f, {DType::f32, c.raw_data(), n});
    return c.to(out_dtype);
  }
  const Tensor aw = widen_for_gemm(a.data), bw = widen_for_gemm(b.data);
  const DType wd = aw.dtype();
  const auto* ap = static_cast<const char*>(aw.raw_data());
  const auto* bp = static_cast<const char*>(bw.raw_data());
  const auto at = [&](const char* base, int64_t i) { return base + i * dtype_size(wd); };
  Tensor acc = Tensor::zeros({m, n}, DType::f32);
  Tensor part = Tensor::empty({m, n}, DType::f32);
  float* c = acc.data<float>();
  float* p = part.data<float>();
  std::vector<float> sb(static_cast<std::size_t>(n));  // B's descales of the K-step, by column
  for (int64_t k0 = 0, j = 0; k0 < k; k0 += step, ++j) {
    const int64_t ks = std::min(step, k - k0);
    // The K-step's exact products summed in f32: A[:, k0:k0+ks] · B[:, k0:k0+ks]ᵀ.
    gemm(m, n, ks, 1.0f, {wd, at(ap, k0), k}, {wd, at(bp, k0), k, true}, 0.0f, {DType::f32, p, n});
    for (int64_t col = 0; col < n; ++col) sb[static_cast<std::size_t>(col)] = db.at(col, j);
    parallel_for(m, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        const float sa = da.at(i, j);
        float* ci = c + i * n;
        const float* pi = p + i * n;
        for (int64_t col = 0; col < n; ++col) ci[col] += pi[col] * sa * sb[col];
      }
    });
  }
  return acc.to(out_dtype);
}

}  // namespace mixprec::cpu
