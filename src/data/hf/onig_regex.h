// A tokenizer.json regex, compiled and searched by Oniguruma, the engine Hugging Face
// `tokenizers` runs them on (same syntax and Unicode classes; PCRE2 and std::regex differ).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mixprec::data::hf {

struct Match {
  std::size_t begin;
  std::size_t end;
};

class OnigRegex {
 public:
  // Errors name `where` (the file and key) and quote Oniguruma's message.
  OnigRegex(const std::string& pattern, const std::string& where);
  ~OnigRegex();
  OnigRegex(const OnigRegex&) = delete;
  OnigRegex& operator=(const OnigRegex&) = delete;

  // Every match in `text` (valid UTF-8), left to right, as the onig crate's find_iter: an
  // empty match right where the previous one ended is skipped. A search that exceeds
  // Oniguruma's backtracking limit throws, naming the regex.
  std::vector<Match> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string where_;
};

}  // namespace mixprec::data::hf
