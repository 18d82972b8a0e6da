#pragma once

#include <CLI/CLI.hpp>

namespace mixprec::cli {

// Registers `export`: a run's weights as a Hugging Face folder (io/hf_weights.h); the command's
// status goes to exit_code.
void add_export_command(CLI::App& app, int& exit_code);

}  // namespace mixprec::cli
