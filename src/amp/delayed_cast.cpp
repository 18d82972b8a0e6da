// The cast of a delayed recipe: a given per-tensor scale instead of one from the tensor's amax.
#include <cmath>
#include <vector>

#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/scaled_cast.h"

namespace mixprec::amp {

backend::Quantized delayed_quantize(const Tensor& x_in, const backend::QuantSpec& spec,
                                    DelayedScaling& state, const std::string& key, bool record) {
  backend::check_spec(spec, "delayed_quantize");
  MIXPREC_CHECK(x_in.ndim() == 2 && spec.block == backend::BlockShape{}, "delayed_quantize",
                "expects a 2-d tensor and a tensorwise spec");
  MIXPREC_CHECK(!spec.stochastic && !spec.rht, "delayed_quantize",
                "casts to nearest without a transform, got " + backend::describe(spec));
  MIXPREC_CHECK(
      x_in.dtype() == DType::f32 || x_in.dtype() == DType::bf16 || x_in.dtype() == DType::f16,
      "delayed_quantize",
      std::string("input must be f32, bf16 or f16, got ") + dtype_name(x_in.dtype()));
  const float fp8_max = static_cast<float>(max_finite(*info(spec.element).format));
  const float scale = state.scale(key, fp8_max);
  const Tensor x = x_in.contiguous();  // rows widened to f32 one at a time below
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* src = static_cast<const char*>(x.raw_data());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(x.dtype());
  Tensor data = Tensor::empty({rows, cols}, spec.element);
  auto* q = static_cast<uint8_t*>(data.raw_data());
  const ScaleForm form = scale_rule_info(spec.rule).form;
  std::vector<float> row_amax(static_cast<std::size_t>(rows), 0.0f);
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      widen_row_f32(x.dtype(), src + static_cast<std::size_t>(r) * row_bytes, buf.data(),
                    static_cast<std::size_t>(cols));
      row_amax[static_cast<std::size_t>(r)] = block_amax(buf.data(), cols);
      scale_and_cast_row(buf.data(), 0, cols, cols, &scale, form, spec.element, q + r * cols);
    }
  });
  if (record) {
    float amax = 0;
    for (float a : row_amax) amax = std::isnan(a) || std::isnan(amax) ? NAN : std::max(amax, a);
    state.record(key, amax);
  }
  Tensor scales = Tensor::empty({1, 1}, DType::f32);
  scales.data<float>()[0] = scale;
  return {data, scales, spec};
}

}  // namespace mixprec::amp
