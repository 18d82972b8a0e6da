// gelu, gelu_tanh, silu, swiglu and dropout with their backward rules (the backend's
// activation kernels). Activations save their input; dropout saves only (p, seed,
// stream) and regenerates its mask.
#include "mixprec/ops/activation.h"

#include <string>
#include "mixprec/amp/autocast.h"

#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

class ActivationBackward final : public Node {
 public:
  ActivationBackward(backend::Activation act, Tensor x) : act_(act), x_(std::move(x)) {}
  const char* name() const override {
    switch (act_) {
      case backend::Activation::gelu:
        return "GeluBackward";
      case backend::Activation::gelu_tanh:
        return "GeluTanhBackward";
      case backend::Activation::silu:
        return "SiluBackward";
    }
    return "ActivationBackward";
  }
  void release_saved() override { x_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().activation_backward(act_, x_, grads[0])};
  }

 private:
  backend::Activation act_;
  Tensor x_;  // detached input
};

Tensor activation(backend::Activation act, const char* name, const Tensor& x) {
  backend::check_floating(name, x, "input");
  backend::check_compute_dtype(name, x.dtype());
  const Tensor xd = x.detach();
  Tensor y = backend::current().activation_forward(act, xd);
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<ActivationBackward>(act, xd);
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

class SwigluBackward final : public Node {
 public:
  SwigluBackward(Tensor gate, Tensor up) : gate_(std::move(gate)), up_(std::move(up)) {}
  const char* name() const override { return "SwigluBackward"; }
  void release_saved() override { gate_ = up_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const auto& edges = next_edges();
    auto [dgate, dup] = backend::current().swiglu_backward(
        gate_, up_, grads[0], edges[0].node != nullptr, edges[1].node != nullptr);
    return {dgate, dup};
  }

 private:
  Tensor gate_, up_;  // detached inputs
};

class DropoutBackward final : public Node {
 public:
  DropoutBackward(double p, uint64_t seed, uint64_t stream, DType x_dtype)
      : p_(p), seed_(seed), stream_(stream), x_dtype_(x_dtype) {}
  const char* name() const override { return "DropoutBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().dropout_backward(grads[0], p_, seed_, stream_, x_dtype_)};
  }

 private:
  double p_;
  uint64_t seed_, stream_;
  DType x_dtype_;
};

}  // namespace

Tensor gelu(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("gelu", x_in);
  return activation(backend::Activation::gelu, "gelu", x);
}
Tensor gelu_tanh(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("gelu_tanh", x_in);
  return activation(backend::Activation::gelu_tanh, "gelu_tanh", x);
}
Tensor silu(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("silu", x_in);
  return activation(backend::Activation::silu, "silu", x);
}

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  const auto [gate, up] = amp::autocast_args("swiglu", gate_in, up_in);
  backend::check_floating("swiglu", gate, "gate");
  backend::check_floating("swiglu", up, "up");
  MIXPREC_CHECK(gate.dtype() == up.dtype(), "swiglu",
                std::string("gate and up must share a dtype, got ") + dtype_name(gate.dtype()) +
                    " and " + dtype_name(up.dtype()) + " (cast one, or use autocast)");
  MIXPREC_CHECK(gate.shape() == up.shape(), "swiglu",
                "gate " + shape_to_string(gate.shape()) + " and up " + shape_to_string(up.shape()) +
                    " must have the same shape");
  const Tensor gd = gate.detach(), ud = up.detach();
  Tensor y = backend::current().swiglu_forward(gd, ud);
  if (any_requires_grad({&gate, &up})) {
    auto node = std::make_shared<SwigluBackward>(gd, ud);
    connect(*node, {gate, up});
    set_history(y, node);
  }
  return y;
}

Tensor dropout(const Tensor& x_in, double p, uint64_t seed, uint64_t stream) {
  const auto [x] = amp::autocast_args("dropout", x_in);
  MIXPREC_CHECK(p >= 0.0 && p < 1.0, "dropout", "p must be in [0, 1), got " + std::to_string(p));
  backend::check_floating("dropout", x, "input");
  backend::check_compute_dtype("dropout", x.dtype());
  if (p == 0.0) return x;
  Tensor y = backend::current().dropout_forward(x.detach(), p, seed, stream);
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<DropoutBackward>(p, seed, stream, x.dtype());
    connect(*node, {x});
    set_history(y, node);
  }
  return y;
}

}  // namespace mixprec
