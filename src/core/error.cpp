#include "mixprec/core/error.h"

namespace mixprec {

Error::Error(const std::string& where, const std::string& what)
    : std::runtime_error("[" + where + "] " + what), where_(where) {}

std::string Error::what_only() const {
  const std::string all = what();
  const std::size_t skip = where_.size() + 3;  // "[" where "] "
  return all.size() >= skip ? all.substr(skip) : all;
}

std::string quote_prefix(std::string_view text, std::size_t keep) {
  if (text.size() <= keep) return std::string(text);
  return std::string(text.substr(0, keep)) + "... (" + std::to_string(text.size() - keep) +
         " more bytes)";
}

}  // namespace mixprec
