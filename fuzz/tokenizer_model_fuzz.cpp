// libFuzzer target for the sentencepiece model reader. An input is the bytes of a .model file,
// opened as open_sentencepiece opens one (mixprec's checks, then libsentencepiece). Every input
// must either be refused with a mixprec::Error naming the source, or give a tokenizer that
// encodes a few texts (every byte value among them) into ids inside its vocabulary and decodes
// those ids. Anything else (a crash inside the library, a sanitizer report, another exception
// type) is a bug.
//
//   build-fuzz-clang/fuzz/tokenizer_model_fuzz tests/fuzz/tokenizer_model   (scripts/fuzz.sh)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/data/sentencepiece_tokenizer.h"

namespace {

using namespace mixprec;

constexpr const char* kSource = "fuzz-input";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "tokenizer_model_fuzz: %s\n", what.c_str());
  std::abort();
}

void require_names_source(const Error& e) {
  if (std::string(e.what()).find(kSource) == std::string::npos)
    bug(std::string("error without the source: ") + e.what());
}

const std::vector<std::string>& texts() {
  static const std::vector<std::string> all = [] {
    std::string bytes;
    for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
    return std::vector<std::string>{
        "",
        "hello world",
        "  two  spaces\n\tand a tab\n",
        bytes,
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBC\xA1 \xE2\x81\x87",
        std::string(40, 'a')};
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<data::Tokenizer> tokenizer;
  try {
    tokenizer = data::sentencepiece_from_bytes(
        std::string(reinterpret_cast<const char*>(data), size), kSource);
  } catch (const Error& e) {
    require_names_source(e);
    return 0;
  }
  const int64_t vocab = tokenizer->vocab_size();
  if (vocab <= 0) bug("an opened model with no ids");
  for (const std::string& text : texts()) {
    try {
      const std::vector<int64_t> ids = tokenizer->encode(text);
      for (const int64_t id : ids)
        if (id < 0 || id >= vocab) bug("encode gave id " + std::to_string(id));
      tokenizer->decode(ids);
    } catch (const Error& e) {
      require_names_source(e);  // the library's own refusals (a status) are fine
    }
  }
  // Every id decodes alone (pieces of every type: unknown, control, byte, user-defined).
  for (int64_t id = 0; id < vocab && id < 64; ++id) {
    try {
      tokenizer->decode(std::vector<int64_t>{id});
    } catch (const Error& e) {
      require_names_source(e);
    }
  }
  return 0;
}
