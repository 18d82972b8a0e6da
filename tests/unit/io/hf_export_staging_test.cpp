// An export is all or nothing: onto a full disk it left an empty folder, or three complete
// shards without an index or config.json, and the retry was refused as "not an empty folder".
// The disk is "full" in a child process by RLIMIT_FSIZE (SIGXFSZ ignored, so a write past the
// limit fails with EFBIG, "File too large"), which holds for root too.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/hf_folder.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::TempDir;

// Three small tensors, then one of 200 KB: with 15 KB shards, three shards are written before
// the large one meets the limit.
TensorList weights() {
  TensorList list;
  for (int i = 0; i < 3; ++i)
    list.emplace_back("small." + std::to_string(i), Tensor::full({2500}, i + 1.0));
  list.emplace_back("large", Tensor::full({50000}, 7.0));
  return list;
}

// write_hf_folder in a child whose files may not pass 100 KB; its error message, or "" when it
// succeeded.
std::string export_with_a_full_disk(const fs::path& dir, const TensorList& list, uint64_t shard) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{100000, 100000};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string message;
    try {
      write_hf_folder(dir.string(), "{}", list, shard);
    } catch (const std::exception& e) {
      message = e.what();
    }
    if (::write(pipe_fds[1], message.data(), message.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return message;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

TEST(HfExportStaging, AFullDiskLeavesNothingBehindAndTheRetryWorks) {
  TempDir tmp;
  const TensorList list = weights();
  for (const uint64_t shard : {uint64_t{15000}, uint64_t{1} << 40}) {  // sharded, one file
    const fs::path target = tmp / ("hf-" + std::to_string(shard));
    const std::string e = export_with_a_full_disk(target, list, shard);
    const std::string file =
        shard == 15000 ? "model-00004-of-00004.safetensors" : "model.safetensors";
    EXPECT_NE(e.find("[hf " + target.string() + "] cannot write " + file), std::string::npos) << e;
    EXPECT_NE(e.find("File too large"), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(target)) << e;
  }
  EXPECT_TRUE(entries(tmp.path()).empty());  // no staging folder left either
  for (const uint64_t shard : {uint64_t{15000}, uint64_t{1} << 40}) {
    const fs::path target = tmp / ("hf-" + std::to_string(shard));
    write_hf_folder(target.string(), "{}", list, shard);  // the retry
    EXPECT_EQ(read_hf_folder(target.string()).tensors.size(), 4u);
  }
}

TEST(HfExportStaging, AFailedExportRemovesTheParentsItMadeAndKeepsAnEmptyFolderGiven) {
  TempDir tmp;
  const TensorList list = weights();
  const std::string e = export_with_a_full_disk(tmp / "new" / "deeper" / "hf", list, 15000);
  EXPECT_NE(e.find("File too large"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(tmp / "new")) << e;
  fs::create_directory(tmp / "given");
  export_with_a_full_disk(tmp / "given", list, 15000);
  EXPECT_EQ(entries(tmp.path()), std::vector<std::string>{"given"});
  EXPECT_TRUE(fs::is_empty(tmp / "given"));
  write_hf_folder((tmp / "given").string(), "{}", list, 15000);  // an empty folder is filled
  EXPECT_EQ(read_hf_folder((tmp / "given").string()).tensors.size(), 4u);
}

}  // namespace
}  // namespace mixprec::io
