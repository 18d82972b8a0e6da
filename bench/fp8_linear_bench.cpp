// One linear's forward and backward under each low-precision recipe against the same linear
// under plain bf16 autocast, measured side by side in one run (rounds interleaved, medians and
// ranges), and where an FP8 product's time goes: the two quantizes, the FP8 -> GEMM-dtype
// widening and GEMM with its K-step scale pass (scaled_gemm), against the bf16 GEMM alone.
// On a CPU FP8 is emulated: no product is cheaper, the casts are overhead.
//
//   bench_fp8_linear [--reps=N] [--threads=N] [--quick]
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/delayed_scaling.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::bench {
namespace {

struct Shape3 {
  int64_t tokens, in, out;
};

// Forward + backward of linear(x, w) under `recipe` (null: plain bf16 autocast); a delayed
// recipe casts with `delayed`'s scales and updates its histories after the step, as the
// trainer does.
double step_seconds(const amp::LinearRecipe* recipe, amp::DelayedScaling& delayed, const Tensor& x0,
                    const Tensor& w0, const Tensor& dy) {
  Tensor x = x0.detach().set_requires_grad(), w = w0.detach().set_requires_grad();
  return seconds_of([&] {
    Tensor y;
    {
      amp::AutocastGuard guard(DType::bf16, {.linear_recipe = recipe, .delayed_scaling = &delayed});
      y = linear(x, w);
    }
    y.backward(dy);
    if (recipe && recipe->delayed) delayed.update();
  });
}

std::string range_text(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f-%.1f", v.front() * 1e3, v.back() * 1e3);
  return buf;
}

void run_shape(const Shape3& s, int rounds) {
  Generator gen(1);
  const Tensor x = Tensor::normal({s.tokens, s.in}, 0, 1, gen);
  const Tensor w = Tensor::normal({s.out, s.in}, 0, 0.05, gen);
  const Tensor dy = Tensor::normal({s.tokens, s.out}, 0, 1, gen, DType::bf16);
  std::vector<const amp::LinearRecipe*> variants = {nullptr};
  for (const amp::LinearRecipe& r : amp::linear_recipes()) variants.push_back(&r);
  std::vector<std::vector<double>> times(variants.size());
  amp::DelayedScaling delayed;  // TE's defaults
  for (std::size_t v = 0; v < variants.size(); ++v)
    step_seconds(variants[v], delayed, x, w, dy);  // warm
  for (int r = 0; r < rounds; ++r)                 // interleaved: drift hits every variant alike
    for (std::size_t v = 0; v < variants.size(); ++v)
      times[v].push_back(step_seconds(variants[v], delayed, x, w, dy));
  const double base = median(times[0]);
  std::printf("\nlinear x [%lld, %lld] · w [%lld, %lld]ᵀ, forward + backward, %d rounds\n",
              static_cast<long long>(s.tokens), static_cast<long long>(s.in),
              static_cast<long long>(s.out), static_cast<long long>(s.in), rounds);
  std::printf("| recipe | median ms | range ms | time / bf16 |\n|---|---:|---:|---:|\n");
  for (std::size_t v = 0; v < variants.size(); ++v)
    std::printf("| %s | %.1f | %s | %.2fx |\n", variants[v] ? variants[v]->name : "bf16 (autocast)",
                median(times[v]) * 1e3, range_text(times[v]).c_str(), median(times[v]) / base);
}

// Where an FP8 linear's time goes, product by product (operands cast from the bf16 tensors as
// the linear casts them, transposed ones copied by the cast), against the bf16 GEMM.
void breakdown(const Shape3& s, int rounds) {
  Generator gen(2);
  const Tensor x = Tensor::normal({s.tokens, s.in}, 0, 1, gen, DType::bf16);
  const Tensor w = Tensor::normal({s.out, s.in}, 0, 0.05, gen, DType::bf16);
  const Tensor dy = Tensor::normal({s.tokens, s.out}, 0, 1e-3, gen, DType::bf16);
  const backend::Backend& be = backend::current();
  std::printf("\nthe shape above, product by product (median of %d, ms)\n", rounds);
  std::printf("| recipe | product | cast A | cast B | scaled GEMM | total | bf16 GEMM |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  struct Product {
    const char* name;
    const amp::ProductRecipe amp::LinearRecipe::*recipe;
    Tensor a, b;
  };
  const Product products[] = {
      {"output", &amp::LinearRecipe::output, x, w},
      {"grad_input", &amp::LinearRecipe::grad_input, dy, w.transpose(0, 1)},
      {"grad_weight", &amp::LinearRecipe::grad_weight, dy.transpose(0, 1), x.transpose(0, 1)}};
  for (const char* name : {"tensorwise", "rowwise", "deepseek_v3", "mxfp8_cublas", "te_nvfp4"}) {
    const amp::LinearRecipe* r = amp::find_any_linear_recipe(name);
    for (const Product& p : products) {
      const amp::ProductRecipe& pr = r->*p.recipe;
      if (!pr.fp8) continue;
      std::vector<double> qa, qb, g, bf;
      for (int i = 0; i < rounds; ++i) {
        backend::Quantized a, b;
        qa.push_back(seconds_of([&] { a = be.quantize(p.a, pr.a); }));
        qb.push_back(seconds_of([&] { b = be.quantize(p.b, pr.b); }));
        g.push_back(seconds_of([&] { (void)be.scaled_gemm(a, b, DType::f32); }));
        bf.push_back(seconds_of([&] { (void)matmul(p.a, p.b.transpose(0, 1)); }));
      }
      const double total = median(qa) + median(qb) + median(g);
      std::printf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name, p.name,
                  median(qa) * 1e3, median(qb) * 1e3, median(g) * 1e3, total * 1e3,
                  median(bf) * 1e3);
    }
  }
}

}  // namespace
}  // namespace mixprec::bench

int main(int argc, char** argv) {
  using namespace mixprec::bench;
  const Options o = parse_options(argc, argv, 7, {"--quick"},
                                  "bench_fp8_linear [--reps=N] [--threads=N] [--quick]");
  mixprec::set_num_threads(o.threads);
  std::printf("CPU: %s | threads %d | bf16 GEMM path: %s\n", cpu_description().c_str(), o.threads,
              mixprec::cpu::bf16_gemm_path());
  std::vector<Shape3> shapes = {{4096, 256, 768}, {4096, 768, 256}, {4096, 1024, 1024}};
  if (has_flag(o, "--quick")) shapes.resize(1);
  for (const Shape3& s : shapes) run_shape(s, o.reps);
  breakdown(shapes.back(), o.reps);
  return 0;
}
