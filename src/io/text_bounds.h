// Bounds checked on untrusted text before a parser sees it, so that hostile nesting cannot
// exhaust the stack (in a recursive parser, destructor or printer) and hostile sizes cannot
// flood an error message. Private to src/io.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mixprec::io {

// Deepest nesting the readers accept: far beyond any real safetensors header (depth 3) or
// training config (4), far below what exhausts a thread's stack.
inline constexpr int kMaxNesting = 64;

// The deepest nesting of [ ] and { } in JSON text, brackets inside strings not counted.
int json_nesting_depth(std::string_view text);

// The most dot-separated parts of any TOML key or table header (`a.b.c` = 3), counting keys
// of inline tables too; the line (1-based) where it occurs goes to *line.
int toml_key_depth(std::string_view text, int* line);

}  // namespace mixprec::io
