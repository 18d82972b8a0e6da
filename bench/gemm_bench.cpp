// GEMM throughput: mixprec's bf16 and f16 GEMMs (f32 accumulation, output in the operand
// dtype) and its f32 GEMM, each against OpenBLAS sgemm on f32 copies of the same operands,
// on square shapes and on the forward / dX / dW products of a transformer MLP and attention
// projection (d_model 256-1024, 2048-8192 tokens). Per shape, the baseline's repetitions run
// as one block (OpenBLAS with its own threads, as many as mixprec uses), then mixprec's three
// GEMMs interleaved repetition by repetition (OpenBLAS single-threaded inside mixprec's own
// OpenMP tile loop). Columns are medians over repetitions, ratios are of medians. The FP32
// FMA peak and the bf16 dot-product peaks (AVX512-BF16, AMX tiles) are measured in the same
// run, once more in every round of every shape (this host's speed drifts within minutes); the
// last column is bf16 against the peak of the kernel that ran it, the median of its shape's
// rounds.
//
// The machine may be shared: so that a burst of outside load skews both sides alike, the
// baseline block and mixprec's block alternate --rounds times (default 3) and the medians
// are over all rounds.
//
// --peer adds, in each round after mixprec's block, the same product in the peers
// (bench/gemm_peer.py in its own process): PyTorch 2.x's torch.mm in f32 (MKL's sgemm) and
// bf16 (oneDNN, f32 accumulation, bf16 output) and BLIS's sgemm with the kernels its run-time
// dispatch picks for this CPU: what the best libraries reach here, as a fraction of the same
// measured peak.
//
// Usage: bench_gemm [--reps=N] [--rounds=N] [--threads=N] [--quick] [--peer]
//                   [--shape=SUBSTRING]...
// (--reps is per round; --shape keeps only the shapes whose name contains one of the given
// substrings.)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "fma_peak.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/tensor/tensor.h"
#include "python_peer.h"

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

// One shape's figures from the peers (gemm_peer.py's JSON), pooled over rounds. Per peer:
// seconds per repetition; or the GFLOP/s of its 512^3 probe when that ran below the script's
// floor (the shape itself was then not run: PyTorch's bf16 without a bf16 instruction takes
// minutes on the largest); or why it has no figure.
struct PeerTimes {
  std::vector<double> seconds[3];  // torch f32, torch bf16, BLIS f32
  std::vector<double> probe[3];
  std::string why[3];
  std::string torch, blis_arch;
};
constexpr const char* kPeerKeys[3] = {"torch_f32", "torch_bf16", "blis_f32"};

void add_peer_round(const Shape3& s, int reps, int threads, PeerTimes& p) {
  const bench::PeerRun run = bench::run_python_peer(
      "gemm_peer.py", "--m " + std::to_string(s.m) + " --n " + std::to_string(s.n) + " --k " +
                          std::to_string(s.k) + " --ta " + std::to_string(s.ta ? 1 : 0) + " --tb " +
                          std::to_string(s.tb ? 1 : 0) + " --reps " + std::to_string(reps) +
                          " --threads " + std::to_string(threads));
  const nlohmann::json j = bench::peer_json(run.out);
  for (int i = 0; i < 3; ++i) {
    if (!run.failure.empty() || j.is_discarded()) {
      p.why[i] = !run.failure.empty() ? run.failure : "printed no JSON: " + run.last_error;
      continue;
    }
    const nlohmann::json v = j.value(kPeerKeys[i], nlohmann::json());
    if (v.is_array())
      for (const auto& t : v) p.seconds[i].push_back(t.get<double>());
    else if (v.is_object() && v.contains("probe"))
      p.probe[i].push_back(v["probe"].get<double>());
    else
      p.why[i] = i == 2 ? j.value("blis", std::string("no figure")) : "no figure";
  }
  if (!j.is_discarded()) {
    p.torch = j.value("torch", std::string());
    p.blis_arch = j.value("blis_arch", std::string());
  }
}

struct PeerFigure {
  double gflops = -1;  // -1: none
  bool probe_only = false;
};

PeerFigure peer_figure(const PeerTimes& p, int i, double flops) {
  if (!p.seconds[i].empty()) return {flops / median(p.seconds[i]) * 1e-9, false};
  if (!p.probe[i].empty()) return {median(p.probe[i]), true};
  return {};
}

// Why the peers without a figure have none, each reason once a run (BLIS absent is the same
// for every shape): one line when every peer shares it (the script did not run).
void print_peer_reasons(const PeerTimes& p, const PeerFigure (&f)[3], std::set<std::string>& said) {
  auto say = [&](const char* who, const std::string& why) {
    if (said.insert(why).second) std::printf("  (%s: %s)\n", who, why.c_str());
  };
  if (f[0].gflops < 0 && f[1].gflops < 0 && f[2].gflops < 0 && p.why[0] == p.why[1] &&
      p.why[0] == p.why[2])
    return say("peers", p.why[0]);
  for (int i = 0; i < 3; ++i)
    if (f[i].gflops < 0) say(kPeerKeys[i], p.why[i]);
}

struct PeerRow {
  std::string shape;
  double fma_peak, bf16_peak;  // medians of the shape's rounds
  double openblas, ours_f32, ours_bf16;
  PeerFigure peer[3];
};

// "GFLOP/s (% of peak)", "+" when only the probe ran, "-" for no figure.
std::string gflops_cell(double g, double peak, bool probe_only = false) {
  if (g < 0) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f (%.0f%%)%s", g, 100 * g / peak, probe_only ? "+" : "");
  return buf;
}

// The products in every library, GFLOP/s and the share of the peak of what runs them, measured
// in the shape's rounds (the f32 columns and PyTorch's bf16, which does not say what runs it:
// the FMA peak; mixprec's bf16: its kernel's peak).
void print_peer_table(const std::vector<PeerRow>& rows, const std::string& torch,
                      const std::string& blis) {
  std::printf(
      "\nThe same products in the peers (bench/gemm_peer.py: PyTorch %s, BLIS %s), "
      "GFLOP/s (%% of the FMA peak; mixprec bf16: of its kernel's)\n",
      torch.empty() ? "absent" : torch.c_str(),
      blis.empty() ? "absent" : ("kernels " + blis).c_str());
  std::printf("%-22s | %4s | %11s | %11s | %11s | %11s | %12s | %12s | %s\n", "shape", "FMA",
              "OpenBLAS", "BLIS", "torch f32", "mixprec f32", "torch bf16", "mixprec bf16",
              "mixprec f32 / best library");
  bool any_probe = false;
  for (const PeerRow& r : rows) {
    double best = r.openblas;  // f32 libraries timed at the shape itself
    for (int i : {0, 2})
      if (!r.peer[i].probe_only) best = std::max(best, r.peer[i].gflops);
    const double fma = r.fma_peak;
    auto cell = [&](const PeerFigure& f) {
      any_probe = any_probe || f.probe_only;
      return gflops_cell(f.gflops, fma, f.probe_only);
    };
    std::printf("%-22s | %4.0f | %11s | %11s | %11s | %11s | %12s | %12s | %.2fx\n",
                r.shape.c_str(), fma, gflops_cell(r.openblas, fma).c_str(), cell(r.peer[2]).c_str(),
                cell(r.peer[0]).c_str(), gflops_cell(r.ours_f32, fma).c_str(),
                cell(r.peer[1]).c_str(), gflops_cell(r.ours_bf16, r.bf16_peak).c_str(),
                r.ours_f32 / best);
  }
  if (any_probe)
    std::printf(
        "+ a 512^3 probe with the shape's transposes only: it ran below gemm_peer.py's "
        "floor, so the shape was not run\n");
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
  const bench::Options opt =
      bench::parse_options(static_cast<int>(rest.size()), rest.data(), 3, {"--quick", "--peer"},
                           "bench_gemm [--reps=N] [--rounds=N] [--threads=N] [--quick] [--peer] "
                           "[--shape=SUBSTRING]...");
  const int reps = opt.reps, threads = opt.threads;
  const bool quick = bench::has_flag(opt, "--quick");
  const bool with_peer = bench::has_flag(opt, "--peer");
  std::vector<PeerRow> peer_rows;
  std::string peer_torch, peer_blis;
  std::set<std::string> peer_reasons_said;
  set_num_threads(threads);
  const double peak2 = bench::fma_peak_avx2(threads), peak5 = bench::fma_peak_avx512(threads);
  const double dot16 = bench::dot_peak_avx512_bf16(threads);
  const double tile16 = bench::tile_peak_amx_bf16(threads);
  // The bf16 column's ceiling: the peak of the instruction its kernel runs, measured in every
  // round with the FMA peak (the header's peaks are the machine's, once).
  const std::string path = cpu::bf16_gemm_path();
  auto round_peaks = [&](std::vector<double>& fma, std::vector<double>& bf16) {
    fma.push_back(std::max(bench::fma_peak_avx2(threads), bench::fma_peak_avx512(threads)));
    bf16.push_back(path == "amx"           ? bench::tile_peak_amx_bf16(threads)
                   : path == "avx512-bf16" ? bench::dot_peak_avx512_bf16(threads)
                                           : fma.back());
  };
  std::printf("OpenBLAS core: %s, threads: %d, repetitions: %d x %d rounds (medians)\n",
              openblas_get_corename(), threads, reps, rounds);
  std::printf("measured FP32 FMA peak: AVX2 %.0f GFLOP/s", peak2);
  if (peak5 > 0) std::printf(", AVX-512 %.0f GFLOP/s", peak5);
  std::printf("; bf16 dot-product peak: AVX512-BF16 ");
  std::printf(dot16 > 0 ? "%.0f GFLOP/s" : "(absent)", dot16);
  std::printf(", AMX tiles ");
  std::printf(tile16 > 0 ? "%.0f GFLOP/s" : "(absent)", tile16);
  std::printf(
      "\nbf16 x bf16 kernel: %s (the last column: bf16 against its peak, measured in "
      "each of the shape's rounds)\n",
      path.c_str());
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
    std::vector<double> t_base, t_ours[3], fma_peaks, bf16_peaks;
    PeerTimes peer;
    for (int round = 0; round < rounds; ++round) {
      round_peaks(fma_peaks, bf16_peaks);
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
      if (with_peer) add_peer_round(s, reps, threads, peer);
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
        100 * g[1] / median(bf16_peaks));
    if (with_peer) {
      PeerRow row{s.name, median(fma_peaks), median(bf16_peaks), gb, g[0], g[1], {}};
      for (int i = 0; i < 3; ++i) row.peer[i] = peer_figure(peer, i, flops);
      print_peer_reasons(peer, row.peer, peer_reasons_said);
      peer_rows.push_back(row);
      if (!peer.torch.empty()) peer_torch = peer.torch;
      if (!peer.blis_arch.empty()) peer_blis = peer.blis_arch;
    }
  }
  if (with_peer) print_peer_table(peer_rows, peer_torch, peer_blis);
  std::printf(
      "\nworst ratio vs sgemm over shapes with all dims >= 256: f32 %.0f%%, bf16 %.0f%%, f16 "
      "%.0f%% (target 90%%)\n",
      100 * worst[0], 100 * worst[1], 100 * worst[2]);
  return 0;
}
