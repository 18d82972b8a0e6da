#include "mpi_stall_probe.h"

#if MIXPREC_HAVE_MPI
#include <algorithm>
#include <cstring>
#include <thread>

namespace mixprec::dist::mpi {
namespace {

constexpr int kQuestion = 1;
constexpr int kAnswer = 2;

// A WaitPoint on the wire: number, steps done, and the kind's name (NUL-padded).
struct Wire {
  uint64_t number = 0;
  int64_t steps_done = -1;
  char kind[48] = {};
};

Wire to_wire(const detail::WaitPoint& p) {
  Wire w;
  w.number = p.number;
  w.steps_done = p.steps_done;
  std::memcpy(w.kind, p.kind.data(), std::min(p.kind.size(), sizeof w.kind - 1));
  return w;
}

detail::WaitPoint from_wire(const Wire& w) {
  return {std::string(w.kind, strnlen(w.kind, sizeof w.kind)), w.number, w.steps_done};
}

}  // namespace

StallProbe::StallProbe(MPI_Comm world) {
  // Failures here only weaken a diagnosis; the collectives' own checks report MPI errors.
  if (MPI_Comm_dup(world, &comm_) != MPI_SUCCESS) comm_ = MPI_COMM_NULL;
  if (comm_ == MPI_COMM_NULL) return;
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

StallProbe::~StallProbe() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Questions and answers in flight mean a collective timed out: the job is ending anyway.
  if (comm_ != MPI_COMM_NULL && !finalized && outbox_.empty()) MPI_Comm_free(&comm_);
}

void StallProbe::send(const detail::WaitPoint& point, int to, int tag) {
  const Wire w = to_wire(point);
  std::vector<char>& buffer = outbox_.emplace_back(sizeof w);
  std::memcpy(buffer.data(), &w, sizeof w);
  MPI_Request request;
  // Non-blocking: the receiver may be stopped. The buffer lives in outbox_ until we do.
  if (MPI_Isend(buffer.data(), sizeof w, MPI_BYTE, to, tag, comm_, &request) == MPI_SUCCESS)
    MPI_Request_free(&request);
}

void StallProbe::answer_questions(const detail::WaitPoint& mine) {
  if (comm_ == MPI_COMM_NULL) return;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQuestion, comm_, &arrived, &status) != MPI_SUCCESS || !arrived)
      return;
    Wire question;
    MPI_Recv(&question, sizeof question, MPI_BYTE, status.MPI_SOURCE, kQuestion, comm_,
             MPI_STATUS_IGNORE);
    send(mine, status.MPI_SOURCE, kAnswer);
  }
}

std::vector<std::optional<detail::WaitPoint>> StallProbe::ask_everyone(
    const detail::WaitPoint& mine, std::chrono::milliseconds grace) {
  std::vector<std::optional<detail::WaitPoint>> answers(static_cast<std::size_t>(size_));
  answers[static_cast<std::size_t>(rank_)] = mine;
  if (comm_ == MPI_COMM_NULL) return answers;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) send(mine, r, kQuestion);
  int missing = size_ - 1;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (missing > 0 && std::chrono::steady_clock::now() < deadline) {
    answer_questions(mine);  // another rank that timed out is asking us
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAnswer, comm_, &arrived, &status) != MPI_SUCCESS) break;
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    Wire answer;
    MPI_Recv(&answer, sizeof answer, MPI_BYTE, status.MPI_SOURCE, kAnswer, comm_,
             MPI_STATUS_IGNORE);
    auto& slot = answers[static_cast<std::size_t>(status.MPI_SOURCE)];
    if (!slot) --missing;
    slot = from_wire(answer);
  }
  return answers;
}

}  // namespace mixprec::dist::mpi
#endif
