// Every op of the registry (tests/support/op_registry.h), in every compute dtype, forward and
// backward, on the `cpu` backend against the `reference` backend (as ggml's test-backend-ops
// holds each backend to its CPU one). Both run the same op graph, so the roundings between
// ops are the same; inside a kernel `cpu` accumulates in f32 (f64 for f64) and `reference`
// in f64, so results may differ by the accumulate dtype's error and one rounding of the
// result, never more. Also the kernels no op reaches: the gradient scans and the fused
// optimizer update.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "mixprec/backend/backend.h"
#include "mixprec/optim/adamw.h"
#include "support/bf16_products.h"
#include "support/op_registry.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using testing::OpCase;
using testing::Tensors;

constexpr DType kDTypes[] = {DType::f64, DType::f32, DType::bf16, DType::f16};

// The distance a correct kernel may show: a few units in the last place of the run's dtype
// (two roundings, each in a different spot, plus a propagated one), f32's floored at 2^-14
// for f32 sums and polynomial transcendentals (~1e-6 relative each), f64's at 2^-40.
double tolerance(DType dtype) {
  const int mantissa = info(dtype).format->mant_bits;
  if (dtype == DType::f64) return 0x1p-40;
  if (dtype == DType::f32) return 0x1p-14;
  return std::ldexp(1.0, -(mantissa - 2));
}

using testing::rel_distance;

// Forward outputs and "grad_<input>" gradients (upstream gradient: a fixed random tensor of
// the primary output's shape and dtype) of one case on `b`, as f64.
Tensors run_on(const backend::Backend& b, const std::string& name, DType dtype) {
  const backend::BackendScope scope(b);
  Tensors in = testing::case_inputs(name, dtype);
  Tensors inputs = in;
  Tensors out = testing::op_registry().at(name).run(inputs);
  const Tensor& primary = out.at(testing::primary_output(out));
  if (primary.requires_grad())
    primary.backward(testing::randn(primary.shape(), primary.dtype(), 0x6ead));
  Tensors result;
  for (auto& [n, t] : out) result[n] = t.to(DType::f64);
  for (auto& [n, t] : in)
    if (t.requires_grad() && t.grad().defined()) result["grad_" + n] = t.grad().to(DType::f64);
  return result;
}

class BackendOps : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOps, CpuMatchesReferenceInEveryDtype) {
  const std::string name = GetParam();
  std::optional<testing::WidenedBf16Products> widened;
  if (testing::op_registry().at(name).rounds_own_operands) widened.emplace();
  for (DType dtype : kDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensors cpu = run_on(backend::cpu_backend(), name, dtype);
    const Tensors ref = run_on(backend::reference_backend(), name, dtype);
    ASSERT_EQ(cpu.size(), ref.size()) << name;
    for (const auto& [key, r] : ref) {
      ASSERT_TRUE(cpu.count(key)) << name << ": cpu made no " << key;
      const Tensor& c = cpu.at(key);
      ASSERT_EQ(c.shape(), r.shape()) << name << " " << key;
      if (key == "out_indices") {
        EXPECT_EQ(c.to_doubles(), r.to_doubles()) << name << " " << key;
        continue;
      }
      EXPECT_LE(rel_distance(c, r), tolerance(dtype)) << name << " " << key;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, BackendOps, ::testing::ValuesIn(testing::case_names()),
                         [](const auto& info) { return info.param; });

TEST(BackendTable, NamesSelectTheBuiltInBackends) {
  EXPECT_EQ(&backend::find_backend("cpu"), &backend::cpu_backend());
  EXPECT_EQ(&backend::find_backend("reference"), &backend::reference_backend());
  EXPECT_NE(testing::error_of([] { backend::find_backend("gpu"); }).find("cpu, reference"),
            std::string::npos);
  {
    const backend::BackendScope scope(backend::reference_backend());
    EXPECT_EQ(backend::current().name, "reference");
  }
  EXPECT_EQ(backend::current().name, "cpu");
}

// The scans the loss scaler, the numerics monitor and clipping run, on both backends.
TEST(BackendKernels, GradientScansAgree) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    std::vector<double> v = testing::randn({3000}, DType::f64, 21, 40.0).to_doubles();
    v[17] = 1e-30;  // underflows once scaled
    const Tensor g = Tensor::from_doubles(v, {3000}, dtype);
    const Tensor bad = Tensor::from_doubles({1.0, NAN, 2.0}, {3}, dtype);
    for (const backend::Backend* b : {&backend::cpu_backend(), &backend::reference_backend()}) {
      SCOPED_TRACE(std::string(b->name) + " " + dtype_name(dtype));
      const Tensor gs[] = {g, bad};
      const std::span<const Tensor> both(gs);
      EXPECT_EQ(b->first_nonfinite(both, 0.5f), 1);
      const backend::GradNumericsPass pass = b->grad_numerics(both, 1024.0, 1e-20, 1e5);
      EXPECT_EQ(pass.per_tensor[0].numel, 3000);
      EXPECT_EQ(pass.per_tensor[1].nonfinite, 1);
      EXPECT_EQ(pass.per_tensor[0].underflow, 1);
      const double squares = b->square_sum(g, 0, 3000, 0.5f);
      const backend::GradNumericsPass ref = backend::reference_backend().grad_numerics(
          std::span<const Tensor>(gs, 1), 1024.0, 1e-20, 1e5);
      EXPECT_NEAR(pass.per_tensor[0].sum_squares, ref.per_tensor[0].sum_squares,
                  1e-12 * ref.per_tensor[0].sum_squares);
      EXPECT_NEAR(squares, 0.25 * ref.per_tensor[0].sum_squares, 1e-6 * squares);
      EXPECT_EQ(pass.per_tensor[0].amax, ref.per_tensor[0].amax);
      const Tensor copy = g.clone();
      const Tensor written[] = {copy};
      EXPECT_EQ(b->unscale_and_check(std::span<const Tensor>(written), 0.25f), -1);
      EXPECT_TRUE(testing::same_bits(copy, backend::cpu_backend().scale(g, 0.25, dtype)));
    }
  }
}

// Two AdamW steps of a bf16-mixed parameter (f32 master), a pure-bf16 one with stochastic
// rounding and one with Kahan sums, on each backend: the update rule and the rounding draws
// are the same, so the new masters, moments and working copies are the same bits.
TEST(BackendKernels, FusedOptimizerUpdateIsTheSameBits) {
  amp::MixedPrecisionPolicy sr = amp::preset("bf16-pure");
  amp::MixedPrecisionPolicy kahan = amp::preset("bf16-pure-kahan");
  for (const amp::MixedPrecisionPolicy& policy : {amp::preset("bf16-mixed"), sr, kahan}) {
    std::vector<Tensor> results;
    for (const backend::Backend* b : {&backend::cpu_backend(), &backend::reference_backend()}) {
      const backend::BackendScope scope(*b);
      auto p =
          std::make_shared<optim::Parameter>("w", testing::randn({70000}, DType::f32, 5), policy);
      optim::AdamW opt({p}, 1e-2, 0.1);
      for (uint64_t step = 0; step < 2; ++step) {
        p->set_grad(testing::randn({70000}, DType::bf16, 6 + step));
        opt.step();
      }
      results.push_back(p->master().clone());
      results.push_back(p->value().clone());
    }
    EXPECT_TRUE(testing::same_bits(results[0], results[2]));
    EXPECT_TRUE(testing::same_bits(results[1], results[3]));
  }
}

}  // namespace
}  // namespace mixprec
