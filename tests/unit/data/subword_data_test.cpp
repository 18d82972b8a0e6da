// JSONL corpora (a document per line's "text"), sentencepiece models trained and loaded, and
// the token cache with a subword tokenizer: BOS and EOS around each document, 2-byte ids, a
// rebuild when the tokenizer changes, refusals naming the file and line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data_testing.h"
#include "mixprec/data/documents.h"
#include "mixprec/data/sentencepiece_tokenizer.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using namespace testing;
using mixprec::testing::error_of;

std::vector<std::string> documents_of(const fs::path& path) {
  std::vector<std::string> docs;
  for_each_document(list_corpus_files({{path}, {}}), {},
                    [&](std::string_view d) { docs.emplace_back(d); });
  return docs;
}

TEST(Jsonl, EachLinesTextIsADocument) {
  TempDir dir;
  write_file(dir / "c4.jsonl",
             "{\"text\": \"first doc\\nwith two lines\", \"url\": \"x\"}\n"
             "\n"
             "{\"timestamp\": 1, \"text\": \"caf\\u00e9\"}\r\n"
             "{\"text\": \"\"}");
  EXPECT_EQ(documents_of(dir / "c4.jsonl"),
            (std::vector<std::string>{"first doc\nwith two lines\n", "caf\xC3\xA9\n", ""}));
  // A plain file is one document, JSON or not.
  write_file(dir / "notes.txt", "{\"text\": \"kept as written\"}\n");
  EXPECT_EQ(documents_of(dir / "notes.txt"),
            (std::vector<std::string>{"{\"text\": \"kept as written\"}\n"}));
}

TEST(Jsonl, BadLinesAreRefusedNamingFileAndLine) {
  TempDir dir;
  const auto error = [&](const std::string& body) {
    write_file(dir / "bad.jsonl", body);
    return error_of([&] { documents_of(dir / "bad.jsonl"); });
  };
  std::string e = error("{\"text\": \"ok\"}\n{\"text\": 3}\n");
  EXPECT_NE(e.find("bad.jsonl line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("string \"text\""), std::string::npos) << e;
  e = error("{\"text\": \"ok\"}\n\n{\"text\": \"unterminated}\n");
  EXPECT_NE(e.find("bad.jsonl line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;
  e = error("[1, 2]\n");
  EXPECT_NE(e.find("line 1] is not a JSON object"), std::string::npos) << e;
  e = error(std::string(10000, '[') + "\n");
  EXPECT_NE(e.find("nests deeper"), std::string::npos) << e;
}

// A small corpus and a model trained on it, shared by the tests below.
class Sentencepiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "the quick brown fox " + std::to_string(i % 37) + " jumps over the lazy dog\n";
    write_file(*dir_ / "corpus.txt", text);
    SentencepieceTraining o;
    o.files = {(*dir_ / "corpus.txt").string()};
    o.output = (*dir_ / "tok.model").string();
    o.vocab_size = 300;
    train_sentencepiece(o);
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path model() { return *dir_ / "tok.model"; }
  static TempDir* dir_;
};
TempDir* Sentencepiece::dir_ = nullptr;

TEST_F(Sentencepiece, TrainsAModelThatRoundTripsText) {
  const auto tok = open_tokenizer(model().string());
  EXPECT_EQ(tok->vocab_size(), 300);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  const std::string text = "the lazy fox 12 jumps";
  const std::vector<int64_t> ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size());  // pieces, not bytes
  EXPECT_EQ(tok->decode(ids), text);
  // Lossless: newlines, runs of spaces, leading and trailing blanks and tabs come back.
  const std::string layout = "  dog\n    indented  line 0\n\n\tthe end  ";
  EXPECT_EQ(tok->decode(tok->encode(layout)), layout);
  // Byte fallback: text no piece covers still round-trips.
  const std::string odd = "\xE2\x82\xAC zebra \xF0\x9F\x98\x80";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);
  EXPECT_NE(error_of([&] {
              tok->decode(std::vector<int64_t>{5, 300});
            }).find("300"),
            std::string::npos);
  EXPECT_NE(tok->id(), open_tokenizer("")->id());
}

TEST_F(Sentencepiece, BadModelFilesAndOptionsAreRefused) {
  TempDir dir;
  write_file(dir / "junk.model", "not a protobuf at all");
  std::string e = error_of([&] { open_tokenizer((dir / "junk.model").string()); });
  EXPECT_NE(e.find("junk.model"), std::string::npos) << e;
  EXPECT_NE(e.find("is not a sentencepiece model"), std::string::npos) << e;
  e = error_of([&] { open_tokenizer((dir / "missing.model").string()); });
  EXPECT_NE(e.find("missing.model"), std::string::npos) << e;
  SentencepieceTraining o;
  o.files = {(*dir_ / "corpus.txt").string()};
  o.output = (dir / "tok.txt").string();
  EXPECT_NE(error_of([&] { train_sentencepiece(o); }).find("must end in .model"),
            std::string::npos);
  o.output = (dir / "big.model").string();
  o.vocab_size = 100000;  // more pieces than the corpus has
  EXPECT_THROW(train_sentencepiece(o), Error);
  EXPECT_FALSE(fs::exists(dir / "big.model"));  // nothing half-written
}

TEST_F(Sentencepiece, CacheHoldsBosAndEosAroundEachDocumentIn2Bytes) {
  TempDir dir;
  write_file(dir / "docs.jsonl", "{\"text\": \"the quick fox\"}\n{\"text\": \"the lazy dog\"}\n");
  const auto tok = open_tokenizer(model().string());
  std::vector<std::string> w;
  DatasetOptions o = options_for(dir / "docs.jsonl", dir / "run", w, 0.0);
  o.tokenizer = tok.get();
  const TokenDataset ds = TokenDataset::open(o);
  std::vector<int64_t> expect = encode_document(*tok, "the quick fox\n");
  const std::vector<int64_t> second = encode_document(*tok, "the lazy dog\n");
  expect.insert(expect.end(), second.begin(), second.end());
  std::vector<int64_t> got;
  for (int64_t i = 0; i < ds.train().size(); ++i) got.push_back(ds.train().tokens[i]);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(got.front(), 1);
  EXPECT_EQ(got.back(), 2);
  EXPECT_EQ(ds.train().tokens.width(), 2);  // 300 ids do not fit a byte
  EXPECT_EQ(ds.vocab_size(), 300);
  // The byte tokenizer on the same files: another cache, the text's bytes.
  DatasetOptions b = options_for(dir / "docs.jsonl", dir / "run", w, 0.0);
  const TokenDataset bytes = TokenDataset::open(b);
  EXPECT_NE(bytes.cache_path(), ds.cache_path());
  EXPECT_EQ(as_string(bytes), "the quick fox\nthe lazy dog\n");
  EXPECT_TRUE(TokenDataset::open(o).cache_path() == ds.cache_path());
}

// sentencepiece's own "[!sentences_.empty()]" named nothing: the files and what it trains on.
TEST(SentencepieceTraining, NoTrainableLineIsRefusedNamingTheFiles) {
  TempDir dir;
  write_file(dir / "empty.txt", "");
  write_file(dir / "long.txt", "\n" + std::string(5000, 'x') + "\n\n");
  SentencepieceTraining o;
  o.files = {(dir / "empty.txt").string(), (dir / "long.txt").string()};
  o.output = (dir / "a.model").string();
  o.vocab_size = 300;
  const std::string e = error_of([&] { train_sentencepiece(o); });
  EXPECT_NE(e.find("no line of " + o.files[0] + ", " + o.files[1] + " is non-empty, at most 4192"),
            std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(dir / "a.model"));
}

// sentencepiece holds ~225 bytes per byte of a text it encodes: a 100 MB document ended in
// std::bad_alloc. Longer than 8 MiB is refused naming the file, the line and the size; the
// cache is not written.
TEST_F(Sentencepiece, ADocumentTooLongToEncodeIsRefusedNamingFileLineAndSize) {
  TempDir dir;
  const std::string text(9u << 20, 'a');
  write_file(dir / "big.jsonl", "{\"text\": \"short\"}\n{\"text\": \"" + text + "\"}\n");
  const auto tok = open_tokenizer(model().string());
  std::vector<std::string> w;
  DatasetOptions o = options_for(dir / "big.jsonl", dir / "run", w, 0.0);
  o.tokenizer = tok.get();
  const std::string e = error_of([&] { TokenDataset::open(o); });
  const std::string size = std::to_string(text.size() + 1);  // and its newline
  EXPECT_NE(e.find("big.jsonl line 2 (a " + size + "-byte document)"), std::string::npos) << e;
  EXPECT_NE(e.find("tok.model] will not encode a " + size + "-byte text"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 8388608 bytes"), std::string::npos) << e;
  // A text file is one document.
  write_file(dir / "big.txt", text);
  o = options_for(dir / "big.txt", dir / "run2", w, 0.0);
  o.tokenizer = tok.get();
  const std::string t = error_of([&] { TokenDataset::open(o); });
  EXPECT_NE(t.find("big.txt (a " + std::to_string(text.size()) + "-byte document)"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace mixprec::data
