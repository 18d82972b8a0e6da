// A word-at-a-time 64-bit checksum of a byte stream, for files that must notice a flipped bit
// or a truncation (the token cache's payload, each tensor of a checkpoint). Not cryptographic:
// it guards against damage, not against an attacker who rewrites the checksum too.
#pragma once

#include <cstdint>
#include <span>

namespace mixprec {

// The same bytes give the same value however they are split across update() calls.
class ByteChecksum {
 public:
  void update(std::span<const uint8_t> bytes);
  uint64_t finish() const;

 private:
  uint64_t state_ = 0x6d69787072656321ull;
  uint64_t length_ = 0;
  uint64_t carry_ = 0;  // bytes of an unfinished word, low byte first
  int carried_ = 0;
};

uint64_t byte_checksum(std::span<const uint8_t> bytes);

}  // namespace mixprec
