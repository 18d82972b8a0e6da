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

// Each non-blank line's "text" of a JSONL file, with its line number, one at a time: a
// corpus holds one copy of the file and one of the document being taken.
void for_each_jsonl_text(std::string_view bytes, const fs::path& path,
                         const std::function<void(std::string, std::size_t)>& take) {
  std::size_t line_no = 0, begin = 0;
  while (begin < bytes.size()) {
    std::size_t end = bytes.find('\n', begin);
    if (end == std::string_view::npos) end = bytes.size();
    ++line_no;
    const std::string_view line = bytes.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = "data " + path.string() + " line " + std::to_string(line_no);
    MIXPREC_CHECK(io::json_nesting_depth(line) <= io::kMaxNesting, where,
                  "nests deeper than " + std::to_string(io::kMaxNesting) + " levels");
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    MIXPREC_CHECK(!j.is_discarded() && j.is_object(), where, "is not a JSON object");
    const auto text = j.find("text");
    MIXPREC_CHECK(text != j.end() && text->is_string(), where,
                  "has no string \"text\" field (the field Hugging Face datasets export)");
    std::string document = std::move(text->get_ref<std::string&>());
    j = nullptr;  // the rest of the line's values, before the document is tokenized
    take(std::move(document), line_no);
  }
}

// 1-based line of byte `offset`.
std::size_t line_of(std::string_view bytes, std::size_t offset) {
  std::size_t lines = 1;
  for (std::size_t i = 0; i < offset && i < bytes.size(); ++i) lines += bytes[i] == '\n';
  return lines;
}

bool is_jsonl(const fs::path& path) {
  return path.extension() == ".jsonl";
}

bool for_each_placed_document(
    std::string_view bytes, const fs::path& path, const WarningSink& warn,
    const std::function<void(std::string_view, const DocumentPlace&)>& take) {
  if (const auto bad = first_invalid_utf8(bytes)) {
    if (warn)
      warn("data corpus " + path.string() + ": skipped, not valid UTF-8 (bad byte at offset " +
           std::to_string(*bad) + ") on line " + std::to_string(line_of(bytes, *bad)));
    return false;
  }
  // An error while a document is taken (the tokenizer refusing it) names where it came from.
  const auto take_from = [&](std::string_view doc, const DocumentPlace& place) {
    try {
      take(doc, place);
    } catch (const Error& e) {
      throw Error(
          "data " + place.describe() + " (a " + std::to_string(doc.size()) + "-byte document)",
          e.what());
    }
  };
  if (!is_jsonl(path)) {
    take_from(bytes, {path, 0});
    return true;
  }
  // A JSONL document ends in a newline, so documents stay apart in a tokenizer without EOS
  // (the byte tokenizer), as separate text files usually do.
  for_each_jsonl_text(bytes, path, [&](std::string text, std::size_t line_no) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    take_from(text, {path, line_no});
  });
  return true;
}

}  // namespace

std::string DocumentPlace::describe() const {
  return line == 0 ? file.string() : file.string() + " line " + std::to_string(line);
}

bool for_each_document_in(std::string_view bytes, const fs::path& path, const WarningSink& warn,
                          const std::function<void(std::string_view)>& take) {
  return for_each_placed_document(bytes, path, warn,
                                  [&](std::string_view doc, const DocumentPlace&) { take(doc); });
}

std::vector<fs::path> for_each_document(
    const std::vector<CorpusFile>& files, const WarningSink& warn,
    const std::function<void(std::string_view, const DocumentPlace&)>& take) {
  std::vector<fs::path> skipped;
  for (const CorpusFile& f : files)
    if (!for_each_placed_document(read_whole(f), f.path, warn, take)) skipped.push_back(f.path);
  return skipped;
}

std::vector<fs::path> for_each_document(const std::vector<CorpusFile>& files,
                                        const WarningSink& warn,
                                        const std::function<void(std::string_view)>& take) {
  return for_each_document(files, warn,
                           [&](std::string_view doc, const DocumentPlace&) { take(doc); });
}

}  // namespace mixprec::data
