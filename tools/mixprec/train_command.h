#pragma once

#include <CLI/CLI.hpp>

namespace mixprec::cli {

// Registers `train` and `eval`; the chosen command's status goes to exit_code.
void add_train_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);

}  // namespace mixprec::cli
