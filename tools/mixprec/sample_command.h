#pragma once

#include <CLI/CLI.hpp>

namespace mixprec::cli {

// Registers `sample` (text from a checkpoint), `plot` (loss curves of runs) and `summary`
// (a table of runs); the chosen command's status goes to exit_code.
void add_sample_command(CLI::App& app, int& exit_code);
void add_report_commands(CLI::App& app, int& exit_code);

}  // namespace mixprec::cli
