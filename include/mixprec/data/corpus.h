// Which files make up a text corpus, in a deterministic order, and a fingerprint of them
// (paths, sizes, modification times) that decides whether a token cache is still current.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mixprec::data {

struct CorpusSpec {
  // Files and directories. Directories are walked recursively; the roots keep the order
  // given here, the files found under one directory are sorted by path (byte order).
  std::vector<std::filesystem::path> paths;
  // Files found while walking a directory whose names end in one of these are left out
  // (a file named explicitly in `paths` is always taken).
  std::vector<std::string> exclude_suffixes;
};

struct CorpusFile {
  std::filesystem::path path;  // absolute, lexically normal
  uint64_t size = 0;
  int64_t mtime_ns = 0;  // last write time, in the file clock's ticks
};

// Regular files (symlinks to files are followed; symlinked directories are not entered).
// Throws mixprec::Error naming the path when one does not exist or is neither a file nor a
// directory, and when no file is found at all ("corpus is empty").
std::vector<CorpusFile> list_corpus_files(const CorpusSpec& spec);

// 64-bit FNV-1a over the tokenizer's id and, per file, path + size + mtime: equal inputs give
// equal hashes on every run; any added, removed, renamed, resized or touched file, or another
// tokenizer, changes it.
uint64_t corpus_fingerprint(const std::vector<CorpusFile>& files,
                            const std::string& tokenizer_id = "byte256");

// Debian's `fortunes` package: text files under /usr/share/games/fortunes.
std::filesystem::path default_corpus_path();
// default_corpus_path() without the package's index files (*.dat, binary strfile tables)
// and its *.u8 aliases (symlinks to the same text). Throws mixprec::Error when the package
// is missing: "install the fortunes package: sudo apt-get install fortunes".
CorpusSpec default_corpus();

}  // namespace mixprec::data
