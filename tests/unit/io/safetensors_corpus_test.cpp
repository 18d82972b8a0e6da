// The fuzz corpus as a regression test: every input kept in tests/fuzz/safetensors (made and
// kept minimal by scripts/fuzz.sh) goes through the memory reader, the file reader and
// load_checkpoint. Each must parse into tensors that hold exactly the bytes the header assigns
// them, or fail with a mixprec::Error naming the input; never another exception, and the
// readers must agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_store.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(MIXPREC_SOURCE_DIR) / "tests" / "fuzz" / "safetensors"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string s(std::istreambuf_iterator<char>(in), {});
  const auto* first = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(first, first + s.size());
}

// Runs `read`; nullopt when it threw a mixprec::Error naming `source` (a test failure when the
// message does not name it, or for any other exception).
template <class Read>
auto outcome(const std::string& source, Read read) -> std::optional<decltype(read())> {
  try {
    return read();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(source), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a mixprec::Error: " << e.what();
  }
  return std::nullopt;
}

// Every tensor is one header entry, holding that entry's bytes of the input.
void expect_consistent(const TensorMap& tensors, const std::vector<std::byte>& bytes,
                       const std::string& source) {
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), source);
  EXPECT_EQ(header.data_start + header.data_size, bytes.size());
  ASSERT_EQ(tensors.size(), header.entries.size());
  for (const SafetensorsEntry& e : header.entries) {
    SCOPED_TRACE(e.name);
    ASSERT_LE(e.begin, e.end);
    ASSERT_LE(e.end, header.data_size);
    const Tensor& t = tensors.at(e.name);
    EXPECT_EQ(t.dtype(), e.dtype);
    EXPECT_EQ(t.shape(), e.shape);
    ASSERT_EQ(t.nbytes(), e.end - e.begin);
    if (t.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(t.raw_data(), bytes.data() + header.data_start + e.begin, t.nbytes()),
                0);
    }
  }
}

bool same_tensors(const TensorMap& a, const TensorMap& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
           return x.first == y.first && x.second.dtype() == y.second.dtype() &&
                  x.second.shape() == y.second.shape() &&
                  (x.second.nbytes() == 0 ||
                   std::memcmp(x.second.raw_data(), y.second.raw_data(), x.second.nbytes()) == 0);
         });
}

TEST(SafetensorsCorpus, EveryInputParsesConsistentlyOrFailsNamingIt) {
  const std::vector<fs::path> files = corpus_files();
  // A missing or emptied corpus must not pass as "nothing failed".
  ASSERT_GE(files.size(), 20u);
  int valid = 0;
  for (const fs::path& file : files) {
    const std::string path = file.string();
    SCOPED_TRACE(file.filename().string());
    const std::vector<std::byte> bytes = read_bytes(file);
    const auto in_memory = outcome(path, [&] { return parse_safetensors(bytes, path); });
    const auto from_file = outcome(path, [&] { return load_safetensors(path); });
    const auto checkpoint = outcome(path, [&] { return load_checkpoint(path); });
    ASSERT_EQ(in_memory.has_value(), from_file.has_value());
    // load_checkpoint also checks metadata 'tensor_checksums' (and drops the key): it may
    // refuse a file the plain readers take.
    Metadata expected = in_memory ? in_memory->metadata : Metadata{};
    const bool checksummed = expected.erase("tensor_checksums") > 0;
    ASSERT_TRUE(in_memory.has_value() == checkpoint.has_value() || (checksummed && !checkpoint));
    if (!in_memory || !checkpoint) continue;
    ++valid;
    expect_consistent(in_memory->tensors, bytes, path);
    EXPECT_TRUE(same_tensors(in_memory->tensors, from_file->tensors));
    EXPECT_TRUE(same_tensors(in_memory->tensors, checkpoint->tensors));
    EXPECT_EQ(in_memory->metadata, from_file->metadata);
    EXPECT_EQ(expected, checkpoint->metadata);
  }
  // The corpus keeps both kinds: readable files and ones the reader must refuse.
  EXPECT_GT(valid, 0);
  EXPECT_LT(valid, static_cast<int>(files.size()));
}

}  // namespace
}  // namespace mixprec::io
