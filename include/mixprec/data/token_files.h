// Pre-tokenized token files, read in place without re-tokenising (nothing but the header is read
// until a batch needs its tokens; token_span.h says why by offset and not by memory map):
//   nanoGPT   raw little-endian uint16 ids, no header (prepare.py's train.bin / val.bin)
//   llm.c     a header of 256 int32 (magic, version, token count), then the ids: magic
//             20240520 version 1 = uint16 GPT-2 ids (vocabulary 50257); magic 20240801
//             version 7 = uint32 Llama 3 ids (vocabulary 128256) (dev/data/data_common.py)
// A file is taken as llm.c's when its first int32 is one of those magics, else as nanoGPT's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "mixprec/data/token_span.h"
#include "mixprec/io/regular_file.h"

namespace mixprec::data {

struct TokenFile {
  std::shared_ptr<const io::RegularFile> file;
  TokenSpan tokens;
  int64_t header_bytes = 0;           // where tokens[0] sits in the file
  std::string format;                 // "nanoGPT uint16" | "llm.c GPT-2 uint16" | ...
  std::optional<int64_t> vocab_size;  // the ids' vocabulary when the format says it
};

// True for a *.bin file: data that is token ids, not text.
bool is_token_file(const std::filesystem::path& path);

// Opens and checks the file: a regular file, an llm.c header's count against the file's size, a
// nanoGPT file's size even, at least one token. Errors name the file.
TokenFile open_token_file(const std::filesystem::path& path);

// The validation file beside a train file, as nanoGPT (train.bin, val.bin) and llm.c
// (name_train.bin, name_val.bin) lay them out: the last "train" of the file name replaced by
// "val"; nullopt when there is no such file.
std::optional<std::filesystem::path> validation_file_for(const std::filesystem::path& train);

}  // namespace mixprec::data
