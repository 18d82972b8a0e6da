// One training step of config S (vocab 256, d_model 256, 4 layers, 4 heads, T 256, batch 8;
// LayerNorm, GELU MLP d_ff 1024, learned positions, tied embeddings; and the MoE variant with
// 8 experts, top-2, aux loss 0.01, dropless) or, with --model=gpt2s, the GPT-2-small shape
// (d_model 768, 12 layers, 12 heads, d_ff 3072, byte vocabulary; its MoE variant 8 experts of
// d_ff 3072, top-2); --seq=T changes T (default 256). AdamW + global-norm clipping at 1.0, in
// fp32 and in bf16-mixed: tokens/s, MFU, activation memory. Optionally side by side with the
// PyTorch 2.x peer (bench/torch_peer.py: eager and torch.compile; same shapes and threads).
//
// MFU: fp32 runs against the measured FP32 FMA peak; bf16-mixed runs against the host's bf16
// limit, the largest measured peak of the instructions a bf16 product can run on here (AMX
// tiles, AVX512-BF16 dot products, the FMA on widened operands), whichever kernel runs.
// bf16 products take the kernel the trainer would (train/bf16_kernel_choice.h: the host's
// measured choice), or --bf16-kernel=NAME.
//
// A step: forward + loss under autocast, backward through the GradScaler, unscale, clip, step,
// zero_grad. fp32 and bf16-mixed alternate in blocks of steps (--block=N, default 4), so both
// see the same machine state; the first step of a block is untimed, since it re-warms what
// the other variant evicted, which a training run never has to do. The table shows medians
// over the timed steps.
//
// Activation bytes ("act."): the allocator's peak during forward + backward minus the bytes
// live before the forward (so it includes the weight gradients backward allocates: the same
// f32 bytes in both precisions, printed below the table); "saved": the bytes still live after
// the forward, what the graph keeps for backward. --peer adds PyTorch 2.x's tokens/s (eager and
// torch.compile, fp32 and autocast bf16; $MIXPREC_PEER_PYTHON or python3) and peak RSS
// and ours (each variant re-run alone in a child process, for a like-for-like RSS).
//
// --layouts: the MoE's routed experts stacked (model.moe.idle_experts = "step") against one
// weight per expert ("skip"), side by side on config S's MoE and configs/deepseek_moe_debug.toml
// (train_step_layouts.h).
//
// Usage: bench_train_step [--reps=N] [--threads=N] [--warmup=N] [--block=N] [--data=PATH]
//                         [--model=s|gpt2s] [--seq=T] [--peer] [--dense-only | --moe-only]
//                         [--only=fp32|bf16-mixed] [--layouts] [--bf16-kernel=NAME]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench_util.h"
#include "fma_peak.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/bf16_kernel.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/data/batches.h"
#include "mixprec/data/token_dataset.h"
#include "mixprec/io/config_file.h"
#include "mixprec/models/registry.h"
#include "mixprec/optim/adamw.h"
#include "mixprec/optim/clip.h"
#include "mixprec/tensor/allocator.h"
#include "mixprec/train/bf16_kernel_choice.h"
#include "python_peer.h"
#include "train_step_layouts.h"

using namespace mixprec;
using bench::median;

namespace {

constexpr const char* kUsage =
    "bench_train_step [--reps=N] [--threads=N] [--warmup=N] [--block=N] [--data=PATH] "
    "[--model=s|gpt2s] [--seq=T] [--peer] [--dense-only | --moe-only] [--only=fp32|bf16-mixed] "
    "[--layouts] [--bf16-kernel=auto|amx|avx512-bf16|widened]";
constexpr int64_t kBatch = 8;
int64_t kSeq = 256;         // --seq
bool g_gpt2_small = false;  // --model=gpt2s

config::ModelConfig config_s(bool moe) {
  config::ModelConfig c;
  c.kind = moe ? "moe" : "gpt";
  c.vocab_size = 256;
  c.d_model = g_gpt2_small ? 768 : 256;
  c.n_layers = g_gpt2_small ? 12 : 4;
  c.n_heads = g_gpt2_small ? 12 : 4;
  c.d_ff = 4 * c.d_model;
  c.max_seq_len = kSeq;
  c.norm = "layernorm";
  c.mlp = "gelu";
  c.positions = "learned";
  c.tie_embeddings = true;
  c.moe.n_experts = 8;
  c.moe.top_k = 2;
  c.moe.capacity_factor = 0.0;
  c.moe.aux_loss_weight = 0.01;
  c.moe.z_loss_weight = 0.0;  // the peer has no z-loss
  return c;
}

// Model FLOPs of one step (nanoGPT's estimate): tokens * (6 N + 12 L T d), N = the weights a
// token multiplies (attention projections, the MLP or its top-k experts and the router,
// lm_head), 12 L T d the attention scores and values (forward + backward, non-causal count).
double step_flops(const config::ModelConfig& c) {
  const double d = double(c.d_model), ff = double(c.d_ff), L = double(c.n_layers);
  const double mlp = 2 * d * ff;
  const double per_layer =
      4 * d * d + (c.kind == "moe" ? double(c.moe.n_experts) * d + double(c.moe.top_k) * mlp : mlp);
  const double n = L * per_layer + double(c.vocab_size) * d;
  return double(kBatch * kSeq) * (6 * n + 12 * L * double(kSeq) * d);
}

data::TokenSplit random_tokens(int64_t n, uint64_t seed) {
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n));
  uint64_t s = seed;
  for (uint8_t& t : *buf) {  // splitmix64
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    t = static_cast<uint8_t>(z ^ (z >> 31));
  }
  return {buf, {buf->data(), static_cast<int64_t>(buf->size()), 1}, "random tokens", "", 0};
}

data::TokenSplit load_tokens(const std::string& path) {
  if (path.empty()) return random_tokens(1 << 20, 99);
  data::DatasetOptions o;
  o.corpus.paths = {path};
  o.cache_dir = std::filesystem::temp_directory_path() / "mixprec_bench_tokens";
  static data::TokenDataset ds = data::TokenDataset::open(o);  // keeps the mapping alive
  return ds.train();
}

struct Run {
  std::string kind, precision;
  config::ModelConfig config;
  amp::MixedPrecisionPolicy policy;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<amp::GradScaler> scaler;
  std::vector<double> seconds;
  std::vector<double> activation_bytes;
  std::vector<double> saved_bytes;  // live after the forward: what backward keeps
  double grad_bytes = 0;
  double first_loss = 0, last_loss = 0;
  uint64_t steps = 0;

  Run(bool moe, const char* prec)
      : kind(moe ? "moe" : "dense"),
        precision(prec),
        config(config_s(moe)),
        policy(amp::preset(prec)) {
    model = models::make_model(config);
    model->materialize(1337, policy);
    optim::AdamWOptions ao;
    ao.beta1 = 0.9;
    ao.beta2 = 0.95;
    opt = std::make_unique<optim::AdamW>(model->parameters().parameters(), 1e-3, 0.1, ao);
    scaler = std::make_unique<amp::GradScaler>(amp::ScalerOptions::for_policy(policy));
  }

  // One full step; returns seconds, records the activation bytes.
  double step(const data::Batch& b) {
    Allocator& alloc = Allocator::instance();
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t live = alloc.stats().current_bytes;
    alloc.reset_peak();
    Tensor loss;
    {
      amp::AutocastGuard autocast(policy.compute_dtype, policy.compute_dtype != DType::f32);
      loss = model->loss(b.inputs, b.targets).total;
    }
    saved_bytes.push_back(double(alloc.stats().current_bytes - live));
    scaler->scale(loss).backward();
    const std::size_t peak = alloc.stats().peak_bytes;
    scaler->unscale(*opt);
    // Clipped as the trainer clips: the coefficient folded into the optimizer's read, and the
    // norm (finite only when every gradient is) standing in for the scaler's own test.
    const double norm = optim::grad_norm(opt->parameters());
    scaler->step(*opt, std::isfinite(norm) ? optim::clip_coefficient(norm, 1.0) : 1.0f, norm);
    scaler->update();
    opt->zero_grad();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    activation_bytes.push_back(double(peak - live));
    const double l = loss.item();
    if (steps++ == 0) first_loss = l;
    last_loss = l;
    return t;
  }
};

double weight_grad_bytes(const Run& r) {
  return double(r.model->parameters().parameter_count()) *
         double(dtype_size(r.policy.reduce_dtype));
}

struct Peer {
  bool ok = false;
  double tokens_per_s = 0, tokens_min = 0, tokens_max = 0, peak_rss_mb = 0;
  std::string version;
  std::string failure;  // why there is no figure, for the table's row
};

// The PyTorch 2.x peer (bench/torch_peer.py) in one mode, eager or compiled, in its own
// process (python_peer.h).
Peer run_peer(const char* mode, bool compile, bool moe, int steps, int threads) {
  Peer p;
  const config::ModelConfig c = config_s(moe);
  const bench::PeerRun run = bench::run_python_peer(
      "torch_peer.py", std::string("--mode ") + mode + (compile ? " --compile" : "") +
                           (moe ? " --moe" : "") + " --steps " + std::to_string(steps) +
                           " --threads " + std::to_string(threads) + " --d_model " +
                           std::to_string(c.d_model) + " --n_layer " + std::to_string(c.n_layers) +
                           " --n_head " + std::to_string(c.n_heads) + " --T " +
                           std::to_string(kSeq) + " --B " + std::to_string(kBatch));
  const nlohmann::json j = bench::peer_json(run.out);
  if (!j.is_discarded()) {
    p.tokens_per_s = j.value("tokens_per_s", 0.0);
    p.tokens_min = j.value("tokens_per_s_min", 0.0);
    p.tokens_max = j.value("tokens_per_s_max", 0.0);
    p.peak_rss_mb = j.value("peak_rss_mb", 0.0);
    p.version = j.value("torch", std::string());
  }
  p.ok = p.tokens_per_s > 0;
  if (!p.ok)
    p.failure = !run.failure.empty() ? run.failure
                                     : "exited 0 without a figure" +
                                           (run.last_error.empty() ? "" : ": " + run.last_error);
  return p;
}

// Our peak RSS for one variant alone: this program re-run with --rss-probe=KIND:PRECISION,
// which prints its own VmHWM (the peak of its fresh address space; a spawned child's
// ru_maxrss would start from the parent's), so each variant is measured like the peer's
// one-mode process.
double our_peak_rss_mb(const std::string& kind, const std::string& precision, int threads) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd =
      self + " --rss-probe=" + kind + ":" + precision + " --threads=" + std::to_string(threads) +
      (g_gpt2_small ? " --model=gpt2s" : "") + " --seq=" + std::to_string(kSeq) +
      " --bf16-kernel=" + cpu::current_bf16_kernel() + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[256] = {0};
  const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
  if (pclose(pipe) != 0 || !got) return -1;
  return std::atof(buf) / 1024.0;  // KiB -> MiB
}

// Peak resident set of this process so far (VmHWM, KiB), or -1.
double peak_rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::atof(line + 6);
  std::fclose(f);
  return kib;
}

int rss_probe(const std::string& spec, const data::TokenSplit& tokens) {
  const size_t colon = spec.find(':');
  Run r(spec.substr(0, colon) == "moe", spec.substr(colon + 1).c_str());
  const data::TrainBatches batches(tokens, kBatch, kSeq, 7);
  for (uint64_t s = 0; s < 4; ++s) r.step(batches.batch(s));
  std::printf("%.0f\n", peak_rss_kib());
  return 0;
}

std::string take_value(std::vector<std::string>& args, const std::string& key) {
  for (auto it = args.begin(); it != args.end(); ++it)
    if (it->rfind(key, 0) == 0) {
      std::string v = it->substr(key.size());
      args.erase(it);
      return v;
    }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string data_path = take_value(args, "--data=");
  const std::string probe = take_value(args, "--rss-probe=");
  const std::string warmup_arg = take_value(args, "--warmup=");
  const std::string block_arg = take_value(args, "--block=");
  const std::string only = take_value(args, "--only=");  // one precision (for profiling)
  const std::string model_arg = take_value(args, "--model=");
  const std::string seq_arg = take_value(args, "--seq=");
  const std::string kernel_arg = take_value(args, "--bf16-kernel=");
  if (!model_arg.empty() && model_arg != "s" && model_arg != "gpt2s") {
    std::fprintf(stderr, "bench_train_step: --model=%s: expected s or gpt2s\n", model_arg.c_str());
    return 2;
  }
  g_gpt2_small = model_arg == "gpt2s";
  if (!seq_arg.empty()) {
    kSeq = std::atoll(seq_arg.c_str());
    if (kSeq < 2 || kSeq > 8192) {
      std::fprintf(stderr, "bench_train_step: --seq=%s: expected 2..8192\n", seq_arg.c_str());
      return 2;
    }
  }
  std::vector<char*> rest{argv[0]};
  for (std::string& a : args) rest.push_back(a.data());
  const bench::Options opt =
      bench::parse_options(static_cast<int>(rest.size()), rest.data(), 10,
                           {"--peer", "--dense-only", "--moe-only", "--layouts"}, kUsage);
  const int reps = std::max(opt.reps, 1);
  const int warmup = warmup_arg.empty() ? 2 : std::max(0, std::atoi(warmup_arg.c_str()));
  const int block = block_arg.empty() ? 4 : std::max(2, std::atoi(block_arg.c_str()));
  set_num_threads(opt.threads);
  // As the trainer chooses (the host's measured choice, or the flag).
  const train::Bf16KernelChoice kernel = train::choose_bf16_kernel(
      kernel_arg.empty() ? "auto" : kernel_arg, "",
      [](const std::string& w) { std::fprintf(stderr, "warning: %s\n", w.c_str()); });
  const data::TokenSplit tokens = load_tokens(data_path);
  if (!probe.empty()) return rss_probe(probe, tokens);
  if (bench::has_flag(opt, "--layouts")) {
    const config::TrainConfig deepseek =
        config::load_config(std::string(MIXPREC_SOURCE_DIR) + "/configs/deepseek_moe_debug.toml");
    return bench::run_layouts(
        {{"S moe", config_s(true), kBatch, kSeq},
         {"deepseek_moe_debug", deepseek.model, deepseek.training.batch_size,
          deepseek.training.seq_len}},
        tokens, {.reps = reps, .warmup = warmup, .block = block, .threads = opt.threads});
  }

  std::vector<bool> kinds;
  if (!bench::has_flag(opt, "--moe-only")) kinds.push_back(false);
  if (!bench::has_flag(opt, "--dense-only")) kinds.push_back(true);
  const bool with_peer = bench::has_flag(opt, "--peer");

  // The machine's peak: the best of measurements taken before the steps and after each
  // model's steps (a measurement that a busy host slows only underestimates it, which would
  // flatter the MFU).
  auto measure_peak = [&] {
    return std::max(bench::fma_peak_avx512(opt.threads), bench::fma_peak_avx2(opt.threads));
  };
  // bf16-mixed's ceiling: the host's bf16 limit, the largest peak of the instructions a bf16
  // product can run on here (AMX tiles, VDPBF16PS, or the f32 FMA on widened operands),
  // whichever kernel was chosen.
  const std::string bf16_path = cpu::bf16_gemm_path();
  auto measure_bf16_peak = [&] {
    double p = measure_peak();
    for (const std::string& k : cpu::available_bf16_kernels()) {
      if (k == "amx") p = std::max(p, bench::tile_peak_amx_bf16(opt.threads));
      if (k == "avx512-bf16") p = std::max(p, bench::dot_peak_avx512_bf16(opt.threads));
    }
    return p;
  };
  double peak = measure_peak(), peak16 = measure_bf16_peak();
  {
    const config::ModelConfig c = config_s(false);
    std::printf(
        "%s: vocab 256, d_model %lld, %lld layers, %lld heads, d_ff %lld, T %lld, batch %lld; "
        "AdamW, clip 1.0; %d threads; data: %s\n",
        g_gpt2_small ? "GPT-2-small shape" : "config S", static_cast<long long>(c.d_model),
        static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads),
        static_cast<long long>(c.d_ff), static_cast<long long>(kSeq),
        static_cast<long long>(kBatch), opt.threads,
        data_path.empty() ? "random tokens" : data_path.c_str());
  }
  std::printf(
      "FP32 FMA peak (measured now, %s): %.1f GFLOP/s; the host's bf16 limit (largest peak of "
      "its bf16 product instructions) %.1f GFLOP/s; MFU uses the best of these and the "
      "measurements after each model's steps\nbf16 products: %s; GEMMs: %s\n",
      __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2", peak, peak16,
      kernel.describe().c_str(), bf16_path.c_str());
  std::printf(
      "MFU = tokens * (6 N + 12 L T d) / step time / peak; N = matmul weights per token "
      "(attention 4 d^2, MLP 2 d d_ff or router E d + top_k * 2 d d_ff, lm_head V d)\n");
  std::printf(
      "%d warm-up + %d timed steps per variant; fp32 and bf16-mixed alternate in blocks of %d "
      "steps, the first of each block untimed (it re-warms the caches after the other variant)\n\n",
      warmup, reps, block);

  const data::TrainBatches batches(tokens, kBatch, kSeq, 7);
  std::printf("%-6s %-11s %10s %9s %8s %6s %12s %10s %9s %9s\n", "model", "precision", "tokens/s",
              "step ms", "min ms", "MFU", "act. MiB", "saved MiB", "loss0", "loss_end");
  for (const bool moe : kinds) {
    Run f32(moe, "fp32"), bf16(moe, "bf16-mixed");
    std::vector<double> ratio;
    // Each variant runs `block` steps in a row per round, the first untimed: it re-warms the
    // caches the other variant's 70-290 MB of weights and optimizer state just went through,
    // which a training run (one model, step after step) never has to do.
    uint64_t next_batch[2] = {0, 0};
    auto run_steps = [&](Run& r, uint64_t& step, int n, bool timed) {
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        const double t = r.step(batches.batch(step++));
        if (timed) r.seconds.push_back(t);
        sum += t;
      }
      return sum / std::max(n, 1);
    };
    const bool run32 = only != "bf16-mixed", run16 = only != "fp32";
    if (run32) run_steps(f32, next_batch[0], warmup, false);
    if (run16) run_steps(bf16, next_batch[1], warmup, false);
    for (int timed = 0; timed < reps; timed += block - 1) {
      const int n = std::min(block - 1, reps - timed);
      double a = 0, c = 0;
      if (run32) {
        run_steps(f32, next_batch[0], 1, false);
        a = run_steps(f32, next_batch[0], n, true);
      }
      if (run16) {
        run_steps(bf16, next_batch[1], 1, false);
        c = run_steps(bf16, next_batch[1], n, true);
      }
      ratio.push_back(c > 0 ? a / c : 0.0);
    }
    const double flops = step_flops(f32.config);
    peak = std::max(peak, measure_peak());
    peak16 = std::max(peak16, measure_bf16_peak());
    for (Run* r : {&f32, &bf16}) {
      if (r->activation_bytes.empty()) continue;
      const double t = median(r->seconds);
      const double ceiling = r == &bf16 ? peak16 : peak;
      std::printf("%-6s %-11s %10.0f %9.1f %8.1f %5.1f%% %12.1f %10.1f %9.4f %9.4f\n",
                  r->kind.c_str(), r->precision.c_str(), double(kBatch * kSeq) / t, 1e3 * t,
                  1e3 * *std::min_element(r->seconds.begin(), r->seconds.end()),
                  100.0 * flops / t * 1e-9 / ceiling, median(r->activation_bytes) / 1048576.0,
                  median(r->saved_bytes) / 1048576.0, r->first_loss, r->last_loss);
    }
    std::printf(
        "(act. MiB: peak of forward + backward over the bytes live before, weight "
        "gradients included: %.1f MiB; saved MiB: live after the forward; MFU over a peak of "
        "%.1f GFLOP/s for fp32, %.1f for bf16-mixed)\n",
        weight_grad_bytes(f32) / 1048576.0, peak, peak16);
    if (!only.empty()) continue;
    const double noise = (*std::max_element(f32.seconds.begin(), f32.seconds.end()) -
                          *std::min_element(f32.seconds.begin(), f32.seconds.end())) /
                         median(f32.seconds);
    std::printf(
        "%-6s bf16/fp32: speed %.2fx (median of per-round ratios), activation bytes %.2f "
        "(fp32 step spread max-min %.0f%% of median); %.2f GFLOP/step\n",
        f32.kind.c_str(), median(ratio),
        median(bf16.activation_bytes) / median(f32.activation_bytes), 100 * noise, flops * 1e-9);
    if (with_peer) {
      const double our32 = double(kBatch * kSeq) / median(f32.seconds);
      const double our16 = double(kBatch * kSeq) / median(bf16.seconds);
      const int peer_steps = std::max(3, reps / 2);
      const Peer p32 = run_peer("fp32", false, moe, peer_steps, opt.threads);
      const Peer p32c = run_peer("fp32", true, moe, peer_steps, opt.threads);
      const Peer pbf = run_peer("autocast_bf16", false, moe, peer_steps, opt.threads);
      const Peer pbfc = run_peer("autocast_bf16", true, moe, peer_steps, opt.threads);
      const double rss32 = our_peak_rss_mb(f32.kind, "fp32", opt.threads);
      const double rss16 = our_peak_rss_mb(f32.kind, "bf16-mixed", opt.threads);
      std::printf("%-6s %-30s %10s %17s %10s %13s %13s\n", "", "peer (bench/torch_peer.py)",
                  "tokens/s", "(range)", "ours/peer", "peak RSS MiB", "ours RSS MiB");
      auto row = [&](const char* name, const Peer& p, double ours, double rss) {
        if (!p.ok) {
          std::printf("%-6s %-30s (%s)\n", f32.kind.c_str(), name, p.failure.c_str());
          return;
        }
        std::printf("%-6s %-30s %10.0f %8.0f-%-8.0f %9.2fx %13.0f %13.0f\n", f32.kind.c_str(),
                    (std::string(name) + " " + p.version.substr(0, p.version.find('+'))).c_str(),
                    p.tokens_per_s, p.tokens_min, p.tokens_max, ours / p.tokens_per_s,
                    p.peak_rss_mb, rss);
      };
      row("fp32 eager", p32, our32, rss32);
      row("fp32 compile", p32c, our32, rss32);
      row("autocast_bf16 eager", pbf, our16, rss16);
      row("autocast_bf16 compile", pbfc, our16, rss16);
      const double best16 =
          std::max(pbf.ok ? pbf.tokens_per_s : 0.0, pbfc.ok ? pbfc.tokens_per_s : 0.0);
      const double best32 =
          std::max(p32.ok ? p32.tokens_per_s : 0.0, p32c.ok ? p32c.tokens_per_s : 0.0);
      if (best16 > 0 && best32 > 0)
        std::printf(
            "%-6s against the faster PyTorch: fp32 %.2fx, bf16-mixed %.2fx (ours %.0f "
            "tokens/s, range %.0f-%.0f)\n",
            f32.kind.c_str(), our32 / best32, our16 / best16, our16,
            double(kBatch * kSeq) / *std::max_element(bf16.seconds.begin(), bf16.seconds.end()),
            double(kBatch * kSeq) / *std::min_element(bf16.seconds.begin(), bf16.seconds.end()));
    }
    std::printf("\n");
  }
  return 0;
}
