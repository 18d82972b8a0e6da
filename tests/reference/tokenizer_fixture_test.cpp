// Hugging Face tokenizer.json against the `tokenizers` library itself: the ids, the ids with
// special tokens, and both decodes of 142 texts (whitespace runs, digits, contractions, emojis,
// combining marks, many scripts, special tokens inside text) for the real Llama 3, Qwen 3,
// DeepSeek-V3 and Mistral 7B files and two built with `tokenizers` (GPT-2 style byte-level, and
// Metaspace with byte fallback). Fixtures: tests/reference/make_tokenizer_fixtures.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/data/hf_tokenizer.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(MIXPREC_FIXTURE_DIR) / "tokenizers";

const json& cases() {
  static const json j = [] {
    std::ifstream in(kFixtures / "cases.json");
    return json::parse(in);
  }();
  return j;
}

// The tokenizer's committed folder (the real files are gzip'd: the library reads them so).
fs::path tokenizer_folder(const std::string& name) {
  return kFixtures / cases()["tokenizers"][name]["path"].get<std::string>();
}

const data::HfTokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<data::HfTokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = data::HfTokenizer::open(tokenizer_folder(name).string());
  return *slot;
}

class TokenizerFixture : public testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, EncodesAndDecodesAsHuggingFaceTokenizers) {
  const std::string name = GetParam();
  const json& spec = cases()["tokenizers"][name];
  const json& texts = cases()["texts"];
  const data::HfTokenizer& tok = tokenizer(name);
  EXPECT_EQ(tok.vocab_size(), spec["vocab_size"].get<int64_t>());
  auto expect_special = [&](const json& pair, std::optional<int64_t> got, const char* what) {
    if (pair.is_null()) {
      EXPECT_FALSE(got.has_value()) << what;
    } else {
      ASSERT_TRUE(got.has_value()) << what;
      EXPECT_EQ(*got, pair[1].get<int64_t>()) << what;
    }
  };
  expect_special(spec["bos"], tok.bos(), "bos");
  expect_special(spec["eos"], tok.eos(), "eos");
  int wrong = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const json& c = spec["cases"][i];
    const auto ids = tok.encode(text);
    const auto ids_special = tok.encode_with_special_tokens(text);
    const bool ok = ids == c["ids"].get<std::vector<int64_t>>() &&
                    ids_special == c["ids_special"].get<std::vector<int64_t>>() &&
                    tok.decode(ids_special, false) == c["decoded"].get<std::string>() &&
                    tok.decode(ids_special, true) == c["decoded_skip"].get<std::string>();
    if (!ok && ++wrong <= 5) {
      ADD_FAILURE() << name << " text " << i << " " << json(text).dump() << "\n  ids  "
                    << json(ids).dump() << "\n  want " << c["ids"].dump() << "\n  tokens "
                    << c["tokens"].dump() << "\n  special " << json(ids_special).dump() << " want "
                    << c["ids_special"].dump() << "\n  decoded "
                    << json(tok.decode(ids_special, false)).dump() << " want "
                    << c["decoded"].dump() << "\n  skip "
                    << json(tok.decode(ids_special, true)).dump() << " want "
                    << c["decoded_skip"].dump();
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << texts.size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(Files, TokenizerFixture,
                         testing::Values("llama3", "qwen3", "deepseek_v3", "mistral7b",
                                         "gpt2_style", "wordpiece_free_metaspace"));

}  // namespace
}  // namespace mixprec
