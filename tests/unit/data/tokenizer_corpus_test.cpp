// The tokenizer_model and jsonl fuzz corpora as regression tests: every input kept in
// tests/fuzz/tokenizer_model and tests/fuzz/jsonl (made and kept minimal by scripts/fuzz.sh) goes
// through the reader as fuzz/tokenizer_model_fuzz.cpp and fuzz/jsonl_fuzz.cpp feed it. Each
// model opens and encodes and decodes every byte value, or is refused with a mixprec::Error
// naming it; each JSONL file gives UTF-8 documents, or is refused naming it and a line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "mixprec/data/documents.h"
#include "mixprec/data/sentencepiece_tokenizer.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files(const std::string& target) {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(MIXPREC_SOURCE_DIR) / "tests" / "fuzz" / target))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TokenizerModelCorpus, EveryModelWorksOrIsRefusedNamingIt) {
  const std::vector<fs::path> files = corpus_files("tokenizer_model");
  ASSERT_GE(files.size(), 20u);  // a missing or emptied corpus must not pass
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  int opened = 0;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const std::string source = file.string();
    std::unique_ptr<Tokenizer> tok;
    try {
      tok = sentencepiece_from_bytes(read(file), source);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
      continue;
    }
    ++opened;
    for (const std::string& text : {std::string("hello world"), all_bytes}) {
      try {
        const std::vector<int64_t> ids = tok->encode(text);
        for (const int64_t id : ids) EXPECT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
        tok->decode(ids);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
      }
    }
  }
  // The corpus keeps both kinds: models that open and ones the reader must refuse.
  EXPECT_GT(opened, 0);
  EXPECT_LT(opened, static_cast<int>(files.size()));
}

TEST(JsonlCorpus, EveryFileGivesUtf8DocumentsOrIsRefusedNamingFileAndLine) {
  const std::vector<fs::path> files = corpus_files("jsonl");
  ASSERT_GE(files.size(), 20u);
  int read_whole = 0;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const fs::path as_jsonl = file.string() + ".jsonl";  // the reader tells JSONL by its name
    try {
      if (for_each_document_in(read(file), as_jsonl, {}, [&](std::string_view doc) {
            EXPECT_FALSE(first_invalid_utf8(doc).has_value());
            EXPECT_TRUE(doc.empty() || doc.back() == '\n');
          }))
        ++read_whole;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(as_jsonl.string() + " line "), std::string::npos)
          << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a mixprec::Error: " << e.what();
    }
  }
  EXPECT_GT(read_whole, 0);
  EXPECT_LT(read_whole, static_cast<int>(files.size()));
}

}  // namespace
}  // namespace mixprec::data
