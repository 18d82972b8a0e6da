// A directory every rank of an MPI test job uses (rank 0's pid names it), holding a
// generated corpus; removed at the end.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "mpi_test_env.h"
#include "support/temp_files.h"
#include "unit/train/train_testing.h"

namespace mixprec::testing {

class SharedDir {
 public:
  explicit SharedDir(const std::string& name) {
    Tensor pid = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(getpid())});
    world().broadcast(pid, 0);
    path_ = std::filesystem::temp_directory_path() /
            ("mixprec-mpi-" + name + "-" + std::to_string(pid.data<int64_t>()[0]));
    if (world().rank() == 0) {  // with the corpus, before any rank reads it
      std::filesystem::create_directories(path_);
      write_file(path_ / "corpus.txt", train::testing::make_text(60000));
    }
    world().barrier();
  }
  ~SharedDir() {
    std::error_code ec;  // never throw from here: a failed test may be unwinding
    if (world().rank() == 0) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mixprec::testing
