// Which backend CPU tensors run on.
#include "mixprec/backend/backend.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec::backend {
namespace {

const Backend* from_environment() {
  const char* name = std::getenv("MIXPREC_BACKEND");
  if (name == nullptr || *name == '\0') return &cpu_backend();
  for (std::string_view n : backend_names())
    if (n == name) return &find_backend(n);
  throw Error("MIXPREC_BACKEND",
              std::string("no backend named '") + name + "' (use cpu or reference)");
}

std::atomic<const Backend*>& selected() {
  static std::atomic<const Backend*> b{from_environment()};
  return b;
}

}  // namespace

std::vector<std::string_view> backend_names() {
  return {cpu_backend().name, reference_backend().name};
}

const Backend& find_backend(std::string_view name) {
  std::string known;
  for (std::string_view n : backend_names()) {
    if (n == name) return n == cpu_backend().name ? cpu_backend() : reference_backend();
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  throw Error("backend", "no backend named '" + std::string(name) + "' (known: " + known + ")");
}

const Backend& current() {
  return *selected().load(std::memory_order_acquire);
}

BackendScope::BackendScope(const Backend& b) : saved_(&current()) {
  selected().store(&b, std::memory_order_release);
}

BackendScope::~BackendScope() {
  selected().store(saved_, std::memory_order_release);
}

}  // namespace mixprec::backend
