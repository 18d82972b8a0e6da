#include "mixprec/data/corpus.h"

#include <gtest/gtest.h>

#include "data_testing.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;
using testing::TempDir;
using testing::write_file;

std::vector<std::string> relative_names(const std::vector<CorpusFile>& files,
                                        const fs::path& root) {
  std::vector<std::string> names;
  for (const CorpusFile& f : files) names.push_back(f.path.lexically_relative(root).string());
  return names;
}

TEST(Corpus, ListsNestedFilesSortedByPath) {
  TempDir dir;
  // Created out of order so the file system's own order is unlikely to be sorted.
  write_file(dir / "zeta.txt", "z");
  write_file(dir / "b/inner/deep.txt", "deep");
  write_file(dir / "a.txt", "aa");
  write_file(dir / "b/c.txt", "ccc");
  write_file(dir / "b/skip.dat", "\x01\x02");
  fs::create_directories(dir / "empty_dir");
  const fs::path root = fs::absolute(dir.path()).lexically_normal();

  const CorpusSpec spec{{dir.path()}, {".dat"}};
  const std::vector<CorpusFile> files = list_corpus_files(spec);
  EXPECT_EQ(relative_names(files, root),
            (std::vector<std::string>{"a.txt", "b/c.txt", "b/inner/deep.txt", "zeta.txt"}));
  EXPECT_EQ(files[1].size, 3u);
  EXPECT_EQ(files[2].size, 4u);
  EXPECT_EQ(corpus_fingerprint(files), corpus_fingerprint(list_corpus_files(spec)));

  // Without the exclusion the .dat file appears in its sorted place.
  EXPECT_EQ(relative_names(list_corpus_files({{dir.path()}, {}}), root)[3], "b/skip.dat");
  // An explicitly named file is taken even when it has an excluded suffix; roots keep order.
  const std::vector<CorpusFile> two =
      list_corpus_files({{dir / "zeta.txt", dir / "b/skip.dat"}, {".dat"}});
  EXPECT_EQ(relative_names(two, root), (std::vector<std::string>{"zeta.txt", "b/skip.dat"}));
}

TEST(Corpus, FingerprintChangesWithAnySource) {
  TempDir dir;
  write_file(dir / "a.txt", "one");
  write_file(dir / "b.txt", "two");
  const CorpusSpec spec{{dir.path()}, {}};
  const uint64_t before = corpus_fingerprint(list_corpus_files(spec));

  testing::shift_mtime(dir / "a.txt", 5);  // touched, same size and content
  const uint64_t touched = corpus_fingerprint(list_corpus_files(spec));
  EXPECT_NE(touched, before);

  write_file(dir / "c.txt", "three");  // added
  const uint64_t added = corpus_fingerprint(list_corpus_files(spec));
  EXPECT_NE(added, touched);

  fs::rename(dir / "c.txt", dir / "d.txt");  // renamed
  EXPECT_NE(corpus_fingerprint(list_corpus_files(spec)), added);
}

TEST(Corpus, BadPathsAreErrorsNamingThem) {
  TempDir dir;
  const fs::path missing = dir / "no/such/dir";
  const std::string e = error_of([&] { list_corpus_files({{missing}, {}}); });
  EXPECT_NE(e.find(missing.string()), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;

  fs::create_directories(dir / "hollow/inside");
  const std::string empty = error_of([&] { list_corpus_files({{dir / "hollow"}, {}}); });
  EXPECT_NE(empty.find((dir / "hollow").string()), std::string::npos) << empty;
  EXPECT_NE(empty.find("corpus is empty"), std::string::npos) << empty;

  EXPECT_NE(error_of([] { list_corpus_files({}); }).find("no corpus paths"), std::string::npos);
}

TEST(Corpus, DefaultCorpusIsTheFortunesTextFiles) {
  const fs::path dir = default_corpus_path();
  EXPECT_EQ(dir, fs::path("/usr/share/games/fortunes"));
  const std::vector<CorpusFile> files = list_corpus_files(default_corpus());
  ASSERT_GT(files.size(), 10u);
  bool has_fortunes = false;
  for (const CorpusFile& f : files) {
    const std::string name = f.path.filename().string();
    EXPECT_FALSE(name.ends_with(".dat") || name.ends_with(".u8")) << name;
    has_fortunes |= name == "fortunes";
  }
  EXPECT_TRUE(has_fortunes);
}

}  // namespace
}  // namespace mixprec::data
