// The FP8 cast statistics: the source re-read row by row and scaled as the quantize kernels
// scale it; only the rare values past max finite go through the scalar encoder.
#include "mixprec/amp/fp8_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/hadamard.h"
#include "mixprec/numerics/nvfp4.h"

namespace mixprec::amp {

void Fp8TensorStats::merge(const Fp8TensorStats& o) {
  numel += o.numel;
  amax = std::max(amax, o.amax);
  if (o.scales > 0) {
    scale_min = scales > 0 ? std::min(scale_min, o.scale_min) : o.scale_min;
    scale_max = scales > 0 ? std::max(scale_max, o.scale_max) : o.scale_max;
    scales += o.scales;
  }
  saturated += o.saturated;
  flushed += o.flushed;
  nonfinite += o.nonfinite;
}

namespace {

constexpr int64_t kRowGrain = 16;

struct BlockCounts {
  float amax = 0;
  int32_t nonfinite = 0, zeros = 0, over = 0;
};

// One block's source counts, branch-free so that the loop vectorizes (hence 32-bit counters
// and a max written as a select); the scaling is the quantize kernels' f32 operation, x / s
// or x * s. Cloned for AVX-512 and AVX2 (chosen when the program loads): the counts are
// integers and maxima of exactly rounded quotients or products, the same on every path.
template <bool kDivide>
[[gnu::always_inline]] inline BlockCounts count_block_by(const float* x, int32_t n,
                                                         float max_finite, float s) {
  // amax as the largest bit pattern of the finite magnitudes (their order as floats), in
  // signed 32-bit integers: GCC vectorizes that max, not a float one (NaN rules) nor an
  // unsigned one.
  int32_t amax_bits = 0, nonfinite = 0, zeros = 0, over = 0;
  for (int32_t c = 0; c < n; ++c) {
    int32_t bits = 0;
    std::memcpy(&bits, x + c, sizeof bits);
    const int32_t mag = bits & 0x7FFFFFFF;
    const int32_t finite = mag < 0x7F800000;  // 0 for inf and NaN
    const int32_t finite_mag = finite ? mag : 0;
    amax_bits = amax_bits > finite_mag ? amax_bits : finite_mag;
    nonfinite += 1 - finite;
    zeros += mag == 0;
    over += finite & (std::fabs(kDivide ? x[c] / s : x[c] * s) > max_finite);
  }
  return {std::bit_cast<float>(amax_bits), nonfinite, zeros, over};
}
__attribute__((target_clones("avx512f", "avx2", "default"))) BlockCounts count_block(
    const float* x, int32_t n, float max_finite, float s, bool divide) {
  return divide ? count_block_by<true>(x, n, max_finite, s)
                : count_block_by<false>(x, n, max_finite, s);
}

// Stored +-0s among n bytes (a loop of its own: one element width, so it vectorizes).
int32_t zero_bytes(const uint8_t* q, int32_t n, uint8_t abs_mask) {
  int32_t zeros = 0;
  for (int32_t c = 0; c < n; ++c) zeros += (q[c] & abs_mask) == 0;
  return zeros;
}

// One row's counts: x its source widened to f32, q its stored bytes, v the row's scale per
// column block. Only a block with a value past max finite after scaling takes a second,
// scalar look through the encoder.
void count_row(const float* x, const uint8_t* q, const float* v, int64_t cols, int64_t block_cols,
               bool divide, const FloatFormat& f, Fp8TensorStats& s) {
  const float max_finite = static_cast<float>(mixprec::max_finite(f));
  // Where a format without inf or NaN would overflow: max finite plus half its ulp (its
  // significand is all ones, odd, so the tie rounds up too).
  const float half_ulp_at_max = std::ldexp(1.0f, std::ilogb(max_finite) - f.mant_bits - 1);
  const auto abs_mask = static_cast<uint8_t>(f.abs_mask());
  constexpr int64_t kPiece = int64_t{1} << 30;  // 32-bit counts: a longer block goes in pieces
  for (int64_t c0 = 0; c0 < cols; c0 += block_cols) {
    const int64_t n = std::min(cols, c0 + block_cols) - c0;
    const float* xb = x + c0;
    const uint8_t* qb = q + c0;
    const float sv = v[c0 / block_cols];
    // Dividing by a power of two (MX, UE8M0) is multiplying by its reciprocal, bit for bit:
    // the same real number rounded once.
    const bool by_reciprocal = divide && std::isfinite(sv) && sv > 0 && pow2_floor(sv) == sv;
    const float mul = by_reciprocal ? 1.0f / sv : sv;
    int64_t total_over = 0;
    for (int64_t p0 = 0; p0 < n; p0 += kPiece) {
      const auto pn = static_cast<int32_t>(std::min(n - p0, kPiece));
      const bool by_division = divide && !by_reciprocal;
      const BlockCounts b =
          count_block(xb + p0, pn, max_finite, by_division ? sv : mul, by_division);
      s.amax = std::max(s.amax, b.amax);
      s.nonfinite += b.nonfinite;
      // A stored 0 comes from a zero source or a flushed one: an inf or NaN source is stored
      // as NaN or +-max finite, never 0 (the casts saturate, NaN stays NaN, inf·0 is NaN).
      // Under a NaN or inf scale (a block whose amax was inf or NaN) a zero source is stored
      // as NaN too: every stored 0 is then a flushed value.
      const float zero_scaled = divide ? 0.0f / sv : 0.0f * sv;
      s.flushed += zero_bytes(qb + p0, pn, abs_mask) - (zero_scaled == 0.0f ? b.zeros : 0);
      total_over += b.over;
    }
    if (total_over == 0) continue;
    for (int64_t c = 0; c < n; ++c) {
      const float xc = xb[c], y = divide ? xc / sv : xc * sv;
      if (!std::isfinite(xc) || !(std::fabs(y) > max_finite)) continue;
      if (!f.has_inf && !f.has_nan) {  // E2M1: rounding to nearest even would pass max finite
        s.saturated += std::fabs(y) >= max_finite + half_ulp_at_max;
        continue;
      }
      const uint32_t plain = encode_f32(f, y, Rounding::nearest_even, /*saturate=*/false);
      s.saturated += f.is_nan(plain) || (f.has_inf && (plain & f.abs_mask()) == f.inf_bits());
    }
  }
}

}  // namespace

Fp8TensorStats fp8_tensor_stats(const Tensor& source, const backend::Quantized& q) {
  constexpr const char* kWhere = "fp8_tensor_stats";
  MIXPREC_CHECK(source.ndim() == 2 && q.data.ndim() == 2 && source.shape() == q.data.shape(),
                kWhere,
                "source " + shape_to_string(source.shape()) + " and quantized data " +
                    shape_to_string(q.data.shape()) + " must be the same 2-d shape");
  const DType in_dtype = source.dtype();
  MIXPREC_CHECK(in_dtype == DType::f32 || in_dtype == DType::bf16 || in_dtype == DType::f16, kWhere,
                std::string("source must be f32, bf16 or f16, got ") + dtype_name(in_dtype));
  const int64_t rows = source.size(0), cols = source.size(1);
  const backend::BlockShape blk = backend::resolved_block(q.spec, rows, cols);
  const Shape ss = backend::scale_shape(q.spec, rows, cols);
  MIXPREC_CHECK(q.scales.shape() == ss, kWhere,
                "scales " + shape_to_string(q.scales.shape()) + " do not match " +
                    backend::describe(q.spec) + " on " + shape_to_string(source.shape()) +
                    " (expected " + shape_to_string(ss) + ")");
  const Tensor x = source.contiguous();
  const Tensor scales = q.scales.contiguous();
  const Tensor data = q.data.contiguous();
  const float* v = scales.data<float>();
  const auto* bytes = static_cast<const uint8_t*>(data.raw_data());
  const auto* src = static_cast<const char*>(x.raw_data());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(in_dtype);
  const FloatFormat& f = *info(q.spec.element).format;
  // NVFP4 stores its blocks' decode scales and multiplies by their encode ones (nvfp4.h).
  const bool nvfp4 = q.spec.rule == ScaleRule::te_nvfp4;
  const bool divide = !nvfp4 && scale_rule_info(q.spec.rule).form == ScaleForm::divide;
  std::vector<float> encode;
  if (nvfp4) {
    MIXPREC_CHECK(q.tensor_amax.has_value(), kWhere, "a te_nvfp4 cast without its tensor amax");
    const TeNvfp4TensorScale ts = te_nvfp4_tensor_scale(*q.tensor_amax);
    encode.resize(static_cast<std::size_t>(scales.numel()));
    for (std::size_t i = 0; i < encode.size(); ++i) encode[i] = te_nvfp4_block_encode(v[i], ts);
  }
  const float* factors = nvfp4 ? encode.data() : v;

  // One partial per chunk of rows (chunks start at multiples of the grain): integer sums and
  // maxima, so the result does not depend on the thread count.
  std::vector<Fp8TensorStats> parts(static_cast<std::size_t>((rows + kRowGrain - 1) / kRowGrain));
  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    Fp8TensorStats& s = parts[static_cast<std::size_t>(r0 / kRowGrain)];
    std::vector<float> buf(static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      widen_row_f32(in_dtype, src + static_cast<std::size_t>(r) * row_bytes, buf.data(),
                    static_cast<std::size_t>(cols));
      if (q.spec.rht) rht16_in(buf.data(), cols, in_dtype);  // what the cast saw
      count_row(buf.data(), bytes + r * cols, factors + (r / blk.rows) * ss[1], cols, blk.cols,
                divide, f, s);
    }
  });
  Fp8TensorStats out;
  for (const Fp8TensorStats& p : parts) out.merge(p);
  out.numel = rows * cols;
  for (int64_t i = 0; i < scales.numel(); ++i) {
    if (std::isnan(v[i])) continue;
    out.scale_min = out.scales ? std::min(out.scale_min, v[i]) : v[i];
    out.scale_max = out.scales ? std::max(out.scale_max, v[i]) : v[i];
    ++out.scales;
  }
  return out;
}

}  // namespace mixprec::amp
