// How ranks find out who stopped answering when a collective waits past its timeout: the rank
// that timed out asks every other rank, on a communicator of its own (so no question is ever
// mistaken for collective traffic), which collective it is waiting in; ranks that have waited a
// while answer from inside their wait loop. A rank that does not answer within a grace period
// is stopped, hung, or busy outside any collective. Only compiled with MIXPREC_HAVE_MPI.
#pragma once

#if MIXPREC_HAVE_MPI
#include <mpi.h>

#include <chrono>
#include <deque>
#include <optional>
#include <vector>

#include "stall_report.h"

namespace mixprec::dist::mpi {

class StallProbe {
 public:
  explicit StallProbe(MPI_Comm world);
  ~StallProbe();
  StallProbe(const StallProbe&) = delete;
  StallProbe& operator=(const StallProbe&) = delete;

  // Answers every question that has arrived with `mine`. Cheap when none has (one MPI_Iprobe).
  void answer_questions(const detail::WaitPoint& mine);
  // Asks every other rank where it waits and collects the answers for up to `grace` (less
  // when all have answered), answering others' questions meanwhile. answers[r] is empty for a
  // rank that did not answer; answers[own rank] is `mine`.
  std::vector<std::optional<detail::WaitPoint>> ask_everyone(const detail::WaitPoint& mine,
                                                             std::chrono::milliseconds grace);

 private:
  void send(const detail::WaitPoint& point, int to, int tag);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  // Buffers of sends that may still be in flight (their requests are freed, so MPI owns their
  // completion); only written once a collective has timed out, so it stays small.
  std::deque<std::vector<char>> outbox_;
};

}  // namespace mixprec::dist::mpi
#endif
