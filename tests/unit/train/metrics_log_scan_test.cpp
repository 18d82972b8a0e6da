// Resuming cuts metrics.jsonl back to its last complete line, reading backwards a block at a
// time (a 50 MB torn line took 65 s a byte per seek); the result is checked against the
// obvious answer for torn lines of many lengths, across block boundaries, with and without a
// trailing newline. A FIFO or a directory as metrics.jsonl is refused, never waited on.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/train/metrics_log.h"
#include "support/fifo_watchdog.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::call_without_hanging;
using mixprec::testing::error_of;
using mixprec::testing::read_file;
using mixprec::testing::TempDir;
using mixprec::testing::write_file;

// What the scan must find: just past the last '\n', or 0.
uint64_t expected_end(const std::string& text) {
  const std::size_t nl = text.rfind('\n');
  return nl == std::string::npos ? 0 : nl + 1;
}

uint64_t scanned_end(const fs::path& path, std::size_t block) {
  return end_of_last_complete_line(io::RegularFile(path, path.string()), block);
}

TEST(MetricsLogScan, FindsTheLastCompleteLineForEveryTornLengthAndBlockSize) {
  TempDir dir;
  const fs::path path = dir / "metrics.jsonl";
  for (const std::string& head : {std::string(), std::string("{\"a\":1}\n"),
                                  std::string("{\"a\":1}\n{\"bb\":22}\n"), std::string("\n")}) {
    for (std::size_t torn = 0; torn <= 40; ++torn) {
      for (const bool newline : {false, true}) {
        std::string text = head + std::string(torn, 'x');
        if (newline) text += '\n';
        write_file(path, text);
        for (const std::size_t block : {1, 2, 3, 7, 8, 9, 16, 64}) {
          EXPECT_EQ(scanned_end(path, block), expected_end(text))
              << "head " << head.size() << " torn " << torn << " newline " << newline << " block "
              << block;
        }
      }
    }
  }
}

TEST(MetricsLogScan, ResumingCutsTornLinesAroundTheRealBlockSize) {
  TempDir dir;
  const fs::path path = dir / "metrics.jsonl";
  const std::size_t b = kMetricsScanBlockBytes;
  const std::string head = "{\"type\":\"run\"}\n{\"step\":1}\n";
  for (const std::size_t torn : {b - head.size() - 1, b - head.size(), b - head.size() + 1, b - 1,
                                 b, b + 1, 2 * b, 2 * b + 1, 3 * b + 5}) {
    write_file(path, head + std::string(torn, 'x'));
    { MetricsLog(path, /*append=*/true).write("{\"step\":2}"); }
    EXPECT_EQ(read_file(path), head + "{\"step\":2}\n") << "torn " << torn;
  }
  // A complete file is kept whole, however long its last line.
  const std::string whole = head + std::string(b + 3, 'y') + "\n";
  write_file(path, whole);
  { MetricsLog(path, true).write("{\"step\":3}"); }
  EXPECT_EQ(read_file(path), whole + "{\"step\":3}\n");
}

TEST(MetricsLogScan, AFifoOrADirectoryIsRefusedNamingIt) {
  TempDir dir;
  const fs::path fifo = dir / "metrics.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const bool append : {true, false}) {
    const std::string e =
        call_without_hanging(fifo, [&] { return error_of([&] { MetricsLog log(fifo, append); }); });
    EXPECT_NE(e.find("[metrics " + fifo.string() + "] is a FIFO"), std::string::npos) << e;
  }
  fs::create_directory(dir / "folder");
  const std::string e = error_of([&] { MetricsLog log(dir / "folder", true); });
  EXPECT_NE(e.find("[metrics " + (dir / "folder").string() + "]"), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::train
