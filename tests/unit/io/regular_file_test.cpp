// Files a user names (a config, a run's metrics.jsonl, token files) are opened without
// blocking and refused unless regular, naming the path and what it is instead: a FIFO blocked
// for ever, a directory read as empty (the built-in defaults trained, exit 0), /dev/zero ran
// out of memory (std::bad_alloc), a symlink loop gave a raw filesystem error.
#include "mixprec/io/regular_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/config_file.h"
#include "mixprec/report/run_metrics.h"
#include "support/fifo_watchdog.h"
#include "support/hostile_paths.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::call_without_hanging;
using mixprec::testing::error_of;
using mixprec::testing::TempDir;
using mixprec::testing::write_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RegularFile, RefusesWhatIsNotARegularFileNamingWhatItIs) {
  TempDir dir;
  const fs::path fifo = dir / "fifo", folder = dir / "folder", loop = dir / "loop";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_directory(folder);
  fs::create_symlink(loop, loop);
  const auto refusal = [](const fs::path& p) {
    return error_of([&] { read_regular_file(p, 1 << 20, "thing " + p.string()); });
  };
  const std::string on_fifo = call_without_hanging(fifo, [&] { return refusal(fifo); });
  EXPECT_TRUE(contains(on_fifo, "[thing " + fifo.string() + "] is a FIFO")) << on_fifo;
  EXPECT_TRUE(contains(refusal(folder), "is a directory, not a regular file")) << refusal(folder);
  EXPECT_TRUE(contains(refusal("/dev/zero"), "[thing /dev/zero] is a character device"))
      << refusal("/dev/zero");
  EXPECT_TRUE(contains(refusal(loop), "symbolic link")) << refusal(loop);
  EXPECT_TRUE(contains(refusal(dir / "missing"), "No such file")) << refusal(dir / "missing");

  // A socket file (what a leftover server leaves behind).
  const fs::path sock = dir / "sock";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
  if (sock.string().size() < sizeof addr.sun_path &&
      ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    EXPECT_TRUE(contains(refusal(sock), "is a socket")) << refusal(sock);
  }
  ::close(s);
}

TEST(RegularFile, BoundsTheSizeAndNamesAFileCutShortWhileRead) {
  TempDir dir;
  const fs::path p = dir / "f";
  write_file(p, std::string(1000, 'x'));
  EXPECT_EQ(read_regular_file(p, 1000, "f").size(), 1000u);
  EXPECT_TRUE(contains(error_of([&] { read_regular_file(p, 999, "thing f"); }),
                       "[thing f] is 1000 bytes, more than the 999"));
  const RegularFile file(p, "data " + p.string());
  char buffer[100];
  file.read_at(900, buffer, 100);
  fs::resize_file(p, 500);  // someone truncates it
  const std::string e = error_of([&] { file.read_at(900, buffer, 100); });
  EXPECT_TRUE(contains(e, "[data " + p.string() + "] ends at byte 900")) << e;
  EXPECT_TRUE(contains(e, "500 bytes now, 1000 when opened")) << e;
}

TEST(HostileConfigPaths, AFifoADirectoryADeviceAndALoopAreRefusedNamingThePath) {
  TempDir dir;
  const auto [fifo, folder, zero, loop] = mixprec::testing::make_hostile_paths(dir.path(), ".toml");
  const auto refusal = [](const fs::path& p) {
    return error_of([&] { config::load_config(p.string()); });
  };
  const std::string on_fifo = call_without_hanging(fifo, [&] { return refusal(fifo); });
  EXPECT_TRUE(contains(on_fifo, "[config " + fifo.string() + "] is a FIFO")) << on_fifo;
  // These trained the built-in defaults, ran out of memory, or said nothing of the path.
  EXPECT_TRUE(contains(refusal(folder), "[config " + folder.string() + "] is a directory"))
      << refusal(folder);
  EXPECT_TRUE(contains(refusal(zero), "[config " + zero.string() + "] is a character device"))
      << refusal(zero);
  EXPECT_TRUE(contains(refusal(loop), "[config " + loop.string() + "] cannot open the file"))
      << refusal(loop);
}

TEST(HostileMetricsPaths, AFifoOrADirectoryAsMetricsJsonlIsRefusedNamingIt) {
  TempDir dir;
  fs::create_directories(dir / "fifo_run");
  fs::create_directories(dir / "dir_run" / "metrics.jsonl");
  const fs::path fifo = dir / "fifo_run" / "metrics.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string on_fifo = call_without_hanging(
      fifo, [&] { return error_of([&] { report::read_run_metrics(dir / "fifo_run"); }); });
  EXPECT_TRUE(contains(on_fifo, fifo.string() + "] is a FIFO")) << on_fifo;
  // Read as no metrics at all: a row of dashes, exit 0.
  const std::string on_dir = error_of([&] { report::read_run_metrics(dir / "dir_run"); });
  EXPECT_TRUE(contains(on_dir, (dir / "dir_run" / "metrics.jsonl").string() + "] is a directory"))
      << on_dir;
  fs::create_symlink(dir / "loop", dir / "loop");
  const std::string on_loop = error_of([&] { report::read_run_metrics(dir / "loop"); });
  EXPECT_TRUE(contains(on_loop, (dir / "loop").string() + "] cannot open the file")) << on_loop;
}

}  // namespace
}  // namespace mixprec::io
