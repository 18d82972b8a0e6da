#include "pattern.h"

namespace mixprec::data::hf {

Pattern::Pattern(const JsonField& spec) {
  const auto literal = spec.find("String");
  const auto regex = spec.find("Regex");
  if (literal && regex) spec.fail("has both 'String' and 'Regex'");
  if (literal) {
    literal_ = literal->string();
    if (literal_.empty()) literal->fail("an empty pattern matches nothing to split on");
  } else if (regex) {
    regex_ = std::make_unique<OnigRegex>(regex->string(),
                                         "tokenizer " + regex->file() + " " + regex->key());
  } else {
    spec.fail("has neither 'String' nor 'Regex'");
  }
}

std::vector<Match> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<Match> out;
  for (std::size_t at = text.find(literal_); at != std::string_view::npos;
       at = text.find(literal_, at + literal_.size()))
    out.push_back({at, at + literal_.size()});
  return out;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  std::size_t from = 0;
  for (const Match& m : find_all(text)) {
    out.append(text.substr(from, m.begin - from));
    out.append(content);
    from = m.end;
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace mixprec::data::hf
