#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mixprec::cli {

// Registers `memory`: bytes per rank of a training step (dist/memory_plan.h), from a config
// or from a parameter count.
void add_memory_command(CLI::App& app, int& exit_code);

// "500e9", "7B", "1.5M", "1200" (suffixes K, M, B, T, any case: 10^3 .. 10^12), read
// exactly; a UsageError naming --params unless a whole number in [1, 1e15].
int64_t parse_parameter_count(const std::string& text);

// Decimal units, as users quote them: "2.00 TB", "3.91 GB", "545 kB", "12 B".
std::string format_decimal_bytes(std::size_t bytes);
// Decimal units for counts: "500B", "2.72M", "1.5k".
std::string format_count(int64_t n);

}  // namespace mixprec::cli
