// Files and folders a user names that are not what they should be (issue 31): a FIFO as the
// config or as RUN/metrics.jsonl blocked for ever; a directory as the config trained the
// built-in defaults (exit 0) and as metrics.jsonl printed a row of dashes (exit 0); /dev/zero
// as the config gave std::bad_alloc; a symlink loop gave a raw filesystem error. Each is now
// refused at once, naming the path and what it is.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_running.h"
#include "support/hostile_paths.h"
#include "support/temp_files.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::TempDir;

const std::string kTiny = std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml";

using testing::contains;

// Runs the CLI, killing it after `limit`: a hang is a failure, not a stuck test.
testing::RunResult run_bounded(const std::vector<std::string>& args,
                               std::chrono::seconds limit = std::chrono::seconds(30)) {
  testing::RunResult r;
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  const pid_t pid = testing::start_cli(args, out, err);
  if (pid > 0) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "did not end within " << limit.count() << " s: " << describe(args, r);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.out = testing::slurp(out);
  r.err = testing::slurp(err);
  std::fclose(out);
  std::fclose(err);
  return r;
}

void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  const testing::RunResult r = run_bounded(args);
  EXPECT_EQ(r.exit_code, 1) << describe(args, r);
  for (const std::string& part : parts)
    EXPECT_TRUE(contains(r.err, part)) << "expected '" << part << "'\n" << describe(args, r);
}

// A small corpus and the arguments of a short tiny.toml run in dir/run.
std::vector<std::string> short_run(const TempDir& dir, const std::string& config) {
  const fs::path corpus = dir / "corpus.txt";
  if (!fs::exists(corpus)) {
    std::string text;
    for (int i = 0; text.size() < 20000; ++i) text += "words " + std::to_string(i % 97) + ".\n";
    testing::write_file(corpus, text);
  }
  return {"train",   config, "--data",     corpus.string(), "--run-dir", (dir / "run").string(),
          "--steps", "2",    "--progress", "quiet",         "--set",     "training.threads=1"};
}

TEST(HostileFiles, ConfigsThatAreNotRegularFilesAreRefusedNamingThePath) {
  TempDir dir;
  const auto [fifo, folder, zero, loop] = mixprec::testing::make_hostile_paths(dir.path(), ".toml");
  expect_refused(short_run(dir, fifo.string()), {"[config " + fifo.string() + "] is a FIFO"});
  expect_refused({"memory", "--config", fifo.string()},
                 {"[config " + fifo.string() + "] is a FIFO"});
  expect_refused(short_run(dir, folder.string()),
                 {"[config " + folder.string() + "] is a directory"});
  expect_refused(short_run(dir, zero.string()),
                 {"[config " + zero.string() + "] is a character device"});
  expect_refused(short_run(dir, loop.string()),
                 {"[config " + loop.string() + "] cannot open the file", "symbolic link"});
  EXPECT_FALSE(fs::exists(dir / "run"));  // nothing trained
}

TEST(HostileFiles, MetricsThatAreNotARegularFileAreRefusedByTrainSummaryAndPlot) {
  TempDir dir;
  fs::create_directories(dir / "run");
  const fs::path fifo = dir / "run" / "metrics.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string named = fifo.string() + "] is a FIFO";
  expect_refused({"summary", (dir / "run").string()}, {named});
  expect_refused({"plot", (dir / "run").string()}, {named});
  std::vector<std::string> resume = short_run(dir, kTiny);
  resume.push_back("--resume");
  expect_refused(resume, {named});

  fs::create_directories(dir / "dir_run" / "metrics.jsonl");  // was a row of dashes, exit 0
  expect_refused({"summary", (dir / "dir_run").string()},
                 {(dir / "dir_run" / "metrics.jsonl").string() + "] is a directory"});
}

TEST(HostileFiles, ASymlinkLoopAsTheDataIsNamed) {
  TempDir dir;
  const fs::path loop = dir / "loop";
  fs::create_symlink(loop, loop);
  std::vector<std::string> args = short_run(dir, kTiny);
  args[3] = loop.string();  // --data
  expect_refused(args, {"[training.data] cannot examine '" + loop.string() + "'"});
}

}  // namespace
}  // namespace mixprec
