// The MPI backend: collectives on a duplicate of MPI_COMM_WORLD whose failures come back as
// codes (MPI_ERRORS_RETURN) and leave as mixprec::Error naming the call and the rank.
#include "mixprec/dist/communicator.h"
#include "mixprec/error.h"

#if MIXPREC_HAVE_MPI
#include <cstdio>
#include <utility>

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

// A started MPI_Iallgather / MPI_Ireduce_scatter_block. Holds the tensors so their storage
// outlives the transfer even if the caller drops its handles.
class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request request, detail::CallSite site, Tensor send, Tensor recv)
      : request_(request), site_(site), send_(std::move(send)), recv_(std::move(recv)) {}
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
  }
  bool done() const override { return done_; }

 private:
  MPI_Request request_;
  detail::CallSite site_;
  Tensor send_, recv_;
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
    const auto at = site("reduce_scatter (MPI_Reduce_scatter_block)");
    detail::check_reduce_scatter(at, send, recv);
    check_mpi(MPI_Reduce_scatter_block(send.raw_data(), recv.raw_data(), count_of(recv),
                                       mpi::reduce_type(recv.dtype()),
                                       mpi::reduce_op(recv.dtype(), ReduceOp::sum), comm_),
              at);
    count_reduce_scatter(recv);
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

  std::unique_ptr<Request> start_reduce_scatter(const Tensor& send, Tensor& recv) override {
    const auto at = site("start_reduce_scatter (MPI_Ireduce_scatter_block)");
    detail::check_reduce_scatter(at, send, recv);
    MPI_Request request;
    check_mpi(MPI_Ireduce_scatter_block(
                  send.raw_data(), recv.raw_data(), count_of(recv), mpi::reduce_type(recv.dtype()),
                  mpi::reduce_op(recv.dtype(), ReduceOp::sum), comm_, &request),
              at);
    count_reduce_scatter(recv);
    return std::make_unique<MpiRequest>(request, at, send, recv);
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
