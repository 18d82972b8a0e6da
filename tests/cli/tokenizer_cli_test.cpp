// `mixprec tokenizer train` and sentencepiece models as a user meets them: an existing model
// is not overwritten without --overwrite; data sentencepiece cannot train on (empty, one huge
// line, not UTF-8) is refused naming the file and the reason; a model whose normalization rule
// would crash libsentencepiece is refused by `train` naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_running.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::run_cli;
using testing::RunResult;
using testing::TempDir;

using testing::contains;

std::vector<std::string> train_tokenizer(const fs::path& data, const fs::path& model,
                                         std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"tokenizer", "train",        "--data",       data.string(),
                                   "-o",        model.string(), "--vocab-size", "300"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void write_corpus(const fs::path& path) {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "the quick brown fox " + std::to_string(i % 31) + " jumps\n";
  testing::write_file(path, text);
}

void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  const RunResult r = run_cli(args);
  EXPECT_NE(r.exit_code, 0) << describe(args, r);
  EXPECT_LT(r.exit_code, 128) << "a crash, not an error: " << describe(args, r);
  for (const std::string& part : parts)
    EXPECT_TRUE(contains(r.err, part)) << "expected '" << part << "'\n" << describe(args, r);
}

TEST(TokenizerCli, AnExistingModelIsReplacedOnlyWithOverwrite) {
  TempDir dir;
  write_corpus(dir / "corpus.txt");
  const fs::path model = dir / "tok.model";
  testing::write_file(model, "a model some run depends on");
  expect_refused(train_tokenizer(dir / "corpus.txt", model),
                 {"--output '" + model.string() + "' already exists", "--overwrite"});
  EXPECT_EQ(testing::read_file(model), "a model some run depends on");
  const auto args = train_tokenizer(dir / "corpus.txt", model, {"--overwrite"});
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_NE(testing::read_file(model), "a model some run depends on");
}

TEST(TokenizerCli, DataWithoutATrainableLineIsRefusedNamingFileAndReason) {
  TempDir dir;
  testing::write_file(dir / "empty.txt", "");
  expect_refused(train_tokenizer(dir / "empty.txt", dir / "a.model"),
                 {"no line of --data '" + (dir / "empty.txt").string() + "'", "holds no text"});
  testing::write_file(dir / "blank.txt", "\n\n\n");
  expect_refused(train_tokenizer(dir / "blank.txt", dir / "a.model"), {"3 empty line(s)"});
  testing::write_file(dir / "huge.txt", std::string(100000, 'x') + "\n");
  expect_refused(train_tokenizer(dir / "huge.txt", dir / "a.model"),
                 {"1 line(s) longer than sentencepiece's 4192-byte max_sentence_length",
                  (dir / "huge.txt").string() + " line 1, 100000 bytes"});
  testing::write_file(dir / "latin1.txt", "caf\xE9\nna\xEFve\n");
  expect_refused(train_tokenizer(dir / "latin1.txt", dir / "a.model"),
                 {(dir / "latin1.txt").string() + ": skipped, not valid UTF-8",
                  "(bad byte at offset 3) on line 1"});
  // A JSONL document's lines are named by the JSONL line.
  testing::write_file(dir / "c4.jsonl",
                      "{\"text\": \"\"}\n{\"text\": \"" + std::string(5000, 'y') + "\"}\n");
  expect_refused(train_tokenizer(dir / "c4.jsonl", dir / "a.model"),
                 {(dir / "c4.jsonl").string() + " line 2 (line 1 of its \"text\"), 5000 bytes"});
  EXPECT_FALSE(fs::exists(dir / "a.model"));
}

TEST(TokenizerCli, LongLinesLeftOutOfTrainingAreWarnedAbout) {
  TempDir dir;
  write_corpus(dir / "corpus.txt");
  testing::write_file(dir / "corpus.txt",
                      testing::read_file(dir / "corpus.txt") + std::string(5000, 'z') + "\n");
  const auto args = train_tokenizer(dir / "corpus.txt", dir / "a.model");
  const RunResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << describe(args, r);
  EXPECT_TRUE(contains(r.err, "left out of training: 1 line(s) longer than")) << r.err;
  EXPECT_TRUE(contains(r.err, "corpus.txt line 301, 5000 bytes")) << r.err;
}

// A length-delimited protobuf field (payloads below 128 bytes).
std::string field(int number, const std::string& payload) {
  return std::string(1, static_cast<char>(number << 3 | 2)) + static_cast<char>(payload.size()) +
         payload;
}

TEST(TokenizerCli, TrainRefusesAModelWhoseNormalizerWouldCrashTheLibrary) {
  TempDir dir;
  write_corpus(dir / "corpus.txt");
  const fs::path model = dir / "tok.model";
  const auto trained = run_cli(train_tokenizer(dir / "corpus.txt", model));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  // A second normalizer_spec, merged by protobuf: a charsmap whose root unit sends the trie
  // search 4 GB past the blob (libsentencepiece 0.1.97 died of SIGSEGV on the first text).
  std::string charsmap(4 + 8 + 1, '\0');
  charsmap[0] = 8;
  const uint32_t root = 0xFFFFFE00u;
  std::memcpy(charsmap.data() + 4, &root, 4);
  testing::write_file(model, testing::read_file(model) + field(3, field(2, charsmap)));
  const std::string config = std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml";
  expect_refused({"train", config, "--data", (dir / "corpus.txt").string(), "--run-dir",
                  (dir / "run").string(), "--steps", "1", "--progress", "quiet", "--set",
                  "model.tokenizer=\"" + model.string() + "\"", "--set", "model.vocab_size=300"},
                 {"[tokenizer " + model.string() + "] has a broken normalizer rule"});
}

}  // namespace
}  // namespace mixprec

namespace mixprec {
namespace {

const std::filesystem::path kTokenizerFixtures =
    std::filesystem::path(MIXPREC_SOURCE_DIR) / "tests/reference/fixtures/tokenizers";

testing::RunResult run_with_input(const std::vector<std::string>& args, const std::string& input) {
  testing::TempDir dir;
  testing::write_file(dir / "stdin", input);
  return testing::run_cli(args, (dir / "stdin").string());
}

TEST(TokenizerCli, EncodeThenDecodeGivesTheTextBack) {
  const std::string folder = (kTokenizerFixtures / "gpt2_style").string();
  const std::string text = "Hello, world!\n  It's 2026 -- caf\xc3\xa9 \xf0\x9f\x98\x80\n";
  const auto enc = run_with_input({"tokenizer", "encode", folder}, text);
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  ASSERT_EQ(enc.out.front(), '[');
  const auto dec = run_with_input({"tokenizer", "decode", folder}, enc.out);
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_EQ(dec.out, text);
}

TEST(TokenizerCli, AddSpecialTokensAppliesThePostProcessor) {
  const std::string folder = (kTokenizerFixtures / "wordpiece_free_metaspace").string();
  const auto plain = run_with_input({"tokenizer", "encode", folder}, "hello");
  const auto special =
      run_with_input({"tokenizer", "encode", folder, "--add-special-tokens"}, "hello");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(special.exit_code, 0) << special.err;
  EXPECT_EQ(special.out, "[1," + plain.out.substr(1));  // <s> is id 1
  const auto skipped =
      run_with_input({"tokenizer", "decode", folder, "--skip-special-tokens"}, special.out);
  EXPECT_EQ(skipped.out, "hello");
  const auto kept = run_with_input({"tokenizer", "decode", folder}, special.out);
  EXPECT_EQ(kept.out.rfind("<s>", 0), 0u) << kept.out;
}

TEST(TokenizerCli, BadIdsAndTokenizersAreRefusedNamingThem) {
  const std::string folder = (kTokenizerFixtures / "gpt2_style").string();
  auto expect = [](const testing::RunResult& r, int code, const std::string& part) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << "expected '" << part << "' in: " << r.err;
  };
  expect(run_with_input({"tokenizer", "decode", folder}, "1, 2"), 2, "not a JSON array");
  expect(run_with_input({"tokenizer", "decode", folder}, "[1, \"x\"]"), 2, "element 1");
  expect(run_with_input({"tokenizer", "decode", folder}, "[1, 99999]"), 1,
         "token 99999 at position 1");
  expect(run_with_input({"tokenizer", "encode", folder}, std::string("ok\xc3", 3)), 1,
         "not UTF-8 at byte 2");
  expect(run_with_input({"tokenizer", "encode", "/nonexistent/tokenizer.json"}, "x"), 1,
         "/nonexistent/tokenizer.json");
}

}  // namespace
}  // namespace mixprec
