// The MPI backend: collectives on a duplicate of MPI_COMM_WORLD whose failures come back as
// codes (MPI_ERRORS_RETURN) and leave as mixprec::Error naming the call and the rank.
#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"

#if MIXPREC_HAVE_MPI
#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

#include "mixprec/numerics/convert.h"

#include "communicator_checks.h"
#include "mpi_runtime.h"

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

// A started MPI_Iallgather / MPI_Ialltoall. Holds the tensors so their storage outlives the
// transfer even if the caller drops its handles; `finish` runs once the transfer is done.
class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request request, detail::CallSite site, Tensor send, Tensor recv,
             std::function<void()> finish = {})
      : request_(request),
        site_(site),
        send_(std::move(send)),
        recv_(std::move(recv)),
        finish_(std::move(finish)) {}
  ~MpiRequest() override {
    if (done_ || mpi::finalized()) return;
    try {
      wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mixprec: %s (while dropping an unwaited request)\n", e.what());
    }
  }
  void wait() override {
    if (done_) return;
    done_ = true;
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), site_);
    if (finish_) finish_();
  }
  bool done() const override { return done_; }

 private:
  MPI_Request request_;
  detail::CallSite site_;
  Tensor send_, recv_;
  std::function<void()> finish_;
  bool done_ = false;
};

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
  }
  ~MpiCommunicator() override {
    if (!mpi::finalized()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_gather(const Tensor& send, Tensor& recv) override {
    const auto at = site("all_gather (MPI_Allgather)");
    const bool in_place = detail::check_all_gather(at, send, recv);
    const MPI_Datatype type = mpi::move_type(send.dtype());
    check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : send.raw_data(), count_of(send), type,
                            recv.raw_data(), count_of(send), type, comm_),
              at);
    count_all_gather(send);
  }

  void reduce_scatter(const Tensor& send, Tensor& recv) override {
    start_reduce_scatter(send, recv)->wait();
  }

  void all_reduce(Tensor& buffer, ReduceOp op) override {
    const auto at = site("all_reduce (MPI_Allreduce)");
    detail::check_in_place(at, buffer, true);
    check_mpi(
        MPI_Allreduce(MPI_IN_PLACE, buffer.raw_data(), count_of(buffer),
                      mpi::reduce_type(buffer.dtype()), mpi::reduce_op(buffer.dtype(), op), comm_),
        at);
    stats_.all_reduce_bytes += detail::all_reduce_bytes(buffer.nbytes(), size_);
    ++stats_.calls;
  }

  void broadcast(Tensor& buffer, int root) override {
    const auto at = site("broadcast (MPI_Bcast)");
    detail::check_in_place(at, buffer, false);
    detail::check_root(at, root);
    check_mpi(
        MPI_Bcast(buffer.raw_data(), count_of(buffer), mpi::move_type(buffer.dtype()), root, comm_),
        at);
    stats_.broadcast_bytes += detail::broadcast_bytes(buffer.nbytes(), rank_, root, size_);
    ++stats_.calls;
  }

  void barrier() override {
    check_mpi(MPI_Barrier(comm_), site("barrier (MPI_Barrier)"));
    ++stats_.calls;
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
    return std::make_unique<MpiRequest>(request, at, send, recv);
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
    return std::make_unique<MpiRequest>(request, at, send, recv, [staged, blocks, recv]() mutable {
      sum_blocks(staged, blocks, recv);
    });
  }

  void abort_job(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "mixprec: rank %d of %d failed: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }

 private:
  detail::CallSite site(const char* call) const { return {call, rank_, size_}; }
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
};

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
