// How a pre-tokenizer's matches become pieces, as tokenizers' SplitDelimiterBehavior: the
// text is cut into matched and unmatched stretches, then Removed drops the matches,
// Isolated keeps each stretch, MergedWithPrevious / MergedWithNext glue a match to its
// neighbour, Contiguous joins runs of the same kind.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "onig_regex.h"

namespace mixprec::data::hf {

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Parses "Removed", "Isolated", ...; nullopt-like: throws via `fail` on other names.
SplitBehavior parse_split_behavior(const std::string& name, const std::string& file,
                                   const std::string& key);

// The [begin, end) stretches of a text of `size` bytes to keep, empty ones dropped. `matches`
// are non-overlapping, left to right; `invert` swaps matched and unmatched stretches.
std::vector<Match> split_by_matches(std::size_t size, const std::vector<Match>& matches,
                                    SplitBehavior behavior, bool invert = false);

}  // namespace mixprec::data::hf
