// Reference gradient sums and scans: accumulation, unscaling with the non-finite test, the
// numerics monitor's statistics and the clipping norm's sum of squares.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// Writes v (a new contiguous tensor of dst's shape and dtype) over contiguous dst's bytes.
void store_into(const Tensor& dst, const Tensor& v) {
  MIXPREC_CHECK(dst.is_contiguous(), "gradient", "the tensor written in place must be contiguous");
  std::memcpy(dst.raw_data(), v.raw_data(), v.nbytes());
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}

}  // namespace

Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  MIXPREC_CHECK(a.shape() == b.shape(), "accumulate",
                "shape " + shape_to_string(a.shape()) + " vs " + shape_to_string(b.shape()));
  std::vector<double> r = values(a);
  const std::vector<double> bv = values(b);
  for (size_t i = 0; i < r.size(); ++i) r[i] += bv[i];
  return make(r, a.shape(), a.dtype());
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  store_into(dst, add_same_shape(dst, src));
}

// The test is on the stored (rounded) result, so a finite value that unscaling overflows
// counts too.
int64_t unscale_and_check(std::span<const Tensor> gs, float inv_scale) {
  int64_t first = -1;
  for (size_t t = 0; t < gs.size(); ++t) {
    std::vector<double> v = values(gs[t]);
    if (inv_scale != 1.0f) {
      for (double& e : v) e *= static_cast<double>(inv_scale);
      const Tensor r = make(v, gs[t].shape(), gs[t].dtype());
      store_into(gs[t], r);
      v = values(r);
    }
    if (first < 0 && !all_finite(v)) first = static_cast<int64_t>(t);
  }
  return first;
}

// An optimizer widens g to f32 and multiplies by inv_scale in f32.
int64_t first_nonfinite(std::span<const Tensor> gs, float inv_scale) {
  for (size_t t = 0; t < gs.size(); ++t)
    for (double e : values(gs[t]))
      if (!std::isfinite(static_cast<float>(e) * inv_scale)) return static_cast<int64_t>(t);
  return -1;
}

void clamp_in_place(std::span<const Tensor> gs, double lo, double hi) {
  for (const Tensor& g : gs) {
    std::vector<double> v = values(g);
    for (double& e : v) e = std::isnan(e) ? e : std::min(std::max(e, lo), hi);
    store_into(g, make(v, g.shape(), g.dtype()));
  }
}

GradNumericsPass grad_numerics(std::span<const Tensor> gs, double scale, double underflow_below,
                               double overflow_above) {
  GradNumericsPass pass;
  for (const Tensor& g : gs) {
    GradNumerics s;
    s.numel = g.numel();
    double amax = 0;
    for (double e : values(g)) {
      if (!std::isfinite(e)) {
        ++s.nonfinite;
        continue;
      }
      const double a = std::fabs(e);
      amax = std::max(amax, a);
      s.sum_squares += a * a;
      s.underflow += a * scale < underflow_below;
      s.overflow += a * scale > overflow_above;
    }
    s.amax = static_cast<float>(amax);
    pass.sum_squares += s.sum_squares;
    pass.per_tensor.push_back(s);
  }
  return pass;
}

double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale) {
  double sum = 0;
  for (double e : values(grad.detach().reshape({grad.numel()}).slice(0, begin, end))) {
    const auto v = static_cast<double>(static_cast<float>(e) * inv_scale);  // f32, as read
    sum += v * v;
  }
  return sum;
}

}  // namespace mixprec::backend::reference
