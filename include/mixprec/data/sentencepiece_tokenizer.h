// Subword tokenizers through Google's sentencepiece (Debian's libsentencepiece-dev): loading a
// .model file (ours, or the ones Llama-2- and Mistral-family checkpoints ship) and training
// one on a corpus (`mixprec tokenizer train`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/data/tokenizer.h"

namespace mixprec::data {

// Errors name the path when it cannot be read or does not hold a sentencepiece model.
std::unique_ptr<Tokenizer> open_sentencepiece(const std::string& path);
// The model held in `bytes` (what open_sentencepiece reads from `path`, which errors name).
std::unique_ptr<Tokenizer> sentencepiece_from_bytes(const std::string& bytes,
                                                    const std::string& path);

// Training lines longer than this are dropped by sentencepiece (its max_sentence_length, passed
// explicitly so that `tokenizer train` can say which lines it left out).
inline constexpr int64_t kSentencepieceMaxLineBytes = 4192;

struct SentencepieceTraining {
  std::vector<std::string> files;  // plain-text files, one sentence per line as sentencepiece reads
  std::string output;              // the model to write: PATH.model (and PATH.vocab beside it)
  int64_t vocab_size = 4096;
  std::string model_type = "bpe";  // bpe | unigram
  // Byte fallback (Llama's choice): text outside the pieces (newlines too) becomes <0xNN>
  // byte pieces; with the identity normalization and whitespace kept as written, every input
  // decodes back to itself.
  bool byte_fallback = true;
  int64_t max_sentences = 2'000'000;  // sentencepiece's input_sentence_size: a sample of lines
  int threads = 2;
};

// Trains and writes the model (bos 1, eos 2, unk 0, pad none, as Llama's). Errors name the
// option or file at fault; a failed training leaves no model file.
void train_sentencepiece(const SentencepieceTraining& options);

}  // namespace mixprec::data
