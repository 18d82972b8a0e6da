#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace mixprec::cli {

struct CastOptions {
  std::vector<std::string> values;
  std::string to = "bf16,f16,e4m3,e5m2,tf32";
  std::string rounding = "rne";
  uint64_t seed = 0;
  bool saturate = false;
  std::string overflow = "satfinite";  // the OverflowConvention
};

// Registers `dtype info` and `dtype cast`; the chosen command's status goes to exit_code.
void add_dtype_command(CLI::App& app, int& exit_code);

}  // namespace mixprec::cli
