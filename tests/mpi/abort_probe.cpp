// Rank 1 fails (abort_job) while rank 0 waits in a barrier it can never leave: the launcher
// must end the job, non-zero, with rank 1 named. Run by expect_abort.cmake.
#include <cstdio>

#include "mixprec/dist/communicator.h"

int main() {
  auto world = mixprec::dist::make_world_communicator();
  if (world->rank() == 1) world->abort_job("abort_probe stops on purpose", 3);
  world->barrier();
  std::printf("rank %d passed the barrier\n", world->rank());
  return 0;
}
