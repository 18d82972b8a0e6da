// mixprec::Error: the one exception type for API misuse and bad input.
// Messages read "[where] what" so a user can find the file, key or value at fault.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mixprec {

// `text` when short, else its first `keep` bytes and how many were left out: what a message
// quotes of a value that may be megabytes long (a hostile file's or config's).
std::string quote_prefix(std::string_view text, std::size_t keep = 80);

class Error : public std::runtime_error {
 public:
  Error(const std::string& where, const std::string& what);
  const std::string& where() const { return where_; }
  // The message without its "[where] " prefix: for an error rethrown under a place the user
  // knows (a file) instead of an internal one.
  std::string what_only() const;

 private:
  std::string where_;
};

}  // namespace mixprec

// Throws mixprec::Error when `cond` is false; `where` and `msg` are std::string-convertible.
#define MIXPREC_CHECK(cond, where, msg)                  \
  do {                                                   \
    if (!(cond)) throw ::mixprec::Error((where), (msg)); \
  } while (0)
