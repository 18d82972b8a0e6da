#pragma once

#include <stdexcept>
#include <string>

namespace mixprec::cli {

// Bad command-line input: main prints "mixprec: <message>" and exits with status 2.
struct UsageError : std::runtime_error {
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mixprec::cli
