#pragma once

#include <CLI/CLI.hpp>

namespace mixprec::cli {

// Registers `tokenizer train` (a sentencepiece model from a corpus), `encode` and `decode`;
// the chosen command's status goes to exit_code.
void add_tokenizer_command(CLI::App& app, int& exit_code);

}  // namespace mixprec::cli
