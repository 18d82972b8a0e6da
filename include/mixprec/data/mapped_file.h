// A whole file mapped read-only into memory (mmap). Pages are read on first touch and shared
// with the page cache, so a large token file costs no copy and no heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace mixprec::data {

class MappedFile {
 public:
  // Throws mixprec::Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;  // null for an empty file (mmap refuses length 0)
  std::size_t size_ = 0;
};

}  // namespace mixprec::data
