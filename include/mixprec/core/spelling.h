// "Did you mean": the closest of a set of valid names to a misspelt one, for error messages
// that name what the user probably meant (config keys, precision policies, flags).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec {

// True when `name` is one of the comma-separated entries of `list` ("e4m3,e4m3fn"): the alias
// columns of the dtype and linear-recipe tables.
bool in_comma_list(std::string_view list, std::string_view name);

// Levenshtein distance (insert, delete, substitute: 1 each).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `text`, compared case-insensitively with '_' and '-' alike; "" when
// none is within a typo's reach (more than a third of the name changed, at least 2 edits
// allowed) or `text` is longer than any name could be (64 bytes: the distance is quadratic).
std::string closest_name(std::string_view text, const std::vector<std::string>& candidates);

}  // namespace mixprec
