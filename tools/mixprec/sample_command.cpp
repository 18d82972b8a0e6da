// `mixprec sample`: generated text from a checkpoint.
#include <fmt/core.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"
#include "sample_command.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

struct SampleArgs {
  std::string checkpoint;
  std::string prompt = "\n";
  std::string precision;  // "" = the run's
  bool no_cache = false;
  infer::SampleOptions options;
};

void run_sample(const SampleArgs& a) {
  std::optional<amp::MixedPrecisionPolicy> chosen;
  if (!a.precision.empty()) {
    try {
      chosen = amp::parse_policy(a.precision);
    } catch (const Error& e) {
      throw UsageError("--precision: " + std::string(e.what()));
    }
  }
  // Working copies in the chosen precision (a bf16 run's weights sampled in fp32 are its f32
  // masters, not their bf16 copies).
  train::LoadedModel loaded = train::load_model(a.checkpoint, chosen);
  const amp::MixedPrecisionPolicy policy = loaded.config.training.policy;
  infer::SampleOptions options = a.options;
  options.use_cache = !a.no_cache;
  const int64_t vocab = loaded.config.model.vocab_size;
  if (a.options.top_k > vocab)
    throw UsageError(fmt::format("--top-k {} is more than the model's vocabulary ({} tokens)",
                                 a.options.top_k, vocab));
  // The run's tokenizer; a document starts with BOS when the vocabulary has one, as in training.
  const auto tokenizer = train::open_checkpoint_tokenizer(loaded);
  // A run on token files (nanoGPT's, llm.c's GPT-2 ids) had no tokenizer of ours for its ids.
  const int64_t covered = (tokenizer->vocab_size() + 63) / 64 * 64;
  if (loaded.config.model.vocab_size > covered)
    throw UsageError(fmt::format(
        "{} has model.vocab_size = {}, but its tokenizer ({}) has {} ids: it was trained on "
        "pre-tokenized ids this tokenizer cannot encode or decode (set model.tokenizer)",
        loaded.path, loaded.config.model.vocab_size, tokenizer->describe(),
        tokenizer->vocab_size()));
  std::vector<int64_t> prompt;
  if (const auto bos = tokenizer->bos()) prompt.push_back(*bos);
  for (const int64_t id : tokenizer->encode(a.prompt)) prompt.push_back(id);
  std::vector<int64_t> tokens;
  {
    amp::ComputeScope compute(policy);
    tokens = infer::generate(*loaded.model, prompt, options);
  }
  // Decoded with the prompt, so a word the prompt began is completed with its spacing.
  std::vector<int64_t> all(prompt.begin() + (tokenizer->bos() ? 1 : 0), prompt.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  if (const auto eos = tokenizer->eos()) std::erase(all, *eos);
  std::string text = tokenizer->decode(all);
  fmt::print("{}\n", text);
}

}  // namespace

void add_sample_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a checkpoint");
  cmd->add_option("checkpoint", args->checkpoint,
                  "a step-<N>.safetensors file, or a run directory (its newest checkpoint)")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue (default: a newline)");
  // Checked here, so a bad value is reported by the flag the user typed.
  cmd->add_option("--tokens", args->options.max_new_tokens,
                  "tokens to generate (bytes with the byte tokenizer)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", args->options.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {
            const double t = std::strtod(text.c_str(), nullptr);
            return std::isfinite(t) && t >= 0 ? std::string()
                                              : "must be a finite number >= 0, got " + text;
          },
          "FLOAT>=0"));
  cmd->add_option("--top-k", args->options.top_k, "sample among the k likeliest (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->options.top_p,
                  "nucleus: the fewest likeliest tokens holding this probability (1 = all)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {
            const double p = std::strtod(text.c_str(), nullptr);
            return p > 0 && p <= 1 ? std::string() : "must be in (0, 1], got " + text;
          },
          "FLOAT in (0, 1]"));
  cmd->add_option("--seed", args->options.seed, "same seed, same text")->capture_default_str();
  cmd->add_option("--precision", args->precision,
                  "compute precision for sampling (fp32, bf16-mixed, ...; default: the run's)");
  cmd->add_flag("--no-cache", args->no_cache,
                "recompute the whole context for every token instead of the key/value cache");
  cmd->callback([args, &exit_code] {
    run_sample(*args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
