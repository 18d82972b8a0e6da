// Attention's row math, delegated to the softmax row kernels (one vector exp for the project).
#include "mixprec/cpu/attention.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

template <class S>
S scaled_exp_sum(S* x, S scale, S shift, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
  return row_ops<S>().exp_shifted_sum(x, shift, x, n);
}

}  // namespace

float exp_scaled_sum(float* x, float scale, float shift, int64_t n) {
  return scaled_exp_sum(x, scale, shift, n);
}

double exp_scaled_sum(double* x, double scale, double shift, int64_t n) {
  return scaled_exp_sum(x, scale, shift, n);
}

float row_max(const float* x, int64_t n) {
  return row_ops<float>().max(x, n);
}

double row_max(const double* x, int64_t n) {
  return row_ops<double>().max(x, n);
}

}  // namespace mixprec::cpu
