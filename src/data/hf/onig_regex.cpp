#include "onig_regex.h"

#include <oniguruma.h>

#include <mutex>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

std::string onig_message(int code, OnigErrorInfo* info) {
  OnigUChar text[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int n =
      info ? onig_error_code_to_str(text, code, info) : onig_error_code_to_str(text, code);
  return std::string(reinterpret_cast<const char*>(text), n > 0 ? static_cast<std::size_t>(n) : 0);
}

void initialize_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

const OnigUChar* bytes(std::string_view s) {
  return reinterpret_cast<const OnigUChar*>(s.data());
}

}  // namespace

struct OnigRegex::Impl {
  regex_t* regex = nullptr;
};

OnigRegex::OnigRegex(const std::string& pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()), where_(where) {
  initialize_once();
  MIXPREC_CHECK(is_valid_utf8(pattern), where, "the regex is not valid UTF-8");
  OnigErrorInfo info;
  // ONIG_SYNTAX_DEFAULT and no options: what the onig crate's Regex::new passes.
  const int r = onig_new(&impl_->regex, bytes(pattern), bytes(pattern) + pattern.size(),
                         ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  MIXPREC_CHECK(r == ONIG_NORMAL, where,
                "regex " + quote_prefix(pattern) + " does not compile: " + onig_message(r, &info));
}

OnigRegex::~OnigRegex() {
  if (impl_->regex) onig_free(impl_->regex);
}

std::vector<Match> OnigRegex::find_all(std::string_view text) const {
  std::vector<Match> matches;
  OnigRegion* region = onig_region_new();
  std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> owned(
      region, [](OnigRegion* r) { onig_region_free(r, 1); });
  const OnigUChar* begin = bytes(text);
  const OnigUChar* end = begin + text.size();
  std::size_t from = 0;
  bool have_last = false;
  std::size_t last_end = 0;
  while (from <= text.size()) {
    onig_region_clear(region);
    const int r =
        onig_search(impl_->regex, begin, end, begin + from, end, region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    MIXPREC_CHECK(r >= 0, where_, "regex search failed: " + onig_message(r, nullptr));
    const auto s = static_cast<std::size_t>(region->beg[0]);
    const auto e = static_cast<std::size_t>(region->end[0]);
    if (s == e && have_last && last_end == e) {
      if (from >= text.size()) break;
      from += code_point_at(text, from).length;
      continue;
    }
    matches.push_back({s, e});
    from = e;
    have_last = true;
    last_end = e;
  }
  return matches;
}

}  // namespace mixprec::data::hf
