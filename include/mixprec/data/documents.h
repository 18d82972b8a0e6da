// The documents of a text corpus: a text file is one document; a JSONL file (*.jsonl, what
// Hugging Face `datasets` exports, and what torchtitan's C4 loader reads) holds one per line,
// its "text" field, ended by a newline when it has none. The token cache and `mixprec tokenizer
// train` read corpora through this.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>
#include <vector>

#include "mixprec/data/corpus.h"
#include "mixprec/data/token_cache.h"

namespace mixprec::data {

// Calls `take` with each document of each file, in order. A file that is not valid UTF-8 is
// skipped with a warning (corpus folders hold stray binaries) and returned. Errors name a file
// that cannot be read or changed size while being read, and the file and line of a JSONL line
// that is not an object with a string "text".
std::vector<std::filesystem::path> for_each_document(
    const std::vector<CorpusFile>& files, const WarningSink& warn,
    const std::function<void(std::string_view)>& take);

}  // namespace mixprec::data
