// The message a rank gives when a collective waited past its timeout: which ranks never came,
// which are waiting with it, and which are waiting somewhere else. Apart from MPI so every case
// can be tested in one process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mixprec::dist::detail {

// Where one rank is waiting: the kind of collective ("all_gather") and its number among the
// collectives that rank started (1 = the first), and the training steps it had done (-1 = none
// yet, or not training).
struct WaitPoint {
  std::string kind;
  uint64_t number = 0;
  int64_t steps_done = -1;
};

struct Stall {
  int rank = 0;    // the rank that timed out
  WaitPoint mine;  // the collective it waited in
  int64_t waited_seconds = 0;
  std::string timeout_key;  // "comm.train_timeout_seconds"
  // One per rank: what it said it is waiting in, or nothing when it did not answer (stopped,
  // hung, or busy outside any collective). The entry of `rank` itself is ignored.
  std::vector<std::optional<WaitPoint>> answers;
};

// "rank 1 did not reach all_gather #57 within 100 s (comm.train_timeout_seconds; after step 3)
// and does not answer (stopped, hung, or busy outside any collective); rank 0 is waiting in it"
std::string describe_stall(const Stall& stall);

}  // namespace mixprec::dist::detail
