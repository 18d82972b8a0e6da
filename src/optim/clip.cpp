#include "mixprec/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fused_update.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/parallel.h"

namespace mixprec::optim {
namespace {

using detail::kChunk;
using detail::kTile;

// f64 sums of (g * inv_scale)^2 over each kChunk piece of g, appended in order.
void append_square_sums(const Tensor& g, float inv_scale, std::vector<double>& out) {
  const int64_t n = g.numel(), pieces = (n + kChunk - 1) / kChunk;
  const std::size_t first = out.size();
  out.resize(first + static_cast<std::size_t>(pieces), 0.0);
  const DType dt = g.dtype();
  const char* base = static_cast<const char*>(g.raw_data());
  const auto esize = static_cast<int64_t>(dtype_size(dt));
  parallel_for(n, kChunk, [&](int64_t begin, int64_t end) {
    alignas(64) float buf[kTile];  // [kTile] gradient widened to f32
    double sum = 0;
    for (int64_t at = begin; at < end; at += kTile) {
      const int64_t m = std::min(kTile, end - at);
      widen_row_f32(dt, base + at * esize, buf, static_cast<std::size_t>(m));
      for (int64_t i = 0; i < m; ++i) {
        const double x = static_cast<double>(buf[i] * inv_scale);
        sum += x * x;
      }
    }
    out[first + static_cast<std::size_t>(begin / kChunk)] = sum;
  });
}

// g *= factor in place, each element computed in f32 and rounded once to g's dtype.
void scale_in_place(Tensor& g, float factor) {
  const DType dt = g.dtype();
  char* base = static_cast<char*>(g.raw_data());
  const auto esize = static_cast<int64_t>(dtype_size(dt));
  parallel_for(g.numel(), kChunk, [&](int64_t begin, int64_t end) {
    alignas(64) float buf[kTile];  // [kTile] f32 working copy of the gradient
    for (int64_t at = begin; at < end; at += kTile) {
      const int64_t m = std::min(kTile, end - at);
      char* p = base + at * esize;
      float* x = dt == DType::f32 ? reinterpret_cast<float*>(p) : buf;
      if (dt != DType::f32) widen_row_f32(dt, p, buf, static_cast<std::size_t>(m));
      for (int64_t i = 0; i < m; ++i) x[i] *= factor;
      if (dt != DType::f32) narrow_row_f32(buf, dt, p, static_cast<std::size_t>(m));
    }
  });
}

}  // namespace

double grad_norm(const ParamList& params, float inv_scale) {
  std::vector<double> sums;
  for (const auto& p : params) {
    const Tensor g = p->grad();
    if (g.defined()) append_square_sums(detail::checked_grad(*p, g, "grad_norm"), inv_scale, sums);
  }
  double total = 0;
  for (double s : sums) total += s;
  return std::sqrt(total);
}

float clip_coefficient(double total_norm, double max_norm) {
  const double coef = max_norm / (total_norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

double clip_grad_norm(const ParamList& params, double max_norm) {
  MIXPREC_CHECK(max_norm > 0, "clip_grad_norm",
                "max_norm must be > 0, got " + std::to_string(max_norm));
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const float coef = clip_coefficient(norm, max_norm);
  if (coef == 1.0f) return norm;
  for (const auto& p : params) {
    const Tensor raw = p->grad();
    if (!raw.defined()) continue;
    Tensor g = raw.contiguous();
    scale_in_place(g, coef);
    if (!g.shares_storage_with(raw)) p->set_grad(g);
  }
  return norm;
}

}  // namespace mixprec::optim
