// `mixprec tokenizer encode | decode`: for checking a tokenizer by hand and for scripts. ids are
// printed as one JSON array; decode prints the text exactly (no newline added), so
// `encode | decode` gives back the input.
#include "tokenizer_text_command.h"

#include <fmt/core.h>

#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/data/hf_tokenizer.h"
#include "mixprec/data/tokenizer.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

constexpr std::size_t kMaxStdinBytes = std::size_t{1} << 30;

struct TextArgs {
  std::string tokenizer;
  bool special = false;  // encode: add_special_tokens; decode: skip_special_tokens
};

std::string read_stdin() {
  std::string text;
  char buffer[1 << 16];
  while (std::cin.read(buffer, sizeof buffer) || std::cin.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(std::cin.gcount()));
    if (text.size() > kMaxStdinBytes)
      throw UsageError("stdin holds more than " + std::to_string(kMaxStdinBytes >> 20) +
                       " MiB: split the text");
  }
  return text;
}

std::unique_ptr<data::Tokenizer> open(const std::string& path) {
  if (path.empty())
    throw UsageError("TOKENIZER is empty: give a tokenizer.json, a folder or a .model");
  return data::open_tokenizer(path);
}

void run_encode(const TextArgs& a) {
  const auto tokenizer = open(a.tokenizer);
  const std::string text = read_stdin();
  std::vector<int64_t> ids;
  if (!a.special) {
    ids = tokenizer->encode(text);
  } else if (const auto* hf = dynamic_cast<const data::HfTokenizer*>(tokenizer.get())) {
    ids = hf->encode_with_special_tokens(text);
  } else {
    ids = data::encode_document(*tokenizer, text);
  }
  fmt::print("{}\n", nlohmann::json(ids).dump());
}

void run_decode(const TextArgs& a) {
  const auto tokenizer = open(a.tokenizer);
  const nlohmann::json parsed = nlohmann::json::parse(read_stdin(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_array())
    throw UsageError("stdin is not a JSON array of token ids (what `tokenizer encode` prints)");
  std::vector<int64_t> ids;
  ids.reserve(parsed.size());
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    if (!parsed[i].is_number_integer())
      throw UsageError("stdin: element " + std::to_string(i) + " (" + parsed[i].dump() +
                       ") is not an integer token id");
    ids.push_back(parsed[i].get<int64_t>());
  }
  const auto* hf = dynamic_cast<const data::HfTokenizer*>(tokenizer.get());
  const std::string text = hf ? hf->decode(ids, a.special) : tokenizer->decode(ids);
  fmt::print("{}", text);
}

}  // namespace

void add_tokenizer_text_commands(CLI::App& tokenizer, int& exit_code) {
  const char* what =
      "a Hugging Face tokenizer.json (or the folder holding it and tokenizer_config.json), or "
      "a sentencepiece .model";
  auto encode_args = std::make_shared<TextArgs>();
  CLI::App* encode = tokenizer.add_subcommand(
      "encode", "Encode UTF-8 text read on stdin; print the ids as one JSON array");
  encode->add_option("TOKENIZER", encode_args->tokenizer, what)->required();
  encode->add_flag("--add-special-tokens", encode_args->special,
                   "tokenizer.json: apply its post-processor (tokenizers' add_special_tokens); "
                   "others: add BOS and EOS");
  encode->footer("\nExample:\n  echo 'Hello, world!' | mixprec tokenizer encode path/to/Llama-3/");
  encode->callback([encode_args, &exit_code] {
    run_encode(*encode_args);
    exit_code = 0;
  });

  auto decode_args = std::make_shared<TextArgs>();
  CLI::App* decode = tokenizer.add_subcommand(
      "decode", "Decode a JSON array of ids read on stdin; print the text exactly");
  decode->add_option("TOKENIZER", decode_args->tokenizer, what)->required();
  decode->add_flag("--skip-special-tokens", decode_args->special,
                   "tokenizer.json: leave special tokens out of the text");
  decode->footer(
      "\nExample:\n  echo '[9906, 11, 1917, 0]' | mixprec tokenizer decode path/to/Llama-3/");
  decode->callback([decode_args, &exit_code] {
    run_decode(*decode_args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
