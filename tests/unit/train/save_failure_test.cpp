// A checkpoint save that fails part-way (here: the file-size limit, as a full disk would) stops
// the run with an error saying so, and leaves the previous checkpoint loadable, no temporary
// file behind, and --resume working from that checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>

#include "mixprec/io/checkpoint_store.h"
#include "mixprec/train/trainer.h"
#include "support/op_testing.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::tiny_config;

// Caps the size of files this process writes (writes past it fail with EFBIG instead of
// raising SIGXFSZ), restoring the old limit at scope exit.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_;
};

TEST(CheckpointSaveFailure, DiskFullMidSaveKeepsThePreviousCheckpointAndResumes) {
  TempDir dir;
  TrainerOptions quiet;
  quiet.progress = ProgressStyle::quiet;
  Trainer(tiny_config(dir),
          [&] {
            TrainerOptions o = quiet;
            o.stop_at_step = 4;  // writes step 4 (interval 4), then stops
            return o;
          }())
      .run();
  const fs::path ckpt_dir = dir / "run/checkpoint";
  const fs::path step4 = ckpt_dir / "step-00000004.safetensors";
  ASSERT_TRUE(fs::exists(step4));

  std::string error;
  {
    TrainerOptions o = quiet;
    o.resume = true;
    Trainer trainer(tiny_config(dir), o);  // opens its files before the limit
    FileSizeLimit limit(fs::file_size(step4) / 2);
    error = mixprec::testing::error_of([&] { trainer.run(); });
  }
  EXPECT_NE(error.find("saving step 8 failed; the checkpoint of step 4 is intact"),
            std::string::npos)
      << error;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ckpt_dir)) files.push_back(e.path().filename());
  EXPECT_EQ(files, std::vector<std::string>{"step-00000004.safetensors"});
  EXPECT_NO_THROW(io::load_checkpoint(step4.string()));

  TrainerOptions o = quiet;
  o.resume = true;
  const TrainSummary resumed = Trainer(tiny_config(dir), o).run();
  EXPECT_EQ(resumed.start_step, 4);
  EXPECT_EQ(resumed.end_step, 12);
}

}  // namespace
}  // namespace mixprec::train
