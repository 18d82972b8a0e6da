// main() for the GoogleTest programs run under mpirun: every rank runs every test; rank 0
// prints the usual report, other ranks print only their failures (prefixed with the rank),
// and the exit code is non-zero when a test failed on ANY rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "mpi_test_env.h"

namespace mixprec::testing {
namespace {

std::unique_ptr<dist::Communicator> g_world;

// Failed assertions of a quiet rank, so they are not lost with the default printer.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(std::string rank) : rank_(std::move(rank)) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[%s] %s:%d: Failure\n%s\n", rank_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[%s] FAILED %s.%s\n", rank_.c_str(), info.test_suite_name(),
                   info.name());
  }

 private:
  std::string rank_;
};

}  // namespace

dist::Communicator& world() {
  return *g_world;
}

}  // namespace mixprec::testing

int main(int argc, char** argv) {
  using mixprec::testing::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  try {
    g_world = mixprec::dist::make_world_communicator();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi test: no world communicator: %s\n", e.what());
    return 1;
  }
  const int rank = g_world->rank(), size = g_world->size();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new mixprec::testing::RankFailurePrinter("rank " + std::to_string(rank) +
                                                              " of " + std::to_string(size)));
  }
  const int local_status = RUN_ALL_TESTS();

  // One verdict for the job: rank 0's report alone would hide a failure on another rank.
  mixprec::Tensor failed = mixprec::Tensor::from_vector<int64_t>({local_status != 0 ? 1 : 0});
  g_world->all_reduce(failed, mixprec::dist::ReduceOp::max);
  const bool any_failed = failed.data<int64_t>()[0] != 0;
  if (rank == 0 && any_failed && local_status == 0)
    std::fprintf(stderr, "mpi test: a test failed on another rank (see its [rank R] lines)\n");
  g_world.reset();
  return any_failed ? 1 : 0;
}
