// Generation with the key/value cache against recomputing the context for every token: the
// same model, prompt and seed, tokens/s for N new tokens (default 512) in one run, and whether
// the two emit the same tokens. Random weights: the cost does not depend on what was learned.
//
//   bench_generate [--tokens N] [--threads T] [--precision fp32|bf16-mixed]
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/core/parallel.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/models/registry.h"

using namespace mixprec;

namespace {

std::string arg(int argc, char** argv, const std::string& flag, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == flag) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_generate [--tokens N] [--threads T] [--precision fp32|bf16-mixed]\n"
          "Tokens/s of generation with the key/value cache against recomputing the "
          "context, N new tokens (default 512), T threads (default 2).\n");
      return 0;
    }
    if (a != "--tokens" && a != "--threads" && a != "--precision") {
      std::fprintf(stderr, "bench_generate: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
    ++i;  // the flag's value
  }
  const int64_t new_tokens = std::stoll(arg(argc, argv, "--tokens", "512"));
  const int threads = std::stoi(arg(argc, argv, "--threads", "2"));
  const std::string precision = arg(argc, argv, "--precision", "bf16-mixed");
  set_num_threads(threads);
  // A Llama 3 of llama3_debug's width with room for the prompt and every new token.
  config::ModelConfig c;
  c.kind = "llama3";
  c.vocab_size = 2048;
  c.d_model = 256;
  c.n_layers = 8;
  c.n_heads = 16;
  c.n_kv_heads = 4;
  c.d_ff = 768;
  c.max_seq_len = 1024;
  c.rope_theta = 500000.0;
  c.tie_embeddings = false;
  const auto policy = amp::parse_policy(precision);
  const auto model = models::make_model(c);
  model->materialize(1, policy);
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 16; ++i) prompt.push_back((i * 131 + 7) % c.vocab_size);

  auto run = [&](bool cache, std::vector<int64_t>& out) {
    infer::SampleOptions o{.max_new_tokens = new_tokens,
                           .temperature = 0.8,
                           .top_k = 40,
                           .top_p = 0.95,
                           .seed = 5,
                           .use_cache = cache};
    amp::ComputeScope scope(policy);
    return bench::seconds_of([&] { out = infer::generate(*model, prompt, o); });
  };
  std::vector<int64_t> with_cache, without;
  const double t_cache = run(true, with_cache);
  const double t_recompute = run(false, without);
  std::printf(
      "generation, %s: llama3 d_model 256, 8 layers, 16 heads (4 kv), vocab 2048; prompt "
      "16 tokens, %lld new; %s; %d threads\n",
      bench::cpu_description().c_str(), static_cast<long long>(new_tokens), precision.c_str(),
      threads);
  std::printf("| path | seconds | new tokens/s |\n|---|---:|---:|\n");
  std::printf("| key/value cache | %.2f | %.1f |\n", t_cache,
              static_cast<double>(new_tokens) / t_cache);
  std::printf("| recompute the context | %.2f | %.1f |\n", t_recompute,
              static_cast<double>(new_tokens) / t_recompute);
  std::printf("cache / recompute: %.2fx faster; same tokens: %s\n", t_recompute / t_cache,
              with_cache == without ? "yes" : "NO");
  return with_cache == without ? 0 : 1;
}
