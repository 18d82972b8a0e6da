// The checks mixprec runs on a sentencepiece .model before libsentencepiece sees it: a broken
// normalizer or denormalizer rule (precompiled_charsmap), on which libsentencepiece 0.1.97
// reads out of bounds and crashes, and an unknown model_type, which it reads as unigram.
#include <sentencepiece_trainer.h>

#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/protobuf_wire.h"
#include "data_testing.h"
#include "mixprec/data/sentencepiece_tokenizer.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using mixprec::testing::error_of;

class Lines final : public sentencepiece::SentenceIterator {
 public:
  Lines() {
    for (int i = 0; i < 200; ++i)
      lines_.push_back("the quick brown fox " + std::to_string(i % 23) +
                       " jumps over the lazy dog \xEF\xBC\xA1\xEF\xBC\xA2 caf\xC3\xA9");
  }
  bool done() const override { return at_ >= lines_.size(); }
  void Next() override { ++at_; }
  const std::string& value() const override { return lines_[at_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  std::size_t at_ = 0;
};

// A model with sentencepiece's own NFKC rule (a 240 KB charsmap), as many published models
// have; mixprec's `tokenizer train` writes identity models, which hold none.
const std::string& nfkc_model() {
  static const std::string model = [] {
    Lines lines;
    std::string bytes;
    const auto status =
        sentencepiece::SentencePieceTrainer::Train({{"model_type", "bpe"},
                                                    {"vocab_size", "320"},
                                                    {"normalization_rule_name", "nmt_nfkc"},
                                                    {"byte_fallback", "true"},
                                                    {"minloglevel", "2"},
                                                    {"num_threads", "1"},
                                                    {"model_prefix", ""}},
                                                   &lines, &bytes);
    EXPECT_TRUE(status.ok()) << status.message();
    return bytes;
  }();
  return model;
}

// Where the normalizer's charsmap lies in the model's bytes (ModelProto field 3, then
// NormalizerSpec field 2).
std::pair<std::size_t, std::size_t> charsmap_span(const std::string& model) {
  std::pair<std::size_t, std::size_t> span{0, 0};
  for_each_wire_field(model, "test", [&](const WireField& spec) {
    if (spec.number != 3 || spec.type != 2) return;
    for_each_wire_field(spec.payload, "test", [&](const WireField& f) {
      if (f.number == 2 && f.type == 2)
        span = {static_cast<std::size_t>(f.payload.data() - model.data()), f.payload.size()};
    });
  });
  return span;
}

// A length-delimited protobuf field (lengths below 2^14 here).
std::string field(int number, const std::string& payload) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  std::size_t n = payload.size();
  do {
    out += static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>= 7;
  } while (n > 0);
  return out + payload;
}

// Opens the model and encodes and decodes texts with every byte value: the texts a broken
// charsmap crashes on.
void use(const std::string& model, const std::string& path) {
  const auto tok = sentencepiece_from_bytes(model, path);
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  for (const std::string& text : {std::string("\xEF\xBC\xA1 fox caf\xC3\xA9"), all_bytes}) {
    try {
      tok->decode(tok->encode(text));
    } catch (const Error&) {
      // the library refusing a text is not what this is about
    }
  }
}

TEST(SentencepieceModelCheck, AnNfkcModelPassesAndNormalizes) {
  const std::string& model = nfkc_model();
  ASSERT_GT(charsmap_span(model).second, 100000u);  // sentencepiece's real NFKC trie
  const auto tok = sentencepiece_from_bytes(model, "nfkc.model");
  EXPECT_EQ(tok->decode(tok->encode("\xEF\xBC\xA1\xEF\xBC\xA2 fox")), "AB fox");  // fullwidth
  EXPECT_NO_THROW(use(model, "nfkc.model"));
  // The same rule as the denormalizer too.
  const auto [at, size] = charsmap_span(model);
  EXPECT_NO_THROW(use(model + field(5, field(2, model.substr(at, size))), "nfkc.model"));
}

TEST(SentencepieceModelCheck, BrokenCharsmapsAreRefusedNamingFileAndSpec) {
  const std::string& model = nfkc_model();
  const auto [at, size] = charsmap_span(model);
  const auto refusal = [](const std::string& bytes) {
    return error_of([&] { sentencepiece_from_bytes(bytes, "dir/broken.model"); });
  };
  // The root unit's offset sends the search far outside the trie.
  std::string bad = model;
  bad[at + 4 + 1] = bad[at + 4 + 2] = bad[at + 4 + 3] = '\x7f';
  std::string e = refusal(bad);
  EXPECT_NE(e.find("dir/broken.model"), std::string::npos) << e;
  EXPECT_NE(e.find("broken normalizer rule"), std::string::npos) << e;
  EXPECT_NE(e.find("outside the trie"), std::string::npos) << e;
  // A trie size past the blob (the library's own check is off by the 4-byte header).
  bad = model;
  const auto declared = static_cast<uint32_t>(size - 1);
  std::memcpy(bad.data() + at, &declared, 4);
  e = refusal(bad);
  EXPECT_NE(e.find("byte trie in a " + std::to_string(size) + "-byte blob"), std::string::npos)
      << e;
  // The denormalizer (ModelProto field 5), named as such.
  std::string charsmap = model.substr(at, size);
  charsmap[4 + 3] = '\x7f';
  e = refusal(model + field(5, field(2, charsmap)));
  EXPECT_NE(e.find("broken denormalizer rule (denormalizer_spec.precompiled_charsmap"),
            std::string::npos)
      << e;
  // Strings without their NUL: the leaf's string would run past the blob.
  e = refusal(model + field(5, field(2, model.substr(at, size - 1) + "x")));
  EXPECT_NE(e.find("past their last NUL"), std::string::npos) << e;
}

// Flipped bytes in a real trie: each model is refused naming the rule, or is sound, and then
// encodes every byte value without crashing (before the check, most of these crashed).
TEST(SentencepieceModelCheck, FlippedCharsmapBytesAreRefusedOrHarmless) {
  const std::string& model = nfkc_model();
  const auto [at, size] = charsmap_span(model);
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, model.data() + at, 4);
  std::mt19937 random(31);
  int refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::string bad = model;
    // The root block of units (the ones every text walks) and random ones.
    for (int flips = 0; flips < 3; ++flips) {
      const std::size_t unit = trial % 2 == 0 ? random() % 256 : random() % (trie_bytes / 4);
      bad[at + 4 + 4 * unit + random() % 4] ^= static_cast<char>(1 << (random() % 8));
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    try {
      use(bad, "flipped.model");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("flipped.model] has a broken normalizer rule"),
                std::string::npos)
          << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 10);
}

TEST(SentencepieceModelCheck, UnknownModelTypeIsRefusedNamingValueAndFile) {
  // A second trainer_spec is merged into the first by protobuf: model_type 99 (field 3).
  const std::string e = error_of(
      [&] { sentencepiece_from_bytes(nfkc_model() + field(2, "\x18\x63"), "dir/odd.model"); });
  EXPECT_NE(e.find("[tokenizer dir/odd.model] has trainer_spec.model_type 99"), std::string::npos)
      << e;
  // The four types sentencepiece knows still open (char: 4).
  EXPECT_NO_THROW(sentencepiece_from_bytes(nfkc_model() + field(2, "\x18\x04"), "char.model"));
}

// darts-clone takes pieces as C strings: a NUL in one threw an uncaught exception from the
// library (found by tokenizer_model_fuzz), which ended the process.
TEST(SentencepieceModelCheck, APieceHoldingNulIsRefused) {
  const std::string piece = field(1, std::string("x\0y", 3)) + std::string("\x15\0\0\0\0", 5);
  const std::string e =
      error_of([&] { sentencepiece_from_bytes(nfkc_model() + field(1, piece), "nul.model"); });
  EXPECT_NE(e.find("[tokenizer nul.model] has a NUL byte in piece 320"), std::string::npos) << e;
}

TEST(SentencepieceModelCheck, BytesThatAreNotProtobufAreRefused) {
  for (const std::string& junk : {std::string("\x1a\x05zz"), std::string("\x00\x01", 2),
                                  std::string("\x0b\x0c"), std::string("\x08\xff\xff")}) {
    const std::string e = error_of([&] { sentencepiece_from_bytes(junk, "junk.model"); });
    EXPECT_NE(e.find("[tokenizer junk.model] is not a sentencepiece model"), std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace mixprec::data
