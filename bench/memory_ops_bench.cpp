// Memory-bound ops in GB/s against memcpy, measured side by side: softmax, log-softmax,
// RMSNorm, LayerNorm, GELU, SiLU (forward, bf16 and f32, [8192, 1024] and [65536, 1024]),
// GELU and SiLU backward (dx from x and the upstream gradient),
// cross-entropy (forward + backward, bf16 logits [4096, 8192]) and embedding backward (bf16
// gradient [8192 tokens, 1024] into an f32 [32768, 1024] weight gradient). The two row
// counts put an op's input and output (and the memcpy's) in the last-level cache of a large
// server part (a 16 MB bf16 tensor) and in DRAM (128 MB and more) respectively; the memcpy
// baseline changes by ~2x between the two, so both are reported.
//
// GB/s counts the bytes an ideal kernel must move: each input read once, each output written
// once (cross-entropy: logits read twice, once per pass, plus the logits gradient written;
// embedding backward: the upstream gradient read and the whole f32 weight gradient written).
// Each repetition times the op and then a 2-thread memcpy of the same number of bytes
// (read + write = the op's traffic); the ratio is the median of per-repetition ratios.
//
// Usage: bench_memory_ops [--reps=N] [--threads=N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/activation.h"
#include "mixprec/ops.h"

using namespace mixprec;

namespace {

// [rows, d] of N(0, 1) draws: 8192 rows drawn, then repeated (drawing 64M normals would
// take longer than the benchmark).
Tensor tiled_normal(int64_t rows, int64_t d, Generator& gen, DType dt) {
  const int64_t block = std::min<int64_t>(rows, 8192);
  const Tensor src = Tensor::normal({block, d}, 0, 1, gen, dt);
  Tensor x = Tensor::empty({rows, d}, dt);
  const auto bytes = static_cast<size_t>(src.nbytes());
  for (int64_t r = 0; r < rows; r += block)
    std::memcpy(static_cast<char*>(x.raw_data()) + static_cast<size_t>(r / block) * bytes,
                src.raw_data(), bytes);
  return x;
}

struct Row {
  std::string name;
  double bytes;                 // traffic per call
  std::function<void()> setup;  // untimed, before each call
  std::function<void()> call;
};

}  // namespace

int main(int argc, char** argv) {
  const bench::Options opt =
      bench::parse_options(argc, argv, 7, {}, "bench_memory_ops [--reps=N] [--threads=N]");
  const int reps = opt.reps, threads = opt.threads;
  set_num_threads(threads);
  Generator gen(3);
  const int64_t d = 1024;
  std::vector<Row> table;
  for (const int64_t rows : {int64_t{8192}, int64_t{65536}})
    for (DType dt : {DType::bf16, DType::f32}) {
      const Tensor x = tiled_normal(rows, d, gen, dt);
      const Tensor w = Tensor::ones({d}, dt), b = Tensor::zeros({d}, dt);
      const double io = 2.0 * static_cast<double>(x.nbytes());
      const std::string sfx =
          std::string(" ") + dtype_name(dt) + " [" + std::to_string(rows) + ", 1024]";
      auto fwd = [&](const char* name, std::function<Tensor()> f) {
        table.push_back({name + sfx, io, [] {},
                         [f] {
                           NoGradGuard g;
                           f();
                         }});
      };
      fwd("softmax", [x] { return softmax(x, -1); });
      fwd("log_softmax", [x] { return log_softmax(x, -1); });
      fwd("rmsnorm", [x, w] { return rmsnorm(x, w, 1e-5); });
      fwd("layernorm", [x, w, b] { return layernorm(x, w, b, 1e-5); });
      fwd("gelu", [x] { return gelu(x); });
      fwd("silu", [x] { return silu(x); });
      // Backward reads x and the upstream gradient (x itself serves) and writes dx.
      auto bwd = [&](const char* name, cpu::Activation act) {
        table.push_back({std::string(name) + " backward" + sfx, 1.5 * io, [] {},
                         [x, act] { cpu::activation_backward(act, x, x); }});
      };
      bwd("gelu", cpu::Activation::gelu);
      bwd("silu", cpu::Activation::silu);
    }
  {  // cross-entropy forward + backward; the logits gradient (bf16) is taken by the leaf
    const int64_t n = 4096, v = 8192;
    auto logits = std::make_shared<Tensor>(Tensor::normal({n, v}, 0, 2, gen, DType::bf16));
    logits->set_requires_grad(true, DType::bf16);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 7919) % v;
    const Tensor targets = Tensor::from_vector(t);
    table.push_back({"cross_entropy fwd+bwd bf16", 3.0 * static_cast<double>(logits->nbytes()),
                     [logits] { logits->set_grad(Tensor()); },
                     [logits, targets] { cross_entropy(*logits, targets).backward(); }});
  }
  {  // embedding backward only: the forward graph is built untimed
    const int64_t vocab = 32768, n = 8192;
    auto weight = std::make_shared<Tensor>(Tensor::normal({vocab, d}, 0, 0.02, gen, DType::bf16));
    weight->set_requires_grad();
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 104729) % vocab;
    const Tensor id_tensor = Tensor::from_vector(ids);
    const Tensor g = Tensor::normal({n, d}, 0, 1, gen, DType::bf16);
    auto out = std::make_shared<Tensor>();
    table.push_back({"embedding backward bf16->f32",
                     static_cast<double>(g.nbytes()) + 4.0 * static_cast<double>(vocab * d),
                     [weight, out, id_tensor] {
                       weight->set_grad(Tensor());
                       *out = embedding(id_tensor, *weight);
                     },
                     [out, g] { out->backward(g); }});
  }
  std::printf("memory-bound ops, %d threads, median of %d repetitions\n\n", threads, reps);
  std::printf("%-40s %9s %9s %7s\n", "op", "GB/s", "memcpy", "ratio");
  double worst = 1e9;
  for (Row& r : table) {
    const bench::VsMemcpy m = bench::measure_vs_memcpy(r.bytes, reps, r.call, r.setup);
    const double q = m.ratio;
    worst = std::min(worst, q);
    std::printf("%-40s %9.1f %9.1f %7.2f\n", r.name.c_str(), m.gbps, m.memcpy_gbps, q);
  }
  std::printf("\nworst ratio: %.2f (target 0.50)\n", worst);
  return 0;
}
