#include "mixprec/tensor/generator.h"

#include <cmath>
#include <numbers>

#include "mixprec/numerics/philox.h"

namespace mixprec {

// Element i takes half of Philox block i/2: words 0-1 for even i, 2-3 for odd i.
double Generator::uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  const PhiloxBlock b = philox_block(seed, stream, index / 2);
  const unsigned w = static_cast<unsigned>(index % 2) * 2;
  const uint64_t bits = (static_cast<uint64_t>(b[w]) << 21) ^ (b[w + 1] >> 11);  // 53 bits
  return static_cast<double>(bits) * 0x1p-53;
}

double Generator::standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const PhiloxBlock b = philox_block(seed, stream, index / 2);
  const unsigned w = static_cast<unsigned>(index % 2) * 2;
  const double u1 = (static_cast<double>(b[w]) + 1.0) * 0x1p-32;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(b[w + 1]) * 0x1p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace mixprec
