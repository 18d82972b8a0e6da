// Writes the tokenizer_model_fuzz seeds into the folder given: small sentencepiece models of
// every type, trained by libsentencepiece, with and without byte fallback, and with custom
// normalizer and denormalizer rules (a few rules compile to a charsmap of a few KB, which fits
// in the fuzzer's FUZZ_MAX_LEN; the built-in NFKC one is 240 KB).
//
//   build-fuzz-clang/fuzz/write_tokenizer_seeds DIR   (scripts/fuzz.sh tokenizer_model runs it)
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

namespace fs = std::filesystem;

class Lines final : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  bool done() const override { return at_ >= lines_.size(); }
  void Next() override { ++at_; }
  const std::string& value() const override { return lines_[at_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  std::size_t at_ = 0;
};

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  for (int i = 0; i < 60; ++i)
    lines.push_back("the quick brown fox " + std::to_string(i % 7) +
                    " jumps over the lazy dog caf\xC3\xA9 \xEF\xBC\xA1");
  return lines;
}

bool train(const fs::path& out, std::unordered_map<std::string, std::string> args) {
  args.emplace("minloglevel", "2");
  args.emplace("num_threads", "1");
  args.emplace("model_prefix", "");
  Lines lines(corpus());
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok()) {
    std::fprintf(stderr, "write_tokenizer_seeds: %s: %s\n", out.c_str(), status.message());
    return false;
  }
  std::ofstream(out, std::ios::binary) << model;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tokenizer_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  // Rules as sentencepiece's TSV: source code points, a tab, target code points.
  const fs::path rules = dir / "rules.tsv", unrules = dir / "unrules.tsv";
  std::ofstream(rules) << "41\t61\n42\t62\nFF21\t41\n3000\t20\n41 42\t63\n";
  std::ofstream(unrules) << "61\t41\n2581\t20\n";
  bool ok = true;
  const std::vector<std::string> types{"bpe", "unigram", "word", "char"};
  for (const std::string& type : types)
    ok &= train(dir / (type + ".model"), {{"model_type", type},
                                          {"vocab_size", type == "char" ? "30" : "60"},
                                          {"normalization_rule_name", "identity"},
                                          {"hard_vocab_limit", "false"}});
  ok &= train(dir / "bytes.model", {{"model_type", "bpe"},
                                    {"vocab_size", "300"},
                                    {"byte_fallback", "true"},
                                    {"normalization_rule_name", "identity"},
                                    {"remove_extra_whitespaces", "false"},
                                    {"allow_whitespace_only_pieces", "true"},
                                    {"user_defined_symbols", "<sep>,@@"}});
  ok &= train(dir / "rules.model", {{"model_type", "unigram"},
                                    {"vocab_size", "60"},
                                    {"hard_vocab_limit", "false"},
                                    {"normalization_rule_tsv", rules.string()},
                                    {"denormalization_rule_tsv", unrules.string()}});
  fs::remove(rules);
  fs::remove(unrules);
  return ok ? 0 : 1;
}
