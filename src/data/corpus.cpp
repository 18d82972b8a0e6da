#include "mixprec/data/corpus.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <system_error>

#include "mixprec/core/error.h"
#include "mixprec/core/hash.h"

namespace mixprec::data {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void fail_corpus(const fs::path& path, const std::string& what) {
  throw Error("data corpus " + path.string(), what);
}

bool has_excluded_suffix(const fs::path& p, const std::vector<std::string>& suffixes) {
  const std::string name = p.filename().string();
  return std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  });
}

CorpusFile describe(const fs::path& path) {
  std::error_code ec;
  CorpusFile f;
  f.path = fs::absolute(path, ec).lexically_normal();
  if (ec) fail_corpus(path, "cannot resolve: " + ec.message());
  f.size = fs::file_size(path, ec);
  if (ec) fail_corpus(path, "cannot read its size: " + ec.message());
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) fail_corpus(path, "cannot read its modification time: " + ec.message());
  f.mtime_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
  return f;
}

void hash_bytes(uint64_t& h, const void* data, std::size_t n) {
  h = fnv1a(std::string_view(static_cast<const char*>(data), n), h);
}

}  // namespace

std::vector<CorpusFile> list_corpus_files(const CorpusSpec& spec) {
  MIXPREC_CHECK(!spec.paths.empty(), "data corpus", "no corpus paths given");
  std::vector<CorpusFile> files;
  for (const fs::path& root : spec.paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(root, ec);
    if (!fs::exists(st)) fail_corpus(root, "does not exist");
    if (fs::is_regular_file(st)) {
      files.push_back(describe(root));
      continue;
    }
    if (!fs::is_directory(st)) fail_corpus(root, "is neither a file nor a directory");
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file() && !has_excluded_suffix(it->path(), spec.exclude_suffixes)) {
        found.push_back(it->path());
      }
    }
    if (ec) fail_corpus(root, "cannot be listed: " + ec.message());
    // Directory iteration order is the file system's; sorting makes it the same everywhere.
    std::sort(found.begin(), found.end(),
              [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
    for (const fs::path& p : found) files.push_back(describe(p));
  }
  if (files.empty()) {
    std::string roots;
    for (const fs::path& p : spec.paths) roots += (roots.empty() ? "" : ", ") + p.string();
    throw Error("data corpus " + roots, "corpus is empty: no files found");
  }
  return files;
}

uint64_t corpus_fingerprint(const std::vector<CorpusFile>& files, const std::string& tokenizer) {
  uint64_t h = kFnv1aBasis;
  hash_bytes(h, tokenizer.data(), tokenizer.size() + 1);
  for (const CorpusFile& f : files) {
    const std::string p = f.path.string();
    hash_bytes(h, p.data(), p.size() + 1);  // the NUL keeps "ab"+"c" apart from "a"+"bc"
    hash_bytes(h, &f.size, sizeof f.size);
    hash_bytes(h, &f.mtime_ns, sizeof f.mtime_ns);
  }
  return h;
}

fs::path default_corpus_path() {
  const fs::path dir = "/usr/share/games/fortunes";
  std::error_code ec;
  MIXPREC_CHECK(fs::is_directory(dir, ec), "data corpus " + dir.string(),
                "default corpus not found: install the fortunes package: sudo apt-get install "
                "fortunes");
  return dir;
}

CorpusSpec default_corpus() {
  return CorpusSpec{{default_corpus_path()}, {".dat", ".u8"}};
}

}  // namespace mixprec::data
