// Rank 1 stops itself (SIGSTOP) while rank 0 waits for it in an all-gather: rank 0's collective
// must time out naming rank 1 and the collective, and the job must end (the stopped rank too).
// Run by expect_stall.cmake: `stall_probe PIDFILE` writes rank 1's pid there.
//
// So that a regression fails rather than hangs, rank 1 first forks a guard that resumes it
// (SIGCONT) after 40 s: without a working timeout both ranks then pass the all-gather and say
// so, and the script fails on that.
#include <signal.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <cstdio>
#include <thread>

#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/tensor/tensor.h"

namespace {

// A child process that sends SIGCONT to its parent after `seconds`, unless the parent is gone
// first. It never touches MPI and leaves with _exit (no atexit MPI_Finalize in a fork).
void fork_resume_guard(int seconds) {
  const pid_t parent = getpid();
  if (fork() != 0) return;
  const int null = open("/dev/null", O_RDWR);  // release mpirun's and CTest's pipes
  for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  for (int tenth = 0; tenth < seconds * 10; ++tenth) {
    if (getppid() != parent) _exit(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(parent, SIGCONT);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mixprec;
  auto world = dist::make_world_communicator();
  // A long init timeout and a short train one: the stall happens "after step 3", so the short
  // one must apply.
  world->set_timeouts({std::chrono::seconds(60), std::chrono::seconds(2)});
  try {
    world->barrier();  // #1: both ranks are up
    world->step_done(3);
    if (world->rank() == 1) {
      if (argc > 1) {
        if (FILE* f = std::fopen(argv[1], "w")) {
          std::fprintf(f, "%d\n", static_cast<int>(getpid()));
          std::fclose(f);
        }
      }
      fork_resume_guard(40);
      raise(SIGSTOP);
    }
    Tensor send = Tensor::from_vector(std::vector<int64_t>{world->rank()});
    Tensor recv = Tensor::empty({world->size()}, DType::i64);
    world->all_gather(send, recv);  // #2
    std::printf("rank %d passed the all_gather\n", world->rank());
  } catch (const std::exception& e) {
    world->abort_job(e.what(), 1);  // as `mixprec train` does
    return 1;
  }
  return 0;
}
