// gzip files: read whole (several members too), and refused naming the file when truncated,
// not gzip, or inflating past the bound (a small file of zeros standing for a bomb).
#include "mixprec/io/gzip_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "mixprec/core/error.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

using mixprec::testing::TempDir;
using ::testing::HasSubstr;

std::string gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string error_of(const std::filesystem::path& p, uint64_t max_bytes) {
  try {
    read_gzip_file(p, max_bytes, "tokenizer " + p.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GzipFile, ReadsOneOrSeveralMembers) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i * 7919 % 10007) + "\n";
  mixprec::testing::write_file(dir / "a.gz", gzip(text));
  EXPECT_EQ(read_gzip_file(dir / "a.gz", 1 << 20, "a"), text);
  mixprec::testing::write_file(dir / "b.gz", gzip("first ") + gzip("second"));
  EXPECT_EQ(read_gzip_file(dir / "b.gz", 1 << 20, "b"), "first second");
  mixprec::testing::write_file(dir / "empty.gz", gzip(""));
  EXPECT_EQ(read_gzip_file(dir / "empty.gz", 1 << 20, "e"), "");
}

TEST(GzipFile, BrokenFilesAreRefusedNamingThem) {
  TempDir dir;
  const std::string packed = gzip(std::string(100000, 'x') + "tail");
  mixprec::testing::write_file(dir / "cut.gz", packed.substr(0, packed.size() / 2));
  EXPECT_THAT(error_of(dir / "cut.gz", 1 << 20), HasSubstr("cut.gz] is truncated"));
  mixprec::testing::write_file(dir / "plain.gz", "{\"model\": {}}");
  EXPECT_THAT(error_of(dir / "plain.gz", 1 << 20), HasSubstr("is not a valid gzip file"));
  std::string flipped = gzip("some text that will be damaged in the middle of its stream");
  flipped[flipped.size() / 2] ^= 0x5a;
  mixprec::testing::write_file(dir / "flipped.gz", flipped);
  EXPECT_THAT(error_of(dir / "flipped.gz", 1 << 20), HasSubstr("flipped.gz]"));
  EXPECT_THAT(error_of(dir / "missing.gz", 1 << 20), HasSubstr("missing.gz"));
}

TEST(GzipFile, InflatingPastTheBoundStops) {
  TempDir dir;
  mixprec::testing::write_file(dir / "bomb.gz", gzip(std::string(64 << 20, '\0')));  // ~64 KB
  EXPECT_THAT(error_of(dir / "bomb.gz", 4 << 20), HasSubstr("inflates past 4 MiB"));
}

}  // namespace
}  // namespace mixprec::io
