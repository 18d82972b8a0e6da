// ModuleScope: the per-thread dotted path of the module being run, and the glob match that
// decides whether an fp32_modules override covers it.
#include <string_view>

#include "autocast_state.h"

namespace mixprec::amp {
namespace {

// '*' matches any run of characters (dots included), '?' any one character.
bool glob_match(std::string_view glob, std::string_view text) {
  std::size_t g = 0, t = 0, star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == text[t])) {
      ++g;
      ++t;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      star_t = t;
    } else if (star != std::string_view::npos) {  // let the last '*' take one more character
      g = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

}  // namespace

namespace detail {

bool in_fp32_module(const AutocastState& s) {
  if (!s.overrides || s.overrides->fp32_modules.empty() || s.module_path.empty()) return false;
  const std::string_view path = s.module_path;
  for (const std::string& glob : s.overrides->fp32_modules) {
    // The scope itself or any scope above it ("a.b" is inside "a").
    for (std::size_t end = path.find('.'); end != std::string_view::npos;
         end = path.find('.', end + 1))
      if (glob_match(glob, path.substr(0, end))) return true;
    if (glob_match(glob, path)) return true;
  }
  return false;
}

}  // namespace detail

ModuleScope::ModuleScope(std::string_view name) {
  std::string& path = detail::state().module_path;
  saved_size_ = path.size();
  if (!path.empty()) path += '.';
  path += name;
}

ModuleScope::~ModuleScope() {
  detail::state().module_path.resize(saved_size_);
}

std::string_view module_path() {
  return detail::state().module_path;
}

}  // namespace mixprec::amp
