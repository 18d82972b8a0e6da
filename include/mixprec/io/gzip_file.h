// Reading a gzip-compressed file a user named (tokenizer.json.gz, as checkpoints' tokenizers
// are often kept): read as io/regular_file.h reads (bounded, non-blocking, a regular file),
// then inflated by zlib with its output bounded too, so a small hostile file cannot inflate
// into memory without end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace mixprec::io {

// The inflated contents of `path` (one or more concatenated gzip members), at most
// max_bytes of them. Throws Error(where, ...) when the file cannot be read, is not gzip, is
// truncated or corrupt, or inflates past max_bytes.
std::string read_gzip_file(const std::filesystem::path& path, uint64_t max_bytes,
                           const std::string& where);

}  // namespace mixprec::io
