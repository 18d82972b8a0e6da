// Token ids as a file stores them: little-endian unsigned integers 1, 2 or 4 bytes wide
// (bytes, uint16 as nanoGPT and llm.c write GPT-2 ids, uint32 for larger vocabularies), read
// in place from a mapping.
#pragma once

#include <cstdint>
#include <cstring>

namespace mixprec::data {

struct TokenSpan {
  const uint8_t* data = nullptr;
  int64_t count = 0;
  int width = 1;  // bytes per token: 1, 2 or 4

  int64_t size() const { return count; }
  int64_t operator[](int64_t i) const {
    const uint8_t* p = data + i * width;
    if (width == 1) return p[0];
    if (width == 2) return int64_t{p[0]} | int64_t{p[1]} << 8;
    uint32_t v;
    std::memcpy(&v, p, 4);  // x86 and every supported target are little-endian
    return v;
  }
  TokenSpan sub(int64_t begin, int64_t end) const {
    return {data + begin * width, end - begin, width};
  }
};

// The narrowest width that holds ids below vocab_size.
inline int token_width(int64_t vocab_size) {
  return vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4;
}

}  // namespace mixprec::data
