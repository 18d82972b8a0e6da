// tokenizer.json by hand: the BPE merge order on words small enough to work out, added tokens,
// the post-processor's template, decode; and hostile files and inputs refused naming the file,
// the key and the value at fault (the agreement with Hugging Face `tokenizers` on real files is
// tests/reference/tokenizer_fixture_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/data/hf_tokenizer.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

// Byte-level BPE over a, b, c and the space (Ġ), merges ranked as written.
json small_tokenizer() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 9, "content": "<eos>", "special": true, "normalized": false,
                      "lstrip": false, "rstrip": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
      "special_tokens": {"<eos>": {"id": "<eos>", "ids": [9], "tokens": ["<eos>"]}}},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null,
      "vocab": {"a": 0, "b": 1, "c": 2, "\u0120": 3, "ab": 4, "bc": 5, "abc": 6, "aa": 7, "\u0120a": 8},
      "merges": ["a b", "b c", "ab c", "a a", "\u0120 a"]}
  })");
}

fs::path write(const TempDir& dir, const json& j, const std::string& name = "tokenizer.json") {
  const fs::path path = dir / name;
  testing::write_file(path, j.dump());
  return path;
}

std::vector<int64_t> ids(std::initializer_list<int64_t> l) {
  return l;
}

TEST(HfTokenizer, MergesLowestRankFirstAndLeftmostAmongEquals) {
  TempDir dir;
  const auto tok = data::HfTokenizer::open(write(dir, small_tokenizer()).string());
  EXPECT_EQ(tok->encode("abc"), ids({6}));  // a b (rank 0), then ab c (rank 2)
  EXPECT_EQ(tok->encode("bc"), ids({5}));
  EXPECT_EQ(tok->encode("aaa"), ids({7, 0}));  // the leftmost a a merges first
  EXPECT_EQ(tok->encode("cab"), ids({2, 4}));
  EXPECT_EQ(tok->encode("ab a"), ids({4, 8}));  // " a" is its own piece (GPT-2's regex)
  EXPECT_EQ(tok->vocab_size(), 10);
}

TEST(HfTokenizer, RanksFollowTheMergesOrder) {
  TempDir dir;
  json j = small_tokenizer();
  j["model"]["merges"] = {"b c", "a b", "ab c", "a a", "\u0120 a"};  // b c now wins
  const auto tok = data::HfTokenizer::open(write(dir, j).string());
  EXPECT_EQ(tok->encode("abc"), ids({0, 5}));
}

TEST(HfTokenizer, AddedTokensTemplateAndDecode) {
  TempDir dir;
  const auto tok = data::HfTokenizer::open(write(dir, small_tokenizer()).string());
  EXPECT_EQ(tok->encode("ab<eos>c"), ids({4, 9, 2}));
  EXPECT_EQ(tok->encode_with_special_tokens("ab"), ids({4, 9}));
  EXPECT_EQ(tok->decode(ids({4, 9, 8})), "ab<eos> a");
  EXPECT_EQ(tok->decode(ids({4, 9, 8}), true), "ab a");
  // No tokenizer_config.json: EOS is what the template appends.
  EXPECT_FALSE(tok->bos().has_value());
  EXPECT_EQ(tok->eos(), 9);
}

TEST(HfTokenizer, BosAndEosComeFromTokenizerConfig) {
  TempDir dir;
  write(dir, small_tokenizer());
  write(dir, json{{"bos_token", {{"content", "<eos>"}}}, {"eos_token", "abc"}},
        "tokenizer_config.json");
  const auto tok = data::HfTokenizer::open(dir.path().string());  // the folder
  EXPECT_EQ(tok->bos(), 9);
  EXPECT_EQ(tok->eos(), 6);
  EXPECT_EQ(data::encode_document(*tok, "ab"), ids({9, 4, 6}));
}

TEST(HfTokenizer, OpenTokenizerTellsTheKindsApart) {
  TempDir dir;
  write(dir, small_tokenizer(), "my.json");
  EXPECT_NE(data::open_tokenizer((dir / "my.json").string())->describe().find("tokenizer.json BPE"),
            std::string::npos);
  fs::create_directories(dir / "empty");
  try {
    data::open_tokenizer((dir / "empty").string());
    FAIL() << "an empty folder was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither tokenizer.json nor tokenizer.model"),
              std::string::npos)
        << e.what();
  }
}

struct Hostile {
  std::string name;
  std::function<void(json&)> edit;
  std::vector<std::string> message;  // parts the error must hold
};

class HfTokenizerHostile : public ::testing::TestWithParam<Hostile> {};

TEST_P(HfTokenizerHostile, IsRefusedNamingTheKey) {
  TempDir dir;
  json j = small_tokenizer();
  GetParam().edit(j);
  const fs::path path = write(dir, j);
  try {
    data::HfTokenizer::open(path.string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    for (const std::string& part : GetParam().message)
      EXPECT_NE(what.find(part), std::string::npos) << "expected '" << part << "' in: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, HfTokenizerHostile,
    ::testing::Values(
        Hostile{"WordPiece",
                [](json& j) { j["model"]["type"] = "WordPiece"; },
                {"model.type", "WordPiece"}},
        Hostile{"MergeOutsideVocab",
                [](json& j) { j["model"]["merges"][1] = "b z"; },
                {"model.merges[1]", "'z' is not in model.vocab"}},
        Hostile{"MergedTokenOutsideVocab",
                [](json& j) { j["model"]["merges"][1] = "c a"; },
                {"model.merges[1]", "'ca'"}},
        Hostile{"MergeWithoutSpace",
                [](json& j) { j["model"]["merges"][0] = "ab"; },
                {"model.merges[0]", "two tokens"}},
        Hostile{"NegativeId",
                [](json& j) { j["model"]["vocab"]["a"] = -1; },
                {"model.vocab['a']", "-1"}},
        Hostile{"HugeId",
                [](json& j) { j["model"]["vocab"]["a"] = 4000000000; },
                {"model.vocab['a']", "above"}},
        Hostile{"IdNotANumber",
                [](json& j) { j["model"]["vocab"]["a"] = "0"; },
                {"model.vocab['a']", "not an integer"}},
        Hostile{"BadRegex",
                [](json& j) {
                  j["pre_tokenizer"] = {{"type", "Split"},
                                        {"pattern", {{"Regex", "(\\p{L}"}}},
                                        {"behavior", "Isolated"}};
                },
                {"pre_tokenizer.pattern.Regex", "does not compile"}},
        Hostile{"BadBehavior",
                [](json& j) {
                  j["pre_tokenizer"] = {
                      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
                },
                {"pre_tokenizer.behavior", "Sideways"}},
        Hostile{"UnknownNormalizer",
                [](json& j) {
                  j["normalizer"] = {{"type", "Precompiled"}};
                },
                {"normalizer.type", "Precompiled"}},
        Hostile{"UnknownDecoder",
                [](json& j) {
                  j["decoder"] = {{"type", "WordPiece"}};
                },
                {"decoder.type", "WordPiece"}},
        Hostile{"Dropout",
                [](json& j) { j["model"]["dropout"] = 0.1; },
                {"model.dropout", "deterministically"}},
        Hostile{"TemplateWithoutText",
                [](json& j) { j["post_processor"]["single"].erase(0); },
                {"post_processor.single", "no Sequence"}},
        Hostile{"TemplateUnknownSpecial",
                [](json& j) { j["post_processor"]["single"][1]["SpecialToken"]["id"] = "<bos>"; },
                {"post_processor.single[1].SpecialToken.id", "'<bos>'"}},
        Hostile{"AddedTokenWithoutId",
                [](json& j) { j["added_tokens"][0].erase("id"); },
                {"added_tokens[0]", "'id'"}},
        Hostile{"NoModel", [](json& j) { j.erase("model"); }, {"the top level", "'model'"}},
        Hostile{"VocabIsAList",
                [](json& j) { j["model"]["vocab"] = json::array(); },
                {"model.vocab", "not an object"}}),
    [](const auto& info) { return info.param.name; });

TEST(HfTokenizer, BadFilesAndInputsAreRefusedNamingThem) {
  TempDir dir;
  auto expect = [](const std::function<void()>& f, const std::vector<std::string>& parts) {
    try {
      f();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "expected '" << part << "' in: " << e.what();
    }
  };
  testing::write_file(dir / "truncated.json", small_tokenizer().dump().substr(0, 200));
  expect([&] { data::HfTokenizer::open((dir / "truncated.json").string()); },
         {"truncated.json", "not valid JSON"});
  testing::write_file(dir / "deep.json", std::string(100000, '[') + std::string(100000, ']'));
  expect([&] { data::HfTokenizer::open((dir / "deep.json").string()); },
         {"deep.json", "nests deeper"});
  expect([&] { data::HfTokenizer::open((dir / "missing.json").string()); }, {"missing.json"});

  const auto tok = data::HfTokenizer::open(write(dir, small_tokenizer()).string());
  expect([&] { tok->encode(std::string("ab\xff", 3)); }, {"not UTF-8 at byte 2"});
  expect([&] { tok->decode(ids({4, 10})); }, {"token 10 at position 1", "not in the vocabulary"});
  expect([&] { tok->decode(ids({-3})); }, {"token -3 at position 0"});

  write(dir, small_tokenizer());
  write(dir, json{{"bos_token", "<s>"}}, "tokenizer_config.json");
  expect([&] { data::HfTokenizer::open(dir.path().string()); },
         {"tokenizer_config.json", "bos_token", "'<s>'"});
}

// A megabyte of whitespace or of one letter is encoded in linear time (the regexes and the
// merge queue do not go quadratic): the test would time out otherwise.
TEST(HfTokenizer, LongRunsEncode) {
  TempDir dir;
  const auto tok = data::HfTokenizer::open(write(dir, small_tokenizer()).string());
  EXPECT_EQ(tok->encode(std::string(1 << 20, ' ')).size(), std::size_t{1} << 20);
  EXPECT_EQ(tok->encode(std::string(1 << 20, 'a')).size(), std::size_t{1} << 19);
  EXPECT_EQ(tok->decode(tok->encode("abc aab  cab ")), "abc aab  cab ");
}

// Without a pre-tokenizer (Mistral's kind) a document is one BPE piece: one past 32 MiB is
// refused by size, naming the limit, instead of taking gigabytes.
TEST(HfTokenizer, AnUncutPieceTooLongIsRefused) {
  TempDir dir;
  json j = small_tokenizer();
  j["pre_tokenizer"] = nullptr;
  const auto tok = data::HfTokenizer::open(write(dir, j).string());
  EXPECT_EQ(tok->encode(std::string(1 << 20, 'a')).size(), std::size_t{1} << 19);
  try {
    tok->encode(std::string((32u << 20) + 1, 'a'));
    FAIL() << "encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 32 MiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
