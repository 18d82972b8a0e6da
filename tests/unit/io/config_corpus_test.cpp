// The config fuzz corpus as a regression test: every input kept in tests/fuzz/config (made and
// kept minimal by scripts/fuzz.sh config) is TOML text, optionally followed by a "--" line and
// --set overrides, as fuzz/config_fuzz.cpp splits it. Each must load into a config that writes
// and reloads unchanged, or fail with a mixprec::Error naming the input; never another exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(MIXPREC_SOURCE_DIR) / "tests" / "fuzz" / "config"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The fuzzer's split: text before the first "\n--\n" is the config, each line after it an
// override.
std::pair<std::string, std::vector<std::string>> split(const std::string& text) {
  const size_t marker = text.find("\n--\n");
  if (marker == std::string::npos) return {text, {}};
  std::vector<std::string> overrides;
  size_t begin = marker + 4;
  while (begin < text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    overrides.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return {text.substr(0, marker), overrides};
}

TEST(ConfigCorpus, EveryInputLoadsAndRoundTripsOrFailsNamingIt) {
  const std::vector<fs::path> files = corpus_files();
  // A missing or emptied corpus must not pass as "nothing failed".
  ASSERT_GE(files.size(), 20u);
  int valid = 0;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    std::ifstream in(file, std::ios::binary);
    const auto [toml, overrides] = split(std::string(std::istreambuf_iterator<char>(in), {}));
    const std::string source = file.string();
    std::string written;
    try {
      written = to_toml(load_config_text(toml, source, overrides));
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a mixprec::Error: " << e.what();
      continue;
    }
    ++valid;
    EXPECT_EQ(to_toml(load_config_text(written, "round trip")), written);
  }
  // The corpus keeps both kinds: configs that load and ones the loader must refuse.
  EXPECT_GT(valid, 0);
  EXPECT_LT(valid, static_cast<int>(files.size()));
}

}  // namespace
}  // namespace mixprec::config
