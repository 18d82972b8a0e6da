// `mixprec sample`: generated text from a checkpoint.
#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/infer/text_stream.h"
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/train/run_data.h"
#include "sample_command.h"
#include "usage_error.h"
#include "value_parse.h"

namespace mixprec::cli {
namespace {

// 10^9 tokens: generation keeps only the model's context window and streams the text, so the
// count costs time, not memory; a billion tokens is already days of this CPU engine and
// thousands of books of text, and past it a typo (10^12, 2^64) is likelier than a wish.
constexpr int64_t kMaxNewTokens = 1'000'000'000;

struct SampleArgs {
  std::string checkpoint;
  std::string tokens = "200";  // parsed exactly by whole_number_option
  std::string prompt = "\n";
  std::string precision;  // "" = the run's
  bool no_cache = false;
  infer::SampleOptions options;
};

void run_sample(const SampleArgs& a) {
  const int64_t max_new_tokens = whole_number_option(
      "--tokens", a.tokens, 0, kMaxNewTokens, false,
      "a billion tokens is days of generation on this engine; the text streams as it comes");
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
  options.max_new_tokens = max_new_tokens;
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
  // Printed as the tokens come, the prompt first (decoded with it, so a word the prompt began
  // is completed with its spacing); the text equals decoding prompt + tokens at the end.
  const std::optional<int64_t> eos = tokenizer->eos();
  infer::TextStream stream(
      [&](std::span<const int64_t> ids) { return tokenizer->decode(ids); },
      [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      },
      std::vector<int64_t>(prompt.begin() + (tokenizer->bos() ? 1 : 0), prompt.end()));
  try {
    amp::ComputeScope compute(policy);
    infer::generate(*loaded.model, prompt, options, [&](int64_t token) {
      if (token != eos) stream.push(token);
    });
  } catch (const Error& e) {
    // A diverged checkpoint (a NaN logit): name the file and step the weights came from.
    stream.finish();
    std::fputc('\n', stdout);
    std::fflush(stdout);
    throw Error(loaded.path, fmt::format("step {}: sampling failed: {}", loaded.step, e.what()));
  }
  stream.finish();
  std::fputc('\n', stdout);
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
  cmd->add_option("--tokens", args->tokens,
                  "tokens to generate, at most 1e9 (bytes with the byte tokenizer)")
      ->capture_default_str();
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
