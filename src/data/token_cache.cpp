#include "mixprec/data/token_cache.h"

#include "mixprec/core/checksum.h"

#include <unistd.h>  // pwrite

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "mixprec/data/documents.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::data {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'M', 'X', 'P', 'T', 'O', 'K', 'E', 'N'};

[[noreturn]] void fail_cache(const fs::path& path, const std::string& what) {
  throw Error("data cache " + path.string(), what);
}

// Appends ids at `width` bytes each to `out`.
void append_ids(std::vector<uint8_t>& out, const std::vector<int64_t>& ids, int width) {
  const std::size_t at = out.size();
  out.resize(at + ids.size() * static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto v = static_cast<uint32_t>(ids[i]);
    std::memcpy(out.data() + at + i * static_cast<std::size_t>(width), &v,
                static_cast<std::size_t>(width));  // little-endian: the low bytes first
  }
}

// Writes the token stream to the open temporary file `fd`; returns the header to put first.
TokenCacheHeader write_tokens(int fd, const fs::path& target, const std::vector<CorpusFile>& files,
                              uint64_t source_hash, const Tokenizer& tokenizer,
                              const WarningSink& warn, TokenCacheBuild& result) {
  TokenCacheHeader header{};
  io::write_all(fd, &header, sizeof header,
                "data cache " + target.string());  // placeholder until the counts are known
  ByteChecksum checksum;
  const int width = token_width(tokenizer.vocab_size());
  uint64_t text_bytes = 0;
  result.skipped = for_each_document(files, warn, [&](std::string_view doc) {
    std::vector<uint8_t> encoded;
    append_ids(encoded, encode_document(tokenizer, doc), width);
    text_bytes += doc.size();
    checksum.update(encoded);
    io::write_all(fd, encoded.data(), encoded.size(), "data cache " + target.string());
    result.token_count += encoded.size() / static_cast<std::size_t>(width);
  });
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kTokenCacheVersion;
  header.token_bytes = static_cast<uint32_t>(width);
  header.vocab_size = static_cast<uint64_t>(tokenizer.vocab_size());
  header.text_bytes = text_bytes;
  header.token_count = result.token_count;
  header.source_hash = source_hash;
  header.payload_checksum = checksum.finish();
  header.file_count = static_cast<uint32_t>(files.size());
  header.skipped_count = static_cast<uint32_t>(result.skipped.size());
  return header;
}

// byte_checksum() of `n` bytes of the file from `offset`, read a block at a time.
uint64_t payload_checksum(const io::RegularFile& file, uint64_t offset, uint64_t n) {
  ByteChecksum checksum;
  std::vector<uint8_t> block(std::size_t{1} << 20);
  for (uint64_t done = 0; done < n;) {
    const auto m = static_cast<std::size_t>(std::min<uint64_t>(block.size(), n - done));
    file.read_at(offset + done, block.data(), m);
    checksum.update(std::span<const uint8_t>(block.data(), m));
    done += m;
  }
  return checksum.finish();
}

}  // namespace

std::string token_cache_file_name(uint64_t source_hash) {
  char name[40];
  std::snprintf(name, sizeof name, "tokens-%016" PRIx64 ".bin", source_hash);
  return name;
}

TokenCacheBuild build_token_cache(const fs::path& target, const std::vector<CorpusFile>& files,
                                  uint64_t source_hash, const Tokenizer& tokenizer,
                                  const WarningSink& warn) {
  TokenCacheBuild result;
  const std::string where = "data cache " + target.string();
  io::write_file_atomically(
      target.string(),
      [&](int fd) {
        const TokenCacheHeader header =
            write_tokens(fd, target, files, source_hash, tokenizer, warn, result);
        if (result.token_count == 0) {
          std::string list;
          for (const CorpusFile& f : files) list += (list.empty() ? "" : ", ") + f.path.string();
          throw Error("data corpus " + list,
                      "corpus is empty: no UTF-8 text in " + std::to_string(files.size()) +
                          " file(s) (" + std::to_string(result.skipped.size()) + " skipped)");
        }
        if (::pwrite(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
          fail_cache(target, std::string("header write failed: ") + std::strerror(errno));
      },
      where);
  return result;
}

TokenSpan TokenCache::tokens() const {
  return {file, sizeof(TokenCacheHeader), static_cast<int64_t>(header.token_count),
          static_cast<int>(header.token_bytes)};
}

std::optional<TokenCache> open_token_cache(const fs::path& path, uint64_t source_hash,
                                           int64_t vocab_size, std::string* why) {
  auto reject = [&](const std::string& reason) -> std::optional<TokenCache> {
    if (why) *why = reason;
    return std::nullopt;
  };
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return reject("missing");
  auto file = std::make_shared<const io::RegularFile>(path, "data cache " + path.string());
  const uint64_t size = file->size();
  if (size < sizeof(TokenCacheHeader)) {
    return reject("truncated: " + std::to_string(size) + " bytes, less than a header");
  }
  TokenCacheHeader h;
  file->read_at(0, &h, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("bad magic");
  if (h.version != kTokenCacheVersion) return reject("version " + std::to_string(h.version));
  const auto width = static_cast<uint32_t>(token_width(vocab_size));
  if (h.token_bytes != width || h.vocab_size != static_cast<uint64_t>(vocab_size)) {
    return reject("token width " + std::to_string(h.token_bytes) + " / vocabulary " +
                  std::to_string(h.vocab_size) + " is not the tokenizer's " +
                  std::to_string(width) + " / " + std::to_string(vocab_size));
  }
  if (h.source_hash != source_hash) return reject("built from other sources");
  const uint64_t payload = size - sizeof h;
  if (payload / width != h.token_count || payload % width != 0) {
    return reject("size mismatch: header says " + std::to_string(h.token_count) +
                  " tokens, file holds " + std::to_string(payload));
  }
  // One pass over the tokens: cheap next to tokenising, and it catches silent corruption.
  if (payload_checksum(*file, sizeof h, payload) != h.payload_checksum) {
    return reject("checksum mismatch");
  }
  return TokenCache{std::move(file), h};
}

}  // namespace mixprec::data
