#include "mixprec/core/error.h"

namespace mixprec {

Error::Error(const std::string& where, const std::string& what)
    : std::runtime_error("[" + where + "] " + what), where_(where) {}

}  // namespace mixprec
