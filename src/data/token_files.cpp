#include "mixprec/data/token_files.h"

#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;

// llm.c's headers: 256 int32, then the ids.
struct LlmcFormat {
  int32_t magic, version, width;
  int64_t vocab;
  const char* name;
};
constexpr LlmcFormat kLlmcFormats[] = {
    {20240520, 1, 2, 50257, "llm.c GPT-2 uint16"},
    {20240801, 7, 4, 128256, "llm.c Llama 3 uint32"},
};
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

}  // namespace

bool is_token_file(const fs::path& path) {
  return path.extension() == ".bin";
}

TokenFile open_token_file(const fs::path& path) {
  const std::string where = "data " + path.string();
  auto file = std::make_shared<const io::RegularFile>(path, where);
  const uint64_t size = file->size();
  TokenFile out;
  out.file = file;
  int32_t head[3] = {0, 0, 0};
  if (size >= sizeof head) file->read_at(0, head, sizeof head);
  for (const LlmcFormat& f : kLlmcFormats) {
    if (head[0] != f.magic) continue;
    MIXPREC_CHECK(head[1] == f.version, where,
                  "has llm.c's magic " + std::to_string(f.magic) + " but version " +
                      std::to_string(head[1]) + " (expected " + std::to_string(f.version) + ")");
    MIXPREC_CHECK(size >= kLlmcHeaderBytes, where, "is shorter than llm.c's header");
    const uint64_t payload = size - kLlmcHeaderBytes;
    MIXPREC_CHECK(head[2] > 0 && payload == static_cast<uint64_t>(head[2]) * f.width, where,
                  "llm.c header says " + std::to_string(head[2]) + " tokens of " +
                      std::to_string(f.width) + " bytes, the file holds " +
                      std::to_string(payload) + " bytes after it (truncated or not llm.c's)");
    out.tokens = {file, kLlmcHeaderBytes, head[2], f.width};
    out.header_bytes = kLlmcHeaderBytes;
    out.format = f.name;
    out.vocab_size = f.vocab;
    return out;
  }
  MIXPREC_CHECK(size % 2 == 0 && size > 0, where,
                "holds " + std::to_string(size) +
                    " bytes: a nanoGPT token file is a non-empty run of uint16 ids (an even size)");
  out.tokens = {file, 0, static_cast<int64_t>(size / 2), 2};
  out.format = "nanoGPT uint16";
  return out;
}

std::optional<fs::path> validation_file_for(const fs::path& train) {
  const std::string name = train.filename().string();
  const std::size_t at = name.rfind("train");
  if (at == std::string::npos) return std::nullopt;
  const fs::path val = train.parent_path() / (name.substr(0, at) + "val" + name.substr(at + 5));
  std::error_code ec;
  if (!fs::is_regular_file(val, ec)) return std::nullopt;
  return val;
}

}  // namespace mixprec::data
