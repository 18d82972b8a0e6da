// `mixprec sample`: generated text from a checkpoint.
#include <fmt/core.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/infer/sampler.h"
#include "mixprec/train/run_checkpoint.h"
#include "sample_command.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

struct SampleArgs {
  std::string checkpoint;
  std::string prompt = "\n";
  infer::SampleOptions options;
};

void run_sample(const SampleArgs& a) {
  train::LoadedModel loaded = train::load_model(a.checkpoint);
  const int64_t vocab = loaded.config.model.vocab_size;
  if (a.options.top_k > vocab)
    throw UsageError(fmt::format("--top-k {} is more than the model's vocabulary ({} tokens)",
                                 a.options.top_k, vocab));
  std::vector<int64_t> prompt;
  for (const unsigned char byte : a.prompt) prompt.push_back(byte);
  std::vector<int64_t> tokens;
  {
    amp::ComputeScope compute(loaded.config.training.policy);
    tokens = infer::generate(*loaded.model, prompt, a.options);
  }
  std::string text = a.prompt;
  for (const int64_t t : tokens) text += static_cast<char>(t);
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
  cmd->add_option("--tokens", args->options.max_new_tokens, "bytes to generate")
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
  cmd->add_option("--seed", args->options.seed, "same seed, same text")->capture_default_str();
  cmd->callback([args, &exit_code] {
    run_sample(*args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
