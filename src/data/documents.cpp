#include "mixprec/data/documents.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "../io/text_bounds.h"
#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"

namespace mixprec::data {
namespace fs = std::filesystem;
namespace {

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

// The documents of a JSONL file: each non-blank line's "text".
std::vector<std::string_view> jsonl_texts(const std::string& bytes, const fs::path& path,
                                          std::vector<std::string>& storage) {
  std::vector<std::string_view> texts;
  std::size_t line_no = 0, begin = 0;
  while (begin < bytes.size()) {
    std::size_t end = bytes.find('\n', begin);
    if (end == std::string::npos) end = bytes.size();
    ++line_no;
    const std::string_view line(bytes.data() + begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = "data " + path.string() + " line " + std::to_string(line_no);
    MIXPREC_CHECK(io::json_nesting_depth(line) <= io::kMaxNesting, where,
                  "nests deeper than " + std::to_string(io::kMaxNesting) + " levels");
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    MIXPREC_CHECK(!j.is_discarded() && j.is_object(), where, "is not a JSON object");
    MIXPREC_CHECK(j.contains("text") && j["text"].is_string(), where,
                  "has no string \"text\" field (the field Hugging Face datasets export)");
    storage.push_back(j["text"].get<std::string>());
  }
  for (const std::string& t : storage) texts.emplace_back(t);
  return texts;
}

bool is_jsonl(const fs::path& path) {
  return path.extension() == ".jsonl";
}

}  // namespace

std::vector<fs::path> for_each_document(const std::vector<CorpusFile>& files,
                                        const WarningSink& warn,
                                        const std::function<void(std::string_view)>& take) {
  std::vector<fs::path> skipped;
  for (const CorpusFile& f : files) {
    const std::string bytes = read_whole(f);
    if (const auto bad = first_invalid_utf8(bytes)) {
      skipped.push_back(f.path);
      if (warn)
        warn("data corpus " + f.path.string() + ": skipped, not valid UTF-8 (bad byte at offset " +
             std::to_string(*bad) + ")");
      continue;
    }
    if (!is_jsonl(f.path)) {
      take(bytes);
      continue;
    }
    // A JSONL document ends in a newline, so documents stay apart in a tokenizer without EOS
    // (the byte tokenizer), as separate text files usually do.
    std::vector<std::string> storage;
    for (std::string_view doc : jsonl_texts(bytes, f.path, storage)) {
      if (doc.empty() || doc.back() == '\n') {
        take(doc);
        continue;
      }
      take(std::string(doc) + "\n");
    }
  }
  return skipped;
}

}  // namespace mixprec::data
