// What mixprec checks in a sentencepiece .model before libsentencepiece sees the bytes.
// Private to src/data.
#pragma once

#include <string>
#include <string_view>

namespace mixprec::data {

// Throws mixprec::Error naming `path` when the model is not protobuf wire format, when its
// normalizer or denormalizer rule (precompiled_charsmap) would make libsentencepiece 0.1.97
// read out of bounds, when a piece holds a NUL byte (an uncaught exception in the library), or
// when trainer_spec.model_type is not a type sentencepiece knows (the
// library would silently use unigram).
void check_sentencepiece_model(std::string_view bytes, const std::string& path);

}  // namespace mixprec::data
