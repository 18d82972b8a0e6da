// One GPT block (d_model 256, 4 heads, T 256, batch 8; pre-LayerNorm, fused causal attention,
// GELU MLP), forward + backward of <out, g>: mixprec with every tensor in f32 and with every
// tensor in bf16 (weight gradients f32), and PyTorch 1.13 on the same shapes in f32 and under
// torch.autocast('cpu', bfloat16) (bench/torch_block.py, run from here when /usr/bin/python3
// has torch). Medians over repetitions; mixprec's two runs are interleaved.
//
// Usage: bench_block [--reps=N] [--threads=N] [--no-torch]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mixprec/core/parallel.h"
#include "mixprec/models/transformer/gpt_block.h"
#include "mixprec/ops.h"

using namespace mixprec;
using bench::median;

namespace {

struct Setup {
  models::GptBlock block;
  Tensor x, g;
};

Setup make(DType dt) {
  Setup s{models::GptBlock::init({256, 4, 1, 1e-5}, 1, dt), {}, {}};
  for (Tensor* p : s.block.parameters()) p->set_requires_grad();
  Generator gen(2);
  s.x = Tensor::normal({8, 256, 256}, 0, 1, gen, dt).set_requires_grad(true, dt);
  s.g = Tensor::normal({8, 256, 256}, 0, 1, gen, dt);
  return s;
}

double step_seconds(Setup& s) {
  const auto t0 = std::chrono::steady_clock::now();
  s.block.forward(s.x).backward(s.g);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Tensor* p : s.block.parameters()) p->set_grad(Tensor());
  s.x.set_grad(Tensor());
  return t;
}

// Median step time in ms reported by torch_block.py, or a negative value when unavailable.
double torch_ms(const char* mode, int reps, int threads) {
  const std::string script = std::string(MIXPREC_SOURCE_DIR) + "/bench/torch_block.py";
  const std::string cmd = "/usr/bin/python3 " + script + " --mode " + mode + " --reps " +
                          std::to_string(reps) + " --threads " + std::to_string(threads) +
                          " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[512] = {0};
  const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
  if (pclose(pipe) != 0 || !got) return -1;
  const char* key = std::strstr(buf, "\"median_ms\": ");
  return key ? std::atof(key + 13) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt = bench::parse_options(
      argc, argv, 10, {"--no-torch"}, "bench_block [--reps=N] [--threads=N] [--no-torch]");
  const int reps = opt.reps, threads = opt.threads;
  const bool with_torch = !bench::has_flag(opt, "--no-torch");
  set_num_threads(threads);
  Setup f32 = make(DType::f32), bf16 = make(DType::bf16);
  step_seconds(f32);  // warm-up: allocator cache, page faults
  step_seconds(bf16);
  std::vector<double> t32, t16, ratio;
  for (int r = 0; r < reps; ++r) {
    const double a = step_seconds(f32), b = step_seconds(bf16);
    t32.push_back(a);
    t16.push_back(b);
    ratio.push_back(a / b);
  }
  const double m32 = 1e3 * median(t32), m16 = 1e3 * median(t16);
  std::printf(
      "GPT block d_model 256, 4 heads, T 256, batch 8: forward + backward, %d threads, "
      "median of %d\n\n",
      threads, reps);
  std::printf("%-34s %10s %12s\n", "run", "ms/step", "vs mixprec f32");
  std::printf("%-34s %10.1f %12s\n", "mixprec f32", m32, "1.00");
  std::printf("%-34s %10.1f %12.2f\n", "mixprec bf16 storage", m16, median(ratio));
  if (with_torch) {
    const double p32 = torch_ms("fp32", reps, threads);
    const double pbf = torch_ms("autocast_bf16", std::max(3, reps / 3), threads);
    if (p32 < 0 || pbf < 0) {
      std::printf("(PyTorch not available: install python3-torch to compare)\n");
    } else {
      std::printf("%-34s %10.1f %12.2f\n", "PyTorch 1.13 f32", p32, m32 / p32);
      std::printf("%-34s %10.1f %12.2f\n", "PyTorch 1.13 autocast bf16", pbf, m32 / pbf);
      std::printf("\nmixprec f32 is %.2fx and mixprec bf16 %.2fx faster than PyTorch f32\n",
                  p32 / m32, p32 / m16);
    }
  }
  return 0;
}
