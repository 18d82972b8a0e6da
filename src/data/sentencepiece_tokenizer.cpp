// sentencepiece models: loading (the Tokenizer interface over SentencePieceProcessor) and
// training from sentences held in memory, the model written atomically by us.
#include "mixprec/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "mixprec/core/error.h"
#include "mixprec/core/hash.h"
#include "mixprec/io/atomic_file.h"
#include "sentencepiece_model_check.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxModelBytes = 1ull << 30;  // real models are a few MB

// sentencepiece encodes a text whole, holding ~225 bytes per byte of it at the peak (measured
// with 0.1.97, BPE and unigram alike: 3.6 GB for 16 MB), so a 100 MB document ended in
// std::bad_alloc. Splitting a text would not give the same ids (each piece would get its own
// dummy-prefix space, which decoding turns into text that was not there), so a longer text is
// refused instead, naming its size; 8 MiB (about 1.9 GB to encode) is a long book.
constexpr std::size_t kMaxEncodeBytes = 8u << 20;
constexpr std::size_t kEncodeBytesPerByte = 225;

class SentencepieceTokenizer final : public Tokenizer {
 public:
  SentencepieceTokenizer(const std::string& path, const std::string& bytes) : path_(path) {
    check_sentencepiece_model(bytes, path);  // before the library, which trusts the bytes
    sentencepiece::util::Status status;
    try {
      status = sp_.LoadFromSerializedProto(bytes);
    } catch (const std::exception& e) {  // darts-clone throws on keys it cannot index
      throw Error("tokenizer " + path,
                  std::string("is not a usable sentencepiece model: ") + e.what());
    }
    MIXPREC_CHECK(status.ok(), "tokenizer " + path,
                  "is not a sentencepiece model: " + std::string(status.message()));
    vocab_ = sp_.GetPieceSize();
    MIXPREC_CHECK(vocab_ > 0, "tokenizer " + path, "holds no pieces");
    id_ = "sentencepiece-" + std::to_string(fnv1a(bytes));
  }
  std::string id() const override { return id_; }
  std::string describe() const override {
    return "sentencepiece, " + std::to_string(vocab_) + " ids (" + path_ + ")";
  }
  int64_t vocab_size() const override { return vocab_; }
  std::vector<int64_t> encode(std::string_view text) const override {
    MIXPREC_CHECK(text.size() <= kMaxEncodeBytes, "tokenizer " + path_,
                  "will not encode a " + std::to_string(text.size()) +
                      "-byte text: sentencepiece holds about " +
                      std::to_string(kEncodeBytesPerByte) + " bytes per byte of it (" +
                      std::to_string(text.size() * kEncodeBytesPerByte >> 20) +
                      " MiB here); split it into documents of at most " +
                      std::to_string(kMaxEncodeBytes) + " bytes");
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    MIXPREC_CHECK(status.ok(), "tokenizer " + path_, std::string(status.message()));
    return {ids.begin(), ids.end()};
  }
  std::string decode(std::span<const int64_t> ids) const override {
    std::vector<int> narrow(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      MIXPREC_CHECK(ids[i] >= 0 && ids[i] < vocab_, "tokenizer " + path_,
                    "token " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
      narrow[i] = static_cast<int>(ids[i]);
    }
    std::string text;
    const auto status = sp_.Decode(narrow, &text);
    MIXPREC_CHECK(status.ok(), "tokenizer " + path_, std::string(status.message()));
    return text;
  }
  std::optional<int64_t> bos() const override { return id_or_none(sp_.bos_id()); }
  std::optional<int64_t> eos() const override { return id_or_none(sp_.eos_id()); }

 private:
  std::optional<int64_t> id_or_none(int id) const {
    if (id < 0 || id >= vocab_) return std::nullopt;  // disabled in this model (-1)
    return id;
  }
  std::string path_, id_;
  sentencepiece::SentencePieceProcessor sp_;
  int64_t vocab_ = 0;
};

// The training sentences: each file's lines, in order.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& files) : files_(files) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) {
        usable_ += !line_.empty() && line_.size() <= kSentencepieceMaxLineBytes &&
                   line_.find("\xE2\x96\x85") == std::string::npos;  // U+2585: reserved
        return;
      }
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_ = std::ifstream(files_[next_++], std::ios::binary);
      if (!in_) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                              "cannot read " + files_[next_ - 1]);
        done_ = true;
        return;
      }
    }
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }
  // Lines sentencepiece keeps: it drops the others silently.
  int64_t usable() const { return usable_; }

 private:
  int64_t usable_ = 0;
  const std::vector<std::string>& files_;
  std::size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

std::unique_ptr<Tokenizer> open_sentencepiece(const std::string& path) {
  std::error_code ec;
  MIXPREC_CHECK(fs::is_regular_file(path, ec), "tokenizer " + path,
                "does not exist or is not a file (model.tokenizer names a sentencepiece .model)");
  MIXPREC_CHECK(fs::file_size(path, ec) <= kMaxModelBytes, "tokenizer " + path,
                "is larger than " + std::to_string(kMaxModelBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  MIXPREC_CHECK(in.good() || in.eof(), "tokenizer " + path, "cannot be read");
  return sentencepiece_from_bytes(bytes.str(), path);
}

std::unique_ptr<Tokenizer> sentencepiece_from_bytes(const std::string& bytes,
                                                    const std::string& path) {
  return std::make_unique<SentencepieceTokenizer>(path, bytes);
}

void train_sentencepiece(const SentencepieceTraining& o) {
  const std::string where = "tokenizer train";
  MIXPREC_CHECK(o.output.ends_with(".model"), where,
                "--output '" + o.output + "' must end in .model");
  MIXPREC_CHECK(o.model_type == "bpe" || o.model_type == "unigram", where,
                "--model-type '" + o.model_type + "' is not bpe or unigram");
  MIXPREC_CHECK(o.vocab_size >= 8 && o.vocab_size <= (1 << 24), where,
                "--vocab-size " + std::to_string(o.vocab_size) + " is not in [8, 2^24]");
  MIXPREC_CHECK(!o.files.empty(), where, "no training text");
  const std::unordered_map<std::string, std::string> args{
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"character_coverage", "0.9995"},
      // Lossless: no NFKC folding, whitespace kept as written (sentencepiece's defaults
      // collapse runs of spaces, and newlines never reach it: it trains on lines).
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"max_sentence_length", std::to_string(kSentencepieceMaxLineBytes)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(std::max(1, o.threads))},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"minloglevel", "2"},  // only errors on stderr
      {"model_prefix", ""},
  };
  LineIterator lines(o.files);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok() && lines.usable() == 0) {
    std::string files;
    for (const std::string& f : o.files) files += (files.empty() ? "" : ", ") + f;
    throw Error(where, "no line of " + files + " is non-empty, at most " +
                           std::to_string(kSentencepieceMaxLineBytes) +
                           " bytes and free of U+2585 (the lines sentencepiece trains on)");
  }
  MIXPREC_CHECK(status.ok(), where, std::string(status.message()));
  io::write_file_atomically(
      o.output, [&](int fd) { io::write_all(fd, model.data(), model.size(), o.output); },
      "tokenizer " + o.output);
}

}  // namespace mixprec::data
