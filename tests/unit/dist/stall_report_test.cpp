// The message of a collective that timed out: who never came, who waits with it, who waits
// somewhere else (the MPI side is tests/mpi/stall_probe.cpp).
#include <gtest/gtest.h>

#include <string>

#include "dist/stall_report.h"

namespace mixprec::dist::detail {
namespace {

Stall stall_at(int rank, int size, WaitPoint mine) {
  Stall s;
  s.rank = rank;
  s.mine = mine;
  s.waited_seconds = 100;
  s.timeout_key = "comm.train_timeout_seconds";
  s.answers.resize(static_cast<std::size_t>(size));
  s.answers[static_cast<std::size_t>(rank)] = mine;
  return s;
}

TEST(StallReport, NamesTheRankThatDoesNotAnswer) {
  const Stall s = stall_at(0, 2, {"all_gather", 1234, 41});
  EXPECT_EQ(describe_stall(s),
            "rank 1 did not reach all_gather #1234 within 100 s (comm.train_timeout_seconds; "
            "after step 41) and does not answer (stopped, hung, or busy outside any "
            "collective); rank 0 is waiting in all_gather #1234");
}

TEST(StallReport, ListsEveryRankWaitingAndEverySilentOne) {
  Stall s = stall_at(2, 4, {"barrier", 7, -1});
  s.timeout_key = "comm.init_timeout_seconds";
  s.answers[0] = WaitPoint{"barrier", 7, -1};
  EXPECT_EQ(describe_stall(s),
            "ranks 1, 3 did not reach barrier #7 within 100 s (comm.init_timeout_seconds; before "
            "the first training step) and do not answer (stopped, hung, or busy outside any "
            "collective); ranks 0, 2 are waiting in barrier #7");
}

TEST(StallReport, NamesARankInAnotherCollectiveAsAMismatch) {
  Stall s = stall_at(0, 3, {"all_gather", 12, 3});
  s.answers[1] = WaitPoint{"broadcast", 12, 3};   // same number, another collective
  s.answers[2] = WaitPoint{"all_reduce", 11, 3};  // still in an earlier one
  const std::string m = describe_stall(s);
  EXPECT_NE(m.find("all_gather #12 did not complete within 100 s"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 1 is waiting in broadcast #12 (after step 3), not all_gather #12: the "
                   "ranks called different collectives"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("rank 2 is waiting in all_reduce #11 (after step 3)"), std::string::npos) << m;
  EXPECT_EQ(m.find("rank 2 is waiting in all_reduce #11 (after step 3), not"), std::string::npos)
      << m;
}

}  // namespace
}  // namespace mixprec::dist::detail
