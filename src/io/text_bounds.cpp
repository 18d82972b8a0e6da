#include "text_bounds.h"

#include <algorithm>

namespace mixprec::io {

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// A key's parts are counted where a key can stand: at the start of a line or a table header,
// and after '{' or ',' inside an inline table; a dot outside quotes adds a part. Values are
// skipped up to the next ',' '}' or line end, so the dots of numbers never count.
int toml_key_depth(std::string_view text, int* line) {
  int deepest = 0, parts = 0, line_no = 1, inline_depth = 0;
  bool in_key = true;      // reading a key (or header) rather than a value
  char quote = 0;          // the open string's quote character, 0 outside strings
  std::string_view multi;  // the open multi-line string's delimiter, empty outside one
  auto finish_key = [&] {
    if (parts > deepest) {
      deepest = parts;
      if (line) *line = line_no;
    }
    parts = 0;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!multi.empty()) {
      if (c == '\n') ++line_no;
      if (text.substr(i, 3) == multi) {
        multi = {};
        i += 2;
      }
      continue;
    }
    if (quote) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote || c == '\n')
        quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      if (text.substr(i, 3) == "\"\"\"" || text.substr(i, 3) == "'''") {
        multi = text.substr(i, 3);
        i += 2;
      } else {
        quote = c;
      }
      if (in_key && parts == 0) parts = 1;
      continue;
    }
    if (c == '#') {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      ++line_no;
      if (inline_depth == 0) {
        finish_key();
        in_key = true;
      }
    } else if (in_key) {
      if (c == '=' || c == ']') {
        finish_key();
        in_key = false;
      } else if (c == '.') {
        ++parts;
      } else if (c != ' ' && c != '\t' && c != '[' && c != '\r' && parts == 0) {
        parts = 1;
      }
    } else if (c == '{') {
      ++inline_depth;
      in_key = true;
    } else if (c == '}' && inline_depth > 0) {
      --inline_depth;
    } else if (c == ',' && inline_depth > 0) {
      in_key = true;
    }
  }
  finish_key();
  return deepest;
}

}  // namespace mixprec::io
