// Every op against the PyTorch fixtures in tests/reference/fixtures (see README.md there):
//  1. f32: our forward and gradients match PyTorch's f32 results (accumulation-order level).
//  2. bf16: our bf16 kernels match our f32 kernels run on the same bf16-rounded inputs within
//     one bf16 rounding (the kernels compute in f32 and round once).
//  3. bf16: our bf16 results vs PyTorch's bf16 results directly, within 0.31: PyTorch 1.13
//     rounds intermediates to bf16 in many CPU ops, and its own worst distance from the f32
//     math is 0.303 (small matmul outputs; table in README.md), plus one of our roundings.
//     Loose, but independent of our f32 kernels (a bound built from check 2's reference
//     would hold by the triangle inequality and could not fail); sign or indexing errors
//     give distances near 1 or more.
// Distances are relative with a floor of 1% of the tensor's largest magnitude, the metric of
// the tolerance table in tests/reference/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "mixprec/cpu/gemm.h"
#include "support/bf16_products.h"
#include "support/op_registry.h"

namespace mixprec {
namespace {

using testing::op_registry;
using testing::Tensors;

// PyTorch's worst bf16 distance from the f32 math over all fixtures, plus one rounding.
constexpr double kTorchBf16Tol = 0.303 + testing::kOneBf16Rounding;

// Runs op forward and backward on the file's inputs converted to `dtype` (integers kept).
// Returns outputs and "grad_<input>" gradients, all as f64.
Tensors run_op(const std::string& op, const io::SafetensorsFile& f, DType dtype) {
  Tensors in;
  for (const auto& [name, t] : f.tensors) {
    if (!testing::is_fixture_input(name, f)) continue;
    Tensor x = is_floating(t.dtype()) ? t.to(dtype).contiguous().clone() : t;
    if (f.tensors.count("grad_" + name)) x.set_requires_grad(true, dtype);
    in[name] = x;
  }
  Tensors inputs = in;
  Tensors out = op_registry().at(op).run(inputs);
  const std::string out_name = out.count("out_values") ? "out_values" : "out";
  const std::string grad_name = out_name == "out" ? "grad_out" : "grad_out_values";
  out.at(out_name).backward(f.at(grad_name).to(out.at(out_name).dtype()));
  Tensors result;
  for (auto& [name, t] : out) result[name] = t.to(DType::f64);
  for (auto& [name, t] : in)
    if (t.requires_grad()) {
      EXPECT_TRUE(t.grad().defined()) << op << ": no gradient for " << name;
      if (t.grad().defined()) result["grad_" + name] = t.grad().to(DType::f64);
    }
  return result;
}

using testing::rel_distance;

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, F32MatchesPyTorch) {
  const std::string op = GetParam();
  const io::SafetensorsFile f = io::load_safetensors(testing::fixture_path(op, "f32"));
  const Tensors ours = run_op(op, f, DType::f32);
  for (const auto& [name, t] : ours) {
    ASSERT_TRUE(f.tensors.count(name)) << op << ": fixture has no " << name;
    const Tensor& ref = f.at(name);
    ASSERT_EQ(t.shape(), ref.shape()) << op << " " << name;
    if (!is_floating(ref.dtype())) {
      EXPECT_EQ(t.to_doubles(), ref.to_doubles()) << op << " " << name;
      continue;
    }
    EXPECT_LE(rel_distance(t, ref.to(DType::f64)), op_registry().at(op).f32_tol)
        << op << " " << name;
  }
}

TEST_P(Fixture, Bf16MatchesF32KernelOnRoundedInputsAndPyTorch) {
  const std::string op = GetParam();
  const io::SafetensorsFile f = io::load_safetensors(testing::fixture_path(op, "bf16"));
  std::optional<testing::WidenedBf16Products> widened;
  if (op_registry().at(op).rounds_own_operands) widened.emplace();
  const Tensors ours = run_op(op, f, DType::bf16);
  const Tensors ref32 = run_op(op, f, DType::f32);  // the bf16 inputs, widened exactly
  for (const auto& [name, t] : ours) {
    const Tensor& torch_bf16 = f.at(name);
    if (!is_floating(torch_bf16.dtype())) {
      EXPECT_EQ(t.to_doubles(), torch_bf16.to_doubles()) << op << " " << name;
      continue;
    }
    const Tensor& r = ref32.at(name);
    const double ours_err = rel_distance(t, r);
    EXPECT_LE(ours_err, op_registry().at(op).bf16_tol) << op << " " << name << " vs f32 kernel";
    EXPECT_LE(rel_distance(t, torch_bf16.to(DType::f64)), kTorchBf16Tol)
        << op << " " << name << " vs PyTorch bf16";
  }
  if (!widened) return;
  // The native path (if this CPU has it) against PyTorch's bf16, which rounds such operands
  // too (autocast runs matmul in bf16).
  widened.reset();
  if (!cpu::bf16_gemm_is_native()) return;
  for (const auto& [name, t] : run_op(op, f, DType::bf16)) {
    if (!is_floating(t.dtype())) continue;
    EXPECT_LE(rel_distance(t, f.at(name).to(DType::f64)), kTorchBf16Tol)
        << op << " " << name << " (native bf16 products) vs PyTorch bf16";
  }
}

// The registry's cases that PyTorch can reproduce (the others say why not).
std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& [name, c] : op_registry())
    if (c.no_fixture_because.empty()) names.push_back(name);
  return names;
}

// One list of ops: every fixture file belongs to a registry case, and every case either has
// both fixture files or says why PyTorch cannot make them.
TEST(FixtureList, IsTheOpRegistry) {
  std::set<std::string> stems;
  for (const auto& entry : std::filesystem::directory_iterator(MIXPREC_FIXTURE_DIR)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("optim_", 0) == 0 || entry.path().extension() != ".safetensors") continue;
    stems.insert(file.substr(0, file.rfind('_')));
  }
  for (const std::string& stem : stems)
    EXPECT_TRUE(op_registry().count(stem)) << "fixture " << stem << " has no registry case";
  for (const auto& [name, c] : op_registry()) {
    if (!c.no_fixture_because.empty()) continue;
    EXPECT_TRUE(std::filesystem::exists(testing::fixture_path(name, "f32"))) << name;
    EXPECT_TRUE(std::filesystem::exists(testing::fixture_path(name, "bf16"))) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(PyTorch, Fixture, ::testing::ValuesIn(op_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mixprec
