// The documents of a text corpus: a text file is one document; a JSONL file (*.jsonl, what
// Hugging Face `datasets` exports, and what torchtitan's C4 loader reads) holds one per line,
// its "text" field, ended by a newline when it has none. The token cache and `mixprec tokenizer
// train` read corpora through this.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/corpus.h"
#include "mixprec/data/token_cache.h"

namespace mixprec::data {

// Where a document comes from: a whole text file (line 0) or a line of a JSONL file.
struct DocumentPlace {
  std::filesystem::path file;
  std::size_t line = 0;
  std::string describe() const;  // "PATH" or "PATH line N"
};

// Calls `take` with each document of each file, in order. A file that is not valid UTF-8 is
// skipped with a warning (corpus folders hold stray binaries) and returned. Errors name a file
// that cannot be read or changed size while being read, and the file and line of a JSONL line
// that is not an object with a string "text".
// An error thrown by `take` is rethrown naming the file and line of the document.
std::vector<std::filesystem::path> for_each_document(
    const std::vector<CorpusFile>& files, const WarningSink& warn,
    const std::function<void(std::string_view)>& take);
// The same, each document with its place.
std::vector<std::filesystem::path> for_each_document(
    const std::vector<CorpusFile>& files, const WarningSink& warn,
    const std::function<void(std::string_view, const DocumentPlace&)>& take);

// The documents of one file's bytes (its path tells JSONL from text and names it in errors),
// as for_each_document reads each file; false when the bytes are not UTF-8 (warned, skipped).
bool for_each_document_in(std::string_view bytes, const std::filesystem::path& path,
                          const WarningSink& warn,
                          const std::function<void(std::string_view)>& take);

}  // namespace mixprec::data
