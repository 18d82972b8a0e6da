// GEMM throughput: mixprec's bf16 and f16 GEMMs (f32 accumulation, output in the operand
// dtype) and its f32 GEMM, each against OpenBLAS sgemm on f32 copies of the same operands,
// on square shapes and on the forward / dX / dW products of a transformer MLP and attention
// projection (d_model 256-1024, 2048-8192 tokens). Per shape, the baseline's repetitions run
// as one block (OpenBLAS with its own threads, as many as mixprec uses), then mixprec's three
// GEMMs interleaved repetition by repetition (OpenBLAS single-threaded inside mixprec's own
// OpenMP tile loop). Columns are medians over repetitions, ratios are of medians. The FP32
// FMA peak and the bf16 dot-product peaks (AVX512-BF16, AMX tiles) are measured in the same
// run; the last column is bf16 against the peak of the kernel that ran it.
//
// The machine may be shared: so that a burst of outside load skews both sides alike, the
// baseline block and mixprec's block alternate --rounds times (default 3) and the medians
// are over all rounds.
//
// Usage: bench_gemm [--reps=N] [--rounds=N] [--threads=N] [--quick] [--shape=SUBSTRING]...
// (--reps is per round; --shape keeps only the shapes whose name contains one of the given
// substrings.)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "fma_peak.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/tensor.h"

using namespace mixprec;
using bench::median;
using bench::seconds_of;

namespace {

struct Shape3 {
  std::string name;
  int64_t m, n, k;
  bool ta, tb;
};

std::string label(const char* fmt, long long a, long long b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

std::vector<Shape3> shapes(bool quick) {
  std::vector<Shape3> s;
  for (int64_t n : {512, 1024, 2048}) s.push_back({label("%lld^3", n, 0), n, n, n, false, false});
  const int64_t dT[][2] = {{256, 2048}, {256, 8192},  {512, 4096},
                           {768, 2048}, {1024, 2048}, {1024, 8192}};
  for (auto [d, T] : dT) {
    // MLP up projection [T,d]·[4d,d]ᵀ, square projection [T,d]·[d,d]ᵀ, their dX and dW.
    s.push_back({label("d%lld T%lld fwd 4d", d, T), T, 4 * d, d, false, true});
    s.push_back({label("d%lld T%lld fwd d", d, T), T, d, d, false, true});
    s.push_back({label("d%lld T%lld dX 4d", d, T), T, d, 4 * d, false, false});
    s.push_back({label("d%lld T%lld dW 4d", d, T), 4 * d, d, T, true, false});
    s.push_back({label("d%lld T%lld dW d", d, T), d, d, T, true, false});
    if (quick) break;
  }
  if (!quick) {
    // GPT-2-small's tied output layer at T 256 x 8 (2048 tokens, vocabulary 50257): logits,
    // their dX (K = 50257, split over K) and the embedding's dW.
    const int64_t tokens = 2048, width = 768, vocab = 50257;
    s.push_back({"lm_head fwd", tokens, vocab, width, false, true});
    s.push_back({"lm_head dX", tokens, width, vocab, false, false});
    s.push_back({"lm_head dW", vocab, width, tokens, true, false});
    // One expert of the MoE config S (d 256, d_ff 1024, 2048 tokens, 8 experts, top-2): about
    // 512 rows each; up/down projections, their dX and dW.
    const int64_t rows = 512, d = 256, ff = 1024;
    s.push_back({"moe expert fwd up", rows, ff, d, false, true});
    s.push_back({"moe expert fwd down", rows, d, ff, false, true});
    s.push_back({"moe expert dX up", rows, d, ff, false, false});
    s.push_back({"moe expert dX down", rows, ff, d, false, false});
    s.push_back({"moe expert dW up", ff, d, rows, true, false});
    s.push_back({"moe expert dW down", d, ff, rows, true, false});
  }
  if (quick) s.resize(4);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // --shape=... and --rounds=N are taken out here; the shared parser handles the rest.
  std::vector<std::string> filters;
  std::vector<char*> rest;
  int rounds = 3;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strncmp(argv[i], "--shape=", 8) == 0)
      filters.emplace_back(argv[i] + 8);
    else if (i > 0 && std::strncmp(argv[i], "--rounds=", 9) == 0)
      rounds = std::max(1, std::atoi(argv[i] + 9));
    else
      rest.push_back(argv[i]);
  }
  const bench::Options opt = bench::parse_options(
      static_cast<int>(rest.size()), rest.data(), 3, {"--quick"},
      "bench_gemm [--reps=N] [--rounds=N] [--threads=N] [--quick] [--shape=SUBSTRING]...");
  const int reps = opt.reps, threads = opt.threads;
  const bool quick = bench::has_flag(opt, "--quick");
  set_num_threads(threads);
  const double peak2 = bench::fma_peak_avx2(threads), peak5 = bench::fma_peak_avx512(threads);
  const double dot16 = bench::dot_peak_avx512_bf16(threads);
  const double tile16 = bench::tile_peak_amx_bf16(threads);
  // The bf16 column's ceiling: the peak of the instruction its kernel runs.
  const std::string path = cpu::bf16_gemm_path();
  const double bf16_peak = path == "amx"           ? tile16
                           : path == "avx512-bf16" ? dot16
                                                   : std::max(peak2, peak5);
  std::printf("OpenBLAS core: %s, threads: %d, repetitions: %d x %d rounds (medians)\n",
              openblas_get_corename(), threads, reps, rounds);
  std::printf("measured FP32 FMA peak: AVX2 %.0f GFLOP/s", peak2);
  if (peak5 > 0) std::printf(", AVX-512 %.0f GFLOP/s", peak5);
  std::printf("; bf16 dot-product peak: AVX512-BF16 ");
  std::printf(dot16 > 0 ? "%.0f GFLOP/s" : "(absent)", dot16);
  std::printf(", AMX tiles ");
  std::printf(tile16 > 0 ? "%.0f GFLOP/s" : "(absent)", tile16);
  std::printf("\nbf16 x bf16 kernel: %s; its peak: %.0f GFLOP/s\n", path.c_str(), bf16_peak);
  std::printf("\n%-22s %5s %5s %5s | %7s | %13s | %13s | %13s | %s\n", "shape", "M", "N", "K",
              "sgemm", "mixprec f32", "bf16", "f16", "bf16 % its peak");
  std::vector<double> worst(3, 1e9);
  for (const Shape3& s : shapes(quick)) {
    if (!filters.empty() && std::none_of(filters.begin(), filters.end(), [&](const std::string& f) {
          return s.name.find(f) != std::string::npos;
        }))
      continue;
    Generator gen(7);
    const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k;
    const int64_t br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
    const Tensor a = Tensor::uniform({ar, ac}, -1, 1, gen),
                 b = Tensor::uniform({br, bc}, -1, 1, gen);
    const Tensor a16[2] = {a.to(DType::bf16), a.to(DType::f16)};
    const Tensor b16[2] = {b.to(DType::bf16), b.to(DType::f16)};
    Tensor c = Tensor::empty({s.m, s.n});
    Tensor c16[2] = {Tensor::empty({s.m, s.n}, DType::bf16), Tensor::empty({s.m, s.n}, DType::f16)};
    const double flops = 2.0 * s.m * s.n * s.k;
    auto ours = [&](const Tensor& x, const Tensor& y, Tensor& out) {
      cpu::gemm(s.m, s.n, s.k, 1.0f, {x.dtype(), x.raw_data(), ac, s.ta},
                {y.dtype(), y.raw_data(), bc, s.tb}, 0.0f, {out.dtype(), out.raw_data(), s.n});
    };
    auto sgemm = [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(s.m), static_cast<blasint>(s.n), static_cast<blasint>(s.k),
                  1.0f, a.data<float>(), static_cast<blasint>(ac), b.data<float>(),
                  static_cast<blasint>(bc), 0.0f, c.data<float>(), static_cast<blasint>(s.n));
    };
    std::vector<double> t_base, t_ours[3];
    for (int round = 0; round < rounds; ++round) {
      // Baseline block: OpenBLAS with its own threads (switching its thread count per call
      // costs it a thread wake-up, so it keeps them for the whole block).
      openblas_set_num_threads(threads);
      sgemm();
      for (int r = 0; r < reps; ++r) t_base.push_back(seconds_of(sgemm));
      openblas_set_num_threads(1);
      // OpenBLAS's own threads spin for a while after their last call (THREAD_TIMEOUT, about
      // 0.1 s here) and would take the cores from ours: measured 10x slow rows without this.
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      ours(a, b, c);
      ours(a16[0], b16[0], c16[0]);
      ours(a16[1], b16[1], c16[1]);
      for (int r = 0; r < reps; ++r) {
        t_ours[0].push_back(seconds_of([&] { ours(a, b, c); }));
        t_ours[1].push_back(seconds_of([&] { ours(a16[0], b16[0], c16[0]); }));
        t_ours[2].push_back(seconds_of([&] { ours(a16[1], b16[1], c16[1]); }));
      }
    }
    const double gb = flops / median(t_base) * 1e-9;
    double g[3], q[3];
    for (int i = 0; i < 3; ++i) {
      g[i] = flops / median(t_ours[i]) * 1e-9;
      q[i] = median(t_base) / median(t_ours[i]);
      if (s.m >= 256 && s.n >= 256 && s.k >= 256)
        worst[static_cast<size_t>(i)] = std::min(worst[static_cast<size_t>(i)], q[i]);
    }
    std::printf(
        "%-22s %5lld %5lld %5lld | %7.0f | %5.0f (%4.0f%%) | %5.0f (%4.0f%%) | %5.0f (%4.0f%%) | "
        "%4.0f%%\n",
        s.name.c_str(), static_cast<long long>(s.m), static_cast<long long>(s.n),
        static_cast<long long>(s.k), gb, g[0], 100 * q[0], g[1], 100 * q[1], g[2], 100 * q[2],
        100 * g[1] / bf16_peak);
  }
  std::printf(
      "\nworst ratio vs sgemm over shapes with all dims >= 256: f32 %.0f%%, bf16 %.0f%%, f16 "
      "%.0f%% (target 90%%)\n",
      100 * worst[0], 100 * worst[1], 100 * worst[2]);
  return 0;
}
