#include "mixprec/data/token_dataset.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "data_testing.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;
using testing::as_string;
using testing::options_for;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

// A small nested corpus; `expected` is its token stream (files in sorted path order).
struct NestedCorpus {
  TempDir dir;
  fs::path root = dir / "corpus";
  fs::path run = dir / "run";
  std::string expected;
  NestedCorpus() {
    write_file(root / "b.txt", "second file\n");
    write_file(root / "a/x.txt", "first: \xC3\xA9t\xC3\xA9\n");
    write_file(root / "a/y/z.txt", "nested deeper\n");
    expected =
        "first: \xC3\xA9t\xC3\xA9\n"
        "nested deeper\n"
        "second file\n";
  }
};

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return st.st_ino;
}

TEST(TokenDataset, ConcatenatesFilesInPathOrder) {
  NestedCorpus c;
  std::vector<std::string> warnings;
  const TokenDataset ds = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_TRUE(ds.rebuilt());
  EXPECT_EQ(as_string(ds), c.expected);
  EXPECT_EQ(ds.num_files(), 3);
  EXPECT_EQ(ds.num_skipped_files(), 0);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(ds.cache_path().parent_path(), c.run);
  EXPECT_EQ(ds.cache_path().filename().string(), token_cache_file_name(ds.source_hash()));
  EXPECT_TRUE(ds.cache_path().filename().string().starts_with("tokens-"));
  // Header then the raw bytes: the file is the documented format.
  const std::string file = read_file(ds.cache_path());
  ASSERT_EQ(file.size(), 64 + c.expected.size());
  EXPECT_EQ(file.substr(0, 8), "MXPTOKEN");
  EXPECT_EQ(file.substr(64), c.expected);
}

TEST(TokenDataset, SplitsTheTailOffForValidation) {
  NestedCorpus c;
  std::vector<std::string> warnings;
  const auto n = static_cast<int64_t>(c.expected.size());
  ASSERT_EQ(n, 39);
  const TokenDataset ds = TokenDataset::open(options_for(c.root, c.run, warnings, 0.25));
  const int64_t n_val = 9;  // floor(39 * 0.25)
  EXPECT_EQ(ds.validation().size(), n_val);
  EXPECT_EQ(ds.train().size(), n - n_val);
  EXPECT_EQ(as_string(ds.train()) + as_string(ds.validation()), c.expected);
  EXPECT_EQ(as_string(ds.validation()), c.expected.substr(static_cast<std::size_t>(n - n_val)));
  EXPECT_NE(ds.train().name.find("train split of " + ds.cache_path().string()), std::string::npos);

  const TokenDataset none = TokenDataset::open(options_for(c.root, c.run, warnings, 0.0));
  EXPECT_EQ(none.train().size(), n);
  EXPECT_EQ(none.validation().size(), 0);
  EXPECT_NE(error_of([&] {
              TokenDataset::open(options_for(c.root, c.run, warnings, 1.0));
            }).find("validation_fraction"),
            std::string::npos);
}

TEST(TokenDataset, ReusesAnUnchangedCache) {
  NestedCorpus c;
  std::vector<std::string> warnings;
  const TokenDataset first = TokenDataset::open(options_for(c.root, c.run, warnings));
  ASSERT_TRUE(first.rebuilt());
  const fs::path path = first.cache_path();
  const auto mtime = fs::last_write_time(path);
  const ino_t inode = inode_of(path);

  const TokenDataset second = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_FALSE(second.rebuilt());
  EXPECT_EQ(second.cache_path(), path);
  EXPECT_EQ(fs::last_write_time(path), mtime);
  EXPECT_EQ(inode_of(path), inode);  // not replaced by a rename either
  EXPECT_EQ(as_string(second), c.expected);
  EXPECT_TRUE(warnings.empty());
}

TEST(TokenDataset, RebuildsWhenASourceChanges) {
  NestedCorpus c;
  std::vector<std::string> warnings;
  const TokenDataset first = TokenDataset::open(options_for(c.root, c.run, warnings));
  write_file(c.root / "a/y/z.txt", "CHANGED\n");
  testing::shift_mtime(c.root / "a/y/z.txt", 3);

  const TokenDataset second = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_TRUE(second.rebuilt());
  EXPECT_NE(second.source_hash(), first.source_hash());
  EXPECT_NE(second.cache_path(), first.cache_path());
  EXPECT_EQ(as_string(second), "first: \xC3\xA9t\xC3\xA9\nCHANGED\nsecond file\n");
  // The first dataset's mapping is untouched: it still reads its own snapshot.
  EXPECT_EQ(as_string(first), c.expected);

  // A new file also counts as a change.
  write_file(c.root / "0.txt", "zero\n");
  const TokenDataset third = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_TRUE(third.rebuilt());
  EXPECT_TRUE(as_string(third).starts_with("zero\n"));
}

// Damages the cache with `damage`, then expects a rebuild with the right tokens and a
// warning that contains `reason`.
void expect_rebuild_after(const std::function<void(const fs::path&)>& damage,
                          const std::string& reason) {
  NestedCorpus c;
  std::vector<std::string> warnings;
  const fs::path path = TokenDataset::open(options_for(c.root, c.run, warnings)).cache_path();
  damage(path);
  const TokenDataset ds = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_TRUE(ds.rebuilt()) << reason;
  EXPECT_EQ(as_string(ds), c.expected) << reason;
  ASSERT_EQ(warnings.size(), 1u) << reason;
  EXPECT_NE(warnings[0].find(reason), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(path.string()), std::string::npos) << warnings[0];
  EXPECT_FALSE(TokenDataset::open(options_for(c.root, c.run, warnings)).rebuilt()) << reason;
}

void overwrite_byte(const fs::path& path, std::size_t offset, char value) {
  std::string bytes = read_file(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] = value;
  write_file(path, bytes);
}

TEST(TokenDataset, RebuildsACorruptedOrTruncatedCache) {
  expect_rebuild_after([](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 5); },
                       "size mismatch");
  expect_rebuild_after([](const fs::path& p) { fs::resize_file(p, 10); }, "truncated");
  expect_rebuild_after([](const fs::path& p) { fs::resize_file(p, 0); }, "truncated");
  expect_rebuild_after([](const fs::path& p) { overwrite_byte(p, 70, 'Q'); }, "checksum mismatch");
  expect_rebuild_after([](const fs::path& p) { overwrite_byte(p, 0, 'X'); }, "bad magic");
  expect_rebuild_after([](const fs::path& p) { overwrite_byte(p, 8, 9); }, "version 9");
  // Token count in the header raised by one: the payload no longer matches it.
  expect_rebuild_after([](const fs::path& p) { overwrite_byte(p, 24, 39 + 1); }, "size mismatch");
  expect_rebuild_after([](const fs::path& p) { write_file(p, std::string(4096, '\xFF')); },
                       "bad magic");
}

TEST(TokenDataset, SkipsFilesThatAreNotUtf8WithAWarning) {
  NestedCorpus c;
  write_file(c.root / "a/binary.bin", std::string("ok\xFF\xFEno", 6));
  std::vector<std::string> warnings;
  const TokenDataset ds = TokenDataset::open(options_for(c.root, c.run, warnings));
  EXPECT_EQ(as_string(ds), c.expected);
  EXPECT_EQ(ds.num_files(), 4);
  EXPECT_EQ(ds.num_skipped_files(), 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find((c.root / "a/binary.bin").string()), std::string::npos);
  EXPECT_NE(warnings[0].find("not valid UTF-8 (bad byte at offset 2)"), std::string::npos)
      << warnings[0];
  // Reusing the cache still says that files were skipped.
  warnings.clear();
  EXPECT_FALSE(TokenDataset::open(options_for(c.root, c.run, warnings)).rebuilt());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("1 corpus file(s) were skipped"), std::string::npos);
}

TEST(TokenDataset, BadInputIsAnErrorNamingThePath) {
  TempDir dir;
  std::vector<std::string> warnings;
  const fs::path missing = dir / "nothing-here";
  std::string e =
      error_of([&] { TokenDataset::open(options_for(missing, dir / "run", warnings)); });
  EXPECT_NE(e.find(missing.string()), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;

  // Only empty files, or only files that are not text: an empty corpus, and no cache left.
  write_file(dir / "blank/a.txt", "");
  write_file(dir / "blank/b.bin", "\xC0\xAF");
  e = error_of([&] { TokenDataset::open(options_for(dir / "blank", dir / "run", warnings)); });
  EXPECT_NE(e.find("corpus is empty"), std::string::npos) << e;
  EXPECT_NE(e.find((dir / "blank/a.txt").string()), std::string::npos) << e;
  EXPECT_TRUE(fs::is_empty(dir / "run")) << "a failed build leaves no file behind";
}

TEST(TokenDataset, OpensTheDefaultCorpus) {
  TempDir run;
  DatasetOptions o{default_corpus(), run.path(), 0.1, nullptr};
  const TokenDataset ds = TokenDataset::open(o);
  uint64_t total = 0;
  for (const CorpusFile& f : list_corpus_files(default_corpus())) total += f.size;
  EXPECT_EQ(ds.size(), static_cast<int64_t>(total));
  EXPECT_EQ(ds.num_skipped_files(), 0);
  EXPECT_GT(ds.size(), 1'000'000);
  EXPECT_FALSE(TokenDataset::open(o).rebuilt());
}

}  // namespace
}  // namespace mixprec::data
