// Collectives between the ranks of a data-parallel job, behind one interface with two
// implementations: MPI (Debian's OpenMPI, when the library is built with it and the process
// was started by mpirun) and a single process (world size 1; every collective is a copy), so
// the library builds, runs and tests without MPI.
//
// Buffers are contiguous CPU tensors. Reductions (reduce_scatter, all_reduce) take f32, bf16,
// f16, f64 and i64; data moves (all_gather, broadcast) take any dtype. reduce_scatter is an
// all-to-all of blocks after which each rank adds its W blocks in rank order (bf16/f16 in f32,
// rounded once: the exact f32 sum at any world size). all_reduce of bf16/f16 adds in f32 and
// rounds once per pairwise sum (a user-defined MPI reduction: at world size 2 the same
// thing). bf16/f16 max/min pick one operand's bits and
// let NaN win; f32/f64 max/min are MPI's. Reductions run in a fixed order for a given world
// size, so a run repeats bit for bit.
//
// Every rank must call the same collectives in the same order with matching sizes; a size
// or dtype mismatch that one rank can see is an Error naming the call. MPI failures become
// mixprec::Error with MPI's message and the rank. A rank that throws must call abort_job():
// the launcher then stops every rank with a message naming the failed one (no hang).
//
// A collective that waits longer than the timeout (torchtitan's [comm] keys: init until the
// first training step is done, train after) asks the other ranks where they are and fails with
// an Error naming the ranks that never came (stopped, hung, or busy elsewhere) and those that
// wait in another collective. The communicator is then unusable: every later call throws the
// same Error, and the caller must end the job (abort_job).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::dist {

enum class ReduceOp { sum, max, min };

// Bytes this rank handed to each kind of collective, as a ring (or the all-to-all) moves them:
// all-gather and reduce-scatter of a full buffer of B bytes send (W-1)/W * B per rank;
// all-reduce 2 (W-1)/W * B (rounded down); broadcast B, counted on the root only. Zero at
// world size 1. `calls` counts every collective this rank started, barriers included (the
// single-process backend counts nothing).
struct CommStats {
  uint64_t all_gather_bytes = 0;
  uint64_t reduce_scatter_bytes = 0;
  uint64_t all_reduce_bytes = 0;
  uint64_t broadcast_bytes = 0;
  uint64_t calls = 0;
  uint64_t total() const {
    return all_gather_bytes + reduce_scatter_bytes + all_reduce_bytes + broadcast_bytes;
  }
};

// A collective in flight. wait() blocks until the buffers may be used (and rethrows an MPI
// failure as Error); it is called by the destructor when the owner did not.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool done() const = 0;  // true once wait() has returned
};

// How long a collective may wait for the other ranks ([comm] init_timeout_seconds and
// train_timeout_seconds; torchtitan's defaults).
struct CommTimeouts {
  std::chrono::seconds init{300};   // until the first training step is done
  std::chrono::seconds train{100};  // after it
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single" or "mpi"

  // recv[r*n : (r+1)*n] = send of rank r. send [n], recv [n * size()], same dtype. send may
  // be recv's own block recv[rank()*n : (rank()+1)*n] (in place); no other overlap.
  virtual void all_gather(const Tensor& send, Tensor& recv) = 0;
  // recv = sum over ranks of their send[rank()*n : (rank()+1)*n]. send [n * size()], recv [n],
  // same dtype, not overlapping.
  virtual void reduce_scatter(const Tensor& send, Tensor& recv) = 0;
  // In place, every rank gets the reduction of every rank's buffer.
  virtual void all_reduce(Tensor& buffer, ReduceOp op = ReduceOp::sum) = 0;
  // In place: every rank gets root's buffer.
  virtual void broadcast(Tensor& buffer, int root) = 0;
  virtual void barrier() = 0;

  // Non-blocking forms (MPI_Iallgather; MPI_Ialltoall + a local sum): the tensors must stay
  // alive and untouched until the request's wait() returns.
  virtual std::unique_ptr<Request> start_all_gather(const Tensor& send, Tensor& recv) = 0;
  virtual std::unique_ptr<Request> start_reduce_scatter(const Tensor& send, Tensor& recv) = 0;
  // MPI_Iallgatherv: rank r sends counts[r] elements (send [counts[rank()]]), received end to
  // end in rank order (recv [sum of counts], same dtype, not overlapping send). Every rank
  // passes the same counts. Counted as an all-gather of the whole: (W-1)/W of recv's bytes.
  virtual std::unique_ptr<Request> start_all_gather_v(const Tensor& send, Tensor& recv,
                                                      const std::vector<int64_t>& counts) = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  void set_timeouts(const CommTimeouts& timeouts) { timeouts_ = timeouts; }
  // The trainer's call after each step: collectives then wait timeouts.train, and a timeout's
  // message says after which step it happened.
  void step_done(int64_t step) { steps_done_ = std::max<int64_t>(step, 0); }

  // Ends the whole job after a fatal error on this rank: MPI_Abort naming `rank()` and
  // `message` (a single process just returns; the caller exits).
  virtual void abort_job(const std::string& message, int exit_code) = 0;

 protected:
  // The timeout that applies now, and the config key that set it.
  std::chrono::seconds timeout() const {
    return steps_done_ < 0 ? timeouts_.init : timeouts_.train;
  }
  const char* timeout_key() const {
    return steps_done_ < 0 ? "comm.init_timeout_seconds" : "comm.train_timeout_seconds";
  }
  int64_t steps_done() const { return steps_done_; }

  CommStats stats_;

 private:
  CommTimeouts timeouts_;
  int64_t steps_done_ = -1;  // -1: no training step done yet
};

// World size 1.
std::unique_ptr<Communicator> make_single_process_communicator();

// True when the library was built with MPI.
bool mpi_built();
// True when this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE /
// PMIX_RANK), so MPI may be initialised.
bool launched_by_mpi();
// MPI_COMM_WORLD (initialises MPI once, thread level FUNNELED: only the main thread calls
// MPI; finalised at exit). Error when the library was built without MPI.
std::unique_ptr<Communicator> make_mpi_communicator();
// Ranks of this job on this machine: the launcher's count (Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE), else the whole job's.
int ranks_on_this_machine(const Communicator& comm);
// The job's communicator: MPI when launched by mpirun and built with it, else a single
// process. Error when launched by mpirun with more than one rank but built without MPI.
std::unique_ptr<Communicator> make_world_communicator();

}  // namespace mixprec::dist
