#include "mixprec/data/token_cache.h"

#include "mixprec/core/checksum.h"

#include <unistd.h>  // pwrite

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "mixprec/data/byte_tokenizer.h"
#include "mixprec/io/atomic_file.h"

namespace mixprec::data {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'M', 'X', 'P', 'T', 'O', 'K', 'E', 'N'};

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw Error("data cache " + path.string(), what);
}

std::string read_whole(const CorpusFile& f) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in)
    throw Error("data corpus " + f.path.string(),
                "cannot open: " + std::string(std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The fingerprint was taken from the listed size: a file rewritten since would give a cache
  // that claims sources it does not hold.
  if (bytes.size() != f.size) {
    throw Error("data corpus " + f.path.string(), "changed while being read (" +
                                                      std::to_string(f.size) + " bytes listed, " +
                                                      std::to_string(bytes.size()) + " read)");
  }
  return bytes;
}

// Writes the token stream to the open temporary file `fd`; returns the header to put first.
TokenCacheHeader write_tokens(int fd, const fs::path& target, const std::vector<CorpusFile>& files,
                              uint64_t source_hash, const WarningSink& warn,
                              TokenCacheBuild& result) {
  TokenCacheHeader header{};
  io::write_all(fd, &header, sizeof header,
                "data cache " + target.string());  // placeholder until the counts are known
  ByteChecksum checksum;
  for (const CorpusFile& f : files) {
    const std::string bytes = read_whole(f);
    if (const auto bad = first_invalid_utf8(bytes)) {
      result.skipped.push_back(f.path);
      if (warn) {
        warn("data corpus " + f.path.string() + ": skipped, not valid UTF-8 (bad byte at offset " +
             std::to_string(*bad) + ")");
      }
      continue;
    }
    // Byte tokenizer: the tokens are the bytes themselves, one byte each on disk.
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    checksum.update({p, bytes.size()});
    io::write_all(fd, p, bytes.size(), "data cache " + target.string());
    result.token_count += bytes.size();
  }
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kTokenCacheVersion;
  header.token_bytes = 1;
  header.vocab_size = ByteTokenizer::kVocabSize;
  header.token_count = result.token_count;
  header.source_hash = source_hash;
  header.payload_checksum = checksum.finish();
  header.file_count = static_cast<uint32_t>(files.size());
  header.skipped_count = static_cast<uint32_t>(result.skipped.size());
  return header;
}

}  // namespace

std::string token_cache_file_name(uint64_t source_hash) {
  char name[40];
  std::snprintf(name, sizeof name, "tokens-%016" PRIx64 ".bin", source_hash);
  return name;
}

TokenCacheBuild build_token_cache(const fs::path& target, const std::vector<CorpusFile>& files,
                                  uint64_t source_hash, const WarningSink& warn) {
  TokenCacheBuild result;
  const std::string where = "data cache " + target.string();
  io::write_file_atomically(
      target.string(),
      [&](int fd) {
        const TokenCacheHeader header = write_tokens(fd, target, files, source_hash, warn, result);
        if (result.token_count == 0) {
          std::string list;
          for (const CorpusFile& f : files) list += (list.empty() ? "" : ", ") + f.path.string();
          throw Error("data corpus " + list,
                      "corpus is empty: no UTF-8 text in " + std::to_string(files.size()) +
                          " file(s) (" + std::to_string(result.skipped.size()) + " skipped)");
        }
        if (::pwrite(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
          fail(target, std::string("header write failed: ") + std::strerror(errno));
      },
      where);
  return result;
}

std::span<const uint8_t> TokenCache::tokens() const {
  return file->bytes().subspan(sizeof(TokenCacheHeader), header.token_count);
}

std::optional<TokenCache> open_token_cache(const fs::path& path, uint64_t source_hash,
                                           std::string* why) {
  auto reject = [&](const std::string& reason) -> std::optional<TokenCache> {
    if (why) *why = reason;
    return std::nullopt;
  };
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return reject("missing");
  auto file = std::make_shared<const MappedFile>(path);
  const std::span<const uint8_t> bytes = file->bytes();
  if (bytes.size() < sizeof(TokenCacheHeader)) {
    return reject("truncated: " + std::to_string(bytes.size()) + " bytes, less than a header");
  }
  TokenCacheHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("bad magic");
  if (h.version != kTokenCacheVersion) return reject("version " + std::to_string(h.version));
  if (h.token_bytes != 1 || h.vocab_size != ByteTokenizer::kVocabSize) {
    return reject("token width " + std::to_string(h.token_bytes) + " / vocabulary " +
                  std::to_string(h.vocab_size) + " is not the byte tokenizer's 1 / 256");
  }
  if (h.source_hash != source_hash) return reject("built from other sources");
  const uint64_t payload = bytes.size() - sizeof h;
  if (payload != h.token_count) {
    return reject("size mismatch: header says " + std::to_string(h.token_count) +
                  " tokens, file holds " + std::to_string(payload));
  }
  // One pass over the tokens: cheap next to tokenising, and it catches silent corruption.
  if (byte_checksum(bytes.subspan(sizeof h)) != h.payload_checksum) {
    return reject("checksum mismatch");
  }
  return TokenCache{std::move(file), h};
}

}  // namespace mixprec::data
