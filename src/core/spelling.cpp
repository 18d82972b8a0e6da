#include "mixprec/core/spelling.h"

#include <algorithm>
#include <cctype>

namespace mixprec {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

namespace {

// Lower case, '_' as '-': bf16_mixed and BF16-Mixed are spellings of bf16-mixed.
std::string folded(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string closest_name(std::string_view text, const std::vector<std::string>& candidates) {
  if (text.size() > 64) return "";
  const std::string key = folded(text);
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(key, folded(c));
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best_distance <= std::max<std::size_t>(2, key.size() / 3) ? best : "";
}

bool in_comma_list(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace mixprec
