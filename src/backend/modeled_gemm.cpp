#include "mixprec/backend/modeled_gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::backend {
namespace {

// The operand's values in f32 (exact: FP8 widens exactly), row-major.
std::vector<float> values_of(const Quantized& q) {
  const Tensor d = q.data.contiguous();
  std::vector<float> v(static_cast<std::size_t>(d.numel()));
  widen_row_f32(q.spec.element, d.raw_data(), v.data(), v.size());
  return v;
}

int min_exponent(DType element) {  // the smallest normal exponent: subnormals align there
  return info(element).format->min_exp();
}

}  // namespace

Tensor scaled_gemm_modeled(const Quantized& a, const Quantized& b, const AccumulatorModel& model) {
  check_accumulator_model(model, "scaled_gemm_modeled");
  const int64_t step = scaled_gemm_k_step(a, b, "scaled_gemm_modeled");
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  const std::vector<float> av = values_of(a), bv = values_of(b);
  const Descales da = descales(a), db = descales(b);
  const int ea = min_exponent(a.spec.element), eb = min_exponent(b.spec.element);
  Tensor out = Tensor::zeros({m, n}, DType::f32);
  float* c = out.data<float>();
  parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    std::vector<double> products(static_cast<std::size_t>(step));
    std::vector<int> exponents(static_cast<std::size_t>(step));
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t col = 0; col < n; ++col) {
        float acc = 0;
        for (int64_t k0 = 0, j = 0; k0 < k; k0 += step, ++j) {
          const int64_t ks = std::min(step, k - k0);
          for (int64_t p = 0; p < ks; ++p) {
            const float x = av[static_cast<std::size_t>(i * k + k0 + p)];
            const float y = bv[static_cast<std::size_t>(col * k + k0 + p)];
            const auto at = static_cast<std::size_t>(p);
            products[at] = static_cast<double>(x) * static_cast<double>(y);
            exponents[at] = products[at] != 0 && std::isfinite(products[at])
                                ? product_exponent(x, ea, y, eb)
                                : 0;
          }
          const float partial =
              model_dot(std::span<const double>(products).first(static_cast<std::size_t>(ks)),
                        model, std::span<const int>(exponents).first(static_cast<std::size_t>(ks)));
          acc += partial * da.at(i, j) * db.at(col, j);
        }
        c[i * n + col] = acc;
      }
  });
  return out;
}

}  // namespace mixprec::backend
