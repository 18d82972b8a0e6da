// The metrics file: a fresh run starts it afresh; a resumed run appends after the last
// complete line, dropping a line a kill left half-written.
#include "mixprec/train/metrics_log.h"

#include <gtest/gtest.h>

#include "support/temp_files.h"

namespace mixprec::train {
namespace {

using mixprec::testing::read_file;
using mixprec::testing::TempDir;
using mixprec::testing::write_file;

TEST(MetricsLog, AppendingDropsATornLastLine) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  write_file(path, "{\"a\":1}\n{\"b\":2}\n{\"type\":\"train\",\"st");  // killed mid-line
  {
    MetricsLog log(path, /*append=*/true);
    log.write("{\"c\":3}");
  }
  EXPECT_EQ(read_file(path), "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
}

TEST(MetricsLog, AppendingToCompleteOrSingleTornLinesAndFreshStarts) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  write_file(path, "{\"a\":1}\n");
  { MetricsLog(path, true).write("{\"b\":2}"); }
  EXPECT_EQ(read_file(path), "{\"a\":1}\n{\"b\":2}\n");
  write_file(path, "{\"torn");  // nothing complete at all
  { MetricsLog(path, true).write("{\"c\":3}"); }
  EXPECT_EQ(read_file(path), "{\"c\":3}\n");
  { MetricsLog(path, false).write("{\"d\":4}"); }
  EXPECT_EQ(read_file(path), "{\"d\":4}\n");
}

}  // namespace
}  // namespace mixprec::train
