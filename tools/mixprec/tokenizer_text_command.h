#pragma once

#include <CLI/CLI.hpp>

namespace mixprec::cli {

// Registers `tokenizer encode` and `tokenizer decode` under `tokenizer`: text on stdin to a
// JSON array of ids, and back, with any tokenizer [model] tokenizer accepts.
void add_tokenizer_text_commands(CLI::App& tokenizer, int& exit_code);

}  // namespace mixprec::cli
