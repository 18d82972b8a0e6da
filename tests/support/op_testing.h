// Shared checks for op tests: f64 finite-difference gradient checks, thread-count bit
// equality, and low-precision-vs-f32 comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/tensor/generator.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::testing {

inline Tensor randn(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return Tensor::normal(shape, 0.0, scale, gen, dtype);
}

// Same values rounded into `dtype` (the inputs a bf16 kernel and its f32 twin both see).
inline Tensor rounded(const Tensor& x, DType dtype) {
  NoGradGuard g;
  return x.to(dtype).to(DType::f64);
}

// Runs fn with `threads` OpenMP threads, restoring the previous count.
template <class Fn>
auto with_threads(int threads, Fn&& fn) {
  struct Restore {
    int saved;
    ~Restore() { set_num_threads(saved); }
  } restore{num_threads()};
  set_num_threads(threads);
  return fn();
}

// The message of the mixprec::Error that fn throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// Expects |a - b| <= atol + rtol * |b| elementwise; reports the worst element.
inline void expect_close(const Tensor& a, const Tensor& b, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < x.size(); ++i) {
    const double excess = std::fabs(x[i] - y[i]) - (atol + rtol * std::fabs(y[i]));
    if (std::isnan(x[i]) != std::isnan(y[i]) || excess > worst_excess) {
      worst_excess = std::isnan(x[i]) != std::isnan(y[i]) ? INFINITY : excess;
      worst = i;
    }
  }
  if (!x.empty()) {
    EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " got " << x[worst]
                                 << " expected " << y[worst] << " (atol " << atol << ", rtol "
                                 << rtol << ")";
  }
}

// f64 gradient check of fn at `inputs` (f64 tensors; those with requires_grad are checked):
// analytic d<out, R>/dx from backward(R) vs central differences, R a fixed random tensor.
inline void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             std::vector<Tensor> inputs, const std::string& what, double eps = 1e-6,
                             double atol = 1e-7, double rtol = 1e-5) {
  for (Tensor& t : inputs) {
    if (t.requires_grad()) {
      ASSERT_EQ(t.dtype(), DType::f64) << what << ": gradcheck needs f64 inputs";
      t.set_grad(Tensor());
    }
  }
  Tensor out = fn(inputs);
  ASSERT_TRUE(out.requires_grad()) << what << ": output records no history";
  const Tensor r = randn(out.shape(), DType::f64, 0x5eed);
  const std::vector<double> rv = r.to_doubles();
  out.backward(r);
  auto dot = [&](const Tensor& o) {
    const std::vector<double> ov = o.to_doubles();
    double s = 0;
    for (size_t i = 0; i < ov.size(); ++i) s += ov[i] * rv[i];
    return s;
  };
  NoGradGuard no_grad;
  for (size_t a = 0; a < inputs.size(); ++a) {
    Tensor& x = inputs[a];
    if (!x.defined() || !x.requires_grad()) continue;
    ASSERT_TRUE(x.is_contiguous());
    const Tensor g = x.grad();
    ASSERT_TRUE(g.defined()) << what << ": input " << a << " got no gradient";
    const std::vector<double> analytic = g.to_doubles();
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = p[i];
      p[i] = saved + eps;
      const double up = dot(fn(inputs));
      p[i] = saved - eps;
      const double down = dot(fn(inputs));
      p[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<size_t>(i)], numeric, atol + rtol * std::fabs(numeric))
          << what << ": input " << a << " element " << i;
    }
  }
}

// Tensor of `shape` in f64 that requires grad (a gradcheck input).
inline Tensor grad_input(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Tensor t = randn(shape, DType::f64, seed, scale);
  t.set_requires_grad(true, DType::f64);
  return t;
}

}  // namespace mixprec::testing
