// Small hashes that turn names and counters into random-number keys (stochastic rounding's
// Philox seeds and streams): deterministic everywhere, not for files (checksum.h) nor secrets.
#pragma once

#include <cstdint>
#include <string_view>

namespace mixprec {

inline constexpr uint64_t kFnv1aBasis = 0xCBF29CE484222325ull;

// FNV-1a, 64 bits; `h` carries a hash on over several pieces.
constexpr uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aBasis) {
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

// splitmix64's step and finalizer: nearby inputs give unrelated outputs.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace mixprec
