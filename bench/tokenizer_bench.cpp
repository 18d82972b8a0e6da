// Times mixprec's tokenizer.json encoding of one text file, as bench/tokenizer_bench.py runs it
// beside Hugging Face `tokenizers` (that script prints the table).
//
//   bench_tokenizer TOKENIZER TEXT [--lines] [--rounds N] [--dump]
//
// Prints one JSON line: the seconds of each round (loading excluded), the token count and a
// hash of the ids (the driver compares it with `tokenizers`' ids). --lines encodes each line
// as its own text (a corpus of short documents) instead of the whole file as one. --dump prints
// the ids of each text instead, one JSON array a line (for finding a text both disagree on).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/core/hash.h"
#include "mixprec/data/hf_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER TEXT [--lines] [--rounds N]\n");
    return 2;
  }
  bool lines = false, dump = false;
  int rounds = 3;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--lines") == 0)
      lines = true;
    else if (std::strcmp(argv[i], "--dump") == 0)
      dump = true;
    else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
  }
  const auto tokenizer = mixprec::data::HfTokenizer::open(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<std::string_view> texts;
  if (lines) {
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = text.find('\n', at);
      const std::size_t stop = end == std::string::npos ? text.size() : end + 1;
      texts.push_back(std::string_view(text).substr(at, stop - at));
      at = stop;
    }
  } else {
    texts.push_back(text);
  }
  if (dump) {
    for (const std::string_view t : texts) {
      std::string line = "[";
      for (const int64_t id : tokenizer->encode(t)) {
        if (line.size() > 1) line += ',';
        line += std::to_string(id);
      }
      std::printf("%s]\n", line.c_str());
    }
    return 0;
  }
  // Only the encoding is timed; the ids are hashed afterwards (the hash is the driver's check).
  std::vector<double> seconds;
  std::vector<std::vector<int64_t>> encoded(texts.size());
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < texts.size(); ++i) encoded[i] = tokenizer->encode(texts[i]);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::size_t tokens = 0;
  uint64_t hash = mixprec::kFnv1aBasis;
  for (const std::vector<int64_t>& ids : encoded) {
    tokens += ids.size();
    for (const int64_t id : ids) hash = mixprec::fnv1a(std::to_string(id) + ",", hash);
  }
  std::printf("{\"seconds\": [");
  for (std::size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.6f", i ? ", " : "", seconds[i]);
  std::printf("], \"tokens\": %zu, \"hash\": \"%016llx\"}\n", tokens,
              static_cast<unsigned long long>(hash));
  return 0;
}
