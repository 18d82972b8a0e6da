// Reference elementwise kernels: broadcasting arithmetic, activations, SwiGLU and dropout in f64.
#include <cmath>
#include <numbers>
#include <string>

#include "mixprec/numerics/philox.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// The elements of t broadcast (NumPy rules) to `shape`, in row-major order of `shape`.
std::vector<double> broadcast(const Tensor& t, const Shape& shape, const char* where) {
  const std::vector<int64_t> src = broadcast_sources(t.shape(), shape, where);
  const std::vector<double> v = values(t);
  std::vector<double> out(src.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = v[static_cast<size_t>(src[i])];
  return out;
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b, const char* what) {
  MIXPREC_CHECK(a.shape() == b.shape(), op,
                std::string(what) + " has shape " + shape_to_string(b.shape()) + ", expected " +
                    shape_to_string(a.shape()));
}

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));  // exp overflowing to inf gives the limit 0
}

constexpr double kTanhK = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // √(2/π)
constexpr double kTanhC = 0.044715;

// gelu_tanh's 0.5·(1 + tanh u) is written σ(2u) (the same function): for u << 0 the sum
// 1 + tanh u cancels to nothing in f64 while σ(2u) keeps its relative accuracy.
double act(Activation a, double x) {
  switch (a) {
    case Activation::gelu:
      return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);  // erfc: no 1 + erf cancellation
    case Activation::gelu_tanh:
      return x * sigmoid(2 * kTanhK * (x + kTanhC * x * x * x));
    case Activation::silu:
      break;
  }
  return x * sigmoid(x);
}

// act'(x). σ'(v) = σ(v)·σ(-v).
double act_slope(Activation a, double x) {
  switch (a) {
    case Activation::gelu:
      return 0.5 * std::erfc(-x / std::numbers::sqrt2) +
             x * std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
    case Activation::gelu_tanh: {
      const double v = 2 * kTanhK * (x + kTanhC * x * x * x);
      const double dv = 2 * kTanhK * (1 + 3 * kTanhC * x * x);
      const double slope = sigmoid(v) * sigmoid(-v);
      // Where σ' is 0 (|x| huge) the term is 0, not 0·inf from an overflowing x·v'.
      return sigmoid(v) + (slope == 0 ? 0.0 : x * slope * dv);
    }
    case Activation::silu:
      break;
  }
  return sigmoid(x) + x * sigmoid(x) * sigmoid(-x);
}

// x·mask/(1-p) into `out`: element i kept iff philox_u32(seed, stream, i) >= floor(p·2^32);
// the factor rounded to f32 unless x or the result is f64, as the cpu kernel has it.
Tensor dropout(const char* op, const Tensor& x, double p, uint64_t seed, uint64_t stream,
               DType out) {
  MIXPREC_CHECK(p >= 0.0 && p < 1.0, op, "p must be in [0, 1), got " + std::to_string(p));
  const auto threshold = static_cast<uint32_t>(std::floor(p * 0x1p32));
  const double f = 1.0 / (1.0 - p);
  const bool f64 = x.dtype() == DType::f64 || out == DType::f64;
  const double factor = f64 ? f : static_cast<double>(static_cast<float>(f));
  std::vector<double> v = values(x);
  for (size_t i = 0; i < v.size(); ++i)  // x·0 where dropped: NaN stays NaN, as in torch
    v[i] *= philox_u32(seed, stream, i) >= threshold ? factor : 0.0;
  return make(v, x.shape(), out);
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype) {
  const std::vector<double> x = broadcast(a, shape, "binary"), y = broadcast(b, shape, "binary");
  std::vector<double> r(x.size());
  for (size_t i = 0; i < r.size(); ++i) {
    switch (op) {
      case BinaryOp::add:
        r[i] = x[i] + y[i];
        break;
      case BinaryOp::sub:
        r[i] = x[i] - y[i];
        break;
      case BinaryOp::mul:
        r[i] = x[i] * y[i];
        break;
      case BinaryOp::div:
        r[i] = x[i] / y[i];
        break;
    }
  }
  return make(r, shape, out_dtype);
}

Tensor div_grad_b(const Tensor& g, const Tensor& a, const Tensor& b, DType out_dtype) {
  const char* op = "div backward";
  const std::vector<double> gv = values(g), av = broadcast(a, g.shape(), op),
                            bv = broadcast(b, g.shape(), op);
  std::vector<double> r(gv.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = -(gv[i] / bv[i]) * (av[i] / bv[i]);
  return make(r, g.shape(), out_dtype);
}

Tensor scale(const Tensor& x, double s, DType out_dtype) {
  const bool f64 = x.dtype() == DType::f64 || out_dtype == DType::f64;
  const double factor = f64 ? s : static_cast<double>(static_cast<float>(s));
  std::vector<double> v = values(x);
  for (double& e : v) e *= factor;
  return make(v, x.shape(), out_dtype);
}

Tensor activation_forward(Activation a, const Tensor& x) {
  std::vector<double> v = values(x);
  for (double& e : v) e = act(a, e);
  return make(v, x.shape(), x.dtype());
}

Tensor activation_backward(Activation a, const Tensor& x, const Tensor& g) {
  check_same_shape("activation backward", x, g, "gradient");
  const std::vector<double> xv = values(x), gv = values(g);
  std::vector<double> r(xv.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = gv[i] * act_slope(a, xv[i]);
  return make(r, x.shape(), x.dtype());
}

Tensor swiglu_forward(const Tensor& gate, const Tensor& up) {
  check_same_shape("swiglu", gate, up, "up");
  const std::vector<double> gv = values(gate), uv = values(up);
  std::vector<double> r(gv.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = act(Activation::silu, gv[i]) * uv[i];
  return make(r, gate.shape(), promote(gate.dtype(), up.dtype()));
}

std::array<Tensor, 2> swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& g,
                                      bool want_gate, bool want_up) {
  check_same_shape("swiglu backward", gate, up, "up");
  check_same_shape("swiglu backward", gate, g, "gradient");
  const std::vector<double> gv = values(gate), uv = values(up), dy = values(g);
  std::vector<double> dgate(gv.size()), dup(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) {
    dgate[i] = dy[i] * uv[i] * act_slope(Activation::silu, gv[i]);
    dup[i] = dy[i] * act(Activation::silu, gv[i]);
  }
  return {want_gate ? make(dgate, gate.shape(), gate.dtype()) : Tensor(),
          want_up ? make(dup, up.shape(), up.dtype()) : Tensor()};
}

Tensor dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t stream) {
  return dropout("dropout", x, p, seed, stream, x.dtype());
}

Tensor dropout_backward(const Tensor& g, double p, uint64_t seed, uint64_t stream,
                        DType out_dtype) {
  return dropout("dropout backward", g, p, seed, stream, out_dtype);
}

}  // namespace mixprec::backend::reference
