// Validation rather than containment: a broken charsmap crashes only on the texts whose bytes
// walk the broken part of the trie, so a probe in a forked child (encoding a few strings) would
// pass models that then crash on some document later, and running every encode in a child is
// far too slow. The trie is small and finite: walking all of it proves that no text can make
// the library read outside the blob.
#include "sentencepiece_model_check.h"

#include <vector>

#include "mixprec/core/error.h"
#include "precompiled_charsmap.h"
#include "protobuf_wire.h"

namespace mixprec::data {
namespace {

// Field numbers of sentencepiece_model.proto (0.1.97).
constexpr uint32_t kModelPieces = 1;            // ModelProto.pieces (repeated SentencePiece)
constexpr uint32_t kPieceText = 1;              // SentencePiece.piece
constexpr uint32_t kModelTrainerSpec = 2;       // ModelProto.trainer_spec
constexpr uint32_t kModelNormalizerSpec = 3;    // ModelProto.normalizer_spec
constexpr uint32_t kModelDenormalizerSpec = 5;  // ModelProto.denormalizer_spec
constexpr uint32_t kTrainerModelType = 3;       // TrainerSpec.model_type
constexpr uint32_t kNormalizerCharsmap = 2;     // NormalizerSpec.precompiled_charsmap
constexpr int kVarint = 0, kLengthDelimited = 2;

// A singular message field that occurs more than once is merged by protobuf: its fields are
// read as if the occurrences were one message, the last value of a singular field winning.
// A field with an unexpected wire type is an unknown field to protobuf, not this one.
void check_normalizer(const std::vector<std::string_view>& occurrences, const std::string& path,
                      const std::string& which) {
  const std::string where = "tokenizer " + path;
  std::string_view charsmap;
  for (const std::string_view spec : occurrences)
    for_each_wire_field(spec, where, [&](const WireField& f) {
      if (f.number == kNormalizerCharsmap && f.type == kLengthDelimited) charsmap = f.payload;
    });
  if (const auto fault = precompiled_charsmap_fault(charsmap))
    throw Error(where, "has a broken " + which + " rule (" + which + "_spec.precompiled_charsmap " +
                           *fault + "); libsentencepiece would read outside it");
}

// darts-clone, which the library builds its piece tries with, takes keys as C strings: a NUL
// in a piece ends in an uncaught Darts::Details::Exception ("zero-length key", "wrong key
// order"), which terminates the process. Real pieces never hold one (bytes are "<0x00>").
void check_pieces(const std::vector<std::string_view>& pieces, const std::string& path) {
  const std::string where = "tokenizer " + path;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    for_each_wire_field(pieces[i], where, [&](const WireField& f) {
      if (f.number != kPieceText || f.type != kLengthDelimited) return;
      MIXPREC_CHECK(
          f.payload.find('\0') == std::string_view::npos, where,
          "has a NUL byte in piece " + std::to_string(i) + " (libsentencepiece cannot index it)");
    });
}

void check_trainer(const std::vector<std::string_view>& occurrences, const std::string& path) {
  const std::string where = "tokenizer " + path;
  for (const std::string_view spec : occurrences)
    for_each_wire_field(spec, where, [&](const WireField& f) {
      if (f.number != kTrainerModelType || f.type != kVarint) return;
      MIXPREC_CHECK(f.varint >= 1 && f.varint <= 4, where,
                    "has trainer_spec.model_type " + std::to_string(f.varint) +
                        ", not a sentencepiece model type (1 unigram, 2 bpe, 3 word, 4 char)");
    });
}

}  // namespace

void check_sentencepiece_model(std::string_view bytes, const std::string& path) {
  std::vector<std::string_view> pieces, trainer, normalizer, denormalizer;
  for_each_wire_field(bytes, "tokenizer " + path, [&](const WireField& f) {
    if (f.type != kLengthDelimited) return;
    if (f.number == kModelPieces) pieces.push_back(f.payload);
    if (f.number == kModelTrainerSpec) trainer.push_back(f.payload);
    if (f.number == kModelNormalizerSpec) normalizer.push_back(f.payload);
    if (f.number == kModelDenormalizerSpec) denormalizer.push_back(f.payload);
  });
  check_pieces(pieces, path);
  check_trainer(trainer, path);
  check_normalizer(normalizer, path, "normalizer");
  check_normalizer(denormalizer, path, "denormalizer");
}

}  // namespace mixprec::data
