// Token ids as a file stores them: little-endian unsigned integers 1, 2 or 4 bytes wide
// (bytes, uint16 as nanoGPT and llm.c write GPT-2 ids, uint32 for larger vocabularies), read
// from the file by offset (pread) when they are needed, or from memory.
//
// Why pread and not a memory map: a mapped file truncated while a run reads it raises SIGBUS on
// the next touch of a lost page, which kills the process with no message, and a SIGBUS handler
// would be process-wide state that MPI libraries install their own of. A read past the file's
// end is an ordinary short read, reported as an error naming the file. Opening stays as cheap
// as a map (open + fstat, nothing read up front) and the page cache serves repeated reads.
#pragma once

#include <cstdint>
#include <memory>

#include "mixprec/io/regular_file.h"

namespace mixprec::data {

class TokenSpan {
 public:
  TokenSpan() = default;
  // `count` tokens in memory at `data` (kept alive by the caller).
  TokenSpan(const uint8_t* data, int64_t count, int width)
      : memory_(data), count_(count), width_(width) {}
  // `count` tokens in `file` from byte `offset` on.
  TokenSpan(std::shared_ptr<const io::RegularFile> file, uint64_t offset, int64_t count, int width)
      : file_(std::move(file)), offset_(offset), count_(count), width_(width) {}

  int64_t size() const { return count_; }
  int width() const { return width_; }  // bytes per token: 1, 2 or 4

  // Ids [begin, begin + n) into ids[0, n). Throws mixprec::Error naming the file when it no
  // longer holds them (truncated since it was opened) or cannot be read.
  void read(int64_t begin, int64_t n, int64_t* ids) const;
  int64_t operator[](int64_t i) const {
    int64_t id = 0;
    read(i, 1, &id);
    return id;
  }
  TokenSpan sub(int64_t begin, int64_t end) const {
    TokenSpan s = *this;
    s.offset_ += static_cast<uint64_t>(begin * width_);
    s.count_ = end - begin;
    return s;
  }

 private:
  std::shared_ptr<const io::RegularFile> file_;  // null: the tokens are in memory
  const uint8_t* memory_ = nullptr;
  uint64_t offset_ = 0;  // bytes from the file's start, or from memory_
  int64_t count_ = 0;
  int width_ = 1;
};

// The narrowest width that holds ids below vocab_size.
inline int token_width(int64_t vocab_size) {
  return vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4;
}

}  // namespace mixprec::data
