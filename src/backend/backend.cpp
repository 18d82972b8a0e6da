// Which backend CPU tensors run on.
#include "mixprec/backend/backend.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec::backend {
namespace {

std::array<const Backend*, 2> built_ins() {
  return {&cpu_backend(), &reference_backend()};
}

const Backend* lookup(std::string_view name) {
  for (const Backend* b : built_ins())
    if (b->name == name) return b;
  return nullptr;
}

std::string known_names() {
  std::string known;
  for (const Backend* b : built_ins()) known += (known.empty() ? "" : ", ") + std::string(b->name);
  return known;
}

const Backend* from_environment() {
  const char* name = std::getenv("MIXPREC_BACKEND");
  if (name == nullptr || *name == '\0') return &cpu_backend();
  if (const Backend* b = lookup(name)) return b;
  throw Error("MIXPREC_BACKEND",
              "no backend named '" + quote_prefix(name) + "' (known: " + known_names() + ")");
}

std::atomic<const Backend*>& selected() {
  static std::atomic<const Backend*> b{from_environment()};
  return b;
}

}  // namespace

std::vector<std::string_view> backend_names() {
  std::vector<std::string_view> names;
  for (const Backend* b : built_ins()) names.push_back(b->name);
  return names;
}

const Backend& find_backend(std::string_view name) {
  if (const Backend* b = lookup(name)) return *b;
  throw Error("backend",
              "no backend named '" + quote_prefix(name) + "' (known: " + known_names() + ")");
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
