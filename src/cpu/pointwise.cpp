// Pointwise math over map_flat blocks: the formulas are backend/pointwise_math.h's.
#include "mixprec/cpu/pointwise.h"

#include <array>
#include <string>

#include "../backend/pointwise_math.h"
#include "mixprec/cpu/elementwise.h"

namespace mixprec::cpu {
namespace {

// out = f(x) (no g) or g·f'(x), in A (f32, or f64 when any operand is f64).
template <class A>
void run(const Pointwise& f, const Tensor& x, const Tensor* g, const Tensor& out) {
  if (!g) {
    map_flat<A>(x.numel(), std::array<MapIn, 1>{{{x.dtype(), x.raw_data()}}},
                std::array<MapOut, 1>{{{out.dtype(), out.raw_data()}}},
                [&](const A* const* in, A* const* y, int64_t len, int64_t) {
                  for (int64_t i = 0; i < len; ++i)
                    y[0][i] = backend::pointwise_value<A>(f, in[0][i]);
                });
    return;
  }
  map_flat<A>(x.numel(),
              std::array<MapIn, 2>{{{x.dtype(), x.raw_data()}, {g->dtype(), g->raw_data()}}},
              std::array<MapOut, 1>{{{out.dtype(), out.raw_data()}}},
              [&](const A* const* in, A* const* y, int64_t len, int64_t) {
                for (int64_t i = 0; i < len; ++i)
                  y[0][i] = in[1][i] * backend::pointwise_slope<A>(f, in[0][i]);
              });
}

Tensor apply(const Pointwise& f, const Tensor& x_in, const Tensor* g_in) {
  const char* name = backend::pointwise_name(f.op);
  check_floating(name, x_in, "input");
  check_compute_dtype(name, x_in.dtype());
  const Tensor x = kernel_input(x_in);
  Tensor g;
  if (g_in) {
    check_floating(name, *g_in, "gradient");
    MIXPREC_CHECK(g_in->shape() == x.shape(), name,
                  "gradient has shape " + shape_to_string(g_in->shape()) + ", expected " +
                      shape_to_string(x.shape()));
    g = kernel_input(*g_in);
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const bool f64 = compute_dtype({x.dtype(), g_in ? g.dtype() : x.dtype()}) == DType::f64;
  if (f64)
    run<double>(f, x, g_in ? &g : nullptr, out);
  else
    run<float>(f, x, g_in ? &g : nullptr, out);
  return out;
}

}  // namespace

Tensor pointwise_forward(const Pointwise& f, const Tensor& x) {
  return apply(f, x, nullptr);
}

Tensor pointwise_backward(const Pointwise& f, const Tensor& x, const Tensor& g) {
  return apply(f, x, &g);
}

}  // namespace mixprec::cpu
