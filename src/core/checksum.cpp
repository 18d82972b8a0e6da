#include <cstring>

#include "mixprec/core/checksum.h"

namespace mixprec {
namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

uint64_t mix(uint64_t state, uint64_t word) {
  state = (state ^ word) * kMul;
  return state ^ (state >> 29);
}

}  // namespace

void ByteChecksum::update(std::span<const uint8_t> bytes) {
  std::size_t i = 0;
  length_ += bytes.size();
  // Finish a word left over from the previous call, so chunking never changes the result.
  while (carried_ > 0 && carried_ < 8 && i < bytes.size()) {
    carry_ |= uint64_t{bytes[i++]} << (8 * carried_++);
  }
  if (carried_ == 8) {
    state_ = mix(state_, carry_);
    carry_ = 0;
    carried_ = 0;
  }
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);  // little-endian host: byte k is bits 8k..8k+7
    state_ = mix(state_, word);
  }
  for (; i < bytes.size(); ++i) carry_ |= uint64_t{bytes[i]} << (8 * carried_++);
}

uint64_t ByteChecksum::finish() const {
  uint64_t h = carried_ > 0 ? mix(state_, carry_) : state_;
  return mix(h, length_);
}

uint64_t byte_checksum(std::span<const uint8_t> bytes) {
  ByteChecksum c;
  c.update(bytes);
  return c.finish();
}

}  // namespace mixprec
