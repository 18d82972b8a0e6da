// The `pattern` of Split, Replace (normalizer and decoder): {"String": s} matches s literally,
// {"Regex": r} through Oniguruma.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_field.h"
#include "onig_regex.h"

namespace mixprec::data::hf {

class Pattern {
 public:
  explicit Pattern(const JsonField& spec);
  // Non-overlapping matches, left to right.
  std::vector<Match> find_all(std::string_view text) const;
  // Every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<OnigRegex> regex_;
};

}  // namespace mixprec::data::hf
