#include "split_behavior.h"

#include <algorithm>

#include "mixprec/core/error.h"

namespace mixprec::data::hf {
namespace {

struct Stretch {
  Match span;
  bool matched;
};

}  // namespace

SplitBehavior parse_split_behavior(const std::string& name, const std::string& file,
                                   const std::string& key) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  throw Error("tokenizer " + file, key + ": behavior '" + name +
                                       "' is not one of Removed, Isolated, MergedWithPrevious, "
                                       "MergedWithNext, Contiguous");
}

std::vector<Match> split_by_matches(std::size_t size, const std::vector<Match>& matches,
                                    SplitBehavior behavior, bool invert) {
  std::vector<Stretch> stretches;
  std::size_t at = 0;
  for (const Match& m : matches) {
    if (at < m.begin) stretches.push_back({{at, m.begin}, invert});
    stretches.push_back({m, !invert});
    at = m.end;
  }
  if (at < size || stretches.empty()) stretches.push_back({{at, size}, invert});

  std::vector<Stretch> kept;
  bool previous_matched = false;
  switch (behavior) {
    case SplitBehavior::removed:
      for (const Stretch& s : stretches)
        if (!s.matched) kept.push_back(s);
      break;
    case SplitBehavior::isolated:
      kept = stretches;
      break;
    case SplitBehavior::contiguous:
      for (const Stretch& s : stretches) {
        if (s.matched == previous_matched && !kept.empty())
          kept.back().span.end = s.span.end;
        else
          kept.push_back(s);
        previous_matched = s.matched;
      }
      break;
    case SplitBehavior::merged_with_previous:
      for (const Stretch& s : stretches) {
        if (s.matched && !previous_matched && !kept.empty())
          kept.back().span.end = s.span.end;
        else
          kept.push_back(s);
        previous_matched = s.matched;
      }
      break;
    case SplitBehavior::merged_with_next:
      for (auto it = stretches.rbegin(); it != stretches.rend(); ++it) {
        if (it->matched && !previous_matched && !kept.empty())
          kept.back().span.begin = it->span.begin;
        else
          kept.push_back(*it);
        previous_matched = it->matched;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  std::vector<Match> spans;
  for (const Stretch& s : kept)
    if (s.span.end > s.span.begin) spans.push_back(s.span);
  return spans;
}

}  // namespace mixprec::data::hf
