// The error every safetensors reader and writer throws: "safetensors <file>: <what>".
#pragma once

#include <string>

#include "mixprec/core/error.h"

namespace mixprec::io {

[[noreturn]] inline void fail_safetensors(const std::string& source, const std::string& what) {
  throw Error("safetensors " + source, what);
}

}  // namespace mixprec::io
