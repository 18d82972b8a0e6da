// libFuzzer target for the JSONL document reader (for_each_document_in on a *.jsonl file's
// bytes). Every input must either give documents that are UTF-8 text ending in a newline (or
// empty), at most one per line, or be refused with a mixprec::Error naming the file and a line.
// Bytes that are not UTF-8 are skipped with a warning naming the file. Anything else (a crash,
// a sanitizer report, another exception type, a stack overflow on deep nesting) is a bug.
//
//   build-fuzz-clang/fuzz/jsonl_fuzz tests/fuzz/jsonl   (see scripts/fuzz.sh jsonl)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "mixprec/data/documents.h"

namespace {

using namespace mixprec;

constexpr const char* kSource = "fuzz-input.jsonl";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "jsonl_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto lines = static_cast<std::size_t>(std::count(bytes.begin(), bytes.end(), '\n')) + 1;
  std::size_t documents = 0, warnings = 0;
  bool read = false;
  try {
    read = data::for_each_document_in(
        bytes, kSource,
        [&](const std::string& w) {
          ++warnings;
          if (w.find(kSource) == std::string::npos) bug("warning without the file: " + w);
        },
        [&](std::string_view doc) {
          ++documents;
          if (first_invalid_utf8(doc)) bug("a document that is not UTF-8");
          if (!doc.empty() && doc.back() != '\n') bug("a document without its newline");
        });
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(std::string(kSource) + " line ") == std::string::npos)
      bug("error without the file and line: " + what);
    return 0;
  }
  if (read == (warnings != 0)) bug("a skipped file must be warned about, a read one not");
  if (documents > lines) bug("more documents than lines");
  return 0;
}
