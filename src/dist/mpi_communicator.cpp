// The MPI backend: collectives on a duplicate of MPI_COMM_WORLD whose failures come back as
// codes (MPI_ERRORS_RETURN) and leave as mixprec::Error naming the call and the rank. Every
// collective is MPI's non-blocking form, tested in a loop against the timeout (mpi_stall_probe.h
// names the ranks that never came).
#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"

#if MIXPREC_HAVE_MPI
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <utility>

#include "mixprec/numerics/convert.h"

#include "communicator_checks.h"
#include "mpi_runtime.h"
#include "mpi_stall_probe.h"
#include "stall_report.h"

namespace mixprec::dist {
namespace {

// Throws Error("[dist] <call> on rank R of W: <MPI's message>") unless code is success.
void check_mpi(int code, const detail::CallSite& site) {
  if (code != MPI_SUCCESS) site.fail(mpi::error_string(code));
}

int count_of(const Tensor& t) {
  return static_cast<int>(t.numel());  // checked against INT_MAX by communicator_checks
}

// recv = the sum of the `blocks` consecutive blocks of `staged` (block r came from rank r),
// added in rank order: f64 and i64 in their own type, f32/bf16/f16 in f32 rounded once.
template <class T>
void sum_blocks_as(const T* in, int blocks, std::size_t n, T* out) {
  for (std::size_t i = 0; i < n; ++i) {
    T acc = in[i];
    for (int r = 1; r < blocks; ++r) acc += in[static_cast<std::size_t>(r) * n + i];
    out[i] = acc;
  }
}

void sum_blocks(const Tensor& staged, int blocks, Tensor& recv) {
  const std::size_t n = static_cast<std::size_t>(recv.numel());
  const DType dt = recv.dtype();
  if (dt == DType::f64) return sum_blocks_as(staged.data<double>(), blocks, n, recv.data<double>());
  if (dt == DType::i64)
    return sum_blocks_as(staged.data<int64_t>(), blocks, n, recv.data<int64_t>());
  const std::size_t esz = dtype_size(dt);
  const char* in = static_cast<const char*>(staged.raw_data());
  constexpr std::size_t kChunk = 1024;
  float acc[kChunk], part[kChunk];
  for (std::size_t at = 0; at < n; at += kChunk) {
    const std::size_t len = std::min(kChunk, n - at);
    widen_row_f32(dt, in + at * esz, acc, len);
    for (int r = 1; r < blocks; ++r) {
      widen_row_f32(dt, in + (static_cast<std::size_t>(r) * n + at) * esz, part, len);
      for (std::size_t i = 0; i < len; ++i) acc[i] += part[i];
    }
    narrow_row_f32(acc, dt, static_cast<char*>(recv.raw_data()) + at * esz, len);
  }
}

class MpiCommunicator;

// A started MPI_Iallgather / MPI_Ialltoall. Holds the tensors so their storage outlives the
// transfer even if the caller drops its handles; `finish` runs once the transfer is done.
class MpiRequest final : public Request {
 public:
  MpiRequest(MpiCommunicator& owner, MPI_Request request, detail::CallSite site,
             detail::WaitPoint point, Tensor send, Tensor recv, std::function<void()> finish = {})
      : owner_(owner),
        request_(request),
        site_(site),
        point_(std::move(point)),
        send_(std::move(send)),
        recv_(std::move(recv)),
        finish_(std::move(finish)) {}
  ~MpiRequest() override;
  void wait() override;
  bool done() const override { return done_; }

 private:
  MpiCommunicator& owner_;
  MPI_Request request_;
  detail::CallSite site_;
  detail::WaitPoint point_;
  Tensor send_, recv_;
  std::function<void()> finish_;
  bool done_ = false;
};

// How a rank waits: MPI_Test in a loop (MPI_Wait would block past any deadline), spinning for
// the first 2 ms (most collectives end within them), then yielding the core, then, past 50 ms
// (another rank is late), sleeping 1 ms between tests (at most 2% later than MPI_Wait).
void pause_while_waiting(std::chrono::steady_clock::duration waited) {
  using namespace std::chrono_literals;
  if (waited < 2ms) return;
  if (waited < 50ms) return std::this_thread::yield();
  std::this_thread::sleep_for(1ms);
}

// After this long in one collective a rank answers other ranks' "where are you?" questions.
constexpr std::chrono::milliseconds kAnswerAfter{50};

// How long the rank that timed out waits for the others' answers: a waiting rank answers
// within milliseconds, a stopped one never.
std::chrono::milliseconds answer_grace(std::chrono::seconds timeout) {
  return std::clamp<std::chrono::milliseconds>(std::chrono::milliseconds(timeout) / 20,
                                               std::chrono::seconds(1), std::chrono::seconds(5));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    mpi::ensure_initialized();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Our own communicator, so MPI_ERRORS_RETURN does not change MPI_COMM_WORLD for others.
    const auto at = site("MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), at);
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), at);
    probe_ = std::make_unique<mpi::StallProbe>(MPI_COMM_WORLD);
  }
  ~MpiCommunicator() override {
    // After a timeout a collective is still pending on comm_: leave it to the job's end.
    if (!mpi::finalized() && stalled_.empty()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_gather(const Tensor& send, Tensor& recv) override {
    const auto at = site("all_gather (MPI_Iallgather)");
    const bool in_place = detail::check_all_gather(at, send, recv);
    const MPI_Datatype type = mpi::move_type(send.dtype());
    MPI_Request request;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.raw_data(), count_of(send), type,
                             recv.raw_data(), count_of(send), type, comm_, &request),
              at);
    count_all_gather(send);
    await(request, at, next_point("all_gather"));
  }

  void reduce_scatter(const Tensor& send, Tensor& recv) override {
    start_reduce_scatter(send, recv)->wait();
  }

  void all_reduce(Tensor& buffer, ReduceOp op) override {
    const auto at = site("all_reduce (MPI_Iallreduce)");
    detail::check_in_place(at, buffer, true);
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw_data(), count_of(buffer),
                             mpi::reduce_type(buffer.dtype()), mpi::reduce_op(buffer.dtype(), op),
                             comm_, &request),
              at);
    stats_.all_reduce_bytes += detail::all_reduce_bytes(buffer.nbytes(), size_);
    ++stats_.calls;
    await(request, at, next_point("all_reduce"));
  }

  void broadcast(Tensor& buffer, int root) override {
    const auto at = site("broadcast (MPI_Ibcast)");
    detail::check_in_place(at, buffer, false);
    detail::check_root(at, root);
    MPI_Request request;
    check_mpi(MPI_Ibcast(buffer.raw_data(), count_of(buffer), mpi::move_type(buffer.dtype()), root,
                         comm_, &request),
              at);
    stats_.broadcast_bytes += detail::broadcast_bytes(buffer.nbytes(), rank_, root, size_);
    ++stats_.calls;
    await(request, at, next_point("broadcast"));
  }

  void barrier() override {
    const auto at = site("barrier (MPI_Ibarrier)");
    MPI_Request request;
    check_mpi(MPI_Ibarrier(comm_, &request), at);
    ++stats_.calls;
    await(request, at, next_point("barrier"));
  }

  std::unique_ptr<Request> start_all_gather(const Tensor& send, Tensor& recv) override {
    const auto at = site("start_all_gather (MPI_Iallgather)");
    const bool in_place = detail::check_all_gather(at, send, recv);
    const MPI_Datatype type = mpi::move_type(send.dtype());
    MPI_Request request;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.raw_data(), count_of(send), type,
                             recv.raw_data(), count_of(send), type, comm_, &request),
              at);
    count_all_gather(send);
    return std::make_unique<MpiRequest>(*this, request, at, next_point("all_gather"), send, recv);
  }

  std::unique_ptr<Request> start_all_gather_v(const Tensor& send, Tensor& recv,
                                              const std::vector<int64_t>& counts) override {
    const auto at = site("start_all_gather_v (MPI_Iallgatherv)");
    detail::check_all_gather_v(at, send, recv, counts);
    const MPI_Datatype type = mpi::move_type(send.dtype());
    // MPI reads the counts and displacements until the transfer ends: the request keeps them.
    auto layout = std::make_shared<std::vector<int>>(2 * counts.size());
    int at_element = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      (*layout)[r] = static_cast<int>(counts[r]);
      (*layout)[counts.size() + r] = at_element;
      at_element += static_cast<int>(counts[r]);
    }
    MPI_Request request;
    check_mpi(
        MPI_Iallgatherv(send.raw_data(), count_of(send), type, recv.raw_data(), layout->data(),
                        layout->data() + counts.size(), type, comm_, &request),
        at);
    ++stats_.calls;
    stats_.all_gather_bytes += detail::all_gather_bytes(recv.nbytes(), size_) / size_;
    return std::make_unique<MpiRequest>(*this, request, at, next_point("all_gather"), send, recv,
                                        [layout] {});
  }

  // An all-to-all of blocks, then each rank adds the W blocks it received in rank order, in
  // f32, rounding once: (W-1)/W of the buffer leaves each rank (what a ring sends), every rank
  // sums its own block, and a bf16/f16 sum rounds once at any world size. (Open MPI 4.1's
  // MPI_Ireduce_scatter_block reduces everything to rank 0 and scatters: 1.5x the bytes at
  // W = 2, all the summing on one rank.)
  std::unique_ptr<Request> start_reduce_scatter(const Tensor& send, Tensor& recv) override {
    const auto at = site("start_reduce_scatter (MPI_Ialltoall + local sum)");
    detail::check_reduce_scatter(at, send, recv);
    MPI_Request request;
    const MPI_Datatype type = mpi::move_type(recv.dtype());
    Tensor staged = Tensor::empty({send.numel()}, send.dtype());
    check_mpi(MPI_Ialltoall(send.raw_data(), count_of(recv), type, staged.raw_data(),
                            count_of(recv), type, comm_, &request),
              at);
    count_reduce_scatter(recv);
    const int blocks = size_;
    return std::make_unique<MpiRequest>(
        *this, request, at, next_point("reduce_scatter"), send, recv,
        [staged, blocks, recv]() mutable { sum_blocks(staged, blocks, recv); });
  }

  void abort_job(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "mixprec: rank %d of %d failed: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }

  // Waits until `request` is done, or throws the stall report once timeout() has passed.
  void await(MPI_Request& request, const detail::CallSite& at, const detail::WaitPoint& point) {
    if (stalled()) throw Error("dist", stalled_);
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), at);
    if (done) return;
    const auto start = std::chrono::steady_clock::now();
    const std::chrono::seconds limit = timeout();
    for (;;) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= kAnswerAfter) probe_->answer_questions(point);
      if (waited >= limit) stall(at, point, limit);
      pause_while_waiting(waited);
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), at);
      if (done) return;
    }
  }

  // True after a timeout: the job is stuck and this communicator must not be used again.
  bool stalled() const { return !stalled_.empty(); }

 private:
  // Every collective after a timeout fails with the timeout's own message (a caller that
  // catches the first Error and reports the failure with a collective must not hang or lose it).
  detail::CallSite site(const char* call) const {
    if (stalled()) throw Error("dist", stalled_);
    return {call, rank_, size_};
  }
  detail::WaitPoint next_point(const char* kind) { return {kind, ++started_, steps_done()}; }

  [[noreturn]] void stall(const detail::CallSite& at, const detail::WaitPoint& point,
                          std::chrono::seconds limit) {
    detail::Stall s;
    s.rank = rank_;
    s.mine = point;
    s.waited_seconds = limit.count();
    s.timeout_key = timeout_key();
    s.answers = probe_->ask_everyone(point, answer_grace(limit));
    stalled_ = at.describe() + ": " + detail::describe_stall(s);
    throw Error("dist", stalled_);
  }

  void count_all_gather(const Tensor& send) {
    stats_.all_gather_bytes += detail::all_gather_bytes(send.nbytes(), size_);
    ++stats_.calls;
  }
  void count_reduce_scatter(const Tensor& recv) {
    stats_.reduce_scatter_bytes += detail::reduce_scatter_bytes(recv.nbytes(), size_);
    ++stats_.calls;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<mpi::StallProbe> probe_;
  uint64_t started_ = 0;  // collectives started, so the ranks' numbers match
  std::string stalled_;   // the timeout's message, once one happened
};

MpiRequest::~MpiRequest() {
  if (done_ || mpi::finalized() || owner_.stalled()) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixprec: %s (while dropping an unwaited request)\n", e.what());
  }
}

void MpiRequest::wait() {
  if (done_) return;
  done_ = true;
  owner_.await(request_, site_, point_);
  if (finish_) finish_();
}

}  // namespace

bool mpi_built() {
  return true;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

}  // namespace mixprec::dist

#else  // built without MPI: the factory says so

namespace mixprec::dist {

bool mpi_built() {
  return false;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw Error("dist",
              "make_mpi_communicator: this mixprec was built without MPI (install "
              "libopenmpi-dev and rebuild with -DMIXPREC_WITH_MPI=ON)");
}

}  // namespace mixprec::dist
#endif
