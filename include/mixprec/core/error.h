// mixprec::Error: the one exception type for API misuse and bad input.
// Messages read "[where] what" so a user can find the file, key or value at fault.
#pragma once

#include <stdexcept>
#include <string>

namespace mixprec {

class Error : public std::runtime_error {
 public:
  Error(const std::string& where, const std::string& what);
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

}  // namespace mixprec

// Throws mixprec::Error when `cond` is false; `where` and `msg` are std::string-convertible.
#define MIXPREC_CHECK(cond, where, msg)                  \
  do {                                                   \
    if (!(cond)) throw ::mixprec::Error((where), (msg)); \
  } while (0)
